"""The machine around a run (or a group of them): read once before the spawn and once after the
reap, wherever the run happens (this machine, or a Slurm node for a group's task there)."""

from __future__ import annotations

from ttfr.model.journal import Host


def host_reading(host):
    """CPU pressure, the machine's CPU times and its runnable count: read once before a
    spawn and once after the reap."""
    return host.cpu_pressure(), host.cpu_times(), host.runnable_tasks()


def host_fields(host, load, started: str, before, after) -> Host:
    """The machine around a run (or a group): contention evidence (analyse/contention.py)."""
    (pressure_before, times_before, runnable_start), (pressure_after, times_after, runnable_end) = before, after
    stall = steal = busy = None
    if pressure_before and pressure_after:
        stall = (pressure_after["total_us"] - pressure_before["total_us"]) / 1e6
    if times_before and times_after:
        total = times_after["total"] - times_before["total"]
        steal = (times_after["steal"] - times_before["steal"]) / total if total > 0 else None
        busy = (times_after["busy"] - times_before["busy"]) * times_after["tick_s"]
    return Host(
        load_average=load,
        cpu_pressure_avg10=pressure_before["avg10"] if pressure_before else None,
        steal_fraction=steal,
        started_at=started,
        # Contention evidence: runnable entities machine-wide (ttfr's own parent counts as one)
        # before the spawn and after the reap, and the CPU-pressure stall time in between.
        runnable_start=runnable_start,
        runnable_end=runnable_end,
        cpu_pressure_stall_s=stall,
        usable_cores=host.usable_cpus(),
        # CPU seconds every task of the machine used from spawn to reap (the worker's
        # own are in its rusage): what was left is what its neighbours took.
        machine_busy_s=busy,
    )
