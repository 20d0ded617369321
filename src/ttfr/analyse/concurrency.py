"""A case's groups of concurrent cold starts (`--concurrency`, issue 29) -> its Concurrency, decided
once: per process what it did with the shared cache, per group the spread of its start, when all
had a result, how many compilations it took per program and whether the cache is whole afterwards,
per mode and size the percentiles, and the fan-out advice."""

from __future__ import annotations

import math
import statistics

from msgspec import structs

from ttfr.analyse.runs import run_metrics
from ttfr.measure import cache, catalog
from ttfr.measure.plan import GROUP, GROUP_CHECK
from ttfr.model.base import UNSET, UnsetType
from ttfr.model.concurrency import NOT_RUN, Concurrency, ConcurrencyPoint, FanOut, Group, GroupCheck, GroupMember
from ttfr.model.journal import JournalEntry
from ttfr.model.policies import COLD_PRIVATE, COLD_SHARED, CONCURRENCY_MODES, WARM_SHARED


def nearest_rank(values: list[float], q: float) -> float | None:
    """The q-quantile by nearest rank (no interpolation: with few processes, a value one of them had)."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def _median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def _counts(entry: JournalEntry, case: catalog.Case):
    """(compiles, loads) from the runtime's own counters; (None, None) where it reported none."""
    record = entry.record
    counters = record.cache.end if record and record.cache else None
    counts = cache.hit_miss(case.backend_info.cache_counters, counters or None)
    return (counts.misses, counts.hits) if counts else (None, None)


def _spawned(entry: JournalEntry) -> bool:
    """Whether its worker ever started: one that could not (or whose Slurm task never ran) has only the
    reading taken when that was known, which is no spawn and would stretch the group's skew."""
    return entry.record is not None or entry.reaped_ns is not None or entry.exit_code is not None


def _common_clock(entry: JournalEntry, ns: int) -> int:
    """A reading of the member's monotonic clock on the clock all members share: this machine's own, or,
    for members on Slurm nodes, the wall clock (each node's offset between the two, taken at its spawn)."""
    return ns + (0 if entry.clock_offset_ns is UNSET else entry.clock_offset_ns)


def _cache_use(compiles, loads) -> str:
    if compiles is None or loads is None:
        return "unknown"
    if compiles and loads:
        return "mixed"
    return "compiled" if compiles else "loaded" if loads else "unknown"


def _member(entry: JournalEntry, case: catalog.Case, first_spawn: int) -> GroupMember:
    metrics = run_metrics(entry.spawn_ns, entry.reaped_ns, entry.record)
    ok = entry.outcome == "ok"
    compiles, loads = _counts(entry, case) if ok else (None, None)
    first = entry.record.marks_ns.first if ok and entry.record.marks_ns else UNSET
    sched = entry.record.sched if entry.record else None
    blocked = runq = None
    if ok and sched and isinstance(sched.main_on_cpu_s, float) and isinstance(sched.main_runq_wait_s, float) \
            and sched.read_ns is not UNSET:  # fmt: skip
        # the main thread's life to its reading, less its time on a CPU and waiting for one: blocked
        runq = sched.main_runq_wait_s
        blocked = max(0.0, (sched.read_ns - entry.spawn_ns) / 1e9 - sched.main_on_cpu_s - runq)
    return GroupMember(
        member=entry.member,
        outcome=entry.outcome,
        reason=entry.reason,
        start_skew_s=(_common_clock(entry, entry.spawn_ns) - first_spawn) / 1e9 if _spawned(entry) else None,
        ttfr_s=metrics.ttfr_s if ok else None,
        result_after_release_s=(_common_clock(entry, first) - first_spawn) / 1e9 if first not in (UNSET, None) else None,
        cache_use=_cache_use(compiles, loads),
        compiles=compiles,
        loads=loads,
        blocked_s=blocked,
        runq_wait_s=runq,
        messages=list(entry.messages or []),
        node=None if entry.node is UNSET else entry.node,
        node_cores=None if entry.node_cpus is UNSET else entry.node_cpus,
    )


def _check(entry: JournalEntry | None, case: catalog.Case) -> GroupCheck:
    if entry is None:  # the run stopped between the group and its check
        return GroupCheck(files=None, bytes=None, unreadable=[], outcome=NOT_RUN, compiles=None, loads=None, whole=None)
    directory = entry.cache_dir
    basis = "process" if entry.check_basis is UNSET else entry.check_basis
    if basis == "process":
        compiles, loads = _counts(entry, case) if entry.outcome == "ok" else (None, None)
    else:  # members: group_of decides it from them (_members_check); private: nothing shared to check
        compiles = loads = None
    unreadable = list(directory.unreadable or [])
    whole = False if unreadable else None if compiles is None else compiles == 0
    size = None if directory.bytes_before is UNSET else directory.bytes_before
    return GroupCheck(files=directory.entries_before, bytes=size, unreadable=unreadable, outcome=entry.outcome,
                      compiles=compiles, loads=loads, whole=whole, basis=basis)  # fmt: skip


