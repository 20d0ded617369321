"""`ttfr run --precision`: the allocator (analyse/precision.py) on synthetic statistics, and the
whole phase on a fake executor with known run costs and spreads and a fake clock."""

import dataclasses
import json
import random

import pytest
from conftest import fake_result
from support.fakes import FakeExecutor, run_suite

from ttfr.measure.executors import Executors
from ttfr.analyse import precision
from ttfr.analyse.precision import BUSY, FAILING, MET, MIN_RUNS, SHORT, UNREACHABLE
from ttfr.model.base import decode, encode
from ttfr.model.record import RunRecord
from ttfr.model.suite import Statistic
from ttfr.artifacts.reader import load_finished, validate_dir
from ttfr.artifacts.store import ArtifactError
from ttfr.pipeline import suite as suite_run
from ttfr.errors import UsageError
from ttfr.measure.limits import MAX_COLD_RUNS
from ttfr.measure.spec import RunRequest, build_spec

COLD_CACHE, WARM_CACHE, WARM = "cold-process/cold-cache", "cold-process/warm-cache", "warm-process"


def stat(case, policy=COLD_CACHE, *, n=10, half_width=0.10, cost_s=1.0, state=SHORT, contended=0, runs=None):
    return Statistic(case=case, policy=policy, metric=precision.metric_of(policy), runs=n if runs is None else runs,
                     n=n, contended=contended, median=1.0, half_width=half_width, cost_s=cost_s, state=state,
                     needed_runs=precision.needed_runs(n, half_width, 0.05), added=0)  # fmt: skip


def test_six_runs_are_the_fewest_with_a_95_percent_median_interval():
    # [min, max] of n runs covers the median with probability 1 - 2 * 0.5**n: 93.75% at 5, 96.9% at 6
    assert MIN_RUNS == 6


def test_the_first_run_goes_to_the_widest_interval_per_second():
    # equal widths, ten times the cost: the cheap one first; a slightly wider but 20x dearer one last
    stats = [stat("cheap", cost_s=1.0), stat("dear", cost_s=10.0), stat("widest_but_dear", half_width=0.12, cost_s=20.0)]
    assert precision.allocate(stats, 0.05, quantum_s=1.0) == {("cheap", COLD_CACHE): 1}
    # per second, 0.12 at 1 s beats 0.10 at 1 s
    stats = [stat("narrow"), stat("wide", half_width=0.12)]
    assert precision.allocate(stats, 0.05, quantum_s=1.0) == {("wide", COLD_CACHE): 1}


def test_a_batch_spreads_over_statistics_as_their_projected_widths_shrink():
    # "a" at 0.06 from 10 runs needs ~15 runs; "b" at 0.20 needs ~160. b's runs buy more precision
    # and it gets most of a batch, but each run given shrinks what the next one buys, so a gets its
    # share too, and never more than it is projected to need
    a, b = stat("a", half_width=0.06), stat("b", half_width=0.20)
    for quantum in (20.0, 150.0):
        got = precision.allocate([a, b], 0.05, quantum_s=quantum)
        assert sum(got.values()) == quantum
        assert got[("b", COLD_CACHE)] > got[("a", COLD_CACHE)] >= 1
        assert got[("a", COLD_CACHE)] <= precision.needed_runs(10, 0.06, 0.05) - 10


def test_a_run_buys_less_where_many_runs_were_measured_already():
    # equal widths and costs: one more of 12 runs narrows the interval ~4%, one more of 500 ~0.1%
    many, few = stat("many", n=500), stat("few", n=12)
    assert precision.allocate([many, few], 0.05, quantum_s=1.0) == {("few", COLD_CACHE): 1}


