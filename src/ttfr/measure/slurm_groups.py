"""`--concurrency-executor slurm`: each group of N processes is a Slurm job array of N tasks (a node
each, or `--slurm-cpus-per-task C` of one), pointed at one cache directory under the
`--concurrency-cache-dir` the user named (a filesystem every node mounts); its check, where it needs
a process, is one more task after them. The rest of the run stays on this machine.

A job array's tasks start whenever Slurm finds them room, so the group is released by a barrier on
the shared filesystem: each task (measure/group_task.py) says it is ready, and once all N are, this
side writes a release instant RELEASE_LEAD_S ahead on the wall clock, at which every task spawns its
worker. The start skew is the spread of those spawns on the nodes' wall clocks, which NTP keeps
within about a millisecond of each other: the skew carries that error. A cluster that cannot run N
tasks at once would keep the first ones waiting for the others forever: after `start_patience_s`
the array is cancelled and the group's processes fail, saying so.
"""

from __future__ import annotations

import os
import shlex
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import msgspec

from ttfr.measure import group_task, slurm_client
from ttfr.measure.group_task import TaskRun
from ttfr.measure.spawn import ERROR, RunResult
from ttfr.redaction import redact_text

RELEASE_LEAD_S = 2.0  # the release instant is this far ahead: every node's next look at the file comes first
POLL_S = 0.5  # the files on the shared filesystem
SQUEUE_EVERY_S = 2.0  # the controller, asked less often
FINISH_GRACE_S = 30.0  # after Slurm says the array is gone: for its last writes to show on this node


@dataclass
class SlurmGroups:
    """Runs a group's processes as one Slurm job array; `root`: this run's directory on the user's
    shared filesystem (the tasks' files; the groups' caches are beside them)."""

    root: Path
    options: slurm_client.SlurmOptions = field(default_factory=slurm_client.SlurmOptions)
    start_patience_s: float = 1800.0
    say: Callable[[str], None] = lambda text: None

    def run(self, members: list[tuple], timeout_s: float, python: str | None) -> list[TaskRun]:
        """Each (job, env) as one array task, released together; what each did, in order."""
        n = len(members)
        (self.root / "tasks").mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix="group-", dir=self.root / "tasks"))
        for sub in ("ready", "result", "status", "logs"):
            (work / sub).mkdir()
        # a task waits for its release a little longer than this side waits for all N to start
        patience = self.start_patience_s + RELEASE_LEAD_S + 60
        for k, (job, env) in enumerate(members):
            # only what ttfr set or removed for the case: the node's own environment stays (Slurm's per-task
            # variables, its TMPDIR), and the submitter's secrets are not written to the shared filesystem
            overrides = {key: value for key, value in env.items() if os.environ.get(key) != value}
            removed = sorted(key for key in os.environ if key not in env)
            task = group_task.TaskFile(job=job.as_dict(), env=overrides, removed=removed, timeout_s=timeout_s,
                                       release_patience_s=patience)  # fmt: skip
            _create(group_task.task_file(work, k), msgspec.json.encode(task).decode())
            for path in (group_task.ready_file(work, k), group_task.result_file(work, k), group_task.status_file(work, k)):
                _create(path, "")
        _create(group_task.release_file(work), "")
        script = _script(work, python)
        words = [f"--array=0-{n - 1}", *array_words(self.options)]
        job = None
        try:
            job = slurm_client.submit(words, str(script))
            self.say(f"slurm: group job {job}, {n} task(s)")
            why = self._release(work, job, n)
            if why is None:
                self._wait_done(work, job, n, timeout_s)
        except KeyboardInterrupt:
            if job is not None and not slurm_client.cancel(job):
                self.say(f"slurm: job {job} NOT cancelled (scancel failed): `scancel {job}`")
            raise
        return [_outcome(work, job, k, why, env) for k, (_job, env) in enumerate(members)]

    def _release(self, work: Path, job: str, n: int) -> str | None:
        """Release the tasks once every one is ready (or ended without being: it fails, the others run, as
        a local group's broken barrier); why none ran, where Slurm could not start them all in time."""
        started = asked = time.monotonic()
        while True:
            ready = [group_task.read_line(group_task.ready_file(work, k)) for k in range(n)]
            ended = [group_task.read_line(group_task.status_file(work, k)) for k in range(n)]
            everyone = all(r or e for r, e in zip(ready, ended, strict=True))
            if not everyone and time.monotonic() - asked >= SQUEUE_EVERY_S:  # the controller: less often than files
                asked = time.monotonic()
                everyone = slurm_client.active(job) == 0
            if everyone:
                at_ns = time.time_ns() + int(RELEASE_LEAD_S * 1e9)
                group_task.write_in_place(group_task.release_file(work), f"{at_ns}\n")
                return None
            if time.monotonic() - started > self.start_patience_s:
                slurm_client.cancel(job)
                count = sum(1 for r in ready if r)
                return (f"Slurm had started only {count} of the group's {n} tasks after {self.start_patience_s:g} s "
                        f"(job {job}, cancelled): the cluster could not run {n} at once")  # fmt: skip
            time.sleep(POLL_S)

    def _wait_done(self, work: Path, job: str, n: int, timeout_s: float) -> None:
        """Until every task wrote its exit code (or Slurm no longer has any, plus a grace for their last
        writes to show here); a task is killed by its worker's own timeout well before our limit."""
        gone_at, asked = None, time.monotonic()
        limit = time.monotonic() + RELEASE_LEAD_S + timeout_s * 2 + 120
        while time.monotonic() < limit:
            if all(group_task.read_line(group_task.status_file(work, k)) for k in range(n)):
                return
            if gone_at is None and time.monotonic() - asked >= SQUEUE_EVERY_S:
                asked = time.monotonic()
                if slurm_client.active(job) == 0:
                    gone_at = time.monotonic()
            if gone_at is not None and time.monotonic() - gone_at > FINISH_GRACE_S:
                return
            time.sleep(POLL_S)
        slurm_client.cancel(job)


