"""End to end: `ttfr run` on the HistFactory workloads with real engines on complex8p."""

import csv
import json
import subprocess
import sys

import pytest
from conftest import have, ok_unless_busy

from ttfr.artifacts.reader import validate_dir

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not all(have(m) for m in ("pyhf", "jax", "nextstat", "torch")), reason="needs pyhf, jax, nextstat, torch"),
]


def _run(out, *selection):
    done = subprocess.run(
        [sys.executable, "-m", "ttfr", "run", "--out", str(out), *selection, "--workspace-preset", "complex8p",
         "--cold-runs", "1", "--warm-procs", "1", "--warm-samples", "3", "--seed", "5", "--no-html"],
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (root,) = [p for p in out.iterdir() if p.is_dir()]
    return root


# What these tests read, each case once: every engine on the workloads its assertions name. Torch eager's
# other workloads and pyhf's unsupported ones (a warning each, no process) are left to the in-process engine
# tests (test_histfactory.py); the AOT mass scan runs on its own (hf_aot_scan), cold and from a warm cache.
HF_CASES = [
    *(f"jax_jit_cpu_{w}_8_f64" for w in ("hf_nll_grad", "hf_profiled_q0", "hf_train_loop", "hf_fd_check", "hf_train20",
                                        "hf_mass_scan_naive", "hf_mass_scan_vmapped")),
    *(f"nextstat_{w}_8_f64" for w in ("hf_nll_grad", "hf_profiled_q0", "hf_train_loop", "hf_fd_check", "hf_train20",
                                     "hf_mass_scan_naive")),
    *(f"pyhf_numpy_{w}_8_f64" for w in ("hf_nll_grad", "hf_profiled_q0", "hf_mass_scan_naive")),
    *(f"torch_eager_cpu_{w}_8_f64" for w in ("hf_nll_grad", "hf_train20", "hf_mass_scan_naive")),
]  # fmt: skip


@pytest.fixture(scope="module")
def hf_suite(tmp_path_factory):
    """The engines on the HistFactory workloads, cold cache and warm process (the warm process is also the
    case's checking process). The warm-cache policy's runs add nothing these tests read but the AOT scan's
    loading (hf_aot_scan, on its own)."""
    return _run(tmp_path_factory.mktemp("hf"), "--cases", ",".join(HF_CASES),
                "--cache-policy", "cold-process/cold-cache,warm-process")  # fmt: skip


@pytest.fixture(scope="module")
def hf_aot_scan(tmp_path_factory):
    """The AOT mass scan, cold and from a warm cache: its executables compiled, then loaded and none compiled."""
    return _run(tmp_path_factory.mktemp("hf-aot"), "--cases", "jax_jit_cpu_hf_mass_scan_aot_8_f64",
                "--cache-policy", "cold-process/cold-cache,cold-process/warm-cache")  # fmt: skip


def cases(root):
    suite = json.loads((root / "suite.json").read_text())
    return suite, {ref["case"]: json.loads((root / ref["path"]).read_text()) for ref in suite["cases"]}


def test_every_engine_is_measured_or_warns_and_artifacts_are_valid(hf_suite):
    assert validate_dir(hf_suite) == []
    suite, by_case = cases(hf_suite)
    assert suite["state"] == "complete" and suite["summary"]["n_failed"] == 0
    assert by_case["pyhf_numpy_hf_profiled_q0_8_f64"]["status"] == "warn"
    assert by_case["pyhf_numpy_hf_profiled_q0_8_f64"]["reason"].startswith("unsupported: pyhf's NumPy backend has no autodiff")
    for case_id, case in by_case.items():
        if case["status"] == "ok":
            assert len(case["dataset"]["sha256"]) == 64, case_id
    [dataset] = [d for d in suite["datasets"] if d["path"].endswith("complex8p.json")]
    assert (hf_suite / dataset["path"]).is_file() and dataset["size"] == 8


def test_parity_and_finite_differences_are_recorded_and_pass(hf_suite):
    _, by_case = cases(hf_suite)
    for case_id, case in by_case.items():
        if case["status"] != "ok":
            continue
        check = case["correctness"]
        assert check["passed"], (case_id, check.get("detail"))
        assert check["parity"]["nll"]["rel_diff"] <= 1e-8 and check["parity"]["q0"]["abs_diff"] <= 1e-4
        if case["workload"] in ("hf_nll_grad", "hf_profiled_q0", "hf_fd_check"):
            fd = check["fd"]
            assert fd["passed"] and fd["bins"] == 2 and fd["max_abs_error"] < 1e-4, case_id


def test_train_loop_records_both_variants_and_engines_agree(hf_suite):
    _, by_case = cases(hf_suite)
    loops = {b: by_case[f"{b}_hf_train_loop_8_f64"]["correctness"]["train_loop"] for b in ("jax_jit_cpu", "nextstat")}
    for loop in loops.values():
        for variant in ("kde", "sigmoid"):
            assert len(loop[variant]["losses"]) == 20 and loop[variant]["first_step_s"] > 0
            assert loop[variant]["losses"][-1] < loop[variant]["losses"][0]
    for variant in ("kde", "sigmoid"):  # NextStat's torch layer and our JAX engine train the same network
        assert loops["jax_jit_cpu"][variant]["losses"] == pytest.approx(loops["nextstat"][variant]["losses"], abs=1e-6)


def test_report_and_plot_ready_scaling_data(hf_suite):
    report = (hf_suite / "report.md").read_text()
    for heading in ("## HistFactory workloads", "### hf_nll_grad: cost against parameter count", "### Correctness gates",
                    "### 20-step training loop", "### Reference rows (measured elsewhere)"):  # fmt: skip
        assert heading in report
    assert "3.66 ms" in report and "measured elsewhere" in report
    rows = list(csv.DictReader((hf_suite / "scaling.csv").open()))
    assert {r["engine"] for r in rows} >= {"jax_jit_cpu", "nextstat", "torch_eager_cpu"}
    # A figure is positive or empty, never 0: empty for a warned case, or where a busy machine
    # left no clean run to give one (the case says so with a flag).
    for r in rows:
        case = json.loads((hf_suite / "cases" / f"{r['engine']}_{r['workload']}_{r['parameters']}_f64.json").read_text())
        if r["ttfr_cold_cache_s"] == "" and ok_unless_busy(case):
            policy = "cold-process/cold-cache"
            flags = case["flags"]
            assert any(f["flag"] == "could_not_measure_cleanly" and f.get("policy") == policy for f in flags), (r, flags)
        elif r["ttfr_cold_cache_s"] == "":
            assert r["status"] == "warn", r  # unavailable here: no figure at all
        else:
            assert float(r["ttfr_cold_cache_s"]) > 0


def loop_run(case, policy):
    """A run's own loop figures (counters, timeline): the policy summary is left null when a
    busy machine set the runs aside, the runs keep them."""
    (run,) = [r for r in case["policies"][policy]["runs"] if r["outcome"] == "ok"]
    return run["loop"]


def test_the_training_loop_end_to_end_per_engine(hf_suite):
    """hf_train20: the whole 20-step loop is the timed unit; native JAX builds exactly one
    executable (in step 1), every engine's 20 losses are finite and repeat run after run."""
    suite, by_case = cases(hf_suite)
    rows = {c["backend"]: c for c in by_case.values() if c["workload"] == "hf_train20" and ok_unless_busy(c)}
    assert set(rows) == {"jax_jit_cpu", "nextstat", "torch_eager_cpu"}
    # (a busy machine can leave no loop row: `loops` is absent then)
    assert {r["backend"] for r in suite.get("loops", []) if r["loop"] == "hf_train20"} <= set(rows)
    jax_case = by_case["jax_jit_cpu_hf_train20_8_f64"]
    summary = loop_run(jax_case, "cold-process/cold-cache")
    assert summary["compiles"] == summary["expected_compiles"] == 1
    assert [e["compiles"] for e in summary["iterations"]] == [1] + [0] * 19
    assert loop_run(rows["torch_eager_cpu"], "cold-process/cold-cache")["compiles"] is None  # eager: nothing to count
    for backend in rows:
        case = by_case[f"{backend}_hf_train20_8_f64"]
        assert ok_unless_busy(case), case["reason"]
        losses = case["correctness"]["train_loop"]["kde"]["losses"]
        assert len(losses) == 20 and all(isinstance(v, float) for v in losses)
        assert not [f for f in case["flags"] if f["flag"] in ("compile_count_mismatch", "invalid_measurement")]
    # the engines train the same network on the same problem: their losses agree
    first = {b: by_case[f"{b}_hf_train20_8_f64"]["correctness"]["train_loop"]["kde"]["losses"] for b in rows}
    assert max(abs(first[b][-1] - first["jax_jit_cpu"][-1]) for b in first) < 1e-3 * abs(first["jax_jit_cpu"][-1])
    assert "### `hf_train20`: the loop end to end, per engine" in (hf_suite / "report.md").read_text()


def test_the_mass_scan_compiles_once_per_binning_and_every_strategy_agrees_with_naive(hf_suite, hf_aot_scan):
    """hf_mass_scan: 6 hypotheses (same shapes) and 3 binnings (new shapes). Native JAX
    compiles one executable for the hypotheses and one per binning; vmapped batches the
    hypotheses; AOT compiles all ahead, and from a warm cache loads them and compiles nothing.
    Every strategy's q0s and gradients equal a naive recomputation on its engine."""
    suite, by_case = cases(hf_suite)
    _, aot = cases(hf_aot_scan)
    by_case = {**by_case, **aot}
    for strategy in ("naive", "vmapped", "aot"):
        case = by_case[f"jax_jit_cpu_hf_mass_scan_{strategy}_8_f64"]
        assert ok_unless_busy(case), case["reason"]
        assert case["correctness"]["scan"]["max_normalised_error_vs_naive"] <= 1e-6
        cold = loop_run(case, "cold-process/cold-cache")
        assert cold["compiles"] == cold["expected_compiles"] == 4, strategy
    naive = loop_run(by_case["jax_jit_cpu_hf_mass_scan_naive_8_f64"], "cold-process/cold-cache")
    assert [e["compiles"] for e in naive["iterations"]] == [1, 0, 0, 0, 0, 0, 1, 1, 1]
    vmapped = loop_run(by_case["jax_jit_cpu_hf_mass_scan_vmapped_8_f64"], "cold-process/cold-cache")
    assert len(vmapped["iterations"]) == 4  # the six hypotheses in one batched call, then the binnings
    warm = loop_run(aot["jax_jit_cpu_hf_mass_scan_aot_8_f64"], "cold-process/warm-cache")
    assert warm["compiles"] == warm["expected_compiles"] == 0 and warm["loaded"] == 4
    for backend in ("nextstat", "torch_eager_cpu"):
        case = by_case[f"{backend}_hf_mass_scan_naive_8_f64"]
        assert ok_unless_busy(case), case["reason"]
    assert by_case["pyhf_numpy_hf_mass_scan_naive_8_f64"]["status"] == "warn"
