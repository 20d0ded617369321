"""The gate on ttfr's own overhead: B (ttfr's measured no-op) against A (the bare command),
paired rounds, the same Hodges-Lehmann ratio and signed-rank interval `ttfr ab` uses.

It fails only when the whole interval lies above the limit: with a generous limit (1.5×) a real
regression (the threadpoolctl import once made a no-op process 3.3× the bare interpreter) cannot
hide in a shared machine's noise, and a 5% wobble cannot fail it."""

from __future__ import annotations

import math
import statistics

from ttfr.analyse import comparison_stats
from ttfr.model.harness import OverheadRatio

MIN_ROUNDS = 6  # the fewest paired rounds whose 95% signed-rank interval exists


def judge(name: str, measured: str, baseline: str, unit_s: str, pairs: list[tuple[float | None, float | None]],
          limit: float) -> OverheadRatio:  # fmt: skip
    """`pairs`: (A, B) per round, None where that side's run failed (the round is dropped)."""
    kept = [(a, b) for a, b in pairs if a is not None and b is not None and a > 0 and b > 0]
    a = [p[0] for p in kept]
    b = [p[1] for p in kept]
    estimate = comparison_stats.paired([math.log(v) for v in a], [math.log(v) for v in b])
    common = dict(name=name, measured=measured, baseline=baseline, unit_s=unit_s, estimate=estimate, limit=limit,
                  baseline_median_s=statistics.median(a) if a else None,
                  measured_median_s=statistics.median(b) if b else None)  # fmt: skip
    if len(kept) < MIN_ROUNDS or estimate.ci is None:
        why = f"{len(kept)} of {len(pairs)} paired rounds succeeded; the gate needs {MIN_ROUNDS}"
        return OverheadRatio(**common, verdict="unmeasured", reason=why)
    low, _high = estimate.ci
    verdict = "fail" if low > limit else "warn" if estimate.ratio > limit else "pass"
    return OverheadRatio(**common, verdict=verdict)
