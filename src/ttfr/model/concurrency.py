"""Many cold starts at once (`--concurrency N`, issue 29): what each process of a group did, each
group's figures, and the figures per sharing mode and group size that every output renders
(analyse/concurrency.py decides them once)."""

from __future__ import annotations

from typing import Annotated, Literal

from msgspec import Meta

from ttfr.model.base import Artifact, Count
from ttfr.model.journal import CheckBasis
from ttfr.model.policies import CONCURRENCY_MODES

Mode = Literal[CONCURRENCY_MODES]  # type: ignore[valid-type]
Seconds = Annotated[float, Meta(ge=0)] | None
# What a process did with the shared cache, from its runtime's own counters: compiled every program,
# loaded every one, some of each, or nothing to say (no counters, or it failed).
CacheUse = Literal["compiled", "loaded", "mixed", "unknown"]


def point_label(mode: str, n: int) -> str:
    """A sharing mode at a group size, as every output and comparison names it: "cold-shared x8"."""
    return f"{mode} x{n}"


class GroupMember(Artifact):
    member: Count
    """The process's index in its group (0 to N-1)."""
    outcome: str
    """How its run ended: ok, unavailable, error, timeout, oom, signal or invalid-measurement."""
    reason: str | None
    """Why it was not ok, in words; null when ok."""
    start_skew_s: Seconds
    """Its spawn after the group's first spawn (the barrier's spread), in seconds; null where its worker never
    started."""
    ttfr_s: Seconds
    """Its own time to first result: from its spawn to its first result, in seconds; null unless ok."""
    result_after_release_s: Seconds
    """From the group's first spawn to this process's first result, in seconds; null unless ok with a result."""
    cache_use: CacheUse
    """What it did with the shared cache, from its runtime's own counters: compiled every program, loaded every
    one, mixed, or unknown (no counters, not ok, or neither count)."""
    compiles: Count | None
    """The number of programs it compiled: its persistent-cache misses by its runtime's counters; null where it
    was not ok or reported no counters."""
    loads: Count | None
    """The number of programs it loaded from the cache: its persistent-cache hits (AOT executables loaded
    included); null where it was not ok or reported no counters."""
    blocked_s: Seconds
    """Seconds its main thread was neither on a CPU nor waiting for one, from its spawn to its scheduler reading:
    blocked on a lock or on I/O, told apart from compiling and from queueing; null unless ok with that reading."""
    runq_wait_s: Seconds
    """Seconds its main thread spent runnable but waiting in a run queue for a CPU (CPU contention); null unless
    ok with a scheduler reading."""
    messages: list[str]
    """The warning and error lines of its output (the last 64 KiB, at most 10, redacted): a cache read or write
    gone wrong shows here."""
    node: str | None = None
    """The machine it ran on where not the run's own (a Slurm node: --concurrency-executor slurm); its
    start_skew_s and result_after_release_s are then on the nodes' wall clocks. Null: this machine."""
    node_cores: Annotated[int, Meta(ge=1)] | None = None
    """The number of logical CPUs of that node (`os.cpu_count()` there; its Slurm allocation may be fewer); null
    on this machine."""


NOT_RUN = "not run"  # a GroupCheck's outcome where the run ended between the group and its check


class GroupCheck(Artifact):
    """The cache a group left, checked before anything else touched it."""

    files: Count | None
    """The number of files in the cache directories the group left (all of them, for private ones); null: the
    check never ran (the run ended after the group)."""
    bytes: Count | None
    """The size of those files in bytes; null where not measured."""
    unreadable: list[str]
    """The files that could not be read to their end, each as its path in the cache (private: `member i/path`)
    and the error."""
    outcome: str
    """How the fresh process run on the cache afterwards ended (ok, error, ...); "not run" where the run ended
    first; ok without a process where the basis is members or private."""
    compiles: Count | None
    """The number of programs the check still had to compile (cache misses; 0: every program was there); for a
    members basis, the members' summed; null where not counted."""
    loads: Count | None
    """The number of programs the check loaded from the cache (cache hits); for a members basis, the members'
    summed; null where not counted."""
    whole: bool | None
    """Whether the cache is whole: every file readable and nothing left to compile; false when a file is
    unreadable; null where it cannot tell (private directories: null unless a file is unreadable)."""
    basis: CheckBasis = "process"
    """What the check rests on: "process", a fresh process ran on the cache; "members", a warm-shared group that
    changed no file (its N processes were fresh ones on that very cache); "private", only that every file reads."""


