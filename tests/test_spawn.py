"""Spawning one worker against real processes: stand-in 'interpreters' that misbehave on purpose."""

import os
import signal
import sys
import threading
import time

import pytest

from ttfr.child.job import Job, JobError
from ttfr.measure import spawn, supervisor
from ttfr.model.base import decode
from ttfr.model.record import Marks, RunRecord

NOOP_JOB = Job(adapter="python_backend", workload="noop", size=1, dtype="float64")


def script(tmp_path, body):
    path = tmp_path / "fake-python"
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(0o755)
    return str(path)


def alive(pid):
    """True while the process exists and is not a zombie (PID 1 may reap late)."""
    try:
        stat = open(f"/proc/{pid}/stat").read()
    except FileNotFoundError:
        return False
    return stat.rpartition(")")[2].split()[0] not in ("Z", "X")


def wait_dead(pid, seconds=3.0):
    deadline = time.monotonic() + seconds
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not alive(pid)


def run(python, timeout=10.0, env=None):
    return spawn.run_worker(NOOP_JOB, env or dict(os.environ), timeout, python=python)


def test_timeout_kills_the_whole_process_group(tmp_path):
    pid_file = tmp_path / "grandchild.pid"
    python = script(tmp_path, f"sleep 60 & echo $! > {pid_file}; wait")
    started = time.monotonic()
    result = run(python, timeout=1.0)
    assert time.monotonic() - started < 10
    assert result.outcome == "timeout" and "timeout after 1 s" in result.reason
    assert result.reaped_ns is None  # no process_s for a killed run
    assert wait_dead(int(pid_file.read_text())), "the grandchild survived the timeout"


def test_stragglers_are_killed_after_the_worker_exits(tmp_path):
    pid_file = tmp_path / "straggler.pid"
    python = script(tmp_path, f"sleep 60 & echo $! > {pid_file}; exit 0")
    result = run(python)
    assert result.outcome == "error" and "without a result record" in result.reason
    assert wait_dead(int(pid_file.read_text())), "a straggler survived its worker"


def test_crash_by_signal_is_reported_with_its_name(tmp_path):
    result = run(script(tmp_path, "kill -SEGV $$"))
    assert result.outcome == "signal" and result.reason == "killed by SIGSEGV"


def test_sigkill_without_an_oom_kill_is_a_signal_not_oom(tmp_path):
    result = run(script(tmp_path, "kill -KILL $$"))
    assert result.outcome == "signal" and result.reason.startswith("killed by SIGKILL from outside ttfr")
    if supervisor.find_oom_counter() is not None:  # this machine has a counter to check: it did not rise
        assert "no OOM kill recorded" in result.reason


OOM_CONTROL = "oom_kill_disable 0\nunder_oom 0\noom_kill {}\n"


def test_classify_calls_sigkill_oom_only_when_the_oom_kill_counter_rose():
    killed = -signal.SIGKILL
    cgroup = dict(source="memory.oom_control", scope="in this cgroup")
    outcome, reason = spawn.classify(None, killed, False, 5, supervisor.OomCheck(kills=2, **cgroup))
    assert outcome == spawn.OOM == "oom"
    assert (
        reason == "killed by SIGKILL; the kernel's OOM killer killed 2 process(es) in this cgroup meanwhile (memory.oom_control)"
    )
    outcome, reason = spawn.classify(None, killed, False, 5, supervisor.OomCheck(kills=0, **cgroup))
    assert outcome == spawn.SIGNAL == "signal"
    assert reason == "killed by SIGKILL from outside ttfr (no OOM kill recorded in this cgroup: memory.oom_control)"
    machine = supervisor.OomCheck(kills=0, source="/proc/vmstat", scope="on this machine")
    assert spawn.classify(None, killed, False, 5, machine)[1].endswith("(no OOM kill recorded on this machine: /proc/vmstat)")
    outcome, reason = spawn.classify(None, killed, False, 5, None)
    assert outcome == "signal" and "could not be checked" in reason
    # Other signals and exits are not OOM; a rise is still noted where it may explain a failure (g++ killed).
    segv = spawn.classify(None, -signal.SIGSEGV, False, 5, supervisor.OomCheck(kills=1, **cgroup))
    assert segv == ("signal", "killed by SIGSEGV")
    outcome, reason = spawn.classify(None, 1, False, 5, supervisor.OomCheck(kills=1, **cgroup))
    assert outcome == "error" and reason.startswith("exit code 1 without a result record; the kernel's OOM killer killed 1")
    assert spawn.classify(None, 1, False, 5, supervisor.OomCheck(kills=0, **cgroup))[1] == "exit code 1 without a result record"


