"""Loop workloads (sweep_mlp): the strategies' results and compile counts, the loop figures,
their artifacts and report, and the break-even against loop length."""

from __future__ import annotations

import json
import os
import sys

import msgspec
import numpy as np
import pytest
from conftest import PASSED_CHECK, fake_record, fake_result, fake_warm, have
from support.fakes import FakeExecutor, run_suite

from ttfr.model.base import UNSET, encode
from ttfr.analyse import case_result, loops
from ttfr.artifacts.reader import load_finished, validate_dir
from ttfr.artifacts.store import sha256_file
from ttfr.child import loop as loop_driver
from ttfr.child import worker
from ttfr.child.contracts import Loop
from ttfr.child.job import WARM, Job
from ttfr.child.workloads import loop_mlp, ragged_batches, sweep_mlp
from ttfr.child.workloads.loop_strategies import builders, numpy_loops, segment_loop
from ttfr.errors import UsageError
from ttfr.measure import catalog, datasets, spawn
from ttfr.measure.selection import select_cases
from ttfr.measure.spec import RunRequest
from ttfr.model.flags import CompileCountMismatch
from ttfr.model.run_figures import RunFigures
from ttfr.model.loops import CostPoint
from ttfr.model.record import LoopRecord
from ttfr.model.result_check import Check
from ttfr.report import terminal
from ttfr.measure.profiles import PROFILES

STRATEGIES = [s[0] for s in catalog.LOOP_STRATEGIES]


# ------------------------------------------------------------------ catalog and spec
def test_a_loop_family_name_selects_every_strategy_its_backends_can_run():
    cases = select_cases(catalog.BUILTIN, PROFILES["quick"], backends="numpy,jax_jit_cpu,torch_eager_cpu,torch_compile_cpu",
                         workloads="sweep_mlp", sizes="4", dtypes="f32")  # fmt: skip
    by_backend = {}
    for case in cases:
        by_backend.setdefault(case.backend, set()).add(catalog.WORKLOADS[case.workload].strategy)
    assert by_backend == {
        "numpy": {"naive"},
        "jax_jit_cpu": set(STRATEGIES),
        # eager torch never compiles: padding or dynamic shapes for a compiler mean nothing there
        "torch_eager_cpu": {"naive", "vmapped"},
        "torch_compile_cpu": set(STRATEGIES),
    }
    assert catalog.BUILTIN.parse_case_id("jax_jit_cpu_sweep_mlp_bucketed_16_f32").workload == "sweep_mlp_bucketed"


def test_a_compilers_strategy_on_an_eager_backend_is_refused_naming_the_backends_that_run_it():
    with pytest.raises(UsageError, match=r"does not run workload 'sweep_mlp_bucketed'.*jax_jit_cpu.*torch_compile_cpu"):
        catalog.BUILTIN.parse_case_id("torch_eager_cpu_sweep_mlp_bucketed_4_f32")
    with pytest.raises(UsageError, match="backends that do"):
        select_cases(catalog.BUILTIN, PROFILES["quick"], backends="numpy", workloads="sweep_mlp_aot")


def test_a_loop_that_carries_its_parameters_offers_no_batching():
    cases = select_cases(catalog.BUILTIN, PROFILES["quick"], backends="jax_jit_cpu", workloads="ragged_batches", sizes="8")
    assert {catalog.WORKLOADS[c.workload].strategy for c in cases} == {"naive", "bucketed", "dynamic", "aot"}
    with pytest.raises(ValueError, match="carries its parameters"):
        builders.build(type("R", (), {"framework": "jax"})(), "vmapped",
                       ragged_batches.segments(ragged_batches.make_inputs(3, "float32", 0)))  # fmt: skip


def test_a_loop_length_outside_the_grid_is_refused_with_the_valid_range():
    with pytest.raises(UsageError, match=r"valid sizes are 1\.\.192"):
        select_cases(catalog.BUILTIN, PROFILES["quick"], backends="jax_jit_cpu", workloads="sweep_mlp_naive", sizes="193")
    with pytest.raises(UsageError, match="sweep_mlp"):  # the family is listed among the choices
        select_cases(catalog.BUILTIN, PROFILES["quick"], backends="jax_jit_cpu", workloads="sweep_mlpp")


def test_the_catalog_offers_every_loop_length_its_workload_can_make():
    assert catalog.WORKLOADS["sweep_mlp_naive"].size_range == (1, sweep_mlp.GRID_SIZE)
    assert len(sweep_mlp.configs(sweep_mlp.GRID_SIZE, 0)) == sweep_mlp.GRID_SIZE  # the whole grid, each once
    assert len(set(sweep_mlp.configs(sweep_mlp.GRID_SIZE, 0))) == sweep_mlp.GRID_SIZE
    assert catalog.expand_workloads(["sweep_mlp_naive", "sweep_mlp", "matmul"])[:2] == ["sweep_mlp_naive", "sweep_mlp_bucketed"]