def test_statistics_without_an_interval_come_first_cheapest_first():
    no_interval = stat("new", n=2, half_width=None, cost_s=3.0)
    cheaper = stat("new_cheap", n=2, half_width=None, cost_s=2.0)
    wide = stat("wide", half_width=0.5, cost_s=0.1)
    assert precision.allocate([wide, no_interval, cheaper], 0.05, quantum_s=2.0) == {("new_cheap", COLD_CACHE): 1}
    # each is brought to MIN_RUNS in one batch when the batch is long enough, and no further
    got = precision.allocate([no_interval, cheaper], 0.05, quantum_s=1000.0)
    assert got == {("new", COLD_CACHE): MIN_RUNS - 2, ("new_cheap", COLD_CACHE): MIN_RUNS - 2}


def test_nothing_is_bought_for_statistics_that_met_the_target_or_cannot():
    stats = [stat("met", half_width=0.01, state=MET), stat("far", state=UNREACHABLE), stat("busy", state=BUSY),
             stat("failing", state=FAILING), stat("full", runs=MAX_COLD_RUNS)]  # fmt: skip
    assert precision.allocate(stats, 0.05) == {}


def test_the_batch_never_exceeds_what_is_left_of_the_budget():
    stats = [stat("a", cost_s=4.0), stat("b", cost_s=4.0)]
    assert precision.allocate(stats, 0.05, limit_s=3.9) == {}
    assert sum(precision.allocate(stats, 0.05, limit_s=9.0).values()) == 2


def _case(runs, *, metric_values, contended=(), failed=0, status="ok"):
    from conftest import make_case, make_run

    from ttfr.analyse import stats
    from ttfr.model.base import decode, encode
    from ttfr.model.case import CaseResult

    quiet = {"waited": None, "others_cores": None, "runnable_cores": None}
    views = [make_run(i, ttfr_s=v, contention={"contended": i in contended, **quiet}) for i, v in enumerate(metric_values)]
    for view in views:
        view["metrics"]["process_s"] = 2.0
    failures = [make_run(len(views) + i, outcome="timeout", ttfr_s=None) for i in range(failed)]
    for view in failures:
        view["metrics"]["process_s"] = 9.0
    clean = [v["metrics"]["ttfr_s"] for v in views if not v["contention"]["contended"]]
    summary = stats.summarize(clean) if 2 * len(clean) >= len(metric_values) else None
    data = encode(make_case(cold_runs=views + failures, status=status))
    data["policies"][COLD_CACHE]["summary"]["ttfr_s"] = encode(summary)
    return decode(data, CaseResult)


def test_assess_reads_the_interval_state_and_cost_of_each_statistic():
    (tight,) = precision.assess([_case(6, metric_values=[1.0, 1.01, 1.0, 0.99, 1.0, 1.02])], 0.05)
    assert tight.state == MET and tight.n == 6 and tight.cost_s == 2.0 and tight.half_width == pytest.approx(0.015)
    (short,) = precision.assess([_case(3, metric_values=[1.0, 1.5, 0.7])], 0.05)
    assert short.state == SHORT and short.half_width is None and short.needed_runs is None  # no 95% interval yet
    (wide,) = precision.assess([_case(6, metric_values=[1.0, 2.0, 1.0, 0.5, 1.0, 1.5])], 0.05)
    assert wide.state == SHORT and wide.needed_runs > 1000  # one outlier widens [min, max]: not judged on 6 runs
    (hopeless,) = precision.assess([_case(12, metric_values=[0.1, 0.3, 1.0, 3.0, 10.0, 30.0] * 2)], 0.05)
    assert hopeless.state == UNREACHABLE and hopeless.needed_runs > 2 * MAX_COLD_RUNS
    (busy,) = precision.assess([_case(12, metric_values=[1.0] * 12, contended=range(7))], 0.05)
    assert busy.state == BUSY and busy.median is None and busy.contended == 7
    (failing,) = precision.assess([_case(2, metric_values=[1.0, 1.1], failed=6)], 0.05)
    assert failing.state == FAILING and failing.cost_s == 9.0
    assert precision.assess([_case(6, metric_values=[1.0] * 6, status="failed")], 0.05) == []


# --- the whole phase on a fake executor --------------------------------------------------------


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


