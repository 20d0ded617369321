import math

import pytest
from conftest import PASSED_CHECK, fake_record, fake_result
from support.fakes import FakeExecutor

from ttfr.measure.executors import Executors
from ttfr.analyse import case_result, suite_figures
from ttfr.measure.catalog import BUILTIN
from ttfr.measure.journal import Journal
from ttfr.measure.plan import build_plan
from ttfr.model.policies import COLD_CACHE, WARM_CACHE, WARM_PROCESS, precompiled_policy
from ttfr.measure.scheduler import Scheduler
from ttfr.measure.spec import RunRequest, build_spec
from ttfr.model.base import decode, encode, present
from ttfr.report import markdown
from ttfr.model.case import CaseResult
from ttfr.model.summary import Summary


def measure(tmp_path, executor=None, **kwargs):
    kwargs.setdefault("backends", "numpy,jax_jit_cpu")
    kwargs.setdefault("workloads", "matmul")
    kwargs.setdefault("sizes", "64")
    kwargs.setdefault("cold_runs", 3)
    kwargs.setdefault("warm_procs", 2)
    plan = build_plan(build_spec(RunRequest(**kwargs)), lambda b, _w=None: "gpu_unavailable" if b.device == "gpu" else None)
    journal = Journal(tmp_path / "journal.jsonl")
    Scheduler(plan, journal, tmp_path / "scratch", Executors(worker=executor or FakeExecutor())).run()
    entries = journal.entries()
    results = {}
    for case in plan.spec.cases:  # each case result as its JSON: what the case file holds
        results[case.id] = encode(case_result.build_case_result(case, plan, [e for e in entries if e.case == case.id]))
    return plan, results


def test_component_timings_come_from_spawn_marks_and_reap(tmp_path):
    _, results = measure(tmp_path)
    run = results["numpy_matmul_64_f32"]["policies"][COLD_CACHE]["runs"][0]
    expected = {
        "interpreter_s": 0.010, "import_s": 0.100, "setup_s": 0.020, "first_call_s": 0.200,
        "second_call_s": 0.005, "ttfr_s": 0.330, "process_s": 0.400,
    }  # fmt: skip
    for name, value in expected.items():
        assert run["metrics"][name] == pytest.approx(value), name
    assert run["resources"]["peak_rss_bytes"] == 100 << 20  # the worker's own, not the tree's


def test_ok_case_has_summaries_verified_caches_and_correctness(tmp_path):
    _, results = measure(tmp_path)
    jax = results["jax_jit_cpu_matmul_64_f32"]
    assert jax["status"] == "ok" and jax["reason"] is None
    assert jax["policies"][COLD_CACHE]["summary"]["ttfr_s"]["n"] == 3
    assert jax["policies"][COLD_CACHE]["cache_verification"]["verdict"] == "verified"
    assert jax["policies"][WARM_CACHE]["cache_verification"]["verdict"] == "verified"
    assert jax["policies"][WARM_CACHE]["cache_verification"]["hits_total"] == 3
    assert jax["policies"][WARM_PROCESS]["summary"]["call_s"]["n"] == 2
    assert jax["correctness"]["passed"] and jax["dataset"]["sha256"] == "a" * 64
    assert results["numpy_matmul_64_f32"]["policies"][COLD_CACHE]["cache_verification"]["verdict"] == "not_applicable"


def test_warm_cache_miss_is_flagged_in_the_case(tmp_path):
    def never_hit(call):
        if call["job"].compile and call["entries_seen"]:
            record = fake_record(cache={"first": None, "end": {"events": {
                "/jax/compilation_cache/compile_requests_use_cache": 1}, "durations_s": {}}},
                check=PASSED_CHECK if call["job"].mode == "warm" else None)  # fmt: skip
            if call["job"].mode == "warm":
                from conftest import fake_warm

                record["warm"] = fake_warm()
            return fake_result(record)
        return None

    _, results = measure(tmp_path, FakeExecutor(never_hit))
    flags = {(f["policy"], f["flag"]) for f in results["jax_jit_cpu_matmul_64_f32"]["flags"]}
    assert (WARM_CACHE, "warm_cache_no_hits") in flags


def test_failed_result_check_fails_the_case_with_numbers_and_null_figures(tmp_path):
    bad_check = {"reference": "numpy float64", "max_normalised_error": 0.5, "tolerance": 2e-4, "passed": False}

    def wrong(call):
        if call["job"].mode == "warm" and call["case"].startswith("numpy"):
            from conftest import fake_warm

            return fake_result(fake_record(check=bad_check, warm=fake_warm()))
        return None

    _, results = measure(tmp_path, FakeExecutor(wrong))
    case = results["numpy_matmul_64_f32"]
    assert case["status"] == "failed"
    assert "0.5 > tolerance 0.0002" in case["reason"]
    for policy in case["policies"].values():
        assert all(value is None for value in policy["summary"].values())
    assert case["memory"]["peak_rss_bytes"] is None
    assert encode(decode(case, CaseResult).headline()) == {
        "ttfr_cold_cache_median_s": None, "ttfr_warm_cache_median_s": None, "warm_call_median_s": None,
    }  # fmt: skip


