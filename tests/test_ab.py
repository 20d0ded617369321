"""ttfr ab / compare / selftest: scheduling with a fake executor, verdicts, refusals."""

import json
import math
import statistics
import sys
from collections import Counter
from dataclasses import replace

import numpy as np
import pytest
from conftest import PASSED_CHECK, fake_record, fake_result, fake_warm

from ttfr.measure.executors import Executors
from ttfr.model.base import UNSET, decode
from ttfr.model.comparison import Comparison
from ttfr.model.journal import CacheDir, Host, JournalEntry, Rusage
from ttfr.analyse import diagnostics
from ttfr.model.base import encode
from ttfr.artifacts import store as artifacts
from ttfr.artifacts.reader import validate_dir
from ttfr.pipeline import interleaved as ab
from ttfr.pipeline import comparison as compare
from ttfr.pipeline import selftest
from ttfr.errors import UsageError
from ttfr.exit_codes import EXIT_OK, EXIT_REGRESSION
from ttfr.measure.plan import PRIME, build_plan
from ttfr.measure.spec import RunRequest, build_spec


class SlowerB:
    """Fake runs: arm B (TTFR_SPIN_EXTRA set) takes `factor` times as long; round noise shared."""

    def __init__(self, factor=1.0, noise=0.02, seed=0):
        self.factor, self.calls = factor, []
        self.rng = np.random.default_rng(seed)
        self.noise = noise

    def __call__(self, job, env, timeout_s, python=None):
        arm = "B" if env.get("TTFR_SPIN_EXTRA") else "A"
        self.calls.append((arm, job.workload, job.mode))
        scale = (self.factor if arm == "B" else 1.0) * math.exp(self.rng.normal(0, self.noise))
        warm = job.mode == "warm"
        record = fake_record(check=PASSED_CHECK if job.check else None,
                             warm=fake_warm(0.001 * scale) if warm and job.samples else None)  # fmt: skip
        first_ns = int(0.33e9 * scale)
        record["marks_ns"] = {k: 1_000_000_000 + int(v * first_ns / 330_000_000) for k, v in (
            ("main", 10_000_000), ("imported", 110_000_000), ("setup", 130_000_000), ("first", 330_000_000),
            ("second_start", 331_000_000), ("second", 336_000_000))}  # fmt: skip
        return fake_result(record)


def ab_spec(rounds=12, min_rounds=None, precision=None, **kwargs):
    run = build_spec(RunRequest(backends="numpy", workloads="matmul,fused_chain", sizes="64",
                     policies="cold-cache,warm", seed=kwargs.pop("seed", 5)))  # fmt: skip
    arms = (ab.Arm("A", sys.executable), ab.Arm("B", sys.executable, (("TTFR_SPIN_EXTRA", "0.2"),)))
    return ab.AbSpec(run, arms, min_rounds or rounds, rounds, precision, None, **kwargs)


def test_rounds_are_abba_balanced_and_reproducible():
    spec = ab_spec(rounds=8).run
    plan = build_plan(replace(spec, cold_runs=8, warm_procs=8))
    rounds = ab.rounds_of(plan, seed=5)
    assert [t.key for t in ab.rounds_of(plan, 5)[3]] == [t.key for t in rounds[3]]
    assert [t.key for t in ab.rounds_of(plan, 6)[3]] != [t.key for t in rounds[3]]
    for task in rounds[0]:
        firsts = [ab._abba_first(task, r, 5) for r in range(8)]
        assert firsts.count(0) == 4  # A first in half the rounds
        assert all(firsts[r : r + 4].count(0) == 2 for r in range(0, 8, 4))


def test_paired_rounds_measure_each_arm_once_a_round_in_abba_order_and_pair_their_own_values():
    from ttfr.pipeline.interleaved import paired_rounds

    order = []

    def arm(name):
        def measure():
            order.append(name)
            return None if (name, len(order)) == ("B", 3) else f"{name}{len(order)}"  # B failed in round 1

        return measure

    pairs = paired_rounds(4, 0, arm("A"), arm("B"))
    assert "".join(order) == "ABBABAAB"
    assert pairs == [("A1", "B2"), ("A4", None), ("A6", "B5"), ("A7", "B8")]