def test_the_mass_scan_moves_the_signal_and_splits_the_binning():
    from ttfr.child.workloads import hf_mass_scan
    from ttfr.child.workloads.histfactory import dense, problems, workspace

    spec = workspace.preset("complex8p")
    signal = workspace.find_signal(spec)
    model = dense.compile_workspace(spec, signal)
    problem = problems.Problem(workspace.canonical_bytes(spec), dict(zip(model.names, model.inits())), signal)
    nominal = problem.signal_nominal()
    hypotheses = hf_mass_scan.templates(nominal)
    assert len(hypotheses) == hf_mass_scan.HYPOTHESES and all((t > 0).all() for t in hypotheses)
    assert all(t.sum() == pytest.approx(nominal.sum()) for t in hypotheses)
    assert np.argmax(hypotheses[0]) < np.argmax(hypotheses[-1])  # the bump moves across the bins
    split = hf_mass_scan.binned_problem(problem, 3)
    assert split.signal_nominal().size == 3 * nominal.size and len(split.point) > len(problem.point)
    labels = [label for label, _m, _t in hf_mass_scan.iterations(problem)]
    assert len(labels) == hf_mass_scan.HYPOTHESES + len(hf_mass_scan.SPLITS)


def test_every_strategy_of_a_loop_shares_its_dataset():
    cases = select_cases(catalog.BUILTIN, PROFILES["quick"], backends="jax_jit_cpu", workloads="sweep_mlp", sizes="4")
    ids = {c.workload_info.strategy: datasets.dataset_id(c, 3) for c in cases}
    assert set(ids.values()) == {"sweep_mlp-4-float32-seed3"}


# ------------------------------------------------------------------ the math the strategies rely on
def test_a_longer_loop_starts_with_a_shorter_ones_iterations():
    assert sweep_mlp.configs(16, seed=0)[:5] == sweep_mlp.configs(5, seed=0)
    assert sweep_mlp.configs(5, seed=0) != sweep_mlp.configs(5, seed=1)
    assert ragged_batches.lengths(50, seed=0)[:7] == ragged_batches.lengths(7, seed=0)
    assert all(16 <= n <= 256 for n in ragged_batches.lengths(500, seed=2))
    # ragged: nearly every batch a new length; a sweep of 16: nearly every configuration a new shape
    assert len(set(ragged_batches.lengths(50, seed=0))) >= 40
    assert len({(w, b) for w, b, _ in sweep_mlp.configs(16, seed=0)}) >= 13


def test_the_ragged_loop_carries_its_parameters_from_batch_to_batch():
    inputs = ragged_batches.make_inputs(4, "float64", 0)
    segments = ragged_batches.segments(inputs)
    assert segments[0].params is not None and all(s.params is None for s in segments[1:])
    (losses,) = ragged_batches.reference(inputs)
    # the same batches each from the initial parameters give other losses from the second on
    fresh = [loop_mlp.numpy_train(segments[0].params, s.x, s.y, s.lr, 1)[0] for s in segments]
    assert losses[0] == pytest.approx(fresh[0][0]) and losses[1] != pytest.approx(fresh[1][0])


def test_padding_and_masking_give_the_unpadded_training_exactly():
    rng = np.random.default_rng(1)
    params = loop_mlp.init_params(rng, 48, "float64")
    x, y = loop_mlp.make_batch(rng, 40, "float64")
    losses, trained = loop_mlp.numpy_train(params, x, y, 0.1)
    xp, yp, mask = loop_mlp.pad_batch(x, y, loop_mlp.bucket(40))
    padded = loop_mlp.pad_params(params, loop_mlp.bucket(48))
    got = []
    for _ in range(loop_mlp.STEPS):
        padded, loss = loop_mlp.numpy_step(padded, xp, yp, mask, 0.1)
        got.append(loss)
    assert (loop_mlp.bucket(40), loop_mlp.bucket(48), loop_mlp.bucket(64)) == (64, 64, 64)
    np.testing.assert_allclose(got, losses, rtol=1e-12)
    # the padded hidden units never moved off zero
    assert not padded[0][:, 48:].any() and not padded[2][48:, :].any() and not padded[2][:, 48:].any()
    np.testing.assert_allclose(padded[2][:48, :48], trained[2], rtol=1e-12)