def test_a_run_whose_result_differs_is_invalid_and_excluded(tmp_path):
    count = {"n": 0}

    def odd_one(call):
        if call["case"].startswith("numpy") and call["job"].mode == "cold":
            count["n"] += 1
            if count["n"] == 3:
                return fake_result(fake_record(digest={"sum": 99.0, "sum_sq": 5000.0, "count": 4, "finite": True}))
        return None

    _, results = measure(tmp_path, FakeExecutor(odd_one))
    case = results["numpy_matmul_64_f32"]
    outcomes = [r["outcome"] for p in (COLD_CACHE, WARM_CACHE) for r in case["policies"][p]["runs"]]
    assert outcomes.count("invalid-measurement") == 1
    assert case["status"] == "warn" and "invalid-measurement" in case["reason"]
    assert any(f["flag"] == "invalid_measurement" for f in case["flags"])


def test_partial_failures_keep_figures_from_good_runs(tmp_path):
    count = {"n": 0}

    def one_timeout(call):
        if call["case"].startswith("numpy") and call["job"].mode == "cold":
            count["n"] += 1
            if count["n"] == 2:
                return fake_result(None, outcome="timeout", reason="timeout after 5 s (process group killed)")
        return None

    _, results = measure(tmp_path, FakeExecutor(one_timeout))
    case = results["numpy_matmul_64_f32"]
    assert case["status"] == "warn"
    timed_out = [r for p in (COLD_CACHE, WARM_CACHE) for r in case["policies"][p]["runs"] if r["outcome"] == "timeout"]
    assert len(timed_out) == 1 and timed_out[0]["metrics"]["ttfr_s"] is None
    summaries = [case["policies"][p]["summary"]["ttfr_s"]["n"] for p in (COLD_CACHE, WARM_CACHE)]
    assert sorted(summaries) == [2, 3]


def test_unavailable_case_is_warn_with_no_runs(tmp_path):
    _, results = measure(tmp_path, backends="jax_jit_gpu,numpy")
    case = results["jax_jit_gpu_matmul_64_f32"]
    assert case["status"] == "warn" and case["reason"] == "gpu_unavailable" and case["policies"] == {}


def _result(backend, ttfr, call, low_high=None, dataset="matmul-512-float32-seed0", status="ok", reason=None):
    from conftest import make_case

    def summary(value):
        low, high = low_high or (value, value)
        return encode(Summary(n=5, min=value, max=value, median=value, median_ci={"low": low * value, "high": high * value,
                                                                                 "level": 0.95}, p95=value, mean=value,
                              std=0.0, mad=0.0))  # fmt: skip

    data = encode(make_case(f"{backend}_matmul_512_f32", cold_runs=[], procs=[], status=status, reason=reason,
                            size=512, dataset={"id": dataset, "sha256": None}))  # fmt: skip
    data["policies"][COLD_CACHE]["summary"]["ttfr_s"] = summary(ttfr) if status != "failed" else None
    data["policies"][WARM_PROCESS]["summary"]["call_s"] = summary(call) if status != "failed" else None
    return decode(data, CaseResult)


def test_break_even_counts_calls_until_the_slow_starter_catches_up():
    rows = suite_figures.break_even([_result("numpy", 0.1, 0.010), _result("jax_jit_cpu", 1.1, 0.002)])
    (row,) = rows
    assert (row.fast_start, row.slow_start) == ("numpy", "jax_jit_cpu")
    # 0.1 + (n-1)*0.010 >= 1.1 + (n-1)*0.002  <=>  n - 1 >= 125
    assert row.calls == 126
    total = lambda start, call, n: start + (n - 1) * call  # noqa: E731
    assert total(1.1, 0.002, 126) <= total(0.1, 0.010, 126)
    assert total(1.1, 0.002, 125) > total(0.1, 0.010, 125)


def test_break_even_never_pairs_a_workspace_file_with_the_preset_of_its_size():
    rows = suite_figures.break_even([
        _result("numpy", 0.1, 0.010, dataset="histfactory-custom-8p-seed0"),
        _result("jax_jit_cpu", 1.1, 0.002, dataset="histfactory-complex8p-8p-seed0"),
    ])  # fmt: skip
    assert rows == []


def test_break_even_is_never_when_the_slow_starter_is_not_faster_per_call():
    (row,) = suite_figures.break_even([_result("numpy", 0.1, 0.001), _result("jax_jit_cpu", 1.1, 0.002)])
    assert row.calls is None


def test_break_even_range_widens_with_the_confidence_intervals():
    (row,) = suite_figures.break_even([_result("numpy", 0.1, 0.010, (0.9, 1.1)), _result("jax_jit_cpu", 1.1, 0.002, (0.9, 1.1))])
    low, high = row.calls_range
    assert low < row.calls < high


