"""Statistics of a comparison between two arms, A and B.

Paired rounds (A and B measured back to back in one session): d_r = log B_r - log A_r.
- Effect: the Hodges-Lehmann estimate (median of the Walsh averages (d_i + d_j)/2, i <= j)
  as a ratio exp(HL); its distribution-free CI is [W_(k), W_(M+1-k)] of the sorted Walsh
  averages, with k from the exact null distribution of the Wilcoxon signed-rank statistic.
- Test: the two-sided Wilcoxon signed-rank test (scipy.stats.wilcoxon).
Unpaired samples (different sessions, `--cross-session`): the two-sample Hodges-Lehmann
shift with its Mann-Whitney CI (normal approximation), scipy.stats.mannwhitneyu.

Verdicts, with delta the smallest effect that matters:
- equivalent: the CI lies inside [1/(1+delta), 1+delta];
- regression / improvement: significant at the gate (Holm-adjusted across the suite, or
  alpha per case) and the estimate is at least delta slower / faster;
- inconclusive: anything else, with the smallest effect this run could have detected.
Rounds are never stopped on significance, only on precision (see ab.py).
"""

from __future__ import annotations

import math
from functools import lru_cache

import msgspec
import numpy as np
from scipy import stats as sps

from ttfr.model.comparison import EQUIVALENT, IMPROVEMENT, INCONCLUSIVE, REGRESSION, Effect, Estimate
from ttfr.model.selftest import RoundsForPower

CONFIDENCE = 0.95
GATE_ALPHA_SUITE = 0.05  # Holm across a suite
GATE_ALPHA_CASE = 0.01  # one comparison, no correction
WARN_FDR = 0.10  # Benjamini-Hochberg, for warnings
DELTA_MIN = {"warm": 0.03, "cold": 0.05}
POWER = 0.80


