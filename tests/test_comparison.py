import math

import numpy as np
import pytest
from scipy import stats as sps

from ttfr.analyse import comparison_stats as C
from ttfr.model.comparison import Estimate


@pytest.mark.parametrize("n", [5, 8, 12, 20])
def test_signed_rank_null_matches_scipys_exact_p_values(n):
    rng = np.random.default_rng(n)
    for _ in range(20):
        d = rng.normal(0.3, 1.0, n)
        ranks = sps.rankdata(np.abs(d))
        t_plus = ranks[d > 0].sum()
        t = min(t_plus, n * (n + 1) / 2 - t_plus)
        ours = min(1.0, 2.0 * C.signed_rank_cdf(n)[int(t)])
        assert ours == pytest.approx(sps.wilcoxon(d, method="exact").pvalue, rel=1e-9)


def test_ten_rounds_use_the_ninth_walsh_averages_from_each_end():
    # Textbook value: n=10, 95% -> k=9 (P(T+ <= 8) = 0.0244), coverage 0.951.
    k, coverage = C._signed_rank_k(10, 0.95)
    assert k == 9 and coverage == pytest.approx(1 - 2 * 25 / 1024)
    d = np.arange(1, 11) / 100.0
    walsh = C.walsh_averages(d)
    effect = C.paired(np.zeros(10), d)
    assert effect.ci == pytest.approx([math.exp(walsh[8]), math.exp(walsh[-9])])
    assert effect.ratio == pytest.approx(math.exp(np.median(walsh)))


def test_hodges_lehmann_is_unbiased_and_its_interval_covers_the_true_ratio():
    rng = np.random.default_rng(0)
    true_ratio, covered, estimates, trials = 1.10, 0, [], 600
    for _ in range(trials):
        base = rng.normal(0.0, 0.3, 20)  # round effects shared by both arms (machine drift)
        log_a = base + rng.normal(0, 0.04, 20)
        log_b = base + math.log(true_ratio) + rng.normal(0, 0.04, 20)
        effect = C.paired(log_a, log_b)
        covered += effect.ci[0] <= true_ratio <= effect.ci[1]
        estimates.append(math.log(effect.ratio))
    assert 0.93 <= covered / trials <= 0.985
    assert abs(np.mean(estimates) - math.log(true_ratio)) < 0.003


def test_pairing_removes_shared_round_noise_that_unpaired_analysis_cannot():
    rng = np.random.default_rng(1)
    base = rng.normal(0.0, 0.5, 20)
    log_a, log_b = base + rng.normal(0, 0.01, 20), base + math.log(1.05) + rng.normal(0, 0.01, 20)
    paired, unpaired = C.paired(log_a, log_b), C.unpaired(log_a, log_b)
    assert paired.ci[0] > 1.0 and paired.p_value < 0.001
    assert unpaired.ci[0] < 1.0 < unpaired.ci[1]  # the shift drowns in between-round noise


def test_holm_against_a_worked_example():
    assert C.holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert C.holm([0.5]) == [0.5]


def test_benjamini_hochberg_against_a_worked_example():
    # Sorted p: 0.01, 0.02, 0.03, 0.04 (m=4): adjusted m p_(i)/i = 0.04 for all.
    assert C.benjamini_hochberg([0.04, 0.01, 0.03, 0.02]) == pytest.approx([0.04, 0.04, 0.04, 0.04])


def effect(ratio, low, high, p=0.5):
    return Estimate(ratio=ratio, ci=[low, high], p_value=p, n=20, ci_level=0.95)


@pytest.mark.parametrize(
    "e, significant, expected",
    [
        (effect(1.00, 1 / 1.03, 1.03), False, C.EQUIVALENT),  # boundaries are inside
        (effect(1.00, 0.96, 1.031), False, C.INCONCLUSIVE),
        (effect(1.03, 1.01, 1.05), True, C.REGRESSION),  # exactly delta slower
        (effect(1.029, 1.01, 1.05), True, C.INCONCLUSIVE),  # significant but below delta
        (effect(1 / 1.03, 0.95, 0.99), True, C.IMPROVEMENT),
        (effect(1.20, 0.90, 1.50), False, C.INCONCLUSIVE),
    ],
)
def test_verdict_edges(e, significant, expected):
    assert C.verdict(e, 0.03, significant)[0] == expected