# ------------------------------------------------------------------ analysis of loop records
def _block(seconds, compiles, expected, ahead=None, hits=0, transfer=0.004):
    """A record's loop block; each iteration copies for `transfer` seconds (None: no device)."""
    iterations = [{"label": f"config {i}", "s": s, "compiles": c, "persistent_hits": hits if c else 0, "traces": c,
                   "compile_s": 0.1 * c, "transfer_s": transfer} for i, (s, c) in enumerate(zip(seconds, compiles))]  # fmt: skip
    if ahead is not None:
        iterations.insert(0, {"label": "ahead", "s": ahead[0], "compiles": ahead[1], "persistent_hits": 0, "traces": 0,
                              "compile_s": 0.1 * ahead[1], "ahead": True,
                              "transfer_s": None if transfer is None else 0.0})  # fmt: skip
    total = sum(e["compiles"] for e in iterations)
    return {"iterations": iterations, "loop_s": sum(e["s"] for e in iterations), "expected_compiles": expected,
            "loaded": 0, "compiles": total, "persistent_hits": hits * sum(1 for c in compiles if c), "traces": total,
            "compile_s": 0.1 * total,
            "transfer_s": None if transfer is None else sum(e["transfer_s"] for e in iterations)}  # fmt: skip


def run_loop(block: dict):
    return loops.run_loop(msgspec.convert(block, LoopRecord))


def test_a_run_whose_compile_count_is_not_its_strategys_expectation_is_flagged(fixture_case):
    good = run_loop(_block([0.3, 0.01, 0.3], [1, 0, 1], expected=2))
    assert good.counts_match is True and good.iteration_hit_rate == pytest.approx(1 / 3)
    bad = run_loop(_block([0.3, 0.3, 0.3], [1, 1, 1], expected=2))
    assert bad.counts_match is False

    def view(index, loop):
        return msgspec.convert(fixture_case.run(index, loop=msgspec.to_builtins(loop)), RunFigures)

    views = [view(0, good), view(1, bad)]
    assert loops.count_flags(views) == [CompileCountMismatch(runs=[1], expected=2, observed=[3])]
    assert loops.count_flags(views[:1]) == []
    # no compiler (NumPy): nothing to check, never flagged
    none = run_loop({**_block([0.1], [0], expected=None), "compiles": None})
    assert none.counts_match is None and loops.count_flags([view(0, none)]) == []


def test_cost_curve_starts_after_the_process_start_and_the_ahead_of_time_phase(fixture_case):
    loop = run_loop(_block([0.2, 0.1], [0, 0], expected=2, ahead=(0.7, 2)))
    run = msgspec.convert(fixture_case.run(0, ttfr_s=2.0, loop=msgspec.to_builtins(loop)), RunFigures)
    policy = msgspec.structs.replace(fixture_case(cold_runs=[]).policies.cold_cache, loop_summary=loops.policy_summary([run]))
    curve = loops.cost_curve(policy)
    assert [p.k for p in curve] == [1, 2]
    assert curve[0].s == pytest.approx(1.0 + 0.7 + 0.2) and curve[1].s == pytest.approx(2.0)


def test_break_even_is_where_a_strategy_stays_no_dearer_than_naive():
    def curve(*points):
        return [CostPoint(k=k, s=s) for k, s in points]

    naive = {4: curve((1, 1.0), (2, 2.0), (3, 3.0), (4, 4.0))}
    ahead = {4: curve((1, 2.5), (2, 2.6), (3, 2.7), (4, 2.8))}
    assert loops.break_even_k(ahead, naive) == 3
    dearer = {4: curve(*((k, k + 0.5) for k in range(1, 5)))}
    assert loops.break_even_k(dearer, naive) is None
    # cheaper at 2, dearer at 3, cheaper at 4: it only "overtakes" from 4 on
    zigzag = {4: curve((1, 1.5), (2, 1.9), (3, 3.1), (4, 3.9))}
    assert loops.break_even_k(zigzag, naive) == 4
    # a batched strategy has one point per measured loop length
    batched = {2: curve((1, 2.2)), 4: curve((1, 2.5))}
    assert loops.break_even_k(batched, naive) == 4


def test_records_without_copy_figures_keep_their_summaries_without_them(fixture_case):
    """A record from before the copies were timed: its figures and summaries leave them out (its
    case file, checked against its runs, stays valid); a loop that moves no data says null."""
    old = _block([0.2, 0.1], [1, 0], expected=1)
    for entry in old["iterations"]:
        del entry["transfer_s"]
    del old["transfer_s"]
    loop = run_loop(old)
    assert loop.transfer_s is UNSET and loop.transfer_share is UNSET and loop.iterations[0].transfer_s is UNSET
    run = msgspec.convert(fixture_case.run(0, loop=msgspec.to_builtins(loop)), RunFigures)
    summary = loops.policy_summary([run])
    assert summary.transfer_s is UNSET and summary.timeline[0].transfer_s is UNSET
    host = run_loop(_block([0.2], [0], expected=None, transfer=None))
    assert host.transfer_s is None and host.transfer_share is None
    run = msgspec.convert(fixture_case.run(0, loop=msgspec.to_builtins(host)), RunFigures)
    assert loops.policy_summary([run]).transfer_s is None