@pytest.mark.parametrize("seed", range(6))
def test_round_zero_runs_the_template_producers_first(seed):
    spec = build_spec(RunRequest(backends="numpy,jax_jit_cpu", workloads="matmul,fused_chain", sizes="64",
                      policies="cold-cache,warm-cache,warm", seed=seed))  # fmt: skip
    producers = [t.makes_template or t.kind == PRIME for t in ab.rounds_of(build_plan(spec), seed)[0]]
    assert any(producers) and not all(producers)
    assert producers == sorted(producers, reverse=True)


def test_ab_interleaves_pairs_and_detects_a_slower_b(tmp_path):
    fake = SlowerB(factor=1.25)
    outcome = ab.execute(ab_spec(rounds=12), tmp_path, executors=Executors(worker=fake))
    assert len(fake.calls) % 2 == 0
    pairs = [fake.calls[i : i + 2] for i in range(0, len(fake.calls), 2)]
    assert all({p[0][0], p[1][0]} == {"A", "B"} for p in pairs)  # every pair is A and B back to back
    verdicts = Counter(r.verdict for r in outcome.comparison.comparisons)
    assert verdicts == {"regression": 4}
    assert outcome.exit_code == EXIT_REGRESSION
    root = outcome.root
    assert validate_dir(root / "A") == [] and validate_dir(root / "B") == []
    written = json.loads((root / "comparison.json").read_text())
    assert artifacts.schema_errors(written, "ttfr.comparison.v1") == []
    assert decode(written, Comparison) == outcome.comparison  # what was written is what every rendering read
    assert "gate **FAIL**" in (root / "comparison.md").read_text()
    manifests = [json.loads((root / arm / "manifest.json").read_text()) for arm in "AB"]
    assert manifests[0]["session_id"] == manifests[1]["session_id"]
    assert manifests[1]["arm"]["env"] == {"TTFR_SPIN_EXTRA": "0.2"}


def test_identical_arms_are_not_called_regressions(tmp_path):
    outcome = ab.execute(ab_spec(rounds=12), tmp_path, executors=Executors(worker=SlowerB(factor=1.0, noise=0.002)))
    assert {r.verdict for r in outcome.comparison.comparisons} <= {"equivalent", "inconclusive"}
    assert outcome.exit_code == EXIT_OK


def test_precision_target_stops_early_but_never_before_min_rounds(tmp_path):
    outcome = ab.execute(
        ab_spec(rounds=30, min_rounds=8, precision=0.05), tmp_path, executors=Executors(worker=SlowerB(1.0, noise=0.001))
    )
    rounds = outcome.comparison.rounds
    assert rounds.stopped_by == "precision" and 8 <= rounds.completed < 30
    spec = json.loads((outcome.root / "A" / "plan.json").read_text())["spec"]
    assert spec["cold_runs"] == rounds.completed  # the arm's artifacts describe what ran
    assert json.loads((outcome.root / "A" / "suite.json").read_text())["state"] == "complete"


def test_fail_on_inconclusive_fails_the_gate(tmp_path):
    outcome = ab.execute(ab_spec(rounds=6, fail_on="inconclusive"), tmp_path, executors=Executors(worker=SlowerB(1.0, noise=0.3)))
    summary = outcome.comparison.summary
    assert summary.inconclusive and summary.gate == "fail" and outcome.exit_code == EXIT_REGRESSION


def test_bad_arms_are_usage_errors(tmp_path):
    with pytest.raises(UsageError, match="identical"):
        ab.validate(ab.AbSpec(ab_spec().run, (ab.Arm("A", "p"), ab.Arm("B", "p")), 10, 20, None, None))
    with pytest.raises(UsageError, match="KEY=VALUE"):
        ab.parse_env(["NOEQUALS"])
    with pytest.raises(UsageError, match="not a virtualenv"):
        ab.resolve_python(str(tmp_path))
    with pytest.raises(UsageError, match="min-rounds"):
        ab.validate(ab_spec(rounds=5, min_rounds=9))


