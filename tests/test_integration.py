"""End to end: real `ttfr run` processes with numpy and JAX (and GPU cases degrading)."""

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import jsonschema
import pytest
from conftest import machine_has_gpu, SHARED_SCHEMAS, have, ok_unless_busy
from support.determinism import deterministic_view, differing_paths, journal_view, suite_view

from ttfr.artifacts.reader import validate_dir

pytestmark = [pytest.mark.integration, pytest.mark.skipif(not have("jax"), reason="jax not installed")]


def ttfr_run(out, *args, env=None):
    done = subprocess.run(
        [sys.executable, "-m", "ttfr", "run", "--out", str(out), *args],
        capture_output=True, text=True, env=env, timeout=600,
    )  # fmt: skip
    return done


def only_dir(path: Path) -> Path:
    (child,) = [p for p in path.iterdir() if p.is_dir()]
    return child


SMALL_SUITE_ARGS = (
    "--backends", "numpy,jax_jit_cpu,jax_jit_gpu,torch_eager_cuda", "--workloads", "matmul,fused_chain",
    "--sizes", "64", "--cold-runs", "2", "--warm-procs", "2", "--deterministic",
)  # fmt: skip


@pytest.fixture(scope="module")
def small_suite(tmp_path_factory):
    out = tmp_path_factory.mktemp("suite")
    done = ttfr_run(out, *SMALL_SUITE_ARGS)
    assert done.returncode == 0, done.stdout + done.stderr
    return only_dir(out), done


def load_cases(root):
    suite = json.loads((root / "suite.json").read_text())
    return suite, {ref["case"]: json.loads((root / ref["path"]).read_text()) for ref in suite["cases"]}


def test_suite_is_schema_valid_and_covers_all_policies(small_suite):
    root, _ = small_suite
    assert validate_dir(root) == []
    suite, cases = load_cases(root)
    assert suite["state"] == "complete"
    for case_id in ("numpy_matmul_64_f32", "jax_jit_cpu_matmul_64_f32", "jax_jit_cpu_fused_chain_64_f32"):
        case = cases[case_id]
        assert ok_unless_busy(case), case["reason"]
        assert set(case["policies"]) == {"cold-process/cold-cache", "cold-process/warm-cache", "warm-process"}
        assert case["correctness"]["passed"]
        # The runs' own figures: a busy machine may set runs aside and leave the summaries null.
        for policy in ("cold-process/cold-cache", "cold-process/warm-cache"):
            runs = [r for r in case["policies"][policy]["runs"] if r["outcome"] == "ok"]
            assert len(runs) == 2
            assert all(r["metrics"]["ttfr_s"] > r["metrics"]["import_s"] > 0 for r in runs)
        procs = [p for p in case["policies"]["warm-process"]["procs"] if p["outcome"] == "ok"]
        assert procs and all(p["median_s"] > 0 for p in procs)


def test_gpu_cases_degrade_to_warn_on_a_cpu_machine(small_suite):
    root, done = small_suite
    _, cases = load_cases(root)

    if machine_has_gpu():
        pytest.skip("this machine has a GPU")
    for case_id in ("jax_jit_gpu_matmul_64_f32", "torch_eager_cuda_matmul_64_f32"):
        assert (cases[case_id]["status"], cases[case_id]["reason"]) == ("warn", "gpu_unavailable")


def test_jax_cache_policies_are_verified_by_counters(small_suite):
    root, _ = small_suite
    _, cases = load_cases(root)
    jax = cases["jax_jit_cpu_matmul_64_f32"]["policies"]
    for run in jax["cold-process/cold-cache"]["runs"]:
        assert run["cache"]["entries_before"] == 0 and run["cache"]["hits"] == 0
        assert run["cache"]["entries_after"] > 0  # JAX's CPU cache really was written
    for run in jax["cold-process/warm-cache"]["runs"]:
        assert run["cache"]["hits"] >= 1 and run["cache"]["entries_before"] > 0
    assert jax["cold-process/cold-cache"]["cache_verification"]["verdict"] == "verified"
    assert jax["cold-process/warm-cache"]["cache_verification"]["verdict"] == "verified"
    assert all(run["stages"]["compile_s"] > 0 for run in jax["cold-process/cold-cache"]["runs"])


def test_report_shows_components_and_break_even(small_suite):
    root, _ = small_suite
    report = (root / "report.md").read_text()
    for heading in ("## Summary", "## Cold start components (cold-process/cold-cache)", "## Warm throughput",
                    "## Memory", "## Break-even", "## Limitations"):  # fmt: skip
        assert heading in report
    assert "`jax_jit_cpu_matmul_64_f32`" in report
    # The stage split is in the components table when the runs were clean; on a busy machine
    # (every run contended and set aside) the row keeps its dashes. Either way each run has it.
    case = json.loads((root / "cases" / "jax_jit_cpu_matmul_64_f32.json").read_text())
    cold = case["policies"]["cold-process/cold-cache"]
    assert all("trace_s" in run["stages"] for run in cold["runs"] if run["outcome"] == "ok")
    # either cold policy's table may show it: each sets aside its own contended runs
    split = [case["policies"][p]["stages_summary"] for p in ("cold-process/cold-cache", "cold-process/warm-cache")]
    assert ("trace" in report) == any(split)
    assert (root / "report.html").is_file()


