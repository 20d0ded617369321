"""JournalEntry: one finished task as the journal keeps it (one fsynced JSON line): the task's
coordinates, the parent's readings of the cache directory and the host around the run, and
the run's outcome and record.

Decoding a line into this type is the journal's whole check of it (measure/journal.py): a
line that does not decode, or whose values contradict each other, is skipped and its task
runs again on --resume.
"""

from __future__ import annotations

import math
from typing import Annotated, Literal

from msgspec import Meta

from ttfr.model.base import UNSET, Count, Open, UnsetType
from ttfr.model.explanation import ImportTrace
from ttfr.model.record import Marks, OUTCOMES, OwnRusage, RunRecord

_STAMP_LIMIT = 2**63  # a monotonic_ns() reading is an int64
_SECONDS_LIMIT = 1e9  # ~31 years: any duration a run records is far below
Outcome = Literal[OUTCOMES]  # type: ignore[valid-type]
Number = Annotated[float, Meta(gt=-_STAMP_LIMIT, lt=_STAMP_LIMIT)]
Reading = Annotated[int, Meta(ge=0, le=_STAMP_LIMIT - 1)]
# What a group's check rests on: a fresh process run on the cache it left; its members themselves (a
# warm-shared group that changed no file: they were N fresh processes on exactly that cache); or, for
# private directories (one writer each), only that every file reads to its end.
CheckBasis = Literal["process", "members", "private"]
CHECKS_WITHOUT_PROCESS = ("members", "private")


class CacheDir(Open):
    """Files in the case's cache directories before and after the run (per cache variable's
    subdirectory where any changed: [before, after])."""

    entries_before: Reading
    """Number of files in the run's cache directory before it started (a group's check: the files the group
    left, in all its directories)."""
    entries_after: Reading
    """Number of files there after it ended (a group's check: after its process, or as the group left them where
    none ran)."""
    restored_template: bool = False
    """Whether the directory started as a copy of the case's cache template (a warm cache); false: it started
    empty."""
    by_directory: dict[str, list[Count]] | UnsetType = UNSET
    """Files per cache variable's subdirectory (`jax`, `inductor`, ...) as a [before, after] count, for those
    holding any at either reading; absent for a group."""
    bytes_before: Count | UnsetType = UNSET
    """A group's (--concurrency): the bytes its directory's files held before it ran (its check: as the group left
    them)."""
    bytes_after: Count | UnsetType = UNSET
    """A group's: the bytes its directory's files held after it ran (its check: after the check's process)."""
    unreadable: list[str] | UnsetType = UNSET
    """A group's check: the files that could not be read to their end, each with its error (a private directory's
    prefixed `member <i>/`)."""


class Host(Open):
    """The machine around one run: contention evidence (analyse/contention.py)."""

    load_average: list[Number | None] | None | UnsetType = UNSET
    """The machine's 1-, 5- and 15-minute load averages before the spawn (the mean number of runnable or
    uninterruptible tasks); null where unreadable."""
    cpu_pressure_avg10: Number | None | UnsetType = UNSET
    """The percent of the last 10 seconds some task waited for a CPU (PSI's CPU `some` avg10), before the spawn;
    null without PSI."""
    steal_fraction: Number | None | UnsetType = UNSET
    """The fraction of the machine's CPU time stolen by its hypervisor from before the spawn to after the reap
    (/proc/stat); null where unreadable."""
    started_at: str | None | UnsetType = UNSET
    """The wall-clock time just before the spawn: UTC, ISO 8601, to the second."""
    runnable_start: Annotated[list[Reading], Meta(min_length=1)] | None | UnsetType = UNSET
    """Machine-wide scheduling entities before the spawn, [runnable, total] (/proc/loadavg; the runnable count
    includes ttfr's own parent); null where unreadable."""
    runnable_end: Annotated[list[Reading], Meta(min_length=1)] | None | UnsetType = UNSET
    """The same [runnable, total] count after the reap; null where unreadable."""
    cpu_pressure_stall_s: Number | None | UnsetType = UNSET
    """The time some task waited for a CPU (PSI's CPU `some` total) from before the spawn to after the reap;
    null without PSI."""
    usable_cores: Annotated[int, Meta(ge=1)] | None | UnsetType = UNSET
    """Number of CPU cores ttfr's process may run on (its affinity; a node's own on Slurm); null where unknown."""
    machine_busy_s: Number | None | UnsetType = UNSET
    """The CPU time every task of the machine used (user, nice, system, irq, softirq) from before the spawn to
    after the reap; the run's own share is in its rusage, the rest its neighbours'."""