def _members_check(check: GroupCheck, members: list[GroupMember]) -> GroupCheck:
    """A warm-shared group that changed no file: its N members were fresh processes on the very cache the
    check would have run on, so their counters are its verdict (whole: every one ok and none compiled)."""
    counted = [m for m in members if m.outcome == "ok" and m.compiles is not None and m.loads is not None]
    every = bool(counted) and len(counted) == len(members)
    compiles = sum(m.compiles for m in counted) if every else None
    loads = sum(m.loads for m in counted) if every else None
    whole = False if check.unreadable else None if compiles is None else compiles == 0
    return structs.replace(check, compiles=compiles, loads=loads, whole=whole)


def _group(members: list[JournalEntry], check: JournalEntry | None, case: catalog.Case) -> Group:
    spawned = [e for e in members if _spawned(e)] or members
    first_spawn = min(_common_clock(e, e.spawn_ns) for e in spawned)
    figures = [_member(e, case, first_spawn) for e in sorted(members, key=lambda e: e.member)]
    sample = members[0]
    shared = sample.policy != COLD_PRIVATE
    if shared:
        written = (sample.cache_dir.bytes_after or 0) - (sample.cache_dir.bytes_before or 0)
    else:
        written = sum((e.cache_dir.bytes_after or 0) - (e.cache_dir.bytes_before or 0) for e in members)
    written = max(0, written) if sample.cache_dir.bytes_after is not UNSET else None
    return group_of(sample.policy, sample.concurrency, sample.index, figures, written, _check(check, case))


def group_of(mode: str, n: int, index: int, members: list[GroupMember], bytes_written, check: GroupCheck) -> Group:
    """A group's figures from its members' (also what a reader recomputes to find an edited one). A group
    some of whose members were never journaled (the run ended mid-group) has no group figures: "all N"
    and a dedup ratio of fewer than N would read as N's."""
    complete = len(members) == n
    ok = [m for m in members if m.outcome == "ok"] if complete else []
    compiles = [m.compiles for m in ok]
    requests = [m.compiles + m.loads for m in ok if m.compiles is not None and m.loads is not None]
    distinct = round(statistics.median(requests)) if requests else None
    total = sum(compiles) if ok and None not in compiles else None
    done = [m.result_after_release_s for m in members] if complete else []
    skews = [m.start_skew_s for m in members if m.start_skew_s is not None]
    if check.basis == "members":  # its verdict is its members': recomputed from them as every figure is
        check = _members_check(check, members)
    return Group(
        mode=mode,
        n=n,
        index=index,
        members=members,
        start_skew_s=max(skews) if skews else None,
        all_results_s=max(done) if done and None not in done else None,
        compiles_total=total,
        distinct_programs=distinct,
        dedup_ratio=total / distinct if total is not None and distinct else None,
        bytes_written=bytes_written,
        check=check,
    )


def _point(mode: str, n: int, groups: list[Group], cores: int | None) -> ConcurrencyPoint:
    members = [m for g in groups for m in g.members if m.outcome == "ok"]
    ttfr = [m.ttfr_s for m in members if m.ttfr_s is not None]
    wholes = [g.check.whole for g in groups]
    return ConcurrencyPoint(
        mode=mode,
        n=n,
        groups=len(groups),
        processes=len(members),
        ttfr_p50_s=_median(ttfr),
        ttfr_p95_s=nearest_rank(ttfr, 0.95),
        ttfr_max_s=max(ttfr) if ttfr else None,
        all_results_s=_median([g.all_results_s for g in groups]),
        dedup_ratio=_median([g.dedup_ratio for g in groups]),
        bytes_written=_int(_median([g.bytes_written for g in groups])),
        blocked_s=_median([m.blocked_s for m in members]),
        runq_wait_s=_median([m.runq_wait_s for m in members]),
        whole=False if False in wholes else None if None in wholes else True,
        oversubscribed=_oversubscribed(n, groups, cores),
        check_basis=bases.pop() if len(bases := {g.check.basis for g in groups}) == 1 else None,
    )


