"""Which statistics meet a precision target, and where more runs buy the most precision per
second (`ttfr run --precision REL [--budget T]`).

A statistic is one headline median of a case: its TTFR under each cold cache policy, its warm
call time (the median of per-process medians). It meets the target when its order-statistic
interval (stats.median_ci) reaches 95% coverage and its half-width, (high - low) / 2, is at
most REL times the median. With fewer than MIN_RUNS runs no such interval exists.

Allocation is greedy, one batch at a time: each next run goes where it buys the most
precision per second, i.e. the largest projected shrink of a half-width still above the
target, per second one of its runs costs (the median wall time of its runs so far). The
half-width of n runs is projected to shrink as 1/sqrt(n), so a run is worth
hw (1 - sqrt(k / (k + 1))) with k runs measured or given: among statistics with as many runs,
the widest interval per second goes first, and a statistic with many runs already gains
little from one more. Returns fall as runs are given within a batch, so one statistic does
not take the whole batch on a single reading. Statistics still short of MIN_RUNS come first,
cheapest first: they cannot meet any target before. A batch is about one round of time (one
run of every statistic still short), so intervals are re-measured and runs re-allocated
often, but at least ten times what re-assessing them took (the caller's `min_batch_s`), so
re-assessing stays a small share of the time; the plan spreads a batch's runs like its
rounds. Stopping when an interval first falls inside the target is a sequential rule: the
final intervals cover a little less than their nominal 95%. Runs are not spent on a
statistic that cannot get there:
- `unreachable`: its projected need is over twice the per-stream limit (a rough projection:
  judged from 2 x MIN_RUNS runs on, as the interval of the first few is [min, max], which one
  outlier makes wide); one that merely reaches the limit stops there, short;
- `busy`: at least MIN_RUNS of its runs were contended and they outnumber the clean ones
  (headline figures use clean runs only: on a machine that stays busy, more runs are waste);
- `failing`: at least MIN_RUNS of its runs failed and they outnumber the ok ones.
Statistics of failed cases, and of streams without a single ok run, are not assessed.
"""

from __future__ import annotations

import math
import statistics as pystats
from dataclasses import dataclass

from ttfr.analyse import contention, stats
from ttfr.measure import limits as spec_limits
from ttfr.model.case import CaseResult
from ttfr.model.policies import WARM_PROCESS
from ttfr.model.suite import Precision, PrecisionCounts, Statistic
from ttfr.model.summary import Summary

LEVEL = 0.95


def _min_runs(level: float = LEVEL) -> int:
    """Fewest runs whose order-statistic median interval reaches `level` ([min, max] of 6: 96.9%)."""
    n = 2
    while stats.median_ci(list(range(n))).level < level:
        n += 1
    return n


MIN_RUNS = _min_runs()

MET, SHORT, UNREACHABLE, BUSY, FAILING = "met", "short", "unreachable", "busy", "failing"
STATES = (MET, SHORT, UNREACHABLE, BUSY, FAILING)


def metric_of(policy: str) -> str:
    return "call_s" if policy == WARM_PROCESS else "ttfr_s"


def run_limit(policy: str) -> int:
    """The most measured runs one stream may have (the command line's own limits)."""
    return spec_limits.MAX_WARM_PROCS if policy == WARM_PROCESS else spec_limits.MAX_COLD_RUNS


def _relative_half_width(summary: Summary | None) -> float | None:
    if not summary or not summary.median_ci or summary.median_ci.level < LEVEL:
        return None
    median = summary.median
    if not median or median <= 0:
        return None
    return (summary.median_ci.high - summary.median_ci.low) / 2.0 / median


def needed_runs(n: int, half_width: float | None, target: float) -> int | None:
    """Runs an interval of `half_width` from `n` runs needs to reach `target` (1/sqrt(n) scaling)."""
    if half_width is None or n == 0:
        return None
    return max(n, MIN_RUNS, math.ceil(n * (half_width / target) ** 2))