class Rusage(Open):
    """The run's process tree (the worker and its reaped children, g++ included)."""

    user_s: Number | None | UnsetType = UNSET
    """CPU time in user mode of the process and its reaped descendants (wait4's rusage)."""
    sys_s: Number | None | UnsetType = UNSET
    """CPU time in the kernel of the process and its reaped descendants (wait4's rusage)."""
    max_rss_bytes: Count | None | UnsetType = UNSET
    """The peak resident set size of the largest process of the tree (ru_maxrss); null where it is not above
    `rss_floor_bytes`, where it says nothing about the child."""
    rss_floor_bytes: Count | None | UnsetType = UNSET
    """The parent's own peak RSS at the spawn, which a forked child's ru_maxrss starts from; null where unknown."""
    involuntary_switches: Count | None | UnsetType = UNSET
    """Number of involuntary context switches (preempted while runnable) of the process and its reaped
    descendants."""


class SeenProcess(Open):
    """One process of the worker's tree as the parent's watch saw it (measure/process_tree.py)."""

    name: str
    """The process's name as the kernel gives it (its program's first 15 bytes: `g++`, `cc1plus`, `ptxas`)."""
    parent: str
    """Its parent's name (`worker`: the measured process itself; where that is a compiler, a user's command such as
    `g++ x.cpp`, its own name, so that what it runs is part of its compile, not a compiler run of its own)."""
    first_ns: Reading
    """The CLOCK_MONOTONIC reading of the first poll that saw it, in nanoseconds (the clock of `spawn_ns`)."""
    last_ns: Reading
    """The reading of the last poll that saw it, in nanoseconds: it ended before the next poll."""
    pid: Count
    """Its process id (its children name it as their `ppid`)."""
    ppid: Count
    """Its parent's process id (the worker's own, or another process of the tree's)."""


class ProcessTree(Open):
    """The processes a cold run's worker started, watched from the parent (a witness of compiler runs that does not
    rest on the runtime's counters)."""

    poll_s: Number
    """The seconds between two polls of the tree; a process that lived less may be missed (counts are a lower
    bound)."""
    polls: Count
    """Number of polls of the tree from the spawn to the worker's exit."""
    watch_cpu_s: Number
    """The CPU time the parent's watching thread used (seconds): what the watch cost the machine, on another core
    than the worker's where one is free."""
    processes: list[SeenProcess]
    """Every process seen, in the order they were first seen (compilers kept first where more than 200)."""
    left_out: Count
    """Number of processes seen beyond the 200 kept."""


