"""Summary statistics of one distribution of timings (criterion's "analysis", not report).

The median's confidence interval comes from order statistics (distribution-free): the
interval [x_(j), x_(n+1-j)] covers the median with probability
P(j <= Binomial(n, 1/2) <= n - j); we take the narrowest one with coverage >= 95% and
report the coverage actually achieved (with few samples only [min, max] is possible and
its coverage is below 95%; it is reported as such, never rounded up).
"""

from __future__ import annotations

import math

import numpy as np
from scipy import special

from ttfr.model.summary import MedianCI, Outlier, Summary

CONFIDENCE = 0.95
ROBUST_Z_OUTLIER = 3.5
_MAD_TO_SIGMA = 1.4826  # MAD of a normal distribution times this is its sigma


def median_ci(values, confidence: float = CONFIDENCE) -> MedianCI | None:
    x = np.sort(np.asarray(values, dtype=float))
    n = x.size
    if n == 0:
        return None
    if n == 1:
        return MedianCI(low=float(x[0]), high=float(x[0]), level=0.0)
    j = np.arange(1, n // 2 + 1)  # 1-based rank of the lower bound; coverage falls as j grows
    # P(j <= Binomial(n, 1/2) <= n - j), from the binomial CDF (scipy.special.bdtr: what
    # scipy.stats.binom.cdf computes, without importing scipy.stats, ~0.4 s, where a run needs
    # none of its tests)
    coverage = special.bdtr(n - j, n, 0.5) - special.bdtr(j - 1, n, 0.5)
    reaching = coverage >= confidence
    if not reaching[0]:
        return MedianCI(low=float(x[0]), high=float(x[-1]), level=float(1.0 - 2.0 * 0.5**n))
    k = int(j[-1]) if reaching.all() else int(np.argmin(reaching))  # the last j that still reaches it
    return MedianCI(low=float(x[k - 1]), high=float(x[n - k]), level=float(coverage[k - 1]))


def _mad(x: np.ndarray) -> float:
    """Median absolute deviation (unscaled, as scipy.stats.median_abs_deviation's default)."""
    return float(np.median(np.abs(x - np.median(x))))


def summarize(values) -> Summary | None:
    """n, min, max, median (+ CI), p95, mean, std, MAD of the values; None when empty."""
    x = np.asarray([v for v in values if v is not None], dtype=float)
    if x.size == 0:
        return None
    return Summary(
        n=int(x.size),
        min=float(x.min()),
        max=float(x.max()),
        median=float(np.median(x)),
        median_ci=median_ci(x),
        p95=float(np.percentile(x, 95)),
        mean=float(x.mean()),
        std=float(x.std(ddof=1)) if x.size > 1 else 0.0,
        mad=_mad(x),
    )


def robust_z(value: float, others) -> float | None:
    """How many robust sigmas (1.4826 MAD) `value` lies from the median of `others`."""
    x = np.asarray(others, dtype=float)
    if x.size < 3:
        return None
    spread = _MAD_TO_SIGMA * _mad(x)
    if spread == 0.0:
        return None
    return abs(value - float(np.median(x))) / spread


def first_run_outlier(values) -> Outlier | None:
    """Flag the first run when it sits > 3.5 robust sigmas from the rest (a cold-disk or
    first-touch effect), without removing it from any statistic."""
    if len(values) < 4 or values[0] is None:
        return None
    z = robust_z(values[0], [v for v in values[1:] if v is not None])
    if z is None or not math.isfinite(z) or z <= ROBUST_Z_OUTLIER:
        return None
    return Outlier(value=values[0], robust_z=z)
