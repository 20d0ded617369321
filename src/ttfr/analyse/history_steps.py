"""Steps in a series of results: where its level changed, by how much, with what certainty.

Each point is one result (a session); its runs are the headline runs' values. Work is on log
times, so a step is a ratio.

- A point's value is its runs' median; its own uncertainty is the median's standard error from
  the runs' spread (1.2533 x the MAD-based standard deviation / sqrt(n)), the spread pooled over
  the series (every run about its own point's median).
- Points from different sessions differ by more than that: on a shared machine, identical code
  measured in two sessions differed 81-88% of the time by within-session statistics. So every
  point also carries the series' **between-session scatter**, estimated from its successive
  differences robustly (the MAD of the differences about zero: a step moves one difference):
  var(between) = max(floor², var(differences) / 2 - mean within variance), the floor below.
- The segmentation is ruptures' Pelt, exact, on the weighted L2 cost (each point weighted by
  1 / (between + its within variance)), so the cost is a chi-square in units of the noise. The
  between-session variance is then re-estimated from the points about their segments' means and
  the series segmented again, until the breakpoints hold (at most 6 times).
- **The penalty per step is fixed**: the F(1, n-2) quantile at 1% / (n-1). Searching n-1
  positions (Bonferroni) on a scatter estimated from the same n points (F, not chi-square) keeps
  a flat series' false-step chance at or below 1%; benchmarks/history_false_steps.py measures it.
- **The between-session scatter is at least SESSION_FLOOR_REL (0.5%).** The robust estimate can be
  ~0 when most sessions agree closely, and then one session that a busy neighbour slowed by 1%
  reads as a step. Sessions of a sleep-bound 210-290 ms program (tests/test_history_runs.py) on
  this machine scattered 0.2-1.2% about their segment's level (0.58% pooled, 10 segments); with no
  floor, 2 in 12 histories of it showed a false step of 0.9-1.3% and an interval that missed the
  injected step by 0.02%.
- Fewer than MIN_POINTS points: no step is claimed.
- A step's interval is a bootstrap: each point's runs resampled with replacement (its median
  taken) plus a session effect drawn from the between-session scatter, itself drawn from its
  estimate's uncertainty (residual variance x dof / chi-square(dof)); the segments' weighted
  means give the ratio; the 2.5% and 97.5% quantiles bound it. The seed is fixed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

MIN_POINTS = 4
FALSE_STEP = 0.01
CI_LEVEL = 0.95
BOOTSTRAP = 2000
SEED = 40
SESSION_FLOOR_REL = 0.005  # the least between-session scatter: a relative standard deviation (see above)
MEDIAN_SE = math.sqrt(math.pi / 2)  # a median's standard error over a mean's, for normal data
MAD_SD = 1.4826  # a MAD as a normal standard deviation


@dataclass(frozen=True)
class FoundStep:
    at: int  # index into the series' points with a figure: the first point after the step
    before: float  # the segments' levels, log seconds
    after: float
    ci: tuple[float, float]  # the ratio's interval


@dataclass(frozen=True)
class Detection:
    segments: list[int]  # each point's segment
    steps: list[FoundStep]
    within_rel: float | None
    between_rel: float | None
    penalty: float | None


def penalty(n: int) -> float:
    """The cost a step must save (chi-square units) in a series of n points: F(1, n-2) at FALSE_STEP / (n-1)."""
    from scipy import stats

    return float(stats.f.isf(FALSE_STEP / (n - 1), 1, max(n - 2, 1)))


def _log_runs(runs: list[float]) -> np.ndarray:
    return np.log(np.asarray([r for r in runs if r > 0], dtype=float))


def point_variances(logs: list[np.ndarray]) -> np.ndarray:
    """Each point's median's variance from the runs' spread, pooled over the series (a MAD over four runs is
    too noisy to weigh one point against another): the MAD of every run about its own point's median, as a
    standard deviation, over each point's number of runs. Zero where no point has two runs."""
    deviations = np.concatenate([np.abs(x - np.median(x)) for x in logs if len(x) >= 2] or [np.zeros(0)])
    if len(deviations) == 0:
        return np.zeros(len(logs))
    sd = MAD_SD * float(np.median(deviations))
    return np.asarray([(MEDIAN_SE * sd) ** 2 / len(x) for x in logs])


def between_variance(levels: np.ndarray, within: np.ndarray) -> float | None:
    """The session-to-session variance beyond the runs' spread, from the successive differences; None with fewer
    than 3 points."""
    if len(levels) < 3:
        return None
    diffs = np.diff(levels)
    sd = MAD_SD * float(np.median(np.abs(diffs)))
    return _floored(sd * sd / 2 - float(np.mean(within)))


def _floored(between):
    """A between-session variance (or an array of them), at least the floor's."""
    return np.maximum(between, SESSION_FLOOR_REL**2)


class _WeightedL2:
    """Pelt's cost: the weighted sum of squares about the segment's weighted mean (prefix sums)."""

    model = "weighted_l2"
    min_size = 1

    def fit(self, signal):
        self.signal = signal  # Pelt reads its length
        x, w = signal[:, 0], signal[:, 1]
        zero = np.zeros(1)
        self._w = np.concatenate([zero, np.cumsum(w)])
        self._wx = np.concatenate([zero, np.cumsum(w * x)])
        self._wxx = np.concatenate([zero, np.cumsum(w * x * x)])
        return self

    def error(self, start, end):
        w = self._w[end] - self._w[start]
        wx = self._wx[end] - self._wx[start]
        return float(self._wxx[end] - self._wxx[start] - wx * wx / w)


