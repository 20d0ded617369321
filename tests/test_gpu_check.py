"""`make gpu-check` (benchmarks/gpu_check.py), tested where CI runs: without a GPU it fails (never a
warning), and its judgement of a GPU case's file holds the GPU rows' promises (issue 27)."""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import machine_has_gpu

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "gpu_check.py"
sys.path.insert(0, str(SCRIPT.parent))
import gpu_check  # noqa: E402


@pytest.mark.skipif(machine_has_gpu(), reason="this machine has a GPU: `make gpu-check` runs for real")
def test_without_a_gpu_gpu_check_fails_and_says_why(tmp_path):
    done = subprocess.run([sys.executable, str(SCRIPT), "--out", str(tmp_path / "docs"), "--work", str(tmp_path / "w")],
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 1 and "no GPU here" in done.stderr
    assert not (tmp_path / "docs").exists() and not (tmp_path / "w").exists()  # nothing ran


def _case(**changes):
    good = {
        "case": "jax_jit_gpu_matmul_512_f32", "backend": "jax_jit_gpu", "workload": "matmul", "status": "ok", "reason": None,
        "correctness": {"passed": True},
        "memory": {"device_peak_bytes": 1 << 20, "device_peaks": {"setup": 1 << 10, "first_call": 1 << 20, "steady": 1 << 19}},
        "policies": {
            "cold-process/cold-cache": {"cache_verification": {"verdict": "verified", "hits_total": 0},
                                        "summary": {"first_call_s": {"median": 1.0}, "device_init_s": {"median": 0.2}},
                                        "stages_summary": {"trace_s": {"median": 0.1}, "lower_s": {"median": 0.1},
                                                           "compile_s": {"median": 0.6}}},
            "cold-process/warm-cache": {"cache_verification": {"verdict": "verified", "hits_total": 2}},
            "warm-process": {"procs": [{"index": 0, "sync_check": {"unsynchronised": False}}]},
        },
    }  # fmt: skip
    for path, value in changes.items():
        where, *keys = path.split(".")
        target = good[where] if keys else good
        for key in keys[:-1]:
            target = target[key]
        target[keys[-1] if keys else where] = value
    return good


def test_gpu_check_judges_each_promise_of_a_gpu_case():
    assert gpu_check.case_problems(_case()) == []
    assert "result check not passed" in gpu_check.case_problems(_case(**{"correctness.passed": None}))[0]
    assert "no device peak memory" in gpu_check.case_problems(_case(**{"memory.device_peak_bytes": None}))[0]
    assert "no device peak for every phase" in gpu_check.case_problems(_case(**{"memory.device_peaks.steady": None}))[0]
    timed = _case()
    del timed["policies"]["cold-process/cold-cache"]["summary"]["device_init_s"]
    assert gpu_check.case_problems(timed) == ["jax_jit_gpu_matmul_512_f32: no device_init phase timed"]
    hits = _case()
    hits["policies"]["cold-process/cold-cache"]["cache_verification"]["hits_total"] = 3
    assert "cold cache verified with 3 hits" in gpu_check.case_problems(hits)[0]
    unsynced = _case()
    unsynced["policies"]["warm-process"]["procs"][0]["sync_check"].update(
        unsynchronised=True, problems=["calls as timed ran 0.70x the time of the same calls each waited on"]
    )
    # the summary alone says which of the sync check's triggers fired (an H200's row failed without it)
    assert gpu_check.case_problems(unsynced)[0].endswith(
        "warm process 0 unsynchronised: calls as timed ran 0.70x the time of the same calls each waited on"
    )
    stages = _case()
    stages["policies"]["cold-process/cold-cache"]["stages_summary"]["compile_s"]["median"] = 2.0
    assert "stages sum to" in gpu_check.case_problems(stages)[0]
    assert gpu_check.case_problems(_case(status="warn", reason="gpu_unavailable: x"))[0].endswith("warn: gpu_unavailable: x")
    transfer = {"case": "interop_gpu_numpy_to_torch_cuda_4194304_f32", "backend": "interop_gpu",
                "workload": "numpy_to_torch_cuda", "status": "ok", "reason": None, "correctness": {"passed": True},
                "policies": {}, "conversion": {"evidence": {"copied": True}}}  # fmt: skip
    assert gpu_check.case_problems(transfer) == []  # a conversion keeps no device peaks: its evidence is judged
    transfer["conversion"]["evidence"]["copied"] = None
    assert gpu_check.case_problems(transfer) == [f"{transfer['case']}: no copy verdict (the evidence disagrees)"]
    assert gpu_check.manifest_problems({"gpu": {"driver_version": "550", "cuda_version": "12.4", "ptxas": None}}) == [
        "manifest: no ptxas recorded"]  # fmt: skip


def test_runs_names_only_the_checks_own_runs_before_anything_runs(tmp_path):
    done = subprocess.run([sys.executable, str(SCRIPT), "--runs", "conversions,bogus", "--out", str(tmp_path / "docs")],
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 2
    assert "unknown run bogus; valid: arrays, precompiled, tf32, conversions, histfactory, loops, pytest" in done.stderr
    assert not (tmp_path / "docs").exists()


def test_a_check_cut_short_by_its_lease_still_writes_what_finished(tmp_path, monkeypatch):
    """A GPU lease's time limit (SIGTERM, as Ctrl-C) mid-check: the first lease lost every finished row
    that way. The summary keeps the finished runs' rows, names the runs not reached, and fails."""
    monkeypatch.setattr(gpu_check.catalog, "gpu_present", lambda: True)
    started = []

    def fake_run(label, options, common, work, planned_count):
        started.append(label)
        if label == "conversions":  # the lease ends during the second run: its SIGTERM, to this process alone
            os.kill(os.getpid(), signal.SIGTERM)  # the handler raises at once (a signal to oneself arrives before
            pytest.fail("SIGTERM did not interrupt the check")  # the next statement)
        run = {"run": label, "command": f"ttfr run {label}", "exit_code": 0, "wall_s": 1.0,
               "processes_planned": planned_count}  # fmt: skip
        return run, [{"run": label, "row": f"{label}_case", "verdict": "pass", "reasons": []}], [], {}

    monkeypatch.setattr(gpu_check, "run_ttfr", fake_run)
    monkeypatch.setattr(gpu_check, "run_pytest", lambda: pytest.fail("pytest ran after the interrupt"))
    before = signal.getsignal(signal.SIGTERM)
    code = gpu_check.main(["--runs", "tf32,conversions,loops,pytest", "--out", str(tmp_path), "--work", str(tmp_path / "w")])
    assert code == 130 and started == ["tf32", "conversions"]
    assert signal.getsignal(signal.SIGTERM) is before  # the check's handler is gone with it
    [written] = tmp_path.glob("gpu-check-*.json")
    summary = json.loads(written.read_text())
    assert summary["verdict"] == "fail" and [r["row"] for r in summary["rows"]] == ["tf32_case"]
    assert summary["problems"] == [f"interrupted: 1 of 4 runs finished; not run: conversions, loops, pytest (their "
                                   f"results, if any, are under {tmp_path / 'w'})"]  # fmt: skip
    assert "interrupted: 1 of 4 runs finished" in next(tmp_path.glob("gpu-check-*.md")).read_text()
