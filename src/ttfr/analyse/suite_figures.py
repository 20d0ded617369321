"""Case results -> suite figures: the summary, break-even points between backends, and the
HistFactory scaling rows."""

from __future__ import annotations

import math

from ttfr.measure import catalog
from ttfr.model.base import UNSET
from ttfr.model.case import CaseResult
from ttfr.model.policies import COLD_CACHE, WARM_CACHE, WARM_PROCESS, policy_order, precompiled_parts
from ttfr.model.suite import BreakEven, CaseReason, ScalingRow, SuiteSummary, WorstCase
from ttfr.model.summary import Summary


def _calls_to_break_even(start_a, start_b, call_a, call_b):
    """Smallest n with start_b + (n-1) call_b <= start_a + (n-1) call_a, where A starts
    faster (start_a <= start_b); None when B never catches up."""
    if call_b >= call_a:
        return None
    return 1 + max(0, math.ceil((start_b - start_a) / (call_a - call_b)))


def shipped_policies(cases: list[CaseResult]) -> list[str]:
    """The precompiled policies some of these cases measured a TTFR under, in policy order: each adds break-even
    rows (and an amortisation panel) of its own."""
    found = {p for c in cases for p, _ in c.policies.items() if precompiled_parts(p) and c.figure(p, "ttfr_s")}
    return sorted(found, key=policy_order)


def break_even(case_results: list[CaseResult]) -> list[BreakEven]:
    """For every workload/size/dtype and every pair of measured backends: after how many
    calls the slower-starting backend has caught up, with a range from the CIs. Each
    precompiled policy measured adds rows that pair a backend starting from its artifact with
    the others as they start in that setting (a new machine compiling, a warm cache)."""
    groups: dict[tuple, list[CaseResult]] = {}
    for result in case_results:
        if result.status == "failed":
            continue
        # A --workspace file and the preset of its size are different problems: never paired.
        key = (result.workload, result.size, result.dtype, result.dataset.id)
        groups.setdefault(key, []).append(result)
    rows = []
    for (workload, size, dtype, dataset), members in sorted(groups.items()):
        shipped = shipped_policies(members)
        for cold_policy in (COLD_CACHE, WARM_CACHE, *shipped):
            figures = []
            for result in members:
                start = result.start_figure(cold_policy)
                warm = result.figure(WARM_PROCESS, "call_s")
                if start and warm:
                    figures.append((result.backend, start[1], warm, start[0]))
            figures.sort(key=lambda f: (f[1].median, f[0]))
            for i, (name_a, cold_a, warm_a, used_a) in enumerate(figures):
                for name_b, cold_b, warm_b, used_b in figures[i + 1 :]:
                    if cold_policy in shipped and cold_policy not in (used_a, used_b):
                        continue  # neither ships the artifact: the setting's standard row says it
                    calls = _calls_to_break_even(cold_a.median, cold_b.median, warm_a.median, warm_b.median)
                    ci = [c.median_ci for c in (cold_a, cold_b, warm_a, warm_b)]
                    best = _calls_to_break_even(ci[0].high, ci[1].low, ci[2].high, ci[3].low)
                    worst = _calls_to_break_even(ci[0].low, ci[1].high, ci[2].low, ci[3].high)
                    sides = {"fast_start_policy": used_a, "slow_start_policy": used_b} if cold_policy in shipped else {}
                    rows.append(BreakEven(
                        workload=workload, size=size, dtype=dtype, dataset=dataset, cold_policy=cold_policy,
                        fast_start=name_a, slow_start=name_b,
                        fast_start_ttfr_s=cold_a.median, slow_start_ttfr_s=cold_b.median,
                        fast_start_call_s=warm_a.median, slow_start_call_s=warm_b.median,
                        calls=calls, calls_range=[best, worst], **sides,
                    ))  # fmt: skip
    return rows


def suite_summary(case_results: list[CaseResult], pending: list[str]) -> SuiteSummary:
    """Counts, the worst measured case by TTFR, and failed/warned cases listed apart."""
    worst = None
    for result in case_results:
        if result.status == "failed":
            continue
        figures = result.headline()
        for policy, value in ((COLD_CACHE, figures.ttfr_cold_cache_median_s), (WARM_CACHE, figures.ttfr_warm_cache_median_s)):
            if value is not None:
                if worst is None or value > worst.ttfr_median_s:
                    worst = WorstCase(case=result.case, ttfr_median_s=value, policy=policy)
                break
    by_status = {s: [r for r in case_results if r.status == s] for s in ("ok", "warn", "failed")}
    return SuiteSummary(
        n_cases=len(case_results) + len(pending),
        n_ok=len(by_status["ok"]),
        n_warn=len(by_status["warn"]),
        n_failed=len(by_status["failed"]),
        n_pending=len(pending),
        worst_case=worst,
        failed=[CaseReason(case=r.case, reason=r.reason) for r in by_status["failed"]],
        warned=[CaseReason(case=r.case, reason=r.reason) for r in by_status["warn"]],
    )


def _with_ci(stem: str, summary: Summary | None) -> dict:
    """stem_s, stem_ci_low_s, stem_ci_high_s from a metric summary (None if absent)."""
    if not summary:
        return {f"{stem}_s": None, f"{stem}_ci_low_s": None, f"{stem}_ci_high_s": None}
    return {f"{stem}_s": summary.median, f"{stem}_ci_low_s": summary.median_ci.low, f"{stem}_ci_high_s": summary.median_ci.high}


def _set(value):
    return None if value is UNSET else value


def scaling_rows(case_results: list[CaseResult]) -> list[ScalingRow]:
    """Plot-ready figures of the HistFactory cases against their parameter count."""
    rows = []
    for result in case_results:
        if result.workload not in catalog.HF_WORKLOADS or result.status == "failed":
            continue
        first_call = result.figure(COLD_CACHE, "first_call_s")
        check = result.correctness
        fd = check.fd if check else None
        parity = check.parity if check else None
        train = check.train_loop if check else None
        loop = train.kde if train else None
        losses = (loop.losses if loop else None) or [None]
        rows.append(ScalingRow(
            workload=result.workload,
            engine=result.backend,
            parameters=result.size,
            dataset=result.dataset.id,
            status=result.status,
            **_with_ci("ttfr_cold_cache", result.figure(COLD_CACHE, "ttfr_s")),
            **_with_ci("ttfr_warm_cache", result.figure(WARM_CACHE, "ttfr_s")),
            **_with_ci("warm_call", result.figure(WARM_PROCESS, "call_s")),
            first_call_cold_s=first_call.median if first_call else None,
            nll_parity_rel=_set(parity.nll.rel_diff) if parity else None,
            q0_parity_abs=_set(parity.q0.abs_diff) if parity else None,
            fd_max_abs_error=fd.max_abs_error if fd else None,
            fd_max_rel_error=fd.max_rel_error if fd else None,
            train_first_step_s=_set(loop.first_step_s) if loop else None,
            train_step_s=_set(loop.step_s_median) if loop else None,
            train_conversion_share=_set(loop.conversion_share) if loop else UNSET,
            train_loss_first=losses[0],
            train_loss_last=losses[-1],
        ))  # fmt: skip
    return sorted(rows, key=lambda r: (r.workload, r.parameters, r.engine))