def _cost():
    from ruptures.base import BaseCost

    return type("WeightedL2", (_WeightedL2, BaseCost), {})()


def segment(levels: np.ndarray, weights: np.ndarray, pen: float) -> list[int]:
    """The breakpoints (first index of each new segment) ruptures' Pelt finds under the penalty."""
    import ruptures

    signal = np.column_stack([levels, weights])
    ends = ruptures.Pelt(custom_cost=_cost(), min_size=1, jump=1).fit(signal).predict(pen=pen)
    return [int(e) for e in ends[:-1]]


def _level(values: np.ndarray, weights: np.ndarray) -> float:
    return float(np.sum(values * weights) / np.sum(weights))


def _session_sd(rng, levels: np.ndarray, breaks: list[int], within: np.ndarray, between: float) -> np.ndarray:
    """Per resample, the between-session standard deviation: drawn from its estimate's own uncertainty (the residual
    variance times dof / chi-square(dof)) where the residuals allow, else the estimate itself."""
    residual = residual_variance(levels, breaks)
    dof = len(levels) - len(breaks) - 1
    if residual is None or dof < 1:
        return np.full(BOOTSTRAP, math.sqrt(between))
    drawn = residual * dof / rng.chisquare(dof, BOOTSTRAP)
    return np.sqrt(_floored(drawn - float(np.mean(within))))


def _interval(rng, logs, weights, session_sd: np.ndarray, left: range, right: range) -> tuple[float, float]:
    draws = {}
    for i in [*left, *right]:
        x = logs[i]
        picks = rng.integers(0, len(x), size=(BOOTSTRAP, len(x)))
        draws[i] = np.median(x[picks], axis=1) + rng.normal(0.0, 1.0, BOOTSTRAP) * session_sd

    def level(side):
        w = np.asarray([weights[i] for i in side])
        return np.stack([draws[i] for i in side], axis=1) @ w / w.sum()

    ratios = np.exp(level(right) - level(left))
    tail = (1 - CI_LEVEL) / 2
    return float(np.quantile(ratios, tail)), float(np.quantile(ratios, 1 - tail))


def residual_variance(levels: np.ndarray, breaks: list[int]) -> float | None:
    """The points' variance about their segments' means (None: no degree of freedom left)."""
    bounds = [0, *breaks, len(levels)]
    squares = sum(float(np.sum((levels[a:b] - levels[a:b].mean()) ** 2)) for a, b in zip(bounds, bounds[1:]))
    dof = len(levels) - (len(bounds) - 1)
    return squares / dof if dof > 0 else None


def _weights(between: float, within: np.ndarray) -> np.ndarray:
    """Each point's weight: one over its variance (floored at a 1e-6 relative spread: identical runs are not
    infinitely certain)."""
    return 1.0 / np.maximum(between + within, 1e-12)


def _segmentation(levels: np.ndarray, within: np.ndarray, between: float, pen: float) -> tuple[list[int], float]:
    """Segment on the differences' estimate; where that finds steps, re-estimate the between-session variance from
    the points about their segments' means (a step inflates the differences' estimate, which hides smaller steps)
    and segment again until the breakpoints hold. Steps that the estimate they imply dissolves are none."""
    breaks = segment(levels, _weights(between, within), pen)
    if not breaks:
        return [], between
    for _ in range(5):
        residual = residual_variance(levels, breaks)
        if residual is None:
            break
        refined = _floored(residual - float(np.mean(within)))
        found = segment(levels, _weights(refined, within), pen)
        if not found:
            return [], between
        between = refined
        if found == breaks:
            break
        breaks = found
    return breaks, between


def detect(runs: list[list[float]]) -> Detection:
    """The steps of a series whose points (each a list of run values, seconds, all with a figure) are in order."""
    logs = [_log_runs(r) for r in runs]
    if any(len(x) == 0 for x in logs):
        raise ValueError("every point needs at least one positive run value")
    levels = np.asarray([float(np.median(x)) for x in logs])
    within = point_variances(logs)
    with_runs = [v for v, x in zip(within, logs) if len(x) >= 2]
    within_rel = math.sqrt(float(np.median(with_runs))) if with_runs else None
    between = between_variance(levels, within)
    between_rel = None if between is None else math.sqrt(between)
    n = len(levels)
    if n < MIN_POINTS:
        return Detection([0] * n, [], within_rel, between_rel, None)
    pen = penalty(n)
    breaks, between = _segmentation(levels, within, between, pen)
    between_rel = math.sqrt(between)
    weights = _weights(between, within)
    bounds = [0, *breaks, n]
    segments = [k for k in range(len(bounds) - 1) for _ in range(bounds[k], bounds[k + 1])]
    steps = []
    rng = np.random.default_rng(SEED)
    session_sd = _session_sd(rng, levels, breaks, within, between)
    for k, at in enumerate(breaks):
        left, right = range(bounds[k], at), range(at, bounds[k + 2])
        before = _level(levels[left.start : left.stop], weights[left.start : left.stop])
        after = _level(levels[right.start : right.stop], weights[right.start : right.stop])
        steps.append(FoundStep(at, before, after, _interval(rng, logs, weights, session_sd, left, right)))
    return Detection(segments, steps, within_rel, between_rel, pen)