def _shipping(result, mechanism, ttfr, setting="cold-cache"):
    """`result` with a precompiled policy of `mechanism` whose TTFR median is `ttfr`."""
    data = encode(result)
    policy = {**data["policies"][COLD_CACHE], "setting": setting, "still_compiled": None, "versus": {},
              "artifact": {"mechanism": mechanism, "claims": "everything", "state": "made", "bytes": 10, "make_s": 1.0,
                           "bound_to": {}}}  # fmt: skip
    figure = {**data["policies"][WARM_PROCESS]["summary"]["call_s"], "median": ttfr, "min": ttfr, "max": ttfr,
              "mean": ttfr, "p95": ttfr, "median_ci": {"low": ttfr, "high": ttfr, "level": 0.95}}  # fmt: skip
    policy["summary"] = {**policy["summary"], "ttfr_s": figure}
    data["policies"]["precompiled"] = {f"{mechanism}/{setting}": policy}
    return decode(data, CaseResult)


def test_a_shipped_artifact_has_break_even_rows_against_the_others_as_they_start_in_its_setting():
    shipped = precompiled_policy("torch_aoti", "cold-cache")
    compiled = _shipping(_result("torch_compile_cpu", 10.0, 0.001), "torch_aoti", 3.0)
    rows = suite_figures.break_even([compiled, _result("torch_eager_cpu", 1.0, 0.003), _result("numpy", 0.5, 0.004)])
    standard = {(r.fast_start, r.slow_start): r for r in rows if r.cold_policy == COLD_CACHE}
    assert standard[("torch_eager_cpu", "torch_compile_cpu")].calls == 1 + 4500  # 9 s over 0.002 s a call
    assert not present(standard[("torch_eager_cpu", "torch_compile_cpu")].slow_start_policy)
    ahead = {(r.fast_start, r.slow_start): r for r in rows if r.cold_policy == shipped}
    # only pairs with the backend that ships it; eager against NumPy is the cold-cache row's, not repeated
    assert set(ahead) == {("torch_eager_cpu", "torch_compile_cpu"), ("numpy", "torch_compile_cpu")}
    row = ahead[("torch_eager_cpu", "torch_compile_cpu")]
    assert (row.fast_start_policy, row.slow_start_policy) == (COLD_CACHE, shipped)
    assert (row.slow_start_ttfr_s, row.calls) == (3.0, 1 + 1000)  # 2 s over 0.002 s a call: the artifact's saving
    # a backend that ran the policy and lost its figure is not put back with its standard start
    lost = encode(compiled)
    lost["policies"]["precompiled"]["torch_aoti/cold-cache"]["summary"]["ttfr_s"] = None
    lost = decode(lost, CaseResult)
    assert lost.start_figure(shipped) is None and lost.start_figure(COLD_CACHE)[0] == COLD_CACHE
    # an artifact its backend could not make: that backend starts as the setting's standard policy does
    unmade = encode(compiled)
    unmade["policies"]["precompiled"]["torch_aoti/cold-cache"]["artifact"].update(
        state="unsupported", bytes=None, make_s=None, reason="a training step"
    )
    unmade["policies"]["precompiled"]["torch_aoti/cold-cache"]["summary"]["ttfr_s"] = None
    assert decode(unmade, CaseResult).start_figure(shipped)[0] == COLD_CACHE
    # a suite.json written before shipped artifacts had rows verifies as it was written; one written since must
    # hold them all
    from types import SimpleNamespace

    from ttfr.artifacts import reader

    standard_only = [r for r in rows if not present(r.fast_start_policy)]
    assert reader._as_written_by(SimpleNamespace(break_even=standard_only), rows) == standard_only
    assert reader._as_written_by(SimpleNamespace(break_even=rows[-1:]), rows) == rows
    # report.md says which side starts from its artifact
    section = "\n".join(markdown._break_even_section(rows))
    assert "torch_aoti/cold-cache" in section and "`torch_compile_cpu` with its artifact (3 s, 1 ms/call)" in section
    assert markdown.SHIPPED_ROWS.strip() in section


def test_suite_summary_worst_case_ignores_failed_cases():
    slow_failed = _result("torch_compile_cpu", 30.0, 0.001, status="failed", reason="x")
    summary = suite_figures.suite_summary([_result("numpy", 0.1, 0.01), _result("jax_jit_cpu", 1.1, 0.002), slow_failed], [])
    assert summary.worst_case.case == "jax_jit_cpu_matmul_512_f32"
    assert encode(summary.failed) == [{"case": "torch_compile_cpu_matmul_512_f32", "reason": "x"}]
    assert (summary.n_ok, summary.n_failed) == (2, 1)


def test_case_id_and_sync_policy_in_results(tmp_path):
    _, results = measure(tmp_path)
    assert results["jax_jit_cpu_matmul_64_f32"]["sync_policy"].startswith("jax.block_until_ready")
    assert BUILTIN.parse_case_id(results["numpy_matmul_64_f32"]["case"]).size == 64
    assert math.isfinite(results["numpy_matmul_64_f32"]["policies"][WARM_PROCESS]["summary"]["call_s"]["median"])