def fake_system(tmp_path, cgroup_lines, files):
    proc, cgroup_fs = tmp_path / "proc", tmp_path / "cgroup"
    (proc / "self").mkdir(parents=True)
    (proc / "self" / "cgroup").write_text("".join(line + "\n" for line in cgroup_lines))
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return str(proc), str(cgroup_fs)


def test_the_oom_kill_counter_is_the_cgroups_v1_or_v2_else_the_machines(tmp_path):
    vmstat = {"proc/vmstat": "pgfault 10\noom_kill 7\n"}
    v1 = ["4:memory:/process_api/abc", "1:cpu:/", "0::/"]
    counter = supervisor.find_oom_counter(*fake_system(tmp_path / "v1", v1, {
        "cgroup/memory/process_api/abc/memory.oom_control": OOM_CONTROL.format(3), **vmstat}))  # fmt: skip
    assert (counter.source, counter.scope, counter.read()) == ("memory.oom_control", "in this cgroup", 3)
    assert counter.path.endswith("memory/process_api/abc/memory.oom_control")

    v2 = ["0::/user.slice/ttfr.scope"]
    counter = supervisor.find_oom_counter(*fake_system(tmp_path / "v2", v2, {
        "cgroup/user.slice/ttfr.scope/memory.events": "low 0\nhigh 0\nmax 4\noom 2\noom_kill 1\noom_group_kill 0\n",
        **vmstat}))  # fmt: skip
    assert (counter.source, counter.read()) == ("memory.events", 1)

    # A cgroup whose files are not visible here (v2 root has no memory.events): the machine-wide count.
    counter = supervisor.find_oom_counter(*fake_system(tmp_path / "root", ["0::/"], vmstat))
    assert (counter.source, counter.scope, counter.read()) == ("/proc/vmstat", "on this machine", 7)

    assert supervisor.find_oom_counter(*fake_system(tmp_path / "none", ["0::/"], {"proc/vmstat": "pgfault 1\n"})) is None


def test_exit_code_and_output_tail_are_kept(tmp_path):
    result = run(script(tmp_path, "echo 'Traceback: something broke' >&2; exit 3"))
    assert result.outcome == "error" and result.exit_code == 3
    assert "something broke" in result.output_tail


def test_garbled_record_is_an_error(tmp_path):
    # A stand-in interpreter that writes half a JSON object to the record pipe.
    path = tmp_path / "fake-python"
    path.write_text(
        f"#!{sys.executable}\nimport os, sys\n"
        "fd = int(next(w for w in sys.argv if w.startswith('fd='))[3:])\n"
        "os.write(fd, b'{\"outcome\": ')\n"
    )
    path.chmod(0o755)
    result = run(str(path))
    assert result.outcome == "error" and "unreadable" in result.reason


def test_an_interpreter_that_cannot_start_is_an_error_not_a_crash(tmp_path):
    result = run(str(tmp_path / "missing-python"))
    assert result.outcome == "error" and "could not start the worker" in result.reason


def test_classify_prefers_the_record_but_not_a_crash_after_it():
    ok = RunRecord(outcome="ok", reason=None)
    assert spawn.classify(ok, 0, False, 5) == ("ok", None)
    assert spawn.classify(ok, -signal.SIGSEGV, False, 5) == ("error", "worker reported a result, then killed by SIGSEGV")
    assert spawn.classify(RunRecord(outcome="unavailable", reason="gpu_unavailable"), 0, False, 5)[0] == "unavailable"
    assert spawn.classify(None, None, True, 5)[0] == "timeout"


def test_a_real_worker_reports_marks_in_order():
    result = spawn.run_worker(NOOP_JOB, dict(os.environ), 30.0, python=sys.executable)
    assert result.outcome == "ok", result.output_tail
    marks = result.record.marks_ns
    order = [result.spawn_ns, marks.main, marks.imported, marks.setup, marks.first, marks.second_start, marks.second,
             result.reaped_ns]  # fmt: skip
    assert order == sorted(order)
    # its CPU time came back (how the kernel splits it between user and system is tick sampling: either may be 0)
    assert result.rusage.user_s + result.rusage.sys_s > 0


def worker_pids():
    """Worker processes this test process spawned."""
    found = []
    for entry in os.listdir("/proc"):
        try:
            stat = open(f"/proc/{entry}/stat").read()
            cmdline = open(f"/proc/{entry}/cmdline", "rb").read()
        except (OSError, ValueError):
            continue
        if int(stat.rpartition(")")[2].split()[1]) == os.getpid() and b"ttfr.child.worker" in cmdline:
            found.append(int(entry))
    return found