# ------------------------------------------------------------------ the driver: finished results, timed copies
class _Clock:
    """perf_counter_ns under the test's control: work advances it."""

    def __init__(self):
        self.ns = 0

    def __call__(self):
        return self.ns

    def advance(self, seconds):
        self.ns += round(seconds * 1e9)


class _Lazy:
    """A device result still being computed: finished only once the runtime's barrier waited for it."""

    def __init__(self):
        self.done = False


class _AsyncRuntime:
    framework = "fake"

    def __init__(self, clock, wait_s=0.5):
        self.clock, self.wait_s, self.synced = clock, wait_s, []

    def sync(self, result):  # the barrier: waits for the work still queued
        self.synced.append(result)
        self.clock.advance(self.wait_s)
        for leaf in result if isinstance(result, list) else [result]:
            if isinstance(leaf, _Lazy):
                leaf.done = True


class _FakeLoop:
    """Iteration i computes for `compute_s[i]` and copies for `transfer_s[i]` (None: no take_transfer_s)."""

    functions, expected_compiles, loaded = None, None, 0

    def __init__(self, clock, results, compute_s, transfer_s=None):
        self.clock, self.results, self.compute_s, self.transfer = clock, results, compute_s, transfer_s
        self.labels = [f"step {i}" for i in range(len(results))]
        self.pending = 0.0
        if transfer_s is None:
            self.take_transfer_s = None

    def iteration(self, index):
        copies = self.transfer[index] if self.transfer else 0.0
        self.clock.advance(self.compute_s[index] + copies)
        self.pending += copies
        return self.results[index]()

    def take_transfer_s(self):
        seconds, self.pending = self.pending, 0.0
        return seconds

    def output(self, results):
        unfinished = [r for r in results if isinstance(r, _Lazy) and not r.done]
        assert not unfinished, "the driver handed on a result still being computed"
        return [np.zeros(1)]


def test_the_driver_waits_for_an_unfinished_result_inside_the_iterations_time(monkeypatch):
    clock = _Clock()
    monkeypatch.setattr(loop_driver, "_clock", clock)
    runtime = _AsyncRuntime(clock)
    fake = _FakeLoop(clock, [lambda: np.arange(3), _Lazy, lambda: [np.ones(2), _Lazy()], lambda: 1.5], [0.1, 0.1, 0.1, 0.1])
    driver = loop_driver.LoopDriver(runtime, fake)
    _output, block = driver.first()
    # host data is finished as it is; the lazy results (alone or in a list) waited on, the wait timed
    assert len(runtime.synced) == 2 and isinstance(runtime.synced[0], _Lazy) and isinstance(runtime.synced[1], list)
    assert [e["s"] for e in block["iterations"]] == pytest.approx([0.1, 0.6, 0.6, 0.1])
    assert [e["transfer_s"] for e in block["iterations"]] == [None] * 4 and block["transfer_s"] is None
    driver.call()  # the second call and the warm samples finish every iteration too
    assert len(runtime.synced) == 4
    assert loop_driver.on_host([np.float32(1), {"a": np.zeros(2)}, (1, None)]) and not loop_driver.on_host(_Lazy())


def test_copy_seconds_are_recorded_per_iteration_and_summed_the_rest_is_compute(monkeypatch):
    clock = _Clock()
    monkeypatch.setattr(loop_driver, "_clock", clock)
    compute, copies = [0.3, 0.02, 0.05], [0.01, 0.004, 0.006]
    fake = _FakeLoop(clock, [lambda: np.zeros(1)] * 3, compute, copies)
    fake.pending = 0.5  # copied while the loop was built: not the first iteration's
    _output, block = loop_driver.LoopDriver(_AsyncRuntime(clock), fake).first()
    entries = block["iterations"]
    assert [e["transfer_s"] for e in entries] == pytest.approx(copies)
    assert [e["s"] - e["transfer_s"] for e in entries] == pytest.approx(compute)  # compute + copies = s
    assert block["transfer_s"] == pytest.approx(sum(copies)) and block["loop_s"] == pytest.approx(sum(compute + copies))
    figures = run_loop(block)
    assert figures.transfer_s == pytest.approx(0.02) and figures.transfer_share == pytest.approx(0.02 / 0.39)
    assert [e.transfer_s for e in figures.iterations] == pytest.approx(copies)