class CostedExecutor(FakeExecutor):
    """Each run takes `cost_s[backend]` on the fake clock; its TTFR (and warm call) is
    0.33 s x (1 + spread[backend] x a seeded uniform draw in [-1, 1])."""

    def __init__(self, clock, cost_s, spread, seed=0, **kwargs):
        super().__init__(**kwargs)
        self.clock, self.cost_s, self.spread = clock, cost_s, spread
        self.rng = random.Random(seed)

    def __call__(self, job, env, timeout_s, python=None):
        result = super().__call__(job, env, timeout_s, python)
        backend = self.calls[-1]["case"].split("_matmul")[0]
        self.clock.now += self.cost_s[backend]
        reaped = result.spawn_ns + int(self.cost_s[backend] * 1e9)
        if result.record is None:
            return dataclasses.replace(result, reaped_ns=reaped)
        factor = 1.0 + self.spread[backend] * self.rng.uniform(-1.0, 1.0)
        record = encode(result.record)
        marks = record["marks_ns"]
        marks["first"] = result.spawn_ns + int(0.33e9 * factor)
        marks["second_start"], marks["second"] = marks["first"] + 1_000_000, marks["first"] + 6_000_000
        if record.get("warm"):
            record["warm"]["samples_s"] = [s * factor for s in record["warm"]["samples_s"]]
        return dataclasses.replace(result, record=decode(record, RunRecord), reaped_ns=reaped)


def _run(tmp_path, executor, clock, **kwargs):
    kwargs.setdefault("backends", "numpy,jax_jit_cpu")
    return run_suite(tmp_path / "out", RunRequest(workloads="matmul", sizes="64", seed=1, **kwargs), executor, clock=clock)


def _runs_per_stream(cases):
    return {(c.case.split("_matmul")[0], p): len(d.measured) for c in cases for p, d in c.policies.items()}


def test_runs_are_added_until_every_statistic_meets_the_target(tmp_path):
    clock = Clock()
    executor = CostedExecutor(clock, {"numpy": 1.0, "jax_jit_cpu": 1.0}, {"numpy": 0.01, "jax_jit_cpu": 0.2})
    outcome = _run(tmp_path, executor, clock, precision=0.05)
    bought = outcome.suite.precision
    assert bought.stopped_by == "target_met"
    assert bought.summary.met == bought.summary.statistics == 6
    assert all(s.half_width <= 0.05 for s in bought.statistics)
    runs = _runs_per_stream(outcome.cases)
    # the quiet backend stops at the fewest runs with a 95% interval; the noisy one needs more
    assert {runs[("numpy", p)] for p in (COLD_CACHE, WARM_CACHE, WARM)} == {MIN_RUNS}
    assert min(runs[("jax_jit_cpu", p)] for p in (COLD_CACHE, WARM_CACHE, WARM)) > MIN_RUNS
    assert bought.summary.added_runs == sum(runs.values()) - 2 * 6  # the quick profile's 2 per stream
    assert validate_dir(outcome.result_dir.root) == []
    assert load_finished(outcome.result_dir.root).suite.precision == bought


def test_added_runs_go_where_precision_is_cheapest(tmp_path):
    # same spread, but a jax run costs 20x a numpy run: with a budget too small for both to reach
    # the target, numpy's statistics get there and jax's get only what their intervals need first
    clock = Clock()
    spread = {"numpy": 0.15, "jax_jit_cpu": 0.15}
    executor = CostedExecutor(clock, {"numpy": 0.5, "jax_jit_cpu": 10.0}, spread)
    outcome = _run(tmp_path, executor, clock, precision=0.05, budget="400s")
    states = {(s.case.split("_matmul")[0], s.policy): s.state for s in outcome.suite.precision.statistics}
    runs = _runs_per_stream(outcome.cases)
    assert all(states[("numpy", p)] == MET for p in (COLD_CACHE, WARM_CACHE, WARM))
    assert any(states[("jax_jit_cpu", p)] == SHORT for p in (COLD_CACHE, WARM_CACHE, WARM))
    numpy_runs = sum(runs[("numpy", p)] for p in (COLD_CACHE, WARM_CACHE, WARM))
    assert numpy_runs > 2 * sum(runs[("jax_jit_cpu", p)] for p in (COLD_CACHE, WARM_CACHE, WARM))
    assert outcome.suite.precision.stopped_by == "budget"