def test_compare_refuses_separate_sessions_unless_asked(tmp_path):
    from support.fakes import FakeExecutor

    from ttfr.pipeline import suite as suite_run

    dirs = []
    for name in ("one", "two"):
        spec = build_spec(RunRequest(backends="numpy", workloads="matmul", sizes="64", cold_runs=6, warm_procs=6))
        result_dir = suite_run.start(spec, tmp_path / name, ["ttfr", "run"])
        dirs.append(suite_run.execute(result_dir, spec, Executors(worker=FakeExecutor())).result_dir.root)
    with pytest.raises(UsageError, match="two separate sessions"):
        compare.compare_dirs(dirs[0], dirs[1], tmp_path, cross_session=False, correction="holm", fail_on="regression")
    assert not list(tmp_path.glob("compare-*"))  # refused before anything is written
    out, document = compare.compare_dirs(dirs[0], dirs[1], tmp_path / "cmp", cross_session=True, correction="holm",
                                         fail_on="regression")  # fmt: skip
    assert out.parent == tmp_path / "cmp" and out.name.startswith("compare-")
    assert document.paired is False and "CROSS-SESSION" in document.warning
    assert all(r.verdict.endswith("(weak)") for r in document.comparisons)
    assert "CROSS-SESSION" in (out / "comparison.md").read_text()


def test_compare_says_when_the_two_results_wait_for_their_calls_differently(tmp_path, monkeypatch):
    from dataclasses import replace

    from support.fakes import FakeExecutor

    from ttfr.measure import catalog
    from ttfr.pipeline import suite as suite_run

    dirs = []
    for name, policy in (("one", None), ("two", "inline, as a newer ttfr would")):
        if policy:
            monkeypatch.setitem(catalog.BACKENDS, "numpy", replace(catalog.BACKENDS["numpy"], sync_policy=policy))
        spec = build_spec(RunRequest(backends="numpy", workloads="matmul", sizes="64", cold_runs=6, warm_procs=6))
        result_dir = suite_run.start(spec, tmp_path / name, ["ttfr", "run"])
        dirs.append(suite_run.execute(result_dir, spec, Executors(worker=FakeExecutor())).result_dir.root)
    _out, document = compare.compare_dirs(dirs[0], dirs[1], tmp_path / "cmp", cross_session=True, correction="holm",
                                          fail_on="regression")  # fmt: skip
    assert "differs between A and B for numpy_matmul_64_f32 (sync_policy)" in document.warning


def test_compare_pairs_the_two_arms_of_an_ab_run(tmp_path):
    outcome = ab.execute(ab_spec(rounds=10), tmp_path, executors=Executors(worker=SlowerB(factor=1.3)))
    _out, document = compare.compare_dirs(outcome.root / "A", outcome.root / "B", tmp_path / "again",
                                          cross_session=False, correction="holm", fail_on="regression")  # fmt: skip
    assert document.paired is True and {r.verdict for r in document.comparisons} == {"regression"}


def test_dip_test_against_published_values():
    assert diagnostics.bimodality([0.0] * 50 + [1.0] * 50).dip == pytest.approx(0.25)  # two point masses
    even = diagnostics.bimodality(list(np.linspace(0, 1, 101)))
    assert even.dip == pytest.approx(1 / 202) and not even.bimodal  # the minimum, 1/(2n)
    assert diagnostics.bimodality([1.0] * 29) is None  # below 30 values: not judged


def test_drift_is_flagged_only_when_it_is_real():
    rng = np.random.default_rng(0)
    steady = list(1.0 + rng.normal(0, 0.005, 20))
    drifting = [v * (1 + 0.004 * i) for i, v in enumerate(steady)]
    assert diagnostics.drift(steady).drifting is False
    assert diagnostics.drift(drifting).drifting is True and diagnostics.drift(drifting).relative_change > 0.05


