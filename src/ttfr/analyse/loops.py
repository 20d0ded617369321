"""Loop workloads: one run's loop figures, a policy's loop summary, the compile-count check,
and the suite's comparison of strategies (total cost against loop length K, the K at which
each strategy overtakes naive).

A loop run's `first_call_s` is the whole loop; its record's `loop` block has the timeline
(every iteration's seconds and the compiles, persistent-cache hits, traces and compile
seconds the runtime's own counters saw during it, and the seconds of its host<->device copies)
and the loop's totals. Compute is an entry's seconds less its copies'.
"""

from __future__ import annotations

import statistics

from ttfr.analyse import stats
from ttfr.measure import catalog
from ttfr.model.base import UNSET
from ttfr.model.case import CaseResult
from ttfr.model.flags import CompileCountMismatch
from ttfr.model.policy_figures import ColdPolicy
from ttfr.model.run_figures import RunFigures
from ttfr.model.loops import CostPoint, LoopRow, LoopStep, LoopSummary, RunLoop, TimelineStep
from ttfr.model.record import LoopRecord
from ttfr.model.summary import Summary


def _ratio(part, whole):
    return part / whole if part is not None and whole else None


def _value(value):
    return None if value is UNSET else value


def _carried(values):
    """The summary of figures that records may lack (UNSET: every one predates the figure)."""
    values = list(values)
    if all(v is UNSET for v in values):
        return UNSET
    return stats.summarize([v for v in values if v is not UNSET])


def run_loop(block: LoopRecord | None) -> RunLoop | None:
    """One run's loop figures from its record's `loop` block (None: not a loop run)."""
    if not block:
        return None
    timeline = [LoopStep(label=e.label, s=e.s, compiles=_value(e.compiles), persistent_hits=_value(e.persistent_hits),
                         traces=_value(e.traces), compile_s=_value(e.compile_s), ahead=bool(e.ahead),
                         transfer_s=e.transfer_s)
                for e in block.iterations]  # fmt: skip
    compiles, expected = _value(block.compiles), _value(block.expected_compiles)
    compile_s, transfer_s = _value(block.compile_s), block.transfer_s
    body = [e for e in timeline if not e.ahead]
    known = [e for e in body if e.compiles is not None]
    return RunLoop(
        iterations=timeline,
        loop_s=block.loop_s,
        compiles=compiles,
        expected_compiles=expected,
        counts_match=None if compiles is None or expected is None else compiles == expected,
        persistent_hits=_value(block.persistent_hits),
        traces=_value(block.traces),
        loaded=0 if block.loaded is UNSET else block.loaded,
        compile_s=compile_s,
        compile_share=_ratio(compile_s, block.loop_s),
        # Iterations that found every executable they needed already built (in memory,
        # or made ahead of time); the persistent cache's share of the executables built.
        iteration_hit_rate=sum(e.compiles == 0 for e in known) / len(known) if known and len(known) == len(body) else None,
        persistent_hit_rate=_ratio(_value(block.persistent_hits), compiles),
        transfer_s=transfer_s,
        transfer_share=UNSET if transfer_s is UNSET else _ratio(transfer_s, block.loop_s),
    )


def count_flags(views: list[RunFigures]) -> list[CompileCountMismatch]:
    """`compile_count_mismatch` when a run's compile counter is not its strategy's expectation."""
    wrong = [v for v in views if v.outcome == "ok" and v.loop and v.loop.counts_match is False]
    if not wrong:
        return []
    return [CompileCountMismatch(runs=[v.index for v in wrong], expected=wrong[0].loop.expected_compiles,
                                 observed=sorted({v.loop.compiles for v in wrong}))]  # fmt: skip


def _single(values):
    """The value every run agrees on, else None."""
    values = set(values)
    return values.pop() if len(values) == 1 else None


def policy_summary(chosen: list[RunFigures]) -> LoopSummary | None:
    """A policy's loop summary from its headline runs (None when they are not loop runs)."""
    loop_runs = [v for v in chosen if v.loop]
    loops = [v.loop for v in loop_runs]
    if not loops:
        return None
    timeline = []
    for index, entry in enumerate(loops[0].iterations):
        column = [loop.iterations[index] for loop in loops if len(loop.iterations) > index]
        timeline.append(TimelineStep(
            label=entry.label,
            ahead=entry.ahead,
            s=stats.summarize([e.s for e in column]),
            compiles=_single(e.compiles for e in column),
            persistent_hits=_single(e.persistent_hits for e in column),
            transfer_s=_carried(e.transfer_s for e in column),
        ))  # fmt: skip
    pre_loop = [v.metrics.ttfr_s - v.loop.loop_s for v in loop_runs if v.metrics.ttfr_s is not None]
    # The cold-start share: what of the total a process that had already run the loop once
    # would not pay again (start-up, imports, setup, compiles), from each run's second loop.
    cold_start = [(m.ttfr_s - m.second_call_s) / m.ttfr_s for m in (v.metrics for v in loop_runs)
                  if m.ttfr_s and m.second_call_s is not None]  # fmt: skip

    def numbers(key):
        return [getattr(loop, key) for loop in loops if getattr(loop, key) is not None]

    return LoopSummary(
        loop_s=stats.summarize(numbers("loop_s")),
        compile_s=stats.summarize(numbers("compile_s")),
        compile_share=stats.summarize(numbers("compile_share")),
        before_loop_s=stats.summarize(pre_loop),
        cold_start_share=stats.summarize(cold_start),
        peak_rss_bytes=stats.summarize([v.resources.peak_rss_bytes for v in loop_runs]),
        compiles=_single(loop.compiles for loop in loops),
        expected_compiles=loops[0].expected_compiles,
        persistent_hits=_single(loop.persistent_hits for loop in loops),
        loaded=_single(loop.loaded for loop in loops),
        iteration_hit_rate=statistics.median(numbers("iteration_hit_rate")) if numbers("iteration_hit_rate") else None,
        persistent_hit_rate=statistics.median(numbers("persistent_hit_rate")) if numbers("persistent_hit_rate") else None,
        timeline=timeline,
        transfer_s=_carried(loop.transfer_s for loop in loops),
        transfer_share=_carried(loop.transfer_share for loop in loops),
    )


