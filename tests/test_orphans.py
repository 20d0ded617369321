"""A ttfr process killed outright (kill -9) takes its workers and their children with it,
and a normal exit leaves no helper process behind (the sweeper, measure/sweeper.py)."""

import os
import signal
import subprocess
import sys
import time

import pytest

pytestmark = pytest.mark.integration

# A stand-in ttfr: spawns one worker through the real spawn machinery and waits for it.
PARENT = """
import os, sys
from ttfr.child.job import Job
from ttfr.measure import spawn
try:
    from ttfr.measure.sweeper import pid as sweeper_pid
except ImportError:  # a ttfr without a sweeper
    sweeper_pid = lambda: None
job = Job(adapter="python_backend", workload="noop", size=1, dtype="float64")
result = spawn.run_worker(job, dict(os.environ), float(sys.argv[2]), python=sys.argv[1] or None)
print("outcome", result.outcome, flush=True)
print("sweeper", sweeper_pid(), flush=True)
"""


def alive(pid):
    """True while the process exists and is not a zombie."""
    try:
        stat = open(f"/proc/{pid}/stat").read()
    except FileNotFoundError:
        return False
    return stat.rpartition(")")[2].split()[0] not in ("Z", "X")


def poll(condition, seconds):
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def children_of(pid):
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = open(f"/proc/{entry}/stat").read()
            except OSError:
                continue
            if int(stat.rpartition(")")[2].split()[1]) == pid:
                found.append(int(entry))
    return found


def start_parent(tmp_path, python, timeout_s):
    script = tmp_path / "parent.py"
    script.write_text(PARENT)
    return subprocess.Popen(
        [sys.executable, str(script), python, str(timeout_s)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True,
    )  # fmt: skip


def test_a_killed_parent_takes_its_worker_and_grandchild_with_it(tmp_path):
    # The "interpreter" forks a long sleep (a stand-in for g++) in its own process group and waits.
    worker_pid, grandchild_pid = tmp_path / "worker.pid", tmp_path / "grandchild.pid"
    shim = tmp_path / "fake-python"
    shim.write_text(
        "#!/bin/sh\n"
        f"sleep 300 & echo $! > {grandchild_pid}.tmp && mv {grandchild_pid}.tmp {grandchild_pid}\n"
        f"echo $$ > {worker_pid}.tmp && mv {worker_pid}.tmp {worker_pid}\n"
        "wait\n"
    )
    shim.chmod(0o755)
    parent = start_parent(tmp_path, str(shim), 600)
    pids = []
    try:
        assert poll(lambda: worker_pid.exists() and grandchild_pid.exists(), 30), parent.communicate(timeout=5)
        pids = [int(worker_pid.read_text()), int(grandchild_pid.read_text())]
        assert all(alive(pid) for pid in pids)
        helpers = [pid for pid in children_of(parent.pid) if pid != pids[0]]  # the sweeper
        parent.send_signal(signal.SIGKILL)
        parent.wait(10)
        assert poll(lambda: not any(alive(pid) for pid in pids), 5), "the worker or its child outlived the killed parent"
        assert poll(lambda: not any(alive(pid) for pid in helpers), 5), "the sweeper stayed behind"
    finally:
        parent.kill()
        parent.communicate()
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def test_a_normal_run_leaves_no_sweeper_behind(tmp_path):
    parent = start_parent(tmp_path, "", 60)
    output, _ = parent.communicate(timeout=120)
    assert parent.returncode == 0, output
    assert "outcome ok" in output, output
    assert "sweeper None" not in output, "no sweeper guarded the worker"
    sweeper_pid = int(output.split("sweeper ")[1].split()[0])
    assert poll(lambda: not alive(sweeper_pid), 5), "the sweeper outlived its parent's normal exit"


def test_the_sweeper_runs_in_its_own_session_and_forgets_finished_groups():
    from ttfr.measure import spawn, sweeper
    from ttfr.child.job import Job

    result = spawn.run_worker(Job(adapter="python_backend", workload="noop", size=1, dtype="float64"),
                              dict(os.environ), 60.0, python=sys.executable)  # fmt: skip
    assert result.outcome == "ok", result.output_tail
    pid = sweeper.pid()
    assert pid is not None and alive(pid)
    assert os.getsid(pid) == pid  # Ctrl-C in the terminal does not reach it
    assert not sweeper._groups  # the finished worker's group is released