class Group(Artifact):
    mode: Mode
    """The sharing mode: cold-shared (one empty cache directory), warm-shared (one holding the case's template)
    or cold-private (an empty one each)."""
    n: Annotated[int, Meta(ge=1)]
    """The group's size: the number of processes released together by the barrier."""
    index: Count
    """The group's index (its round) among the groups of its mode and size, from 0."""
    members: list[GroupMember]
    """Each process of the group, by member index; fewer than n where the run ended mid-group."""
    start_skew_s: Seconds
    """The last spawn after the first (the barrier's spread), in seconds; null where none started."""
    all_results_s: Seconds
    """From the first spawn to the last first result: when all N had a result, in seconds; null where a member
    failed, had no result or was never journaled."""
    compiles_total: Count | None
    """The number of programs compiled, summed over its ok members; null where an ok member has no counters, none
    was ok, or the group is incomplete."""
    distinct_programs: Count | None
    """The number of programs one process asks the cache for (its hits + misses; the median over its ok members,
    rounded); null where none counted."""
    dedup_ratio: float | None
    """compiles_total / distinct_programs, a ratio: 1 = each program compiled once, N = by every process; null
    where either is unknown."""
    bytes_written: Count | None
    """Bytes the group added to its cache (a shared directory's growth; summed over private ones; at least 0);
    null where not measured."""
    check: GroupCheck
    """The check of the cache the group left."""

    @property
    def label(self) -> str:
        """The group as flags and reports name it: "cold-shared x2 #0"."""
        return f"{point_label(self.mode, self.n)} #{self.index}"


class ConcurrencyPoint(Artifact):
    """One sharing mode at one group size, over its groups (rounds)."""

    mode: Mode
    """The sharing mode (cold-shared, warm-shared, cold-private)."""
    n: Annotated[int, Meta(ge=1)]
    """The group size: the number of processes started at once."""
    groups: Count
    """The number of complete groups (rounds) the figures are over."""
    processes: Count
    """The number of ok processes over those groups, over which the percentiles are taken."""
    ttfr_p50_s: Seconds
    """The median of the ok processes' time to first result (ttfr_s), in seconds; null where none."""
    ttfr_p95_s: Seconds
    """The 95th percentile of the ok processes' ttfr_s by nearest rank (a value one of them had), in seconds."""
    ttfr_max_s: Seconds
    """The slowest ok process's ttfr_s, in seconds."""
    all_results_s: Seconds
    """The median over the groups of when all N had a result (all_results_s), in seconds."""
    dedup_ratio: float | None
    """The median over the groups of compilations per program (a ratio: 1 = each compiled once, N = by all)."""
    bytes_written: Count | None
    """The median over the groups of the bytes written to the cache, rounded."""
    blocked_s: Seconds
    """The median over the ok processes of blocked_s (neither on a CPU nor queueing for one), in seconds."""
    runq_wait_s: Seconds
    """The median over the ok processes of runq_wait_s, in seconds: the share of the curve that is queueing for a
    CPU."""
    whole: bool | None
    """Whether every group's cache was whole afterwards: false if any was not, null if any could not tell."""
    oversubscribed: bool | None
    """More processes than a machine's cores (N above this machine's usable cores, or more of a group on one Slurm
    node than its CPUs): expect queueing. Null where the cores are unknown."""
    measured_as: Mode | None = None
    """The mode whose groups give this point's figures; null: its own. At N=1 a private directory and a shared one
    are the same experiment (one process, an empty directory), run once as cold-shared."""
    check_basis: CheckBasis | None = None
    """What its groups' cache checks rest on (process, members, private); null where they differ."""

    @property
    def label(self) -> str:
        return point_label(self.mode, self.n)


class FanOut(Artifact):
    """The advice of the same run: time until all N have a result, started together on an empty
    shared cache, against one warm-up process first and then N on the cache it filled."""

    n: Annotated[int, Meta(ge=1)]
    """The number of processes that need a result (a group size above 1 measured both cold-shared and
    warm-shared)."""
    together_s: Seconds
    """All N started together on an empty shared cache: cold-shared at N's median all_results_s, in seconds."""
    warm_up_s: Seconds
    """One cold process first, in seconds: cold-shared at N=1's median all_results_s, else the case's median
    cold-cache TTFR."""
    fan_out_s: Seconds
    """Then N on the cache it filled: warm-shared at N's median all_results_s, in seconds."""
    warm_up_first_s: Seconds
    """warm_up_s + fan_out_s: all N with a result when one process warms the cache first, in seconds."""
    saving_s: float | None
    """together_s - warm_up_first_s, in seconds: positive, warming up first is faster; negative, starting
    together is."""


class Concurrency(Artifact):
    usable_cores: Annotated[int, Meta(ge=1)] | None
    """The number of CPU cores usable where the groups ran: the host reading around its first group process (on
    Slurm, that node's); null where unknown."""
    points: list[ConcurrencyPoint]
    """The figures per sharing mode and group size, over their complete groups, by mode then N."""
    fan_out: list[FanOut]
    """The fan-out advice, one per group size above 1 with both cold-shared and warm-shared groups."""
    groups: list[Group]
    """Every group the case ran (incomplete ones included, shown but not summarised), by mode, N and index."""
    nodes: list[str] = []
    """The Slurm nodes its groups' processes ran on, sorted; empty: this machine."""