@lru_cache(maxsize=256)
def signed_rank_cdf(n: int) -> np.ndarray:
    """P(T+ <= t) for t = 0..n(n+1)/2 under the null (exact, by counting subsets)."""
    counts = np.zeros(n * (n + 1) // 2 + 1)
    counts[0] = 1.0
    for rank in range(1, n + 1):
        counts[rank:] = counts[rank:] + counts[:-rank].copy()
    return np.cumsum(counts) / 2.0**n


def _signed_rank_k(n: int, confidence: float) -> tuple[int, float]:
    """Largest k with P(T+ <= k-1) <= alpha/2, and the interval's exact coverage."""
    alpha = 1.0 - confidence
    if n <= 60:
        cdf = signed_rank_cdf(n)
        k = int(np.searchsorted(cdf, alpha / 2.0, side="right"))  # cdf[k-1] <= alpha/2 < cdf[k]
        k = max(k, 1)
        coverage = 1.0 - 2.0 * cdf[k - 1]
        return k, float(coverage)
    m = n * (n + 1) / 2
    sd = math.sqrt(n * (n + 1) * (2 * n + 1) / 24.0)
    k = max(1, int(math.floor(m / 2.0 - sps.norm.ppf(1 - alpha / 2) * sd)))
    return k, confidence


def walsh_averages(d) -> np.ndarray:
    d = np.asarray(d, dtype=float)
    i, j = np.triu_indices(d.size)
    return np.sort((d[i] + d[j]) / 2.0)


def _none(n: int) -> Estimate:
    return Estimate(n=int(n), ratio=None, ci=None, ci_level=None, p_value=None)


def paired(log_a, log_b, confidence: float = CONFIDENCE) -> Estimate:
    """Hodges-Lehmann ratio B/A with its signed-rank CI and the Wilcoxon p-value."""
    d = np.asarray(log_b, dtype=float) - np.asarray(log_a, dtype=float)
    n = d.size
    if n < 2:
        return _none(n)
    walsh = walsh_averages(d)
    hl = float(np.median(walsh))
    k, coverage = _signed_rank_k(n, confidence)
    if k > walsh.size // 2:  # too few rounds for any interval at this level
        low, high, coverage = walsh[0], walsh[-1], 1.0 - 2.0 * 0.5**n
    else:
        low, high = walsh[k - 1], walsh[walsh.size - k]
    identical = np.all(d == 0)  # scipy refuses a sample of zeros; nothing differs
    p_value = 1.0 if identical else float(sps.wilcoxon(d, zero_method="wilcox", alternative="two-sided").pvalue)
    return Estimate(
        n=int(n),
        ratio=math.exp(hl),
        ci=[math.exp(low), math.exp(high)],
        ci_level=float(coverage),
        p_value=p_value,
        method="Hodges-Lehmann on paired log ratios, Wilcoxon signed-rank CI and test",
    )


def unpaired(log_a, log_b, confidence: float = CONFIDENCE) -> Estimate:
    """Two-sample Hodges-Lehmann shift of log B over log A, Mann-Whitney CI and p-value."""
    a, b = np.asarray(log_a, dtype=float), np.asarray(log_b, dtype=float)
    if a.size < 2 or b.size < 2:
        return _none(min(a.size, b.size))
    diffs = np.sort((b[:, None] - a[None, :]).ravel())
    m, n = a.size, b.size
    k = min(max(unpaired_rank(m, n, confidence), 1), diffs.size // 2)
    p_value = float(sps.mannwhitneyu(b, a, alternative="two-sided").pvalue)
    if math.isnan(p_value):  # every value tied: no evidence either way (SciPy >= 1.18 says NaN, older 1.0)
        p_value = 1.0
    return Estimate(
        n=int(min(m, n)),
        ratio=math.exp(float(np.median(diffs))),
        ci=[math.exp(diffs[k - 1]), math.exp(diffs[diffs.size - k])],
        ci_level=confidence,
        p_value=p_value,
        method="two-sample Hodges-Lehmann on log times, Mann-Whitney CI and test (unpaired)",
    )


def unpaired_rank(m: int, n: int, confidence: float = CONFIDENCE) -> int:
    """The rank k of the Mann-Whitney interval's ends among the m x n sorted differences (normal approximation);
    below 1, so few runs allow no interval at `confidence` (unpaired clamps it to 1: a narrower coverage)."""
    z = sps.norm.ppf(0.5 + confidence / 2.0)
    return int(math.floor(m * n / 2.0 - z * math.sqrt(m * n * (m + n + 1) / 12.0)))


def holm(p_values) -> list[float]:
    """Holm's step-down adjusted p-values (same order as given)."""
    p = np.asarray(p_values, dtype=float)
    order = np.argsort(p)
    adjusted = np.empty_like(p)
    running = 0.0
    for rank, index in enumerate(order):
        running = max(running, min(1.0, (p.size - rank) * p[index]))
        adjusted[index] = running
    return adjusted.tolist()


def benjamini_hochberg(p_values) -> list[float]:
    if len(p_values) == 0:
        return []
    return np.asarray(sps.false_discovery_control(np.asarray(p_values, dtype=float), method="bh")).tolist()


def delta_for(regime: str, noise_floor: float | None = None) -> float:
    """The smallest effect that matters: max(3% warm / 5% cold, 2x the A/A noise floor)."""
    delta = DELTA_MIN[regime]
    if noise_floor:
        delta = max(delta, 2.0 * noise_floor)
    return delta


def log_half_width(ci) -> float:
    """Half the width of a ratio CI on the log scale (expm1 of it is the relative half-width)."""
    return (math.log(ci[1]) - math.log(ci[0])) / 2.0


def smallest_detectable(effect: Estimate, confidence: float = CONFIDENCE, power: float = POWER) -> float | None:
    """Relative effect this run could detect with `power`: the CI's half-width (log scale)
    scaled by (z_{1-a/2} + z_power) / z_{1-a/2}."""
    if not effect.ci:
        return None
    z = sps.norm.ppf(0.5 + confidence / 2.0)
    return float(math.expm1(log_half_width(effect.ci) * (z + sps.norm.ppf(power)) / z))


def verdict(effect: Estimate, delta: float, significant: bool) -> tuple[str, str]:
    """(verdict, one-line explanation)."""
    if effect.ratio is None or effect.ci is None:
        return INCONCLUSIVE, "too few paired rounds"
    ratio, (low, high) = effect.ratio, effect.ci
    upper, lower = 1.0 + delta, 1.0 / (1.0 + delta)
    change = f"{ratio - 1:+.1%} [{low - 1:+.1%}, {high - 1:+.1%}]"
    if lower <= low and high <= upper:
        return EQUIVALENT, f"{change} lies inside ±{delta:.1%}"
    if significant and ratio >= upper:
        return REGRESSION, f"B is slower: {change}"
    if significant and ratio <= lower:
        return IMPROVEMENT, f"B is faster: {change}"
    mde = smallest_detectable(effect)
    if significant:
        return INCONCLUSIVE, f"{change} is significant but smaller than δ={delta:.1%}"
    return INCONCLUSIVE, f"{change}; smallest detectable effect ≈ {mde:.1%}" if mde is not None else change


def judge(effects: list[Estimate], deltas: list[float], correction: str = "holm") -> list[Effect]:
    """Gate and verdicts for a suite of comparisons (Holm or per-case alpha; BH warnings)."""
    p_values = [e.p_value if e.p_value is not None else 1.0 for e in effects]
    if correction == "holm":
        gate_p, alpha = holm(p_values), GATE_ALPHA_SUITE
    else:
        gate_p, alpha = p_values, GATE_ALPHA_CASE
    warn_p = benjamini_hochberg(p_values)
    judged = []
    for effect, delta, p_gate, p_warn in zip(effects, deltas, gate_p, warn_p):
        significant = p_gate < alpha
        name, why = verdict(effect, delta, significant)
        judged.append(Effect(
            **msgspec.structs.asdict(effect), delta=delta, p_gate=float(p_gate), gate_alpha=alpha, correction=correction,
            p_bh=float(p_warn), warning=bool(p_warn < WARN_FDR and not significant), verdict=name, explanation=why,
            smallest_detectable=smallest_detectable(effect),
        ))  # fmt: skip
    return judged


MAX_MODELLED_ROUNDS = 100_000  # beyond this, "more than ttfr ab allows" is all a user needs to know


def fewest_significant_rounds(alpha: float) -> int:
    """Fewest paired rounds whose signed-rank test can reach p < alpha at all (every
    difference of one sign: p = 2 / 2**n)."""
    return max(2, math.floor(math.log2(2.0 / alpha)) + 1)


def rounds_for_power(half_width_log: float, rounds: int, effect: float, delta: float, alpha: float = GATE_ALPHA_CASE,
                     power: float = POWER, confidence: float = CONFIDENCE) -> RoundsForPower:  # fmt: skip
    """Paired rounds a comparison needs to call a true slowdown of `effect` a regression with
    probability `power`, from the CI half-width (log scale) that `rounds` rounds gave on this
    machine (A/A comparisons).

    The Hodges-Lehmann estimate of log(B/A) from n rounds is taken as sigma(n) times a
    Student t with n - 1 degrees of freedom (small samples: the signed-rank interval is wider
    than a normal one), sigma(n) = sigma(R) sqrt(R / n), sigma(R) = half_width / t_{R-1}.
    A `regression` verdict needs the estimate above t_{1-alpha/2} sigma (significant) and above
    log(1 + delta) (big enough): its probability is P(estimate > max(both)). The answer is the
    fewest rounds where that reaches `power`, never fewer than the signed-rank test needs to
    be significant at all. `precision`: the `ttfr ab --precision` that stops there (the
    relative 95% CI half-width at that many rounds)."""
    mu, floor = math.log1p(effect), math.log1p(delta)

    def quantile(q: float, n: int) -> float:
        return float(sps.t.ppf(q, n - 1))

    sigma_measured = half_width_log / quantile(0.5 + confidence / 2.0, rounds)

    def power_at(n: int) -> float:
        sigma = sigma_measured * math.sqrt(rounds / n)
        if sigma == 0:
            return float(mu > floor)
        threshold = max(quantile(1.0 - alpha / 2.0, n) * sigma, floor)
        return float(sps.t.sf((threshold - mu) / sigma, n - 1))

    found = RoundsForPower(effect=effect, power=power, alpha=alpha, delta=delta, measured_at_rounds=rounds,
                           power_at_measured_rounds=power_at(rounds), rounds=None, precision=None, reason=None)  # fmt: skip
    if floor >= mu:
        reason = f"delta {delta:.1%} (the smallest effect that matters here) is not below the effect"
        return msgspec.structs.replace(found, reason=reason)
    n = fewest_significant_rounds(alpha)
    while power_at(n) < power and n < MAX_MODELLED_ROUNDS:
        n += 1 if n < 64 else max(1, n // 16)  # coarser steps far out: the answer is an estimate anyway
    precision = math.expm1(quantile(0.5 + confidence / 2.0, n) * sigma_measured * math.sqrt(rounds / n))
    return msgspec.structs.replace(found, rounds=n, precision=precision)