def test_a_strategys_copies_are_timed_apart_from_its_compute(monkeypatch):
    """to_device waits for the put arrays inside the copy's time; to_host waits for the compute
    (the runtime's barrier) before its copy's time starts."""
    clock = _Clock()
    monkeypatch.setattr(segment_loop.time, "perf_counter_ns", clock)
    runtime = _AsyncRuntime(clock, wait_s=0.25)

    def put(array):
        clock.advance(0.01)
        return _Lazy()

    def fetch(result):
        assert result.done  # the compute finished before the copy began
        clock.advance(0.002)
        return np.zeros(1)

    strategy = segment_loop.SegmentLoop([], None)
    strategy.barrier = runtime.sync
    moved = strategy.to_device(put, [np.zeros(1), np.zeros(1)])
    assert all(m.done for m in moved) and strategy.take_transfer_s() == pytest.approx(0.02 + 0.25)
    strategy.to_host(fetch, _Lazy())
    assert strategy.take_transfer_s() == pytest.approx(0.002) and strategy.take_transfer_s() == 0.0
    assert numpy_loops._NumpyNaive([]).take_transfer_s() is None  # NumPy never leaves the host


# ------------------------------------------------------------------ fake runs through the whole pipeline
class LoopExecutor(FakeExecutor):
    """Answers loop jobs with a timeline: naive compiles at each new shape, the others per
    `plan` (strategy -> (seconds, compiles, expected))."""

    plan = {
        "naive": ([0.30, 0.30, 0.30, 0.30], [1, 1, 1, 1], 4),
        "vmapped": ([0.50], [1], 1),
        "bucketed": ([0.30, 0.01, 0.30, 0.01], [1, 0, 1, 0], 2),
        "dynamic": ([0.40, 0.01, 0.01, 0.01], [1, 0, 0, 0], 1),
        "aot": ([0.01, 0.01, 0.01, 0.01], [0, 0, 0, 0], 4),
    }

    def __init__(self, wrong=()):
        super().__init__(decide=self._loop)
        self.wrong = set(wrong)

    def _loop(self, call):
        job = call["job"]
        if not job.strategy:
            return None
        seconds, compiles, expected = self.plan[job.strategy]
        if job.adapter == "numpy_backend":
            compiles, expected = [None] * len(compiles), None
        ahead = (0.8, 4) if job.strategy == "aot" else None
        transfer = None if job.adapter == "numpy_backend" else 0.004  # NumPy's loop never leaves the host
        block = _block(seconds, [c or 0 for c in compiles], expected, ahead, transfer=transfer)
        if expected is None:
            block.update(compiles=None, traces=None, persistent_hits=None, compile_s=None)
            for entry in block["iterations"]:
                entry.update(compiles=None, persistent_hits=None, traces=None, compile_s=None)
        if job.strategy in self.wrong:
            block["compiles"] += 1
        warm = job.mode == WARM
        loop_ns = int(block["loop_s"] * 1e9)
        record = fake_record(check=PASSED_CHECK if warm else None, warm=fake_warm() if warm and job.samples else None)
        record["marks_ns"]["first"] = record["marks_ns"]["setup"] + loop_ns
        record["marks_ns"]["second_start"] = record["marks_ns"]["first"] + 1000
        record["marks_ns"]["second"] = record["marks_ns"]["first"] + 2000
        record["loop"] = block
        return fake_result(record, process_ns=loop_ns + 400_000_000)


def _run(tmp_path, executor, **kwargs):
    kwargs.setdefault("backends", "numpy,jax_jit_cpu")
    return run_suite(tmp_path / "out", RunRequest(workloads="sweep_mlp", sizes="4", cold_runs=2, warm_procs=2, **kwargs),
                     executor)  # fmt: skip


def test_loop_figures_reach_the_artifacts_and_the_report(tmp_path):
    outcome = _run(tmp_path, LoopExecutor())
    root = outcome.result_dir.root
    assert validate_dir(root) == []
    suite = json.loads((root / "suite.json").read_text())
    rows = {(r["backend"], r["strategy"], r["policy"]): r for r in suite["loops"]}
    cold = "cold-process/cold-cache"
    assert rows[("jax_jit_cpu", "naive", cold)]["compiles"] == 4
    assert rows[("jax_jit_cpu", "vmapped", cold)]["vs_naive"] < 1
    # before the loop 0.13 s; then naive 0.3 s an iteration, AOT 0.8 s ahead + 0.01 s an iteration
    assert rows[("jax_jit_cpu", "aot", cold)]["overtakes_naive_at_k"] == 3
    assert rows[("jax_jit_cpu", "dynamic", cold)]["overtakes_naive_at_k"] == 2
    assert rows[("numpy", "naive", cold)]["compiles"] is None
    case = json.loads((root / "cases" / "jax_jit_cpu_sweep_mlp_bucketed_4_f32.json").read_text())
    summary = case["policies"][cold]["loop_summary"]
    assert [e["compiles"] for e in summary["timeline"]] == [1, 0, 1, 0] and summary["iteration_hit_rate"] == 0.5
    report = (root / "report.md").read_text()
    assert "## Loops: compilation in the loop" in report
    assert "| 1 | config 0 | 300 ms ⟳1 |" in report  # the timeline marks the iterations that compiled
    assert "**mismatch**" not in report
    # 4 iterations copying 4 ms each of naive's 1.2 s loop; NumPy's loop copies nothing
    naive = rows[("jax_jit_cpu", "naive", cold)]
    assert naive["transfer_s"]["median"] == pytest.approx(0.016) and naive["transfer_share"] == pytest.approx(0.016 / 1.2)
    assert rows[("numpy", "naive", cold)]["transfer_s"] is None
    assert "| host↔device copies (share of loop) |" in report and "| 400 ms (33%) | 16 ms (1%) |" in report
    assert summary["timeline"][0]["transfer_s"]["median"] == pytest.approx(0.004)


