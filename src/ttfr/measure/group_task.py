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
from ttfr.measure.spawn import ERROR, OUTCOMES, RunResult, run_worker
from ttfr.model.journal import Host

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


class TaskFile(msgspec.Struct, forbid_unknown_fields=True):
    """What the submitter tells a task (task-K.json): its worker's job, ttfr's changes to the node's
    environment, and how long to wait."""

    job: dict
    env: dict[str, str]  # what ttfr set for the case
    removed: list[str]  # what it removed
    timeout_s: float
    release_patience_s: float


def to_json(run: TaskRun) -> str:
    return msgspec.json.encode(run).decode() + "\n"


def from_json(text: str) -> TaskRun:
    """A task's result file, typed as it was written (msgspec checks every field's type: the file lies on
    a shared filesystem); ValueError where it is not one (msgspec's errors are ValueErrors)."""
    run = msgspec.json.decode(text.encode(), type=TaskRun)
    if run.result.outcome not in OUTCOMES:
        raise ValueError(f"an outcome ttfr does not have: {run.result.outcome!r}")
    return run


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
    spec = msgspec.json.decode(task_file(work, k).read_bytes(), type=TaskFile)
    job, env, timeout_s = Job(**spec.job), environment(spec.env, spec.removed), spec.timeout_s
    node = socket.gethostname()
    write_in_place(ready_file(work, k), f"{node}\n")
    at_ns = wait_for_release(work, spec.release_patience_s)
    if at_ns is None:
        reason = f"never released: the group's other tasks did not all start within {spec.release_patience_s:g} s"
        return TaskRun(RunResult(ERROR, reason, None, time.monotonic_ns(), None, None), node,
                       time.time_ns() - time.monotonic_ns(), None)  # fmt: skip
    while (left := at_ns - time.time_ns()) > 0:  # the nodes' wall clocks (NTP) are the only common one
        time.sleep(min(left / 1e9, 0.001) if left > 2_000_000 else 0)
    load = hostinfo.load_average()
    before = host_reading(hostinfo)
    started = time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime())
    offset = time.time_ns() - time.monotonic_ns()
    result = run_worker(job, env, timeout_s, python, watch_tree=False)  # N members: no N polls beside them
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