def test_host_noise_warns_with_numbers():
    entries = [JournalEntry(task="t", case="numpy_matmul_64_f32", kind="cold", policy=None, index=0, round=0, measured=True,
                            makes_template=False, cache_dir=CacheDir(entries_before=0, entries_after=0),
                            host=Host(load_average=[6.0, 5, 5], cpu_pressure_avg10=30.0, steal_fraction=0.0),
                            outcome="error", reason="(a test)", record=None, spawn_ns=1, reaped_ns=2, exit_code=1,
                            rusage=Rusage(involuntary_switches=50), output_tail=None)] * 3  # fmt: skip
    noise = diagnostics.host_noise(entries, usable_cores=2)
    assert noise.noisy and any("load_per_core 3" in w for w in noise.why)
    assert any("cpu_pressure_avg10 30" in w for w in noise.why)


def test_selftest_rates_carry_exact_binomial_intervals():
    from scipy.stats import beta

    entry = selftest.rate(3, 200)
    # Clopper-Pearson from the beta quantiles directly
    assert entry.rate == 0.015
    assert entry.ci95 == pytest.approx([beta.ppf(0.025, 3, 198), beta.ppf(0.975, 4, 197)], rel=1e-9)
    assert selftest.rate(0, 0).rate is None


def test_selftest_counts_regression_verdicts_as_gate_false_alarms(monkeypatch):
    """A/A arms 2% apart in every round: significant, but below delta, so the gate stays
    quiet; B 30% slower is detected and the measured truth sits inside every CI."""
    rng = np.random.default_rng(3)

    def series(regime, extra, rounds, python, phase):
        a = np.exp(rng.normal(0, 0.01, rounds))
        shift = 1.3 if extra else 1.02
        return list(a), list(a * shift * np.exp(rng.normal(0, 0.005, rounds)))

    monkeypatch.setattr(selftest, "paired_series", series)
    monkeypatch.setattr(selftest, "ensure_worker_bytecode", lambda: None)
    monkeypatch.setattr(selftest, "measured_ratio_fresh", lambda extra, python: 1.3)
    result = selftest.run(aa=6, per_level=4, rounds=20)
    assert artifacts.schema_errors(encode(result), "ttfr.selftest.v1") == []
    for regime in ("cold", "warm"):
        assert result.aa[regime].significant_either_way.rate == 1.0
        assert result.aa[regime].false_alarm.count == 0 == result.aa[regime].false_alarms
    for level in result.injected:
        assert level.detected.rate == 1.0 and level.coverage.rate == 1.0
    # how many rounds `ttfr ab` needs for +10% at 80% power: 2% apart with 1% noise is a quiet
    # machine (delta = 2 x its noise floor of ~2% = 4%), so the signed-rank test's own minimum
    need = result.rounds_for_power["warm"]
    assert (need.effect, need.power, need.rounds) == (0.10, 0.80, 8) and 0 < need.precision < 0.1
    assert need.check.measured == result.injected[1].detected
    from rich.console import Console

    from ttfr.report import terminal

    console = Console(record=True, width=200)
    terminal.print_selftest(console, result)
    shown = console.export_text()
    assert "≈ 8 paired rounds" in shown
    assert f"ttfr ab --precision {need.precision:.3f} --rounds 20" in shown  # a cap with headroom
    # `ttfr ab` with fixed rounds below what this machine needs says so before it runs
    assert selftest.rounds_advice(result, 20, None) is None  # 8 are needed: 20 suffice
    assert selftest.rounds_advice(result, 6, 0.05) is None  # --precision decides the rounds
    advice = selftest.rounds_advice(result, 6, None)
    assert "more than --rounds 6" in advice and f"warm ≈ 8 (--precision {need.precision:.3f})" in advice


@pytest.mark.integration
def test_selftest_measures_and_stores_a_noise_floor(tmp_path, monkeypatch):
    monkeypatch.setenv("TTFR_STATE_DIR", str(tmp_path))
    result = selftest.run(aa=2, per_level=1, rounds=4)
    assert artifacts.schema_errors(encode(result), "ttfr.selftest.v1") == []
    assert set(result.aa) == {"cold", "warm"} and len(result.injected) == 3
    assert [x.nominal for x in result.injected] == [0.05, 0.10, 0.20]
    # One truth process a level cannot order 5% against 10% on a shared machine (a CI run measured the 5% as
    # 0.949): their mean, +12% injected, is clear of the noise, and swapped arms would put it below 1.
    assert statistics.fmean(math.log(x.measured_ratio) for x in result.injected) > 0
    assert result.injected[0].truth_processes == 1
    selftest.store(result)
    assert selftest.load_noise_floor() == result.noise_floor