def test_a_compile_count_off_its_expectation_flags_the_case(tmp_path):
    outcome = _run(tmp_path, LoopExecutor(wrong={"bucketed"}), backends="jax_jit_cpu")
    root = outcome.result_dir.root
    case = json.loads((root / "cases" / "jax_jit_cpu_sweep_mlp_bucketed_4_f32.json").read_text())
    flags = [f for f in case["flags"] if f["flag"] == "compile_count_mismatch"]
    assert flags and flags[0]["expected"] == 2 and flags[0]["observed"] == [3]
    assert "3 (expected 2) **mismatch**" in (root / "report.md").read_text()
    assert validate_dir(root) == []
    rows = load_finished(root).suite.loops
    lines = terminal.loop_lines(rows)
    assert any(text.startswith("loop sweep_mlp 4 on jax_jit_cpu float32, cold-process/cold-cache: best ") for text, _ in lines)
    no_totals = [msgspec.structs.replace(row, vs_naive=None) for row in rows]  # every run failed or was set aside
    assert (
        "loop sweep_mlp 4 on jax_jit_cpu float32, cold-process/cold-cache: no totals to compare (see Loops in report.md)",
        "yellow",
    ) in terminal.loop_lines(no_totals)  # said, not skipped
    assert ("compile count off: jax_jit_cpu_sweep_mlp_bucketed_4_f32 cold-process/cold-cache: 3 compiles, "
            "bucketed expects 2", "yellow") in lines  # fmt: skip


def test_an_edited_loop_figure_is_refused_even_with_its_hash_updated(tmp_path):
    outcome = _run(tmp_path, LoopExecutor(), backends="jax_jit_cpu")
    root = outcome.result_dir.root
    path = root / "cases" / "jax_jit_cpu_sweep_mlp_naive_4_f32.json"
    case = json.loads(path.read_text())
    case["policies"]["cold-process/cold-cache"]["loop_summary"]["compiles"] = 1  # "it compiled once"
    path.write_text(json.dumps(case))
    suite = json.loads((root / "suite.json").read_text())
    for ref in suite["cases"]:
        ref["sha256"] = sha256_file(root / ref["path"])
    (root / "suite.json").write_text(json.dumps(suite))
    problems = validate_dir(root)
    assert any("summary is not what its runs give" in p for p in problems), problems
    suite["loops"][0]["overtakes_naive_at_k"] = 1
    (root / "suite.json").write_text(json.dumps(suite))
    assert any("`loops` is not what its case files give" in p for p in validate_dir(root))


# ------------------------------------------------------------------ real workers (JAX on CPU)
def _job(strategy, adapter="jax_backend", size=3, compile_=True, **extra):
    return Job(mode="warm", adapter=adapter, compile=compile_, workload="sweep_mlp", strategy=strategy, size=size,
               dtype="float32", seed=0, check=True, **extra)  # fmt: skip


def _env(tmp_path):
    return dict(os.environ, JAX_PLATFORMS="cpu", TTFR_AOT_DIR=str(tmp_path / "aot"),
                TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "inductor"))  # fmt: skip


