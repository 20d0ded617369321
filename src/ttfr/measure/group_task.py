"""One member of a `--concurrency` group run as a Slurm array task (`--concurrency-executor slurm`):
`python -m ttfr.measure.group_task WORK K [PYTHON]`, from the script measure/slurm_groups.py wrote.

It reads its worker's job and environment (`task-K.json`, written by the submitter), says it is
ready, waits for the group's release instant, spawns its worker then, and writes what the worker
did (the same RunResult a local member gives) with its node's name, its clock offset and the
node's readings around the run. Every file it writes was created empty by the submitter and is
written in place: NFS may keep a new name invisible on another node for its attribute-cache time,
while close-to-open consistency shows an existing file's new content at the next open.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import msgspec

from ttfr.child import hostinfo
from ttfr.child.job import Job
from ttfr.measure.host_window import host_fields, host_reading
from ttfr.measure.spawn import ERROR, RunResult, run_worker
from ttfr.model.base import encode
from ttfr.model.journal import Host, Outcome, Reading, Rusage
from ttfr.model.record import RunRecord

POLL_S = 0.1  # how often a task opens the release file (each open is a round trip on NFS); the lead is 2 s


def task_file(work: Path, k: int) -> Path:
    return work / f"task-{k}.json"


def ready_file(work: Path, k: int) -> Path:
    return work / "ready" / str(k)


def result_file(work: Path, k: int) -> Path:
    return work / "result" / str(k)


def status_file(work: Path, k: int) -> Path:
    return work / "status" / str(k)


def release_file(work: Path) -> Path:
    return work / "go"


def write_in_place(path: Path, text: str) -> None:
    """Into the existing file (same inode), flushed to the server before close."""
    with open(path, "r+b") as out:
        out.truncate(0)
        out.write(text.encode())
        out.flush()
        os.fsync(out.fileno())


def read_line(path: Path) -> str | None:
    """The file's first complete line (a writer on another node may not have finished), or None."""
    try:
        text = path.read_text()
    except OSError:
        return None
    return text.split("\n", 1)[0] if "\n" in text else None


@dataclass(frozen=True)
class TaskRun:
    """What one array task did: its worker's RunResult, where, and on which clock."""

    result: RunResult
    node: str  # "" where it never ran on a node (or ran here)
    clock_offset_ns: int  # the node's wall clock minus its monotonic clock at the spawn
    host: Host | None
    node_cpus: int | None = None  # the node's CPUs (its Slurm allocation may be fewer)


class _ResultFile(msgspec.Struct, forbid_unknown_fields=True):
    """A task's result file as it must be (it lies on a shared filesystem: anything else is refused)."""

    outcome: Outcome
    reason: str | None
    record: RunRecord | None
    spawn_ns: Reading
    reaped_ns: Reading | None
    exit_code: int | None
    rusage: Rusage
    output_tail: str | None
    messages: list[str]
    node: str
    clock_offset_ns: int
    host: Host | None
    node_cpus: int | None


def to_json(run: TaskRun) -> str:
    r = run.result
    return json.dumps({
        "outcome": r.outcome, "reason": r.reason, "record": None if r.record is None else encode(r.record),
        "spawn_ns": r.spawn_ns, "reaped_ns": r.reaped_ns, "exit_code": r.exit_code, "rusage": encode(r.rusage),
        "output_tail": r.output_tail, "messages": list(r.messages), "node": run.node,
        "clock_offset_ns": run.clock_offset_ns, "host": None if run.host is None else encode(run.host),
        "node_cpus": run.node_cpus,
    }) + "\n"  # fmt: skip


def from_json(text: str) -> TaskRun:
    """A task's result file, typed (ValueError where it is not one: msgspec's errors are ValueErrors)."""
    data = msgspec.json.decode(text.encode(), type=_ResultFile)
    result = RunResult(outcome=data.outcome, reason=data.reason, record=data.record, spawn_ns=data.spawn_ns,
                       reaped_ns=data.reaped_ns, exit_code=data.exit_code, rusage=data.rusage,
                       output_tail=data.output_tail, messages=tuple(data.messages))  # fmt: skip
    return TaskRun(result, data.node, data.clock_offset_ns, data.host, data.node_cpus)


def environment(overrides: dict, removed: list) -> dict:
    """The worker's environment on the node: the node's own (Slurm's per-task variables, its TMPDIR)
    with what ttfr set or removed for the case applied on top."""
    env = {key: value for key, value in os.environ.items() if key not in set(removed)}
    env.update(overrides)
    return env


def wait_for_release(work: Path, patience_s: float) -> int | None:
    """The release instant (wall-clock ns) once the submitter wrote it; None after `patience_s`."""
    deadline = time.monotonic() + patience_s
    while time.monotonic() < deadline:
        line = read_line(release_file(work))
        if line:
            return int(line)
        time.sleep(POLL_S)
    return None


def run_task(work: Path, k: int, python: str | None) -> TaskRun:
    spec = json.loads(task_file(work, k).read_text())
    job, env, timeout_s = Job(**spec["job"]), environment(spec["env"], spec["removed"]), float(spec["timeout_s"])
    node = socket.gethostname()
    write_in_place(ready_file(work, k), f"{node}\n")
    at_ns = wait_for_release(work, float(spec["release_patience_s"]))
    if at_ns is None:
        reason = f"never released: the group's other tasks did not all start within {spec['release_patience_s']:g} s"
        return TaskRun(RunResult(ERROR, reason, None, time.monotonic_ns(), None, None), node,
                       time.time_ns() - time.monotonic_ns(), None)  # fmt: skip
    while (left := at_ns - time.time_ns()) > 0:  # the nodes' wall clocks (NTP) are the only common one
        time.sleep(min(left / 1e9, 0.001) if left > 2_000_000 else 0)
    load = hostinfo.load_average()
    before = host_reading(hostinfo)
    started = time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime())
    offset = time.time_ns() - time.monotonic_ns()
    result = run_worker(job, env, timeout_s, python)
    host = host_fields(hostinfo, load, started, before, host_reading(hostinfo))
    return TaskRun(result, node, offset, host, os.cpu_count())


def main(argv: list[str]) -> int:
    work, k = Path(argv[0]), int(argv[1])
    python = argv[2] if len(argv) > 2 and argv[2] else None
    run = run_task(work, k, python)
    write_in_place(result_file(work, k), to_json(run))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