def _oversubscribed(n: int, groups: list[Group], cores: int | None) -> bool | None:
    """More processes on one machine than it has cores: N here, or, for members on Slurm nodes, more of a
    group's processes on one node than that node's CPUs (a node each by default: never)."""
    members = [m for g in groups for m in g.members if m.node is not None]
    if not members:
        return None if cores is None else n > cores
    for group in groups:
        on: dict[str, int] = {}
        placed = [m for m in group.members if m.node is not None]
        for m in placed:
            on[m.node] = on.get(m.node, 0) + 1
        if any(m.node_cores is not None and on[m.node] > m.node_cores for m in placed):
            return True
    return None if any(m.node_cores is None for m in members) else False


def _int(value):
    return None if value is None else round(value)


def fan_out(points: list[ConcurrencyPoint], cold_cache_ttfr_s: float | None) -> list[FanOut]:
    """For each N with both cold-shared and warm-shared groups: all N together on an empty shared cache,
    against one warm-up process (cold-shared at N=1, else the case's cold-cache TTFR) and then N."""
    at = {(p.mode, p.n): p for p in points}
    solo = at.get((COLD_SHARED, 1))
    warm_up = solo.all_results_s if solo and solo.all_results_s is not None else cold_cache_ttfr_s
    advice = []
    for (mode, n), point in sorted(at.items(), key=lambda item: item[0][1]):
        if mode != COLD_SHARED or (WARM_SHARED, n) not in at or n == 1:  # one process has nobody to fan out to
            continue
        fanned = at[(WARM_SHARED, n)].all_results_s
        first = warm_up + fanned if warm_up is not None and fanned is not None else None
        together = point.all_results_s
        advice.append(FanOut(n=n, together_s=together, warm_up_s=warm_up, fan_out_s=fanned, warm_up_first_s=first,
                             saving_s=together - first if together is not None and first is not None else None))  # fmt: skip
    return advice


def case_concurrency(entries: list[JournalEntry], case: catalog.Case, cold_cache_ttfr_s: float | None,
                     usable_cores: int | None) -> Concurrency | UnsetType:  # fmt: skip
    """The case's Concurrency from its group entries (UNSET: it ran none)."""
    members: dict[tuple, list[JournalEntry]] = {}
    checks: dict[tuple, JournalEntry] = {}
    for entry in entries:
        if entry.kind not in (GROUP, GROUP_CHECK) or entry.concurrency is UNSET:
            continue
        key = (entry.policy, entry.concurrency, entry.index)
        if entry.kind == GROUP:
            if entry.member == 0:  # a group run again (resumed after an interrupted one) starts over
                members[key] = []
            members.setdefault(key, []).append(entry)
        else:
            checks[key] = entry
    if not members:
        return UNSET
    order = {mode: i for i, mode in enumerate(CONCURRENCY_MODES)}
    keys = sorted(members, key=lambda k: (order[k[0]], k[1], k[2]))
    return _summarised([_group(members[k], checks.get(k), case) for k in keys], cold_cache_ttfr_s, usable_cores)


def _summarised(groups: list[Group], cold_cache_ttfr_s: float | None, usable_cores: int | None) -> Concurrency:
    by_point: dict[tuple, list[Group]] = {}
    for group in groups:
        if len(group.members) == group.n:  # an incomplete group is shown, not summarised
            by_point.setdefault((group.mode, group.n), []).append(group)
    points = [_point(mode, n, found, usable_cores) for (mode, n), found in by_point.items()]
    solo = [p for p in points if (p.mode, p.n) == (COLD_SHARED, 1)]
    if solo and (COLD_PRIVATE, 1) not in by_point:  # the same experiment (plan._group_rounds): both points
        points.append(structs.replace(solo[0], mode=COLD_PRIVATE, measured_as=COLD_SHARED))
    order = {mode: i for i, mode in enumerate(CONCURRENCY_MODES)}
    points.sort(key=lambda p: (order[p.mode], p.n))
    nodes = sorted({m.node for g in groups for m in g.members if m.node})
    return Concurrency(usable_cores=usable_cores, points=points, fan_out=fan_out(points, cold_cache_ttfr_s),
                       groups=groups, nodes=nodes)  # fmt: skip


def recomputed(together: Concurrency, cold_cache_ttfr_s: float | None) -> Concurrency:
    """What a case file's groups give (its members and checks are the raw data): every figure above them."""
    groups = [group_of(g.mode, g.n, g.index, g.members, g.bytes_written, g.check) for g in together.groups]
    return _summarised(groups, cold_cache_ttfr_s, together.usable_cores)