def test_the_budget_is_respected(tmp_path):
    clock = Clock()
    executor = CostedExecutor(clock, {"numpy": 3.0, "jax_jit_cpu": 7.0}, {"numpy": 0.3, "jax_jit_cpu": 0.3})
    outcome = _run(tmp_path, executor, clock, precision=0.01, budget=120)
    bought = outcome.suite.precision
    assert bought.stopped_by == "budget" and bought.summary.added_runs > 0
    assert clock.now <= 120.0
    assert bought.elapsed_s == clock.now
    assert bought.summary.short > 0  # a 1% target on a 30% spread is not met in two minutes


def test_the_profile_runs_complete_even_when_they_alone_exceed_the_budget(tmp_path):
    clock = Clock()
    executor = CostedExecutor(clock, {"numpy": 30.0, "jax_jit_cpu": 30.0}, {"numpy": 0.1, "jax_jit_cpu": 0.1})
    outcome = _run(tmp_path, executor, clock, precision=0.05, budget=60)
    assert outcome.suite.state == "complete"
    assert outcome.suite.precision.stopped_by == "budget" and outcome.suite.precision.summary.added_runs == 0


def test_an_interrupted_precision_phase_resumes_from_the_journal(tmp_path):
    clock = Clock()
    costs, spread = {"numpy": 1.0, "jax_jit_cpu": 1.0}, {"numpy": 0.01, "jax_jit_cpu": 0.2}
    # the quick plan of two cases is 13 tasks (jax's priming is its cold-cache run 0): stop in the added runs
    outcome = _run(tmp_path, CostedExecutor(clock, costs, spread, interrupt_at=20), clock, precision=0.05)
    assert outcome.interrupted and outcome.suite.precision.stopped_by == "interrupted"
    root = outcome.result_dir.root
    result_dir, the_spec = suite_run.reopen(root)
    assert the_spec.precision == 0.05
    resumed = suite_run.execute(result_dir, the_spec, Executors(worker=CostedExecutor(clock, costs, spread, seed=1)), clock=clock)
    assert resumed.suite.precision.stopped_by == "target_met"
    for case in resumed.cases:
        for _name, data in case.policies.items():
            indexes = [r.index for r in data.measured]
            assert sorted(indexes) == list(range(len(indexes)))  # no index twice, none skipped
    assert resumed.suite.precision.summary.added_runs == sum(_runs_per_stream(resumed.cases).values()) - 12
    assert validate_dir(root) == []


def test_a_case_stopped_mid_phase_takes_no_more_runs_and_does_not_end_the_others(tmp_path):
    """numpy's fourth added warm process finds its runtime unavailable (the scheduler stops the
    case); jax's statistics still get their runs up to the target."""
    clock = Clock()
    seen = {"numpy": 0}

    def decide(call):
        if call["case"].startswith("numpy") and call["job"].mode == "warm":
            seen["numpy"] += 1
            if seen["numpy"] == 4:
                return fake_result(None, outcome="unavailable", reason="runtime went away")
        return None

    executor = CostedExecutor(clock, {"numpy": 1.0, "jax_jit_cpu": 1.0}, {"numpy": 0.01, "jax_jit_cpu": 0.2},
                              decide=decide)  # fmt: skip
    outcome = _run(tmp_path, executor, clock, precision=0.05)
    bought = outcome.suite.precision
    states = {(s.case.split("_matmul")[0], s.policy): s.state for s in bought.statistics}
    assert all(states[("jax_jit_cpu", p)] == MET for p in (COLD_CACHE, WARM_CACHE, WARM))
    assert bought.stopped_by == "cannot_improve"  # numpy's warm statistic is short, but its case stopped
    numpy_warm = [c for c in executor.calls if c["case"].startswith("numpy") and c["job"].mode == "warm"]
    assert len(numpy_warm) == 4  # nothing was started for it after it stopped