def test_report_command_rerenders_and_validate_passes(small_suite):
    root, _ = small_suite
    done = subprocess.run([sys.executable, "-m", "ttfr", "report", str(root)], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout == (root / "report.md").read_text()
    done = subprocess.run([sys.executable, "-m", "ttfr", "validate", str(root)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout


@pytest.mark.skipif(not SHARED_SCHEMAS.is_dir(), reason="NextStat reference schemas not available")
def test_nextstat_export_validates_against_the_published_schemas(small_suite, tmp_path):
    root, _ = small_suite
    dest = tmp_path / "nextstat"
    done = subprocess.run([sys.executable, "-m", "ttfr", "export", "--format", "nextstat-v1", str(root), str(dest)],
                          capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 0, done.stderr
    result_schema = json.loads((SHARED_SCHEMAS / "ml_benchmark_result_v1.schema.json").read_text())
    suite_schema = json.loads((SHARED_SCHEMAS / "ml_benchmark_suite_result_v1.schema.json").read_text())
    suite = json.loads((dest / "suite_result.json").read_text())
    jsonschema.Draft202012Validator(suite_schema).validate(suite)
    files = sorted(p for p in dest.glob("*.json") if p.name != "suite_result.json")
    assert len(files) == suite["summary"]["n_cases"] == 8
    for path in files:
        record = json.loads(path.read_text())
        jsonschema.Draft202012Validator(result_schema).validate(record)
        if record["status"] == "warn" and not ok_unless_busy(record):  # unavailable: nothing ran
            assert record["timing"]["cold"]["runs"] == [] and record["timing"]["warm"]["calls_s"] == []
        elif "ttfr_s" in record["timing"]["cold"]:  # absent only where a busy machine left no clean run
            assert record["timing"]["cold"]["ttfr_s"]["median"] > 0
        else:
            assert ok_unless_busy(record) and record["timing"]["cold"]["runs"] == []
    listed = {c["case"] for c in suite["cases"]}
    jax = json.loads((dest / "jax_jit_cpu_matmul_64_f32.json").read_text())["timing"]
    has_figures = "ttfr_s" in jax["cold"] and "call_s" in jax["warm"]  # a busy machine may have left none
    assert ("jax_jit_cpu_matmul_64_f32" in listed) == has_figures and "jax_jit_gpu_matmul_64_f32" not in listed
    import hashlib

    for ref in suite["cases"]:
        assert hashlib.sha256((dest / ref["path"]).read_bytes()).hexdigest() == ref["sha256"]


def test_deterministic_runs_are_byte_stable_apart_from_timings(small_suite, tmp_path):
    root, _ = small_suite
    done = ttfr_run(tmp_path, *SMALL_SUITE_ARGS)
    assert done.returncode == 0, done.stderr
    other = only_dir(tmp_path)
    first_suite, first = load_cases(root)
    second_suite, second = load_cases(other)
    assert first_suite["seed"] == second_suite["seed"] == 0
    assert suite_view(first_suite) == suite_view(second_suite)
    assert list(first) == list(second)
    for case_id in first:
        mine, theirs = deterministic_view(first[case_id]), deterministic_view(second[case_id])
        assert mine == theirs, (case_id, differing_paths(mine, theirs))
    # The order of runs, their outcomes and the digests of their results are fixed too.
    assert journal_view(root) == journal_view(other)


def test_ctrl_c_leaves_valid_artifacts_and_resume_completes(tmp_path):
    proc = subprocess.Popen(
        [sys.executable, "-m", "ttfr", "run", "--out", str(tmp_path), "--backends", "numpy", "--workloads",
         "matmul,fused_chain,mlp_train_step", "--sizes", "32", "--cold-runs", "3", "--warm-procs", "2"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        # A shell's background job (`make test &`) inherits SIGINT ignored, and Python then
        # never installs its Ctrl-C handler: give the run the disposition a terminal gives it.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )  # fmt: skip
    journal = None
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        dirs = [p for p in tmp_path.iterdir() if p.is_dir()]
        if dirs and (dirs[0] / "journal.jsonl").exists():
            journal = dirs[0] / "journal.jsonl"
            if len(journal.read_text().splitlines()) >= 6:
                break
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    output, _ = proc.communicate(timeout=60)
    assert proc.returncode == 130, output
    root = journal.parent
    assert validate_dir(root) == []
    suite = json.loads((root / "suite.json").read_text())
    assert suite["state"] == "incomplete" and suite["pending"]
    done = subprocess.run([sys.executable, "-m", "ttfr", "run", "--resume", str(root)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    suite = json.loads((root / "suite.json").read_text())
    busy = [c for c in suite["summary"]["warned"] if ok_unless_busy({"status": "warn", "reason": c["reason"]})]
    assert suite["state"] == "complete" and suite["summary"]["n_ok"] + len(busy) == 3
    keys = [json.loads(line)["task"] for line in journal.read_text().splitlines()]
    assert len(keys) == len(set(keys)) == 3 * (3 + 3 + 2)
    assert validate_dir(root) == []