@pytest.mark.integration
def test_ab_on_real_processes_detects_real_extra_work(tmp_path):
    import subprocess

    done = subprocess.run(
        [sys.executable, "-m", "ttfr", "ab", "--b-env", "TTFR_SPIN_EXTRA=0.6", "--cases", "python_spin_50_f64",
         "--cache-policy", "warm", "--rounds", "10", "--out", str(tmp_path), "--markdown", str(tmp_path / "pr.md")],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 3, done.stdout[-3000:] + done.stderr[-2000:]
    (root,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    document = decode(json.loads((root / "comparison.json").read_text()), Comparison)  # the artifact reads back typed
    (record,) = document.comparisons
    assert record.verdict == "regression" and record.effect.ratio > 1.3
    assert "🔴 regression" in (tmp_path / "pr.md").read_text()


def test_ab_explain_runs_each_arms_diagnostic_processes_after_the_last_round_and_compares_them(tmp_path):
    """`ttfr ab --explain` (issue 38): a diagnostic process per arm, case and cold policy, after the rounds (a
    precision stop included), never between measured runs; the comparison lists what changed between the arms."""
    from support.fakes import FakeExecutor

    run = build_spec(RunRequest(backends="numpy", workloads="matmul,fused_chain", sizes="64", policies="cold-cache,warm",
                                seed=5, explain=True))  # fmt: skip
    arms = (ab.Arm("A", sys.executable), ab.Arm("B", sys.executable, (("TTFR_SPIN_EXTRA", "0.2"),)))
    fake = FakeExecutor()
    outcome = ab.execute(ab.AbSpec(run, arms, 3, 6, None, None), tmp_path, executors=Executors(worker=fake))
    explained = [i for i, call in enumerate(fake.calls) if call["job"].explain]
    assert explained == list(range(len(fake.calls) - 4, len(fake.calls)))  # after every measured run
    arm_of = ["B" if fake.calls[i]["env"].get("TTFR_SPIN_EXTRA") else "A" for i in explained]
    assert Counter(arm_of) == {"A": 2, "B": 2}  # two cases, one cold policy, each arm
    assert outcome.comparison.explained is not UNSET and validate_dir(outcome.root / "B") == []
    for arm in "AB":
        cases = [json.loads(p.read_text()) for p in (outcome.root / arm / "cases").glob("*.json")]
        assert [c["policies"]["cold-process/cold-cache"]["explanation"]["outcome"] for c in cases] == ["ok", "ok"]
    # interrupted before the last round: no diagnostic process at all (the arms' runs are what they are)
    stopped = FakeExecutor(interrupt_at=6)
    ab.execute(ab.AbSpec(run, arms, 3, 6, None, None), tmp_path / "stopped", executors=Executors(worker=stopped))
    assert not any(call["job"].explain for call in stopped.calls)


def test_a_selftest_whose_workers_all_fail_says_so_instead_of_crashing(monkeypatch, capsys):
    """Every round's workers failed (a broken interpreter): no paired runs, so no ratio to judge; and a truth
    process that hangs is no truth. Both were tracebacks."""
    import subprocess as sp

    from ttfr.commands import cli

    monkeypatch.setattr(selftest, "paired_series", lambda regime, extra, rounds, python, phase: ([], []))
    monkeypatch.setattr(selftest, "ensure_worker_bytecode", lambda: None)
    assert cli.main(["selftest"]) == 1
    assert "every A/A cold comparison lacked paired runs" in capsys.readouterr().err

    def hangs(*_args, **kwargs):
        raise sp.TimeoutExpired("python", kwargs.get("timeout"))

    monkeypatch.setattr(selftest.subprocess, "run", hangs)
    assert selftest.measured_ratio_fresh(0.1, sys.executable) is None