def array_words(options: slurm_client.SlurmOptions) -> list[str]:
    """sbatch's options of a group's array but its size. Slurm's own output goes nowhere: the task keeps
    its log itself (and a `%` in the directory's name would be read as one of sbatch's patterns)."""
    return ["--nodes=1", "--ntasks=1", "--job-name=ttfr-group", f"--chdir={os.getcwd()}", "--output=/dev/null",
            *options.sbatch_words()]  # fmt: skip


def _create(path: Path, text: str) -> None:
    """A new file only this user reads (a task's file holds its environment)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(text)


def _script(work: Path, python: str | None) -> Path:
    """The array task: run its member, keep its log, write its exit code in place."""
    line = shlex.join([sys.executable, "-m", "ttfr.measure.group_task"])
    script = work / "task.sh"
    fd = os.open(script, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o700)
    with os.fdopen(fd, "w") as out:
        out.write(
            "#!/bin/bash\n"
            "# One process of a ttfr --concurrency group (a Slurm array task): written by ttfr.\n"
            "K=${SLURM_ARRAY_TASK_ID:?not a Slurm array task}\n"
            f"WORK={shlex.quote(str(work))}\n"
            f'{line} "$WORK" "$K" {shlex.quote(python or "")} > "$WORK/logs/task-$K.log" 2>&1\n'
            'echo $? > "$WORK/status/$K"\n'
        )
    return script


def _outcome(work: Path, job: str, k: int, why_none: str | None, env: dict) -> TaskRun:
    """Task k's run; where it left none, an error that says why and where its log is (its tail redacted
    with the member's environment, as a local worker's output tail is)."""
    offset = time.time_ns() - time.monotonic_ns()
    if why_none is None:
        try:
            return group_task.from_json(group_task.result_file(work, k).read_text())
        except (OSError, ValueError, KeyError, TypeError) as exc:
            status = group_task.read_line(group_task.status_file(work, k))
            log = work / "logs" / f"task-{k}.log"
            ended = f"exit code {status}" if status else "it never finished (cancelled, or killed by Slurm)"
            why_none = f"Slurm task {job}_{k} left no result ({ended}; {type(exc).__name__}); its log: {log}"
    tail = redact_text(_tail(work / "logs" / f"task-{k}.log"), env)
    return TaskRun(RunResult(ERROR, why_none, None, time.monotonic_ns(), None, None, output_tail=tail), "", offset, None)


def _tail(path: Path) -> str | None:
    try:
        return path.read_text(errors="replace")[-2000:] or None
    except OSError:
        return None
