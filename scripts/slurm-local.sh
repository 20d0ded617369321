#!/usr/bin/env bash
# A single-node Slurm cluster on localhost (Debian's slurm-wlm and munge), for `make test-slurm`:
# installs the packages when missing, writes a minimal slurm.conf, starts munged, slurmctld and
# slurmd, and waits until the node is idle. Idempotent: a running cluster is left as it is.
# Needs root (apt, /etc, daemons); prints what it does.
set -euo pipefail

if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null; then
    echo "slurm-local: installing slurm-wlm and munge"
    apt-get install -y -qq slurm-wlm munge >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq slurm-wlm munge >/dev/null; }
fi

if sinfo -h -o %t 2>/dev/null | grep -qE '^(idle|mix|alloc)'; then
    echo "slurm-local: already running"; exit 0
fi

if [ -f /etc/slurm/slurm.conf ] && ! grep -q '^ClusterName=ttfr-local$' /etc/slurm/slurm.conf; then
    echo "slurm-local: /etc/slurm/slurm.conf belongs to another cluster; not touching it (start that one instead)" >&2
    exit 1
fi

host=$(hostname -s)
cpus=$(nproc)
memory=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 - 1024 ))
mkdir -p /etc/slurm /var/spool/slurmctld /var/spool/slurmd /var/log/slurm /run/munge /var/lib/munge /var/log/munge /etc/munge
cat > /etc/slurm/slurm.conf <<CONF
ClusterName=ttfr-local
SlurmctldHost=${host}
AuthType=auth/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmdSpoolDir=/var/spool/slurmd
StateSaveLocation=/var/spool/slurmctld
SlurmUser=root
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
JobAcctGatherType=jobacct_gather/none
MpiDefault=none
NodeName=${host} CPUs=${cpus} RealMemory=${memory} State=UNKNOWN
PartitionName=debug Nodes=${host} Default=YES MaxTime=INFINITE State=UP
CONF
if [ ! -s /etc/munge/munge.key ]; then
    dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key 2>/dev/null
fi
chown -R munge:munge /etc/munge /run/munge /var/lib/munge /var/log/munge 2>/dev/null || true
chmod 0700 /etc/munge && chmod 0400 /etc/munge/munge.key
pgrep -x munged >/dev/null || runuser -u munge -- /usr/sbin/munged
pgrep -x slurmctld >/dev/null || /usr/sbin/slurmctld
pgrep -x slurmd >/dev/null || /usr/sbin/slurmd
for _ in $(seq 1 60); do
    state=$(sinfo -h -o %t 2>/dev/null || true)
    case "$state" in
        idle*|mix*|alloc*) echo "slurm-local: ${host} is ${state} (${cpus} CPUs, partition debug)"; exit 0 ;;
        down*|drain*) scontrol update nodename="${host}" state=resume >/dev/null 2>&1 || true ;;
    esac
    sleep 1
done
echo "slurm-local: the node did not come up; see /var/log/slurm/" >&2
exit 1
