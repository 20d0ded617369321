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
from ttfr.model.record import OUTCOMES, Marks, OwnRusage, RunRecord

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
    entries_after: Reading
    restored_template: bool = False
    by_directory: dict[str, list[Count]] | UnsetType = UNSET
    # a group's (--concurrency): the bytes its files held before and after, and those that could not be read
    bytes_before: Count | UnsetType = UNSET
    bytes_after: Count | UnsetType = UNSET
    unreadable: list[str] | UnsetType = UNSET


class Host(Open):
    """The machine around one run: contention evidence (analyse/contention.py)."""

    load_average: list[Number | None] | None | UnsetType = UNSET
    cpu_pressure_avg10: Number | None | UnsetType = UNSET
    steal_fraction: Number | None | UnsetType = UNSET
    started_at: str | None | UnsetType = UNSET
    runnable_start: Annotated[list[Reading], Meta(min_length=1)] | None | UnsetType = UNSET
    runnable_end: Annotated[list[Reading], Meta(min_length=1)] | None | UnsetType = UNSET
    cpu_pressure_stall_s: Number | None | UnsetType = UNSET
    usable_cores: Annotated[int, Meta(ge=1)] | None | UnsetType = UNSET
    machine_busy_s: Number | None | UnsetType = UNSET


class Rusage(Open):
    """The run's process tree (the worker and its reaped children, g++ included)."""

    user_s: Number | None | UnsetType = UNSET
    sys_s: Number | None | UnsetType = UNSET
    max_rss_bytes: Count | None | UnsetType = UNSET
    rss_floor_bytes: Count | None | UnsetType = UNSET
    involuntary_switches: Count | None | UnsetType = UNSET


class JournalEntry(Open):
    task: str
    case: str
    kind: str
    policy: str | None
    index: Reading
    round: Reading
    measured: bool
    makes_template: bool
    cache_dir: CacheDir
    host: Host | None
    outcome: Outcome
    reason: str | None
    record: RunRecord | None
    spawn_ns: Reading
    reaped_ns: Reading | None
    exit_code: int | None
    rusage: Rusage | None
    output_tail: str | None
    timeout_s: float | UnsetType = UNSET
    # a group's member (--concurrency): the group's size N and this process's place in it (a group's
    # check process: N), and the warnings and errors its output held (a cache read or write gone wrong)
    concurrency: Annotated[int, Meta(ge=1)] | UnsetType = UNSET
    member: Count | UnsetType = UNSET
    messages: list[str] | UnsetType = UNSET
    # a group's check (GROUP_CHECK): what its verdict rests on (UNSET: a fresh process ran on the cache)
    check_basis: CheckBasis | UnsetType = UNSET
    # where a process ran on another machine's clock (a group on Slurm nodes): its wall clock minus its
    # monotonic clock at the spawn, so that members' spawns and results compare (UNSET: this machine's)
    clock_offset_ns: int | UnsetType = UNSET
    node: str | UnsetType = UNSET  # the machine that ran it, where not the run's own (a Slurm node)
    node_cpus: Annotated[int, Meta(ge=1)] | None | UnsetType = UNSET  # that machine's CPUs

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