def test_inconclusive_names_the_smallest_detectable_effect():
    name, why = C.verdict(effect(1.01, 0.95, 1.07), 0.03, False)
    assert name == C.INCONCLUSIVE and "smallest detectable effect" in why
    assert C.smallest_detectable(effect(1.01, 0.95, 1.07)) == pytest.approx(
        math.expm1((math.log(1.07) - math.log(0.95)) / 2 * (1.959964 + 0.841621) / 1.959964), rel=1e-5
    )


def test_judge_applies_holm_across_the_suite_and_flags_bh_warnings():
    effects = [effect(1.10, 1.05, 1.15, p=0.004), effect(1.10, 1.05, 1.15, p=0.03), effect(1.0, 0.99, 1.01, p=0.9)]
    judged = C.judge(effects, [0.03] * 3, correction="holm")
    assert [j.verdict for j in judged] == [C.REGRESSION, C.INCONCLUSIVE, C.EQUIVALENT]
    assert judged[0].p_gate == pytest.approx(0.012) and judged[1].p_gate == pytest.approx(0.06)
    assert judged[1].p_bh == pytest.approx(0.045) and judged[1].warning is True  # BH flags what Holm did not
    per_case = C.judge(effects, [0.03] * 3, correction="none")
    assert [j.verdict for j in per_case] == [C.REGRESSION, C.INCONCLUSIVE, C.EQUIVALENT]


def test_delta_uses_the_noise_floor_when_it_is_larger():
    assert C.delta_for("warm") == 0.03 and C.delta_for("cold") == 0.05
    assert C.delta_for("warm", noise_floor=0.025) == pytest.approx(0.05)


@pytest.mark.parametrize("spread", [0.10, 0.15])
def test_rounds_for_power_gives_the_power_it_promises(spread):
    """The model behind `ttfr selftest`'s "rounds ttfr ab needs": measure the CI width of A/A
    comparisons at 20 rounds, ask for the rounds that detect +10% with 80% power, then judge
    comparisons with a true +10% at that many rounds with the real verdict code."""
    rng = np.random.default_rng(7)
    widths = [C.log_half_width(C.paired([0.0] * 20, rng.normal(0, spread, 20)).ci) for _ in range(200)]
    need = C.rounds_for_power(float(np.median(widths)), 20, 0.10, delta=0.03, alpha=0.01)
    assert 10 <= need.rounds <= 60 and 0 < need.precision < 0.10
    assert (need.rounds > 20) == (need.power_at_measured_rounds < 0.8)  # the model agrees with itself
    detected = 0
    trials = 300
    for _ in range(trials):
        d = rng.normal(math.log(1.10), spread, need.rounds)
        effect = C.paired([0.0] * need.rounds, d)
        (judged,) = C.judge([effect], [0.03], correction="none")
        detected += judged.verdict == C.REGRESSION
    assert 0.72 <= detected / trials <= 0.88  # 80% promised; 300 trials resolve it to about +-2.3 points (1 sd)


def test_rounds_for_power_says_when_delta_hides_the_effect():
    need = C.rounds_for_power(0.02, 20, 0.10, delta=0.12)
    assert need.rounds is None and "delta 12.0%" in need.reason


def test_a_quiet_machine_still_needs_the_rounds_a_significant_signed_rank_test_needs():
    # n = 7 rounds all of one sign give p = 2/128 > 0.01: the test cannot pass before 8
    assert C.fewest_significant_rounds(0.01) == 8
    assert C.rounds_for_power(1e-6, 20, 0.10, delta=0.03, alpha=0.01).rounds == 8


def test_samples_that_all_tie_give_no_evidence_whatever_scipy_says(monkeypatch):
    """SciPy 1.18 answers NaN for Mann-Whitney where every value ties (1.17: 1.0): p is 1.0, and the
    suite's Benjamini-Hochberg, which refuses a NaN, still gets a number (a GPU image's SciPy)."""
    from types import SimpleNamespace

    same = np.log(np.array([1.0, 1.0, 1.0]))
    monkeypatch.setattr(C.sps, "mannwhitneyu", lambda *a, **k: SimpleNamespace(pvalue=float("nan")))
    estimate = C.unpaired(same, same)
    assert estimate.p_value == 1.0 and estimate.ratio == 1.0
    assert C.benjamini_hochberg([estimate.p_value, 0.01]) == [1.0, 0.02]