@pytest.mark.integration
@pytest.mark.contention_safe
@pytest.mark.skipif(not have("jax"), reason="jax not installed")
def test_every_jax_strategy_meets_its_compile_count_and_agrees_with_naive(tmp_path):
    shapes = {(w, b) for w, b, _lr in sweep_mlp.configs(3, 0)}
    buckets = {(loop_mlp.bucket(w), loop_mlp.bucket(b)) for w, b in shapes}
    expected = {"naive": len(shapes), "bucketed": len(buckets), "vmapped": 1, "dynamic": len(shapes), "aot": len(shapes)}
    digests = {}
    for strategy in STRATEGIES:
        result = spawn.run_worker(_job(strategy), _env(tmp_path), 300.0, python=sys.executable)
        assert result.outcome == "ok", result.output_tail
        record = encode(result.record)
        assert record["check"]["passed"], (strategy, record["check"])
        loop = record["loop"]
        assert loop["compiles"] == loop["expected_compiles"] == expected[strategy], (strategy, loop)
        digests[strategy] = record["digest"]
        if strategy == "naive":  # each new shape compiled in the iteration that first saw it
            assert [e["compiles"] for e in loop["iterations"]] == [1] * len(shapes)
        if strategy == "dynamic":  # traced once (the export); compiled once per shape
            assert loop["traces"] == 1 + len(shapes)
        if strategy == "aot":  # everything compiled ahead, nothing in the loop
            assert loop["iterations"][0]["ahead"] and loop["iterations"][0]["compiles"] == len(shapes)
            assert all(e["compiles"] == 0 for e in loop["iterations"][1:])
    for strategy, digest in digests.items():  # the same losses (float32, summed) as naive's
        assert digest["sum"] == pytest.approx(digests["naive"]["sum"], rel=1e-4), strategy
    # a later process loads the serialised executables and compiles nothing
    again = encode(spawn.run_worker(_job("aot"), _env(tmp_path), 300.0, python=sys.executable).record)
    assert again["loop"]["loaded"] == len(shapes) and again["loop"]["compiles"] == again["loop"]["expected_compiles"] == 0
    assert again["cache"]["end"]["aot_loaded"] == len(shapes) and again["check"]["passed"]


@pytest.mark.integration
@pytest.mark.contention_safe
@pytest.mark.skipif(not have("jax"), reason="jax not installed")
def test_a_damaged_or_foreign_aot_file_costs_a_compile_not_the_run(tmp_path):
    """The AOT directory is one of the case's cache directories: a truncated executable, or
    one that is not a pickle at all, is compiled afresh (and counted as a compile)."""
    first = spawn.run_worker(_job("aot", size=2), _env(tmp_path), 300.0, python=sys.executable)
    assert first.outcome == "ok" and encode(first.record)["loop"]["loaded"] == 0, first.output_tail
    files = sorted((tmp_path / "aot").iterdir())
    assert files and all("jaxlib" in f.name and "-cpu-" in f.name for f in files)
    files[0].write_bytes(files[0].read_bytes()[:100])  # truncated
    for extra in files[1:]:
        extra.write_bytes(b"not a pickle")
    again = spawn.run_worker(_job("aot", size=2), _env(tmp_path), 300.0, python=sys.executable)
    assert again.outcome == "ok", again.output_tail
    loop = encode(again.record)["loop"]
    assert loop["loaded"] == 0 and loop["compiles"] == loop["expected_compiles"] == len(files)
    assert encode(again.record)["check"]["passed"]


@pytest.mark.integration
@pytest.mark.contention_safe
@pytest.mark.skipif(not have("jax"), reason="jax not installed")
def test_ragged_batches_compile_once_per_length_naive_and_once_per_bucket_bucketed(tmp_path):
    lengths = ragged_batches.lengths(6, 0)
    expected = {"naive": len(set(lengths)), "bucketed": len({loop_mlp.bucket(n) for n in lengths})}
    assert expected["bucketed"] < expected["naive"]
    for strategy, count in expected.items():
        job = _job(strategy, size=6).replace(workload="ragged_batches")
        result = spawn.run_worker(job, _env(tmp_path), 300.0, python=sys.executable)
        assert result.outcome == "ok", result.output_tail
        loop = encode(result.record)["loop"]
        assert loop["compiles"] == loop["expected_compiles"] == count and encode(result.record)["check"]["passed"]


@pytest.mark.skipif(not have("jax"), reason="jax not installed")
def test_a_strategy_that_masks_wrongly_fails_its_check(monkeypatch):
    """The padded rows counted in the loss (a mask of ones): the bucketed losses drift from
    the naive reference, and the check that gates the case fails."""

    def unmasked(x, y, rows):
        xp, yp, mask = original(x, y, rows)
        return xp, yp, np.ones_like(mask)

    original = loop_mlp.pad_batch
    monkeypatch.setattr(loop_mlp, "pad_batch", unmasked)
    job = _job("bucketed", size=2)
    record, marks = {}, {}
    worker._run_phases(job, marks, record)
    assert record["check"]["passed"] is False and record["check"]["max_normalised_error"] > 1e-2
    status, reason = case_result._status([], {}, msgspec.convert(record["check"], Check), None)
    assert status == "failed" and reason.startswith("result_mismatch")