@pytest.mark.integration
def test_a_real_worker_killed_from_outside_is_a_signal_not_oom():
    # A worker busy for minutes (spin: a billion loop iterations), SIGKILLed by someone else.
    job = Job(adapter="python_backend", workload="spin", size=1_000_000, dtype="float64")
    killed = []

    def killer():
        deadline = time.monotonic() + 30
        while not killed and time.monotonic() < deadline:
            for pid in worker_pids():
                try:
                    os.kill(pid, signal.SIGKILL)
                    killed.append(pid)
                except ProcessLookupError:
                    pass
            time.sleep(0.02)

    thread = threading.Thread(target=killer)
    thread.start()
    try:
        result = spawn.run_worker(job, dict(os.environ), 60.0, python=sys.executable)
    finally:
        thread.join()
    assert killed, "the worker never showed up"
    assert result.exit_code == -signal.SIGKILL
    assert result.outcome == "signal", result.reason
    assert result.reason.startswith("killed by SIGKILL from outside ttfr"), result.reason
    if supervisor.find_oom_counter() is not None:
        assert "no OOM kill recorded" in result.reason


def test_a_job_survives_its_words_and_refuses_what_it_does_not_know():
    job = NOOP_JOB.replace(mode="warm", samples=9, min_sample_s=0.002, check=True, sync=False, signal="SR/sig")
    assert Job.parse(job.to_words()) == job
    assert "sync=0" in job.to_words() and "check=1" in job.to_words()
    assert "device=cpu" not in job.to_words()  # defaults stay off the command line
    for words, message in (
        (["colour=blue"], "bad job word"),
        (["adapter=x", "workload=y", "size=one", "dtype=float64"], "expected int"),
        (["adapter=x", "workload=y", "size=1", "dtype=float64", "check=yes"], "expected bool"),
        (["adapter=x", "size=1", "dtype=float64"], "'workload' is required"),
    ):
        with pytest.raises(JobError, match=message):
            Job.parse(words)
    with pytest.raises(JobError, match="must be int"):
        NOOP_JOB.replace(size="1")


def record_writer(tmp_path, record: dict, tail: str = ""):
    """A stand-in interpreter that writes `record` to the record pipe, then runs `tail`."""
    path = tmp_path / "fake-python"
    path.write_text(
        f"#!{sys.executable}\nimport os, sys\n"
        "fd = int(next(w for w in sys.argv if w.startswith('fd='))[3:])\n"
        f"os.write(fd, {repr(record).encode()!r})\n" + tail
    )
    path.chmod(0o755)
    return str(path)


def test_every_free_text_field_of_the_workers_record_is_redacted(tmp_path):
    env = {**os.environ, "HF_TOKEN": "hf_live_0123456789", "DB_PASSWORD": "pw-5e5e-x"}
    record = {
        "outcome": "error", "phase": "setup", "dataset_sha256": "ab" * 32, "marks_ns": {"main": 1},
        "reason": "RuntimeError in setup: login with hf_live_0123456789 refused",
        "traceback": "Traceback ...\nValueError: DB_PASSWORD=pw-5e5e-x is wrong",
        "note": "Authorization: Bearer abc.def.ghi",
        # nested free text: a check's detail, a library's refusal in a conversion's layouts
        "check": {"reference": "numpy float64", "max_normalised_error": None, "tolerance": 0.0, "passed": False,
                  "detail": "opened https://me:hf_live_0123456789@hub/x"},
    }  # fmt: skip
    result = spawn.run_worker(NOOP_JOB, env, 10.0, python=record_writer(tmp_path, record))
    text = repr(result)  # everything the journal would record of the run
    for secret in ("hf_live_0123456789", "pw-5e5e-x", "abc.def.ghi"):
        assert secret not in text
    got = result.record
    assert got.reason == "RuntimeError in setup: login with <redacted> refused" == result.reason
    assert "DB_PASSWORD=<redacted>" in got.traceback  # a field the record's type does not know (`note`) is not kept
    assert "hf_live" not in got.check.detail and "<redacted>" in got.check.detail  # however deep
    assert (got.outcome, got.phase, got.dataset_sha256, got.marks_ns) == ("error", "setup", "ab" * 32, Marks(main=1))


def test_a_record_with_an_unknown_outcome_or_no_reason_is_still_a_journalable_result():
    def record(**fields):
        return decode(fields, RunRecord)

    assert spawn.classify(record(outcome="banana"), 0, False, 5) == ("error", "the worker reported an unknown outcome 'banana'")
    assert spawn.classify(record(outcome="error", reason=None), 1, False, 5) == (
        "error", "the worker reported error without a reason")  # fmt: skip
    assert spawn.classify(record(outcome="unavailable", reason="  "), 0, False, 5)[1] == (
        "the worker reported unavailable without a reason")  # fmt: skip
    assert spawn.classify(record(outcome="ok", reason=""), 0, False, 5) == ("ok", None)
    # a reason that is not text is no record at all (the run fails, saying so)
    assert spawn.parse_record(repr({"outcome": "unavailable", "reason": 7}).encode(), {})[0] is None