def assess(cases: list[CaseResult], target: float) -> list[Statistic]:
    """Every headline statistic of the cases that ran (failed and unavailable cases have none)."""
    found = []
    for case in cases:
        if case.status == "failed":
            continue
        for policy, data in case.policies.items():
            views = data.measured
            metric = metric_of(policy)
            summary = data.figure(metric)
            ok = [v for v in views if v.outcome == "ok"]
            if not ok:
                continue
            failed = len(views) - len(ok)
            plan_count = case.config.warm_procs if policy == WARM_PROCESS else case.config.cold_runs
            contended = sum(contention.is_contended(v) for v in ok)
            costs = [v.metrics.process_s for v in views if v.metrics.process_s is not None]
            n = summary.n if summary else 0
            half_width = _relative_half_width(summary)
            need = needed_runs(n, half_width, target)
            if half_width is not None and half_width <= target:
                state = MET
            elif contended >= MIN_RUNS and contended > len(ok) - contended:
                state = BUSY
            elif failed >= MIN_RUNS and failed > len(ok):
                state = FAILING
            elif need is not None and n >= 2 * MIN_RUNS and need > 2 * run_limit(policy):
                state = UNREACHABLE
            else:
                state = SHORT
            found.append(Statistic(
                case=case.case, policy=policy, metric=metric, runs=len(views), n=n, contended=contended,
                median=summary.median if summary else None, half_width=half_width,
                cost_s=pystats.median(costs) if costs else None, state=state, needed_runs=need,
                added=sum(v.index >= plan_count for v in views),
            ))  # fmt: skip
    return found


def buyable(stat: Statistic) -> bool:
    """Short of the target, with a known run cost and room below the per-stream limit."""
    return stat.state == SHORT and bool(stat.cost_s) and stat.runs < run_limit(stat.policy)


def _score(stat: Statistic, given: int, target: float) -> tuple[int, float]:
    """Higher is first. Tier 1: no 95% interval yet even with the runs given (cheapest first);
    tier 0: the projected shrink of a half-width still above the target from one more run,
    per second of that run (0 when projected to meet it)."""
    n = stat.n + given
    if stat.half_width is None or stat.n < MIN_RUNS:
        if n < max(MIN_RUNS, stat.contended):  # clean runs must also outnumber the contended
            return 1, -stat.cost_s
        if stat.half_width is None:
            return 0, 0.0  # projected to have an interval: measure before spending more
    projected = stat.half_width * math.sqrt(stat.n / n)
    if projected <= target:
        return 0, 0.0
    return 0, projected * (1.0 - math.sqrt(n / (n + 1))) / stat.cost_s


def allocate(statistics: list[Statistic], target: float, quantum_s: float | None = None,
             limit_s: float | None = None, min_batch_s: float = 0.0) -> dict[tuple[str, str], int]:  # fmt: skip
    """How many runs each (case, policy) gets in the next batch. The batch is about
    `quantum_s` long (default: one run of every statistic still short, or `min_batch_s` if
    longer) and never above `limit_s` (what is left of the budget); empty when nothing can
    still be bought."""
    candidates = [s for s in statistics if buyable(s)]
    if not candidates:
        return {}
    quantum = max(sum(s.cost_s for s in candidates), min_batch_s) if quantum_s is None else quantum_s
    if limit_s is not None:
        quantum = min(quantum, limit_s)
    given = {s.key: 0 for s in candidates}
    spent = 0.0
    while True:
        open_ = [s for s in candidates if s.runs + given[s.key] < run_limit(s.policy)]
        scored = [(_score(s, given[s.key], target), s) for s in open_]
        scored = [(score, s) for score, s in scored if score[0] == 1 or score[1] > 0]
        if not scored:
            break
        _score_value, best = max(scored, key=lambda pair: (pair[0], pair[1].case, pair[1].policy))
        if spent + best.cost_s > quantum:
            break
        given[best.key] += 1
        spent += best.cost_s
    return {key: count for key, count in given.items() if count}


@dataclass(frozen=True)
class PhaseEnd:
    """How the --precision phase ended (the rest of suite.json's `precision` is derived)."""

    target: float
    budget_s: float | None
    stopped_by: str
    elapsed_s: float | None


def record(cases: list[CaseResult], outcome: PhaseEnd) -> Precision:
    """suite.json's `precision`: how the phase ended and what the case files give: the summary and
    every statistic. The writer and every reader build it here, so a reader recomputes exactly
    what was written."""
    statistics = assess(cases, outcome.target)
    return Precision(target=outcome.target, budget_s=outcome.budget_s, stopped_by=outcome.stopped_by,
                     elapsed_s=outcome.elapsed_s, summary=summary(statistics, outcome.target), statistics=statistics)  # fmt: skip


def summary(statistics: list[Statistic], target: float) -> PrecisionCounts:
    """Counts by state, for the suite index and the report."""
    states = [s.state for s in statistics]
    return PrecisionCounts(target=target, statistics=len(statistics), **{state: states.count(state) for state in STATES},
                           added_runs=sum(s.added for s in statistics))  # fmt: skip