def test_nothing_to_measure_is_not_reported_as_the_target_met(tmp_path):
    clock = Clock()
    executor = CostedExecutor(clock, {"numpy": 1.0, "jax_jit_cpu": 1.0}, {"numpy": 0.0, "jax_jit_cpu": 0.0},
                              decide=lambda call: fake_result(None, outcome="unavailable", reason="no runtime"))  # fmt: skip
    outcome = _run(tmp_path, executor, clock, precision=0.05)
    assert outcome.suite.precision.summary.statistics == 0
    assert outcome.suite.precision.stopped_by == "cannot_improve"


def test_a_removed_precision_block_is_refused(tmp_path):
    clock = Clock()
    executor = CostedExecutor(clock, {"numpy": 1.0, "jax_jit_cpu": 1.0}, {"numpy": 0.01, "jax_jit_cpu": 0.01})
    outcome = _run(tmp_path, executor, clock, precision=0.05, backends="numpy")
    root = outcome.result_dir.root
    suite = json.loads((root / "suite.json").read_text())
    del suite["precision"]  # hides that the cases were run to a target (and which statistics missed it)
    (root / "suite.json").write_text(json.dumps(suite))
    assert any("does not match the --precision its case files were run with" in p for p in validate_dir(root))


def test_an_edited_precision_state_is_refused(tmp_path):
    clock = Clock()
    executor = CostedExecutor(clock, {"numpy": 1.0, "jax_jit_cpu": 1.0}, {"numpy": 0.3, "jax_jit_cpu": 0.3})
    outcome = _run(tmp_path, executor, clock, precision=0.05, budget=40, backends="numpy")
    root = outcome.result_dir.root
    suite = json.loads((root / "suite.json").read_text())
    short = next(s for s in suite["precision"]["statistics"] if s["state"] != MET)
    short["state"] = MET  # a claim of precision the runs do not support
    (root / "suite.json").write_text(json.dumps(suite))
    assert any("`precision` is not what its case files give" in p for p in validate_dir(root))
    with pytest.raises(ArtifactError, match="precision"):
        load_finished(root)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"precision": 0}, "--precision is a relative CI half-width in"),
        ({"precision": 1.5}, "--precision is a relative CI half-width in"),
        ({"precision": float("nan")}, "--precision is a relative CI half-width in"),
        ({"precision": 0.05, "budget": "10 minutes"}, "--budget is a duration like 600, 600s, 10m or 1.5h"),
        ({"precision": 0.05, "budget": "0.5s"}, "--budget '0.5s' is not a duration of 1 s to 7 days"),
        ({"precision": 0.05, "budget": "-5m"}, "--budget '-5m' is not a duration of 1 s to 7 days"),
        ({"precision": 0.05, "budget": "8d"}, "--budget is a duration"),
        ({"precision": 0.05, "budget": "inf"}, "--budget 'inf' is not a duration"),
        ({"precision": 0.05, "budget": "nan"}, "--budget 'nan' is not a duration"),
        ({"budget": "10m"}, "--budget limits the runs --precision adds"),
        ({"precision": 0.05, "deterministic": True}, "--precision adds runs according to timings"),
    ],
)
def test_bad_precision_options_are_refused_before_anything_runs(kwargs, message):
    with pytest.raises(UsageError, match=message):
        build_spec(RunRequest(backends="numpy", workloads="matmul", sizes="64", **kwargs))


@pytest.mark.parametrize(("text", "seconds"), [("600", 600.0), ("600s", 600.0), ("10m", 600.0), ("1.5h", 5400.0)])
def test_budget_durations(text, seconds):
    request = RunRequest(backends="numpy", workloads="matmul", sizes="64", precision=0.05, budget=text)
    assert build_spec(request).budget_s == seconds
