"""What runs the measured processes, as one object the pipeline passes down: a worker for a
built-in or user's case, a user's command and its --prepare, and the host's readings around
each run. Real by default; a test gives fakes with known costs and outcomes (hyperfine's mock
executor), so every display and command path runs without starting a worker."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from ttfr.child import hostinfo
from ttfr.measure.command_run import run_command, run_prepare
from ttfr.measure.group_task import TaskRun
from ttfr.measure.spawn import run_worker


@dataclass(frozen=True)
class Executors:
    worker: Callable = run_worker  # (job, env, timeout_s, python) -> RunResult
    command: Callable = run_command  # (command, env, timeout_s) -> RunResult
    prepare: Callable = run_prepare  # (command, env, timeout_s) -> why it failed, or None
    host: object = hostinfo  # load_average, cpu_pressure, cpu_times, runnable_tasks, usable_cpus
    # where --concurrency groups run: None, on this machine (LocalGroups); else a launcher with the same
    # `run(members, timeout_s, python)` (measure/slurm_groups.py)
    groups: object | None = None
    # where their caches are (--concurrency-cache-dir: this run's directory there); None: the run's scratch
    group_root: Path | None = None

    @property
    def starts_workers(self) -> bool:
        """Whether real workers run (ttfr's own bytecode is compiled before them)."""
        return self.worker is run_worker

    @property
    def together(self):
        """What runs a group's processes (and its check's or template's one): the launcher placed with
        --concurrency-executor, else this machine's threads."""
        return self.groups or LocalGroups(self.worker)


@dataclass(frozen=True)
class LocalGroups:
    """A group's processes on this machine: N threads prepare their spawn and wait on a barrier, then
    spawn at once (the start skew is in their spawn marks); one process runs on the calling thread."""

    worker: Callable

    def run(self, members: list[tuple], timeout_s: float, python: str | None) -> list[TaskRun]:
        if len(members) == 1:
            ((job, env),) = members
            return [TaskRun(self.worker(job, env, timeout_s, python), "", 0, None)]
        barrier = threading.Barrier(len(members))
        runs: list[TaskRun | None] = [None] * len(members)
        raised: list[BaseException] = []

        def member(i: int) -> None:
            job, env = members[i]
            try:
                barrier.wait(timeout=timeout_s)
            except threading.BrokenBarrierError:
                pass  # another member could not start: run anyway, the skew says so
            try:
                runs[i] = TaskRun(self.worker(job, env, timeout_s, python), "", 0, None)
            except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread (an interrupt stops the run)
                raised.append(exc)

        # daemon threads: an interrupted run exits without waiting for them (the sweeper kills their workers)
        threads = [threading.Thread(target=member, args=(i,), name=f"ttfr-group-{i}", daemon=True)
                   for i in range(len(members))]  # fmt: skip
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if raised:
            raise raised[0]
        return runs


REAL = Executors()


def placing_groups(base: Executors | None, executor: str, cache_dir: Path | None, slurm_options, say,
                   start_patience_s: float | None = None) -> Executors:  # fmt: skip
    """`--concurrency-executor` and `--concurrency-cache-dir`: the executors with the groups placed there
    (a fresh `ttfr-*` directory of this run's under the directory named, which must exist; removed by
    `release_groups` when the run ends). Nothing is created before every option checked out."""
    from ttfr.errors import UsageError
    from ttfr.measure import slurm_client
    from ttfr.measure.cache import make_run_directory
    from ttfr.measure.slurm_groups import SlurmGroups, array_words

    base = base or REAL
    if executor == "local" and cache_dir is None:
        return base
    if executor == "slurm":
        if cache_dir is None:
            raise UsageError("--concurrency-executor slurm needs --concurrency-cache-dir DIR: a directory every node "
                             "mounts (the groups' caches and their tasks' files go there)")  # fmt: skip
        slurm_client.require("--concurrency-executor slurm")
    parent = Path(cache_dir).resolve()  # an existing directory: the command checked it (as for shards)
    if executor == "slurm":
        slurm_client.test_only(["--array=0-1", *array_words(slurm_options)], "--concurrency-executor slurm")
    try:
        root = make_run_directory(parent)
    except OSError as exc:
        raise UsageError(f"--concurrency-cache-dir {cache_dir}: cannot make a directory there ({exc.strerror})") from None
    patience = {} if start_patience_s is None else {"start_patience_s": start_patience_s}
    groups = SlurmGroups(root, slurm_options, say=say, **patience) if executor == "slurm" else None
    return replace(base, groups=groups, group_root=root)


def release_groups(executors: Executors) -> None:
    """Remove this run's directory under --concurrency-cache-dir (its groups' caches and tasks' files)."""
    from ttfr.measure.cache import remove_run_directory

    if executors.group_root is not None:
        remove_run_directory(executors.group_root)
