"""ttfr measured on itself: the overhead gate's decision on synthetic paired samples, the
measurement's order and plumbing on fake executors, the command's options and exit codes."""

from __future__ import annotations

import math
import random

import pytest
from conftest import fake_record, fake_result, fake_warm

from ttfr.analyse import overhead
from ttfr.commands import cli
from ttfr.measure.executors import Executors
from ttfr.pipeline import harness_check


def _pairs(ratio: float, rounds: int = 20, noise: float = 0.05, seed: int = 0, base: float = 0.009):
    """Paired (A, B) times: B = ratio x A, each with independent log-normal noise."""
    rng = random.Random(seed)
    out = []
    for _ in range(rounds):
        a = base * math.exp(rng.gauss(0, noise))
        out.append((a, ratio * base * math.exp(rng.gauss(0, noise))))
    return out


def _judge(pairs, limit=1.5):
    return overhead.judge("cold process_s", "no-op", "bare", "process", pairs, limit)


@pytest.mark.parametrize("seed", range(5))
def test_the_gate_passes_no_overhead_through_noise_and_a_five_percent_wobble(seed):
    assert _judge(_pairs(1.0, seed=seed, noise=0.15)).verdict == "pass"
    assert _judge(_pairs(1.05, seed=seed, noise=0.15)).verdict == "pass"


@pytest.mark.parametrize("seed", range(5))
def test_the_gate_fails_a_threefold_regression_even_through_heavy_noise(seed):
    judged = _judge(_pairs(3.0, seed=seed, noise=0.3))
    assert judged.verdict == "fail" and judged.estimate.ci[0] > 1.5
    assert "entirely above the limit 1.5×" in judged.sentence()


def test_an_estimate_above_the_limit_whose_interval_reaches_below_it_warns_not_fails():
    pairs = [(1.0, 1.3), (1.0, 1.4), (1.0, 1.45), (1.0, 1.8), (1.0, 1.9), (1.0, 2.0), (1.0, 1.7)]
    judged = _judge(pairs)
    assert judged.estimate.ratio > 1.5 and judged.estimate.ci[0] <= 1.5
    assert judged.verdict == "warn"


def test_failed_rounds_are_dropped_and_too_few_left_is_unmeasured_not_passed():
    pairs = _pairs(1.0, rounds=8)
    pairs[0] = (None, pairs[0][1])
    pairs[1] = (pairs[1][0], None)
    pairs[2] = (pairs[2][0], None)
    judged = _judge(pairs)
    assert judged.verdict == "unmeasured" and judged.reason.startswith("5 of 8 paired rounds succeeded")
    assert judged.measured_median_s is not None  # the figures that exist are still shown


class _Timed:
    """Fake executors with known process lives: the bare command `bare_ns`, the no-op worker
    `ratio` times that (its first result at 90%), its warm call `warm_ratio` x the bare loop."""

    def __init__(self, ratio: float, warm_ratio: float = 1.0, bare_ns: int = 9_000_000):
        self.ratio, self.warm_ratio, self.bare_ns = ratio, warm_ratio, bare_ns
        self.order: list[str] = []

    def command(self, command, env, timeout_s, watch_tree=True):
        assert watch_tree is False  # a bare arm unwatched: the ratio holds what the watch costs a cold worker
        self.order.append("A")
        if command.first_result:  # the bare warm loop: its figure is the line it was timed to
            assert command.argv[-1] == harness_check.BARE_WARM
            return fake_result({"outcome": "ok", "first_result": {"by": "output", "line": "per_call_s=3e-08"}})
        return fake_result({"outcome": "ok"}, process_ns=self.bare_ns)

    def worker(self, job, env, timeout_s, python=None):
        self.order.append("B")
        life = int(self.bare_ns * self.ratio)
        start = 1_000_000_000
        record = fake_record(start_ns=start)
        if job.mode == "warm":
            record["warm"] = fake_warm(per_call=30e-9 * self.warm_ratio, n=9)
        marks = record["marks_ns"]
        for name in marks:  # squeeze the marks into the fake life, first result at 90% of it
            marks[name] = start + int((marks[name] - start) / 330_000_000 * 0.9 * life)
        return fake_result(record, spawn_ns=start, process_ns=life)

    def executors(self):
        return Executors(worker=self.worker, command=self.command)