@pytest.mark.skipif(not have("jax"), reason="jax not installed")
def test_every_loop_the_catalog_claims_builds_for_its_runtime():
    """Each (framework, strategy) the catalog lists builds a Loop (no compiling needed)."""
    from ttfr.child.backends import jax_backend, numpy_backend

    runtimes = {"jax": jax_backend.Runtime(_job("naive")), "numpy": numpy_backend.Runtime(_job("naive", "numpy_backend"))}
    for runtime in runtimes.values():
        runtime.import_stack()
    if have("torch"):
        from ttfr.child.backends import torch_backend

        runtimes["torch"] = torch_backend.Runtime(_job("naive", "torch_backend", compile_=False))
        runtimes["torch"].import_stack()
    modules = {"sweep_mlp": sweep_mlp, "ragged_batches": ragged_batches}  # hf_train20: test_histfactory_integration
    array_loops = {w.loop for w in catalog.WORKLOADS.values() if w.loop and not w.reads_workspace}
    assert set(modules) == array_loops
    for workload in catalog.WORKLOADS.values():
        if workload.loop not in modules:
            continue
        module = modules[workload.loop]
        inputs = module.make_inputs(2, "float32", 0)
        for framework in workload.frameworks:
            if framework in runtimes:
                loop = module.build_loop(runtimes[framework], _job(workload.strategy), inputs)
                assert isinstance(loop, Loop), (framework, workload.name)
                assert len(loop.labels) == (1 if workload.strategy == "vmapped" else 2)


@pytest.mark.skipif(not have("jax"), reason="jax not installed")
def test_a_real_jax_loop_times_its_copies_within_each_iteration():
    """jax_jit_cpu, two configurations: each iteration copies its inputs in and its losses out,
    a real and small part of its time; the loop's total is the iterations' sum."""
    from ttfr.child.backends import jax_backend

    job = _job("bucketed", size=2)
    runtime = jax_backend.Runtime(job)
    runtime.import_stack()
    strategy = sweep_mlp.build_loop(runtime, job, sweep_mlp.make_inputs(2, "float32", 0))
    _output, block = loop_driver.LoopDriver(runtime, strategy).first()
    for entry in block["iterations"]:
        assert 0 < entry["transfer_s"] <= entry["s"], entry
    assert block["transfer_s"] == pytest.approx(sum(e["transfer_s"] for e in block["iterations"]))
    assert 0 < block["transfer_s"] < block["loop_s"]


# Two tests, so that the spread tier can run the ahead-of-time pair beside the others (each ~30 s of g++).
TORCH_STRATEGIES = {"in-process": (("naive", 2), ("dynamic", 1), ("vmapped", 1)), "ahead-of-time": (("aot", 2), ("aot", 0))}


@pytest.mark.torch_compile
@pytest.mark.contention_safe
@pytest.mark.skipif(not have("torch"), reason="torch not installed")
@pytest.mark.parametrize("group", TORCH_STRATEGIES)
def test_torch_static_dynamic_batched_and_aot_shapes_compile_exactly_as_expected(tmp_path, group):
    """Two shapes: torch.compile(dynamic=False) compiles a graph for each, dynamic=True one —
    also when the first batch is as long as the width (seed 4: 128 x 128, then 32 x 64), which
    with torch's default duck sizing would give a width == batch graph and a recompile — the
    vmapped sweep one, and AOT an AOTInductor package per shape, then none in a later process."""
    assert sweep_mlp.configs(2, 4)[0][:2] == (128, 128) and len({c[:2] for c in sweep_mlp.configs(2, 4)}) == 2
    for strategy, graphs in TORCH_STRATEGIES[group]:
        job = _job(strategy, "torch_backend", size=2).replace(seed=4)
        result = spawn.run_worker(job, _env(tmp_path), 600.0, python=sys.executable)
        assert result.outcome == "ok", result.output_tail
        loop = encode(result.record)["loop"]
        assert loop["compiles"] == loop["expected_compiles"] == graphs, (strategy, loop)
        assert encode(result.record)["check"]["passed"]
    if group == "ahead-of-time":  # the second AOT process loaded both AOTInductor packages the first one built
        assert loop["loaded"] == 2 and encode(result.record)["cache"]["end"]["aot_loaded"] == 2


def test_aot_inductor_on_cuda_without_a_toolkit_is_a_missing_dependency_not_a_crash(monkeypatch):
    """(issue 27, item 5) checked before the strategy compiles anything."""
    torch = pytest.importorskip("torch")
    from torch.utils import cpp_extension

    from ttfr.child.workloads.loop_strategies.torch_loops import aot_cuda_toolkit_missing

    monkeypatch.setattr(cpp_extension, "CUDA_HOME", None)
    assert aot_cuda_toolkit_missing(torch, torch.device("cpu")) is None
    assert aot_cuda_toolkit_missing(torch, torch.device("cuda", 0)).startswith("missing_dependency: a CUDA toolkit")
    monkeypatch.setattr(cpp_extension, "CUDA_HOME", "/usr/local/cuda")
    assert aot_cuda_toolkit_missing(torch, torch.device("cuda", 0)) is None
