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
    outcome: str
    reason: str | None
    start_skew_s: Seconds  # its spawn after the group's first: the barrier's spread
    ttfr_s: Seconds  # its own spawn to its first result
    result_after_release_s: Seconds  # the group's first spawn to its first result
    cache_use: CacheUse
    compiles: Count | None  # programs it compiled (its cache misses)
    loads: Count | None  # programs it loaded from the cache (its hits)
    # neither on a CPU nor waiting for one (process time - CPU time - run-queue wait): blocked on a lock
    # or on I/O, told apart from compiling (on a CPU) and from queueing for one (CPU contention)
    blocked_s: Seconds
    runq_wait_s: Seconds
    messages: list[str]  # the warnings and errors its output held (a cache read or write gone wrong)
    # the machine it ran on where not the run's own (a Slurm node: --concurrency-executor slurm); its
    # start skew and result_after_release_s are then on the nodes' wall clocks
    node: str | None = None
    node_cores: Annotated[int, Meta(ge=1)] | None = None  # that machine's usable cores


NOT_RUN = "not run"  # a GroupCheck's outcome where the run ended between the group and its check


class GroupCheck(Artifact):
    """The cache a group left, checked before anything else touched it."""

    files: Count | None  # null: the check never ran (the run ended after the group)
    bytes: Count | None
    unreadable: list[str]
    outcome: str  # the fresh process run on it afterwards
    compiles: Count | None  # what it still had to compile (0: every program was there)
    loads: Count | None
    whole: bool | None  # every file readable and the fresh process compiled nothing (null: cannot tell)
    # "process": a fresh process ran on the cache; "members": a warm-shared group that changed no file, whose
    # N processes were fresh ones on that very cache (compiles/loads: theirs, summed); "private": one writer
    # per directory, nothing shared to check but that every file of every directory reads to its end
    basis: CheckBasis = "process"


class Group(Artifact):
    mode: Mode
    n: Annotated[int, Meta(ge=1)]
    index: Count
    members: list[GroupMember]
    start_skew_s: Seconds  # the last spawn after the first
    all_results_s: Seconds  # the first spawn to the last first result: when all N have a result
    compiles_total: Count | None
    distinct_programs: Count | None  # what one process asks the cache for (its hits + misses)
    dedup_ratio: float | None  # compiles_total / distinct_programs: 1 = each program compiled once, N = by all
    bytes_written: Count | None
    check: GroupCheck

    @property
    def label(self) -> str:
        """The group as flags and reports name it: "cold-shared x2 #0"."""
        return f"{point_label(self.mode, self.n)} #{self.index}"


class ConcurrencyPoint(Artifact):
    """One sharing mode at one group size, over its groups (rounds)."""

    mode: Mode
    n: Annotated[int, Meta(ge=1)]
    groups: Count
    processes: Count  # ok members, over which the percentiles are taken
    ttfr_p50_s: Seconds
    ttfr_p95_s: Seconds  # nearest rank
    ttfr_max_s: Seconds
    all_results_s: Seconds  # median over the groups
    dedup_ratio: float | None  # median over the groups
    bytes_written: Count | None  # median over the groups
    blocked_s: Seconds  # median over the processes
    runq_wait_s: Seconds  # median over the processes: the share of the curve that is queueing for a CPU
    whole: bool | None  # every group's cache whole afterwards
    # more processes than a machine's cores (this one's usable cores, or a Slurm node's CPUs): expect queueing;
    # null where the cores are unknown
    oversubscribed: bool | None
    # the mode whose groups give this point's figures (null: its own): at N=1 a private directory and a shared
    # one are the same experiment (one process, an empty directory), run once as cold-shared
    measured_as: Mode | None = None
    check_basis: CheckBasis | None = None  # what its groups' checks rest on (null: not all the same)

    @property
    def label(self) -> str:
        return point_label(self.mode, self.n)


class FanOut(Artifact):
    """The advice of the same run: time until all N have a result, started together on an empty
    shared cache, against one warm-up process first and then N on the cache it filled."""

    n: Annotated[int, Meta(ge=1)]
    together_s: Seconds  # cold-shared: the median group's all_results_s
    warm_up_s: Seconds  # one cold process first: cold-shared at N=1, else the cold-cache TTFR
    fan_out_s: Seconds  # warm-shared at N: the median group's all_results_s
    warm_up_first_s: Seconds  # warm_up_s + fan_out_s
    saving_s: float | None  # together_s - warm_up_first_s (negative: starting together is faster)


class Concurrency(Artifact):
    usable_cores: Annotated[int, Meta(ge=1)] | None
    points: list[ConcurrencyPoint]
    fan_out: list[FanOut]
    groups: list[Group]
    nodes: list[str] = []  # the Slurm nodes its groups' processes ran on ([]: this machine)