class JournalEntry(Open):
    task: str
    """The task's key, `<case>|<policy or kind>|<index>` (a group's: `<case>|<mode>x<N>|<index>`): what a --resume
    skips."""
    case: str
    """The case's id."""
    kind: str
    """What the process did: `cold` (a cold-process run), `warm` (a warm process), `prime` (filled the cache
    template), `check` (the result check alone), `group` or `group_check` (--concurrency)."""
    policy: str | None
    """The cache policy (a group's: its sharing mode, `cold-shared`, `warm-shared` or `cold-private`); null for a
    priming or check process."""
    index: Reading
    """The run's index in its (case, policy) stream, from 0 (a group's: its index among the case's groups of that
    mode and size)."""
    round: Reading
    """The index of the plan's round it ran in: 0 the template producers, 1 the gates (first warm process or
    check), then the interleaved runs, those --precision added last."""
    measured: bool
    """Whether its figures are published (a cold run, a warm process, a group's member); false for a priming or
    check process."""
    makes_template: bool
    """Whether its cache directory, if it ended ok, became the case's cache template (the first cold-cache run, or
    a priming run)."""
    cache_dir: CacheDir
    """The files in its cache directory before and after it."""
    host: Host | None
    """The machine around the run (contention evidence); null for a group's check."""
    outcome: Outcome
    """How the run ended: the worker's outcome, or what the parent saw (`timeout`, `oom`, `signal`, `error`,
    `invalid-measurement`)."""
    reason: str | None
    """Why the run was not ok, in words (redacted); null for an ok run."""
    record: RunRecord | None
    """What the worker reported (marks, stages, result check, samples, ...); null where nothing readable arrived."""
    spawn_ns: Reading
    """The CLOCK_MONOTONIC reading just before the process started, in nanoseconds (its node's clock where `node`
    is set; where no process started: when that was known)."""
    reaped_ns: Reading | None
    """The CLOCK_MONOTONIC reading when the parent saw the process exit (before reaping it), in nanoseconds, on
    the same clock as `spawn_ns`; null: it timed out, or no process ran."""
    exit_code: int | None
    """The process's exit status (negative: the number of the signal that killed it); null where no process ran."""
    rusage: Rusage | None
    """The process tree's CPU time, peak memory and involuntary switches; null where no process ran."""
    output_tail: str | None
    """The last 2,000 characters of its stdout and stderr (redacted), kept for a run neither ok nor unavailable;
    null otherwise."""
    process_tree: ProcessTree | UnsetType = UNSET
    """A worker's cold run or priming process: the processes it started (compilers among them), as the parent saw
    them; absent for other runs, in older journals and where the kernel does not list a thread's children."""
    imports: ImportTrace | UnsetType = UNSET
    """--explain's diagnostic process: every module it imported, by phase, as `-X importtime` reported them."""
    timeout_s: float | UnsetType = UNSET
    """The wall-clock limit the run was given (--timeout, times the workload's factor for the process that checks
    the result); absent in older journals."""
    concurrency: Annotated[int, Meta(ge=1)] | UnsetType = UNSET
    """--concurrency: the size N of its group (processes released at once); absent outside a group."""
    member: Count | UnsetType = UNSET
    """Its index in its group, 0 to N - 1 (the group's check: N)."""
    messages: list[str] | UnsetType = UNSET
    """A group's member or check: the warning and error lines its output held (a cache read or write gone wrong
    warns and goes on); at most 10, redacted."""
    check_basis: CheckBasis | UnsetType = UNSET
    """What a group's check rests on where no process ran: `members` (a warm-shared group that changed no file) or
    `private` (each file of the private directories reads to its end); absent: a fresh process ran on the cache."""
    clock_offset_ns: int | UnsetType = UNSET
    """Where it ran on another machine (a group on Slurm nodes): that machine's wall clock minus its monotonic
    clock at the spawn, in nanoseconds, so members' readings compare; absent: this machine's clock."""
    node: str | UnsetType = UNSET
    """The host name of the machine that ran it (a Slurm node), where not the run's own; absent otherwise."""
    node_cpus: Annotated[int, Meta(ge=1)] | None | UnsetType = UNSET
    """That machine's number of CPUs (os.cpu_count(); its Slurm allocation may be fewer)."""

    def __post_init__(self):
        problem = self.problem()
        if problem:
            raise ValueError(problem)

    def problem(self) -> str | None:
        """What no single field's type says: how the values must agree (analysis relies on it)."""
        if (self.outcome == "unavailable" or (self.measured and self.outcome != "ok")) and not self.reason:
            return "`reason` is missing for a run that was not ok"
        if self.reaped_ns is not None and self.reaped_ns < self.spawn_ns:
            return "`reaped_ns` is not a timestamp after `spawn_ns`"
        if self.record is None:
            unrun = self.check_basis in CHECKS_WITHOUT_PROCESS  # a group's check that needed no process
            return "`record` is missing for a run that was ok" if self.outcome == "ok" and not unrun else None
        return _record_problem(self, self.record)


# Cold-start spans analysis takes between the parent's spawn mark, the worker's marks and the reap
# (analyse/runs.py run_metrics): each must not end before it starts.
_SPANS = (("spawn", "main"), ("main", "imported"), ("imported", "setup"), ("setup", "first"), ("spawn", "first"),
          ("second_start", "second"))  # fmt: skip


def _record_problem(entry: JournalEntry, record: RunRecord) -> str | None:
    marks = record.marks_ns or Marks()
    if entry.outcome == "ok" and marks.first is UNSET:
        return "`record.marks_ns` has no `first` mark for a run that was ok"
    points = {"spawn": entry.spawn_ns, **{name: getattr(marks, name) for name in marks.__struct_fields__}}
    for start, end in _SPANS:
        if points[start] is not UNSET and points[end] is not UNSET and points[end] < points[start]:
            return f"`record.marks_ns`: `{end}` is before `{start}`"
    if not all(v <= _SECONDS_LIMIT for v in (record.stages_s or {}).values()):
        return "`record.stages_s` holds a value that is not a number of seconds"
    own = record.rusage_self or OwnRusage()
    if not all(_number(v) for v in (own.user_s, own.sys_s)):
        return "`record.rusage_self` holds a value that is not a number"
    sched = record.sched
    if sched and not all(_number(v) for v in (sched.on_cpu_s, sched.runq_wait_s)):
        return "`record.sched` holds a value that is not a number"
    if record.digest and not all(v is None or _finite(v) for v in (record.digest.sum, record.digest.sum_sq)):
        return "`record.digest` has no `sum` and `sum_sq` numbers"
    if record.warm and not (record.warm.samples_s and all(0 < s <= _SECONDS_LIMIT for s in record.warm.samples_s)):
        return "`record.warm` has no `samples_s` (a non-empty list of seconds > 0)"
    return None


def _finite(value) -> bool:
    return math.isfinite(value)


def _number(value) -> bool:
    return value is UNSET or value is None or (math.isfinite(value) and abs(value) < _STAMP_LIMIT)
