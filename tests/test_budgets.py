"""Budgets' statistics (analyse/budgets.py): order-statistic intervals with their binomial coverage, the
fewest runs each statistic needs, the verdict from the interval, limits as a user writes them."""

import pytest

from ttfr.analyse import budgets


def test_the_fewest_runs_are_six_for_a_median_and_fifty_nine_for_a_p95():
    assert budgets.fewest_runs(0.5) == 6 and budgets.fewest_runs(0.95) == 59


def test_an_interval_covers_its_quantile_with_at_least_95_percent_and_is_the_narrowest():
    low, high, coverage = budgets.quantile_interval(list(range(1, 21)), 0.5)
    assert coverage >= 0.95 and (low, high) == (6, 15)  # Binomial(20, 1/2): ranks 6..15 cover 95.9%
    low, high, coverage = budgets.quantile_interval(list(range(1, 60)), 0.95)
    assert (low, high) == (50, 59) and 0.95 <= coverage < 0.952  # at 59 the maximum is the only upper bound
    assert budgets.quantile_interval([1.0] * 5, 0.5) is None


def test_the_verdict_is_the_intervals_and_too_few_runs_say_so():
    assert budgets.judge([0.3] * 6, "p50", 0.6).verdict == "pass"
    assert budgets.judge([0.7] * 6, "p50", 0.6).verdict == "fail"
    assert budgets.judge([0.3, 0.7] * 3, "p50", 0.6).verdict == "inconclusive"
    short = budgets.judge([0.3] * 5, "p50", 0.6)
    assert short.verdict == "inconclusive"
    assert "no 95% interval from 5 runs (a p50 needs 6)" in short.sentence("c", "p", set_aside=1)
    assert "(1 contended run(s) set aside)" in short.sentence("c", "p", set_aside=1)


@pytest.mark.parametrize("text, seconds", [("600ms", 0.6), ("1.5s", 1.5), ("2m", 120.0), ("0.25", 0.25), (3, 3.0),
                                           ("250 us", 0.00025)])  # fmt: skip
def test_limits_read_as_a_user_writes_them(text, seconds):
    assert budgets.parse_limit(text, "p50") == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["600 parsecs", "-1s", "0", "", None, float("nan")])
def test_a_malformed_limit_names_the_forms(text):
    with pytest.raises(ValueError, match="a duration like 600ms, 1.5s or 2m"):
        budgets.parse_limit(text, "p50")