# ------------------------------------------------------------------ suite: strategies compared
def _median(summary: Summary | None):
    return summary.median if summary else None


def cost_curve(policy: ColdPolicy) -> list[CostPoint] | None:
    """Total cost (seconds from process start) after each of the first k iterations: the
    time before the loop, any ahead-of-time phase, then the iterations' median times. A
    batched loop (one iteration for all K) has one point, at K."""
    loop = policy.loop_summary
    if not loop or _median(loop.before_loop_s) is None:
        return None
    total = _median(loop.before_loop_s)
    points, k = [], 0
    for entry in loop.timeline:
        seconds = _median(entry.s)
        if seconds is None:
            return None
        total += seconds
        if not entry.ahead:
            k += 1
            points.append(CostPoint(k=k, s=total))
    return points


def _batched(curve, size):
    return len(curve) == 1 and size > 1


def break_even_k(strategy: dict[int, list[CostPoint]], naive: dict[int, list[CostPoint]]) -> int | None:
    """The smallest loop length from which the strategy costs no more than naive at every
    longer length measured; `strategy` and `naive`: {size: cost curve}. A sequential curve
    covers every k up to its size; a batched one only its size."""
    naive_cost = {}
    for size in sorted(naive):
        naive_cost.update({p.k: p.s for p in naive[size]})
    mine = {}
    for size in sorted(strategy):
        curve = strategy[size]
        points = curve if not _batched(curve, size) else [CostPoint(k=size, s=curve[0].s)]
        mine.update({p.k: p.s for p in points})
    common = sorted(set(mine) & set(naive_cost))
    if not common:
        return None
    answer = None
    for k in reversed(common):
        if mine[k] <= naive_cost[k]:
            answer = k
        else:
            break
    return answer


def strategy_rows(cases: list[CaseResult]) -> list[LoopRow]:
    """Per loop family, backend, dtype and cold policy: each strategy's figures at each size,
    its cost against naive's and the loop length at which it overtakes naive."""
    groups: dict[tuple, dict] = {}
    for case in cases:
        info = catalog.WORKLOADS.get(case.workload)
        if info is None or not info.loop or case.status == "failed":
            continue
        for policy_name, policy in case.policies.cold():
            if not policy.loop_summary:
                continue
            # A --workspace file and the preset of its parameter count are different problems.
            custom = "_custom_" in case.case
            key = (info.loop, case.backend, case.dtype, policy_name, custom)
            groups.setdefault(key, {}).setdefault(info.strategy, {})[case.size] = (case, policy)
    rows = []
    for (family, backend, dtype, policy_name, _custom), by_strategy in sorted(groups.items()):
        naive_curves = {size: cost_curve(p) for size, (_c, p) in by_strategy.get("naive", {}).items()}
        naive_curves = {size: curve for size, curve in naive_curves.items() if curve}
        for strategy, by_size in sorted(by_strategy.items(), key=lambda item: _strategy_order(item[0])):
            curves = {size: cost_curve(p) for size, (_c, p) in by_size.items()}
            curves = {size: curve for size, curve in curves.items() if curve}
            for size, (case, policy) in sorted(by_size.items()):
                loop = policy.loop_summary
                total = _median(policy.summary.ttfr_s)
                naive = by_strategy.get("naive", {}).get(size)
                naive_total = _median(naive[1].summary.ttfr_s) if naive else None
                rows.append(LoopRow(
                    loop=family, backend=backend, dtype=dtype, policy=policy_name,
                    strategy=strategy, size=size, case=case.case,
                    total_s=policy.summary.ttfr_s,
                    loop_s=loop.loop_s, compile_s=loop.compile_s,
                    compile_share=_median(loop.compile_share),
                    cold_start_share=_median(loop.cold_start_share),
                    compiles=loop.compiles, expected_compiles=loop.expected_compiles, loaded=loop.loaded,
                    iteration_hit_rate=loop.iteration_hit_rate,
                    persistent_hit_rate=loop.persistent_hit_rate,
                    peak_rss_bytes=_median(loop.peak_rss_bytes),
                    vs_naive=total / naive_total if total is not None and naive_total else None,
                    overtakes_naive_at_k=(break_even_k(curves, naive_curves)
                                          if strategy != "naive" and curves and naive_curves else None),
                    cost_curve=curves.get(size),
                    transfer_s=loop.transfer_s,
                    transfer_share=UNSET if loop.transfer_share is UNSET else _median(loop.transfer_share),
                ))  # fmt: skip
    return rows


def _strategy_order(name: str) -> int:
    order = [s[0] for s in catalog.LOOP_STRATEGIES]
    return order.index(name) if name in order else len(order)