def test_the_group_is_killed_before_its_leader_is_reaped(tmp_path, monkeypatch):
    # Killing the group after the reap could hit a stranger's group that reused the pid: the
    # leader must still be an unreaped zombie (our child) when its group is killed.
    calls = []
    real_killpg, real_wait4 = os.killpg, os.wait4

    def killpg(pgid, sig):
        try:
            state = open(f"/proc/{pgid}/stat").read().rpartition(")")[2].split()[0]
        except FileNotFoundError:
            state = "gone"
        calls.append(("killpg", pgid, state))
        return real_killpg(pgid, sig)

    def wait4(pid, options):
        calls.append(("wait4", pid, None))
        return real_wait4(pid, options)

    monkeypatch.setattr(os, "killpg", killpg)
    monkeypatch.setattr(os, "wait4", wait4)
    result = run(script(tmp_path, "sleep 60 & exit 0"))
    assert result.outcome == "error" and result.reaped_ns is not None and result.reaped_ns > result.spawn_ns
    leader = {pid for _, pid, _ in calls}
    assert len(leader) == 1, calls
    reaped_at = [i for i, call in enumerate(calls) if call[0] == "wait4"]
    assert len(reaped_at) == 1, calls
    kills = [call for call in calls[: reaped_at[0]] if call[0] == "killpg"]
    assert kills and all(state == "Z" for _, _, state in kills), calls
    assert not any(call[0] == "killpg" for call in calls[reaped_at[0] :]), calls


def test_a_supervised_program_s_own_cpu_wait_is_read_at_its_exit(tmp_path):
    """A command's run-queue wait (its leader's schedstat, read while it is a zombie): without it a
    busy neighbour alone set every command run aside as contended (issue 25, item 1)."""
    import sys

    if not os.path.exists("/proc/self/schedstat"):
        pytest.skip("no schedstat in this kernel")
    with open(tmp_path / "out", "wb") as output:
        ended = supervisor.supervise([sys.executable, "-c", "sum(range(3_000_000))"], dict(os.environ), tmp_path, 60,
                                     output)  # fmt: skip
    on_cpu_ns, wait_ns = ended.sched
    assert on_cpu_ns > 10_000_000  # it computed for tens of ms: the exited leader's own figures, not nothing
    assert isinstance(wait_ns, int)  # a count of ns (0 on an idle machine): its size is the machine's, never asserted


def test_a_command_run_that_did_not_wait_is_not_contended_by_a_busy_neighbour_alone():
    from ttfr.analyse import contention
    from ttfr.model.journal import Host, Rusage
    from ttfr.model.record import Sched

    host = Host(machine_busy_s=1.2, usable_cores=2)  # the rest of the machine used ~1 core meanwhile
    rusage = Rusage(user_s=0.09, sys_s=0.01)
    quiet = contention.cold_run(Sched(on_cpu_s=0.1, runq_wait_s=0.001), 0.1, host, rusage)
    waited = contention.cold_run(Sched(on_cpu_s=0.1, runq_wait_s=0.05), 0.1, host, rusage)
    unknown = contention.cold_run(None, 0.1, host, rusage)  # what every command run was before
    assert not quiet.contended and waited.contended and unknown.contended


def test_a_wrappers_own_wait_says_nothing_of_its_childrens():
    """`sh -c '...'`: the leader hardly ran, its children did the work: its wait is unknown (the
    machine's load decides, as before), not a clean 0% (issue 25 review)."""
    from ttfr.measure.command_run import _own_wait
    from ttfr.measure.supervisor import Ended
    from ttfr.model.base import UNSET
    from ttfr.model.journal import Rusage

    def ended(leader_cpu_s, tree_cpu_s):
        return Ended(spawn_ns=0, exited_ns=1, exit_code=0, rusage=Rusage(user_s=tree_cpu_s, sys_s=0.0), timed_out=False,
                     oom=None, sched=(int(leader_cpu_s * 1e9), int(0.001 * 1e9)))  # fmt: skip

    assert _own_wait(ended(0.002, 0.6)) is UNSET  # a shell that waited for its python
    own = _own_wait(ended(0.55, 0.6))  # a program that did its own work
    assert own.on_cpu_s == 0.55 and own.runq_wait_s == 0.001
