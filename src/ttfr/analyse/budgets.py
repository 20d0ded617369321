"""Cold-start budgets (`@pytest.mark.ttfr(case=..., policy=..., p50="600ms")`): a limit on a statistic
of a case's time to first result, judged by the statistic's interval, never a point.

- The interval is distribution-free: order statistics whose binomial coverage of the quantile is at
  least 95% (the narrowest such pair). A p50 needs at least 6 runs for one ([min, max] covers the
  median 96.9% of the time at 6); a p95 at least 59 (the maximum bounds it from above 95.2% of the
  time at 59).
- pass: the whole interval is at or under the limit; fail: the whole interval is above it;
  inconclusive: it straddles the limit (more runs, or a quieter machine, would decide).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

CONFIDENCE = 0.95
STATISTICS = {"p50": 0.50, "p95": 0.95}
_UNITS = {"us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0}
_LIMIT = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*(us|µs|ms|s|m)?\s*$")


def parse_limit(value, name: str) -> float:
    """`600ms`, `1.5s`, `2m`, `0.6` (seconds) -> seconds; ValueError naming the forms."""
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and value > 0:
        return float(value)
    found = _LIMIT.match(str(value)) if isinstance(value, str) else None
    if not found or float(found[1]) <= 0:
        raise ValueError(f"{name}={value!r}: a duration like 600ms, 1.5s or 2m (us, ms, s, m; a bare number is seconds)")
    return float(found[1]) * _UNITS[found[2] or "s"]


def fewest_runs(quantile: float, confidence: float = CONFIDENCE) -> int:
    """The fewest runs whose [min, max] covers the quantile with the confidence."""
    n = 1
    while 1 - quantile**n - (1 - quantile) ** n < confidence:
        n += 1
    return n


def quantile_interval(values: list[float], quantile: float, confidence: float = CONFIDENCE):
    """(low, high, coverage) order statistics covering the quantile with at least the confidence, the narrowest
    such pair (by rank); None with too few values."""
    from scipy import stats

    xs = sorted(values)
    n = len(xs)
    if n < fewest_runs(quantile, confidence):
        return None
    cdf = stats.binom(n, quantile).cdf
    best = None
    for i in range(n):  # P(X(i+1) <= q <= X(j+1)) = F(j) - F(i), F the Binomial(n, q) cdf
        for j in range(i, n):
            coverage = cdf(j) - cdf(i)
            if coverage >= confidence and (best is None or j - i < best[1] - best[0]):
                best = (i, j, coverage)
                break
    return xs[best[0]], xs[best[1]], float(best[2])


@dataclass(frozen=True)
class Budget:
    statistic: str  # p50 | p95
    limit_s: float
    runs: int
    estimate_s: float | None
    low_s: float | None
    high_s: float | None
    coverage: float | None
    verdict: str  # pass | fail | inconclusive

    def sentence(self, case: str, policy: str, set_aside: int = 0) -> str:
        def ms(x):  # a cold start in ms; a warm call below a millisecond in µs or ns
            return f"{x * 1e3:.1f} ms" if x >= 1e-3 else f"{x * 1e6:.1f} µs" if x >= 1e-6 else f"{x * 1e9:.1f} ns"

        interval = (f"[{ms(self.low_s)}, {ms(self.high_s)}] ({self.coverage:.1%})" if self.low_s is not None else
                    f"no 95% interval from {self.runs} runs (a {self.statistic} needs "
                    f"{fewest_runs(STATISTICS[self.statistic])})")  # fmt: skip
        aside = f" ({set_aside} contended run(s) set aside)" if set_aside else ""
        return (f"{case} {policy} {self.statistic} {ms(self.estimate_s) if self.estimate_s else '—'} {interval} over "
                f"{self.runs} runs{aside}, limit {ms(self.limit_s)}: {self.verdict}")  # fmt: skip


def judge(values: list[float], statistic: str, limit_s: float) -> Budget:
    """The budget's verdict from the runs' values (seconds)."""
    quantile = STATISTICS[statistic]
    xs = sorted(values)
    estimate = None
    if xs:
        rank = max(0, math.ceil(quantile * len(xs)) - 1)  # nearest rank
        estimate = xs[rank] if quantile != 0.5 else (xs[(len(xs) - 1) // 2] + xs[len(xs) // 2]) / 2
    interval = quantile_interval(xs, quantile)
    if interval is None:
        return Budget(statistic, limit_s, len(xs), estimate, None, None, None, "inconclusive")
    low, high, coverage = interval
    verdict = "pass" if high <= limit_s else "fail" if low > limit_s else "inconclusive"
    return Budget(statistic, limit_s, len(xs), estimate, low, high, coverage, verdict)
