"""Spawning one worker against real processes: stand-in 'interpreters' that misbehave on purpose."""

import os
import signal
import sys
import time

import pytest

from ttfr.child.job import Job, JobError
from ttfr.measure import spawn

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


def test_sigkill_from_outside_is_reported_as_probable_oom(tmp_path):
    result = run(script(tmp_path, "kill -KILL $$"))
    assert result.outcome == "oom" and "OOM killer" in result.reason


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
    ok = {"outcome": "ok", "reason": None}
    assert spawn.classify(ok, 0, False, 5) == ("ok", None)
    assert spawn.classify(ok, -signal.SIGSEGV, False, 5) == ("error", "worker reported a result, then killed by SIGSEGV")
    assert spawn.classify({"outcome": "unavailable", "reason": "gpu_unavailable"}, 0, False, 5)[0] == "unavailable"
    assert spawn.classify(None, None, True, 5)[0] == "timeout"


def test_a_real_worker_reports_marks_in_order():
    result = spawn.run_worker(NOOP_JOB, dict(os.environ), 30.0, python=sys.executable)
    assert result.outcome == "ok", result.output_tail
    marks = result.record["marks_ns"]
    order = [result.spawn_ns, marks["main"], marks["imported"], marks["setup"], marks["first"],
             marks["second_start"], marks["second"], result.reaped_ns]  # fmt: skip
    assert order == sorted(order)
    assert result.rusage["user_s"] > 0


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