def test_the_cold_rounds_run_in_abba_order_and_pair_their_own_runs():
    timed = _Timed(ratio=2.0)
    process, first = harness_check.cold_pairs(8, "python", timed.executors())
    assert "".join(timed.order) == "ABBABAABABBABAAB"
    assert all(b == pytest.approx(2 * a) for a, b in process)
    assert all(b == pytest.approx(0.9 * 2 * a, rel=1e-3) for a, b in first)


def test_a_threefold_no_op_fails_the_gate_and_a_lean_one_passes():
    slow = harness_check.run(8, 1.5, "python", _Timed(3.0).executors(), hyperfine=False, fast_tier=False)
    assert [r.verdict for r in slow.ratios] == ["fail", "fail", "pass"]
    assert [r.name for r in slow.failed] == ["cold process_s", "cold ttfr_s"]
    lean = harness_check.run(8, 1.5, "python", _Timed(1.1).executors(), hyperfine=False, fast_tier=False)
    assert [r.verdict for r in lean.ratios] == ["pass", "pass", "pass"] and not lean.failed


def test_the_warm_arm_compares_per_call_times():
    timed = _Timed(1.0, warm_ratio=4.0)
    pairs = harness_check.warm_pairs(6, "python", timed.executors())
    assert all(b / a == pytest.approx(4.0, rel=0.05) for a, b in pairs)
    assert "".join(timed.order) == "BABAABABBABA"  # ABBA, a phase apart from the cold arm


def test_hyperfine_missing_is_said_not_faked(monkeypatch):
    monkeypatch.setattr(harness_check.shutil, "which", lambda _name: None)
    agreement, why = harness_check.hyperfine_agreement("python")
    assert agreement is None and "hyperfine is not installed" in why


@pytest.mark.parametrize(
    ("argv", "message"),
    [(["--limit", "0.9"], "--limit 0.9: the gate's limit is a finite ratio above 1"),
     (["--limit", "inf"], "--limit inf: the gate's limit is a finite ratio above 1"),
     (["--limit", "nan"], "--limit nan: the gate's limit is a finite ratio above 1"),
     (["--harness-rounds", "3"], "--harness-rounds 3: at least 6 paired rounds")],
)  # fmt: skip
def test_bad_gate_options_are_refused_before_anything_runs(argv, message, capsys):
    timed = _Timed(1.0)
    code = cli.main(["selftest", "--harness", *argv], executors=timed.executors())
    assert code == 2 and message in capsys.readouterr().err
    assert timed.order == []


def test_the_command_exits_3_naming_the_figure_when_the_gate_fails(capsys):
    code = cli.main(["selftest", "--harness", "--harness-rounds", "8", "--no-hyperfine"],
                    executors=_Timed(3.0).executors())  # fmt: skip
    out = capsys.readouterr().out
    assert code == 3
    assert "ttfr: overhead gate: cold process_s: 3.000×" in out and "entirely above the limit 1.5×" in out
    assert cli.main(["selftest", "--harness", "--harness-rounds", "8", "--no-hyperfine"],
                    executors=_Timed(1.0).executors()) == 0  # fmt: skip


def test_a_no_op_that_cannot_run_is_a_failure_to_measure_not_a_regression(capsys):
    timed = _Timed(1.0)
    executors = Executors(worker=lambda job, env, timeout_s, python=None: fake_result(None, outcome="error",
                                                                                   reason="boom"),
                          command=timed.command)  # fmt: skip
    code = cli.main(["selftest", "--harness", "--harness-rounds", "6", "--no-hyperfine"], executors=executors)
    out = capsys.readouterr().out
    assert code == 1
    assert "cold process_s: not measured (0 of 6 paired rounds succeeded; the gate needs 6)" in out
