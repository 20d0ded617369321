import math

import numpy as np
import pytest
from scipy import stats as sps

from ttfr.analyse import stats


def test_median_ci_for_ten_values_uses_ranks_2_and_9():
    # For n=10 the 95% order-statistic interval is [x(2), x(9)], coverage 1 - 2*P(B<=1) = 0.9785.
    values = list(range(10, 0, -1))
    ci = stats.median_ci(values)
    assert (ci.low, ci.high) == (2.0, 9.0)
    assert ci.level == pytest.approx(1 - 2 * sps.binom.cdf(1, 10, 0.5))


def test_median_ci_with_too_few_values_reports_its_true_coverage():
    ci = stats.median_ci([3.0, 1.0, 2.0])
    assert (ci.low, ci.high) == (1.0, 3.0)
    assert ci.level == pytest.approx(0.75)


def test_median_ci_covers_the_true_median_about_95_percent_of_the_time():
    rng = np.random.default_rng(0)
    hits = 0
    trials = 2000
    for _ in range(trials):
        ci = stats.median_ci(rng.lognormal(0.0, 0.5, 20))
        hits += ci.low <= 1.0 <= ci.high  # median of lognormal(0, s) is 1
    assert 0.94 <= hits / trials <= 0.99


def test_summarize_known_values():
    summary = stats.summarize([1.0, 2.0, 3.0, 4.0, 100.0])
    assert summary.n == 5 and summary.median == 3.0 and summary.min == 1.0 and summary.max == 100.0
    assert summary.mad == 1.0
    assert summary.p95 == pytest.approx(np.percentile([1, 2, 3, 4, 100], 95))
    assert summary.std == pytest.approx(np.std([1, 2, 3, 4, 100], ddof=1))


def test_summarize_ignores_missing_and_returns_none_when_empty():
    assert stats.summarize([]) is None
    assert stats.summarize([None, None]) is None
    assert stats.summarize([None, 2.0]).n == 1


def test_first_run_outlier_is_flagged_only_when_far_from_the_rest():
    steady = [1.00, 1.02, 0.98, 1.01, 0.99, 1.03]
    flagged = stats.first_run_outlier([5.0] + steady)
    assert flagged and flagged.robust_z > 3.5 and flagged.value == 5.0
    assert stats.first_run_outlier([1.05] + steady) is None
    assert stats.first_run_outlier([5.0, 1.0, 1.0]) is None  # too few to judge


def test_robust_z_is_none_without_spread():
    assert stats.robust_z(2.0, [1.0, 1.0, 1.0, 1.0]) is None
    assert math.isclose(stats.robust_z(3.0, [0.0, 1.0, 2.0]), 2.0 / 1.4826)
