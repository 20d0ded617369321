"""Shared test helpers: fake run results for the scheduler and analysis tests."""

from __future__ import annotations

import os
from pathlib import Path

import shutil

import pytest

from ttfr.measure.spawn import RunResult
from ttfr.model.base import decode
from ttfr.model.case import CaseResult
from ttfr.model.journal import Rusage
from ttfr.model.record import RunRecord

# The NextStat contracts are AGPL: read from beside the checkout (or $TTFR_NEXTSTAT_SCHEMAS), never copied in.
SHARED_SCHEMAS = Path(
    os.environ.get("TTFR_NEXTSTAT_SCHEMAS") or Path(__file__).resolve().parents[2] / "shared" / "reference" / "nextstat-schemas"
)


class _Canvas:
    """Stands in for matplotlib's pyplot, figures and axes: takes every call, draws nothing."""

    def __getattr__(self, _name):
        return self

    def __call__(self, *_args, **_kwargs):
        return self

    def __getitem__(self, _index):
        return self

    def __iter__(self):
        return iter(())

    def subplots(self, nrows=1, ncols=1, squeeze=True, **_kwargs):
        axes = [[_Canvas() for _ in range(ncols)] for _ in range(nrows)]
        if not squeeze:
            return self, axes
        return self, axes[0][0] if nrows == ncols == 1 else axes[0] if nrows == 1 else [row[0] for row in axes]

    def get_legend_handles_labels(self):
        return [], []


def machine_has_gpu() -> bool:
    """Whether this machine really has one (for tests that start ttfr as a process, which sees it)."""
    from ttfr.child import hostinfo

    return bool(hostinfo.gpu_device_nodes()) or shutil.which("nvidia-smi") is not None


@pytest.fixture(autouse=True)
def no_gpu_unless_asked(request, monkeypatch):
    """The suite's expectations (jax_jit_gpu is `warn: gpu_unavailable`) hold on a GPU machine too:
    in-process, every test but those marked `gpu` sees none (issue 27, item 6). Tests that start
    ttfr as a process check catalog.gpu_present() themselves."""
    if request.node.get_closest_marker("gpu"):
        return
    from ttfr.measure import catalog

    monkeypatch.setattr(catalog, "gpu_present", lambda: False)


@pytest.fixture(autouse=True)
def figures_drawn_only_where_asked(request, monkeypatch):
    """report.html's figures are drawn by matplotlib (~2 s a page): every fake run writes the
    page with a stand-in for matplotlib and each figure's SVG a stub (its table, layout and
    escaping still real); a test marked `figures` draws them for real."""
    if request.node.get_closest_marker("figures"):
        return
    from ttfr.report import plots

    monkeypatch.setattr(plots, "_figures", lambda: _Canvas())
    monkeypatch.setattr(plots, "_svg", lambda _fig: '<svg xmlns="http://www.w3.org/2000/svg" '
                                                    'data-stub="figure not drawn in this test"></svg>')  # fmt: skip


def fake_record(*, start_ns=1_000_000_000, outcome="ok", stages=None, check=None, warm=None, cache=None, digest=None):
    """A worker record with marks 10 ms apart (interpreter), 100 ms import, ..."""
    marks = {
        "main": start_ns + 10_000_000,
        "imported": start_ns + 110_000_000,
        "setup": start_ns + 130_000_000,
        "first": start_ns + 330_000_000,
        "second_start": start_ns + 331_000_000,
        "second": start_ns + 336_000_000,
    }
    record = {
        "protocol": 1,
        "outcome": outcome,
        "reason": None,
        "marks_ns": marks,
        "stages_s": stages or {},
        "cache": cache or {"first": None, "end": None},
        "digest": digest or {"sum": 10.0, "sum_sq": 50.0, "count": 4, "finite": True},
        "memory": {},
        "device": {"platform": "cpu", "kind": "test cpu", "count": 1},
        "versions": {"numpy": "0"},
        "rusage_self": {"max_rss_bytes": 100 << 20, "user_s": 0.3, "sys_s": 0.05, "involuntary_switches": 3},
    }
    # A fake run did not wait for a CPU (its threads' run-queue wait is zero): without this
    # evidence the analysis would fall back on the real machine's runnable count, and a test
    # on a busy machine would see its fake runs flagged `contended` and their figures set aside.
    record["sched"] = {"runq_wait_s": 0.0}
    if check is not None:
        record["check"] = check
        record["dataset_sha256"] = "a" * 64
    if warm is not None:
        record["warm"] = warm
    return record


def fake_result(record=None, *, outcome="ok", reason=None, spawn_ns=1_000_000_000, process_ns=400_000_000):
    """What an executor returns; `record` as the worker writes it (a dict), typed here as
    spawn.py types a real worker's."""
    return RunResult(
        outcome=outcome,
        reason=reason,
        record=None if record is None else decode(record, RunRecord),
        spawn_ns=spawn_ns,
        reaped_ns=spawn_ns + process_ns,
        exit_code=0 if outcome == "ok" else 1,
        rusage=Rusage(user_s=0.4, sys_s=0.1, max_rss_bytes=120 << 20, involuntary_switches=5),
        output_tail=None,
    )


PASSED_CHECK = {"reference": "numpy float64", "max_normalised_error": 1e-7, "tolerance": 2e-4, "passed": True}


def fake_warm(per_call=0.001, n=5):
    return {
        "samples_s": [per_call * (1 + 0.01 * i) for i in range(n)],
        "inner_loops": 5,
        "warmup_per_call_s": [per_call * 1.2, per_call, per_call],
        "warmup_stable": True,
        "trailing_sync_fraction": [],
        "doubling_ratios": [2.0, 2.01, 1.99],
        # each sample ran without waiting for a CPU, with nothing else on the machine (see fake_record)
        "sample_evidence": {
            "wall_s": [0.01] * n,
            "cpu_s": [0.01] * n,
            "runq_wait_s": [0.0] * n,
            "window_ns": [0, 10_000_000 * n],
            "others_cpu_s": 0.0,
        },
    }


def have(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


def make_run(index: int = 0, *, outcome: str = "ok", ttfr_s: float | None = 0.33, **fields) -> dict:
    """One run of a case file as its JSON (a dict): `fields` replace or add its keys."""
    metrics = {name: None for name in ("interpreter_s", "import_s", "setup_s", "first_call_s", "second_call_s", "process_s")}
    run = {
        "index": index, "round": index, "outcome": outcome, "reason": None if outcome == "ok" else f"{outcome} (test)",
        "metrics": {**metrics, "ttfr_s": ttfr_s}, "stages": {},
        "resources": {"peak_rss_bytes": None, "tree_peak_rss_bytes": None, "cpu_user_s": None, "cpu_sys_s": None,
                      "involuntary_switches": None},
        "cache": {"verdict": "not_applicable", "flags": [], "entries_before": 0, "entries_after": 0},
        "host": None, "exit_code": 0,
    }  # fmt: skip
    run.update(fields)
    return run


def make_case(name: str = "numpy_matmul_64_f32", *, cold_runs=None, procs=None, status: str = "ok", reason=None,
              **fields) -> CaseResult:  # fmt: skip
    """A typed case result with the runs given (dicts, e.g. from make_run) and everything else
    minimal; `fields` replace keys of its JSON. Decoded, so it is as valid as a case file."""
    backend = name.partition("_matmul_")[0] if "_matmul_" in name else name.rsplit("_", 3)[0]
    policies = {}
    if cold_runs is not None:
        policies["cold-process/cold-cache"] = {
            "runs": cold_runs, "summary": {m: None for m in ("interpreter_s", "import_s", "setup_s", "first_call_s",
                                                              "second_call_s", "ttfr_s", "process_s")},
            "stages_summary": {}, "flags": [],
            "cache_verification": {"verdict": "not_applicable", "flags": [], "hits_total": None, "misses_total": None,
                                   "runs_verified": 0, "runs": len(cold_runs)},
        }  # fmt: skip
    if procs is not None:
        policies["warm-process"] = {"procs": procs, "summary": {"call_s": None, "samples_per_process": None}, "flags": []}
    data = {
        "schema": "ttfr.case_result.v2", "case": name, "backend": backend or "numpy", "workload": "matmul", "size": 64,
        "dtype": "float32", "status": status, "reason": reason if reason or status == "ok" else f"{status} (test)",
        "config": {"profile": "quick", "policies": list(policies) or ["cold-process/cold-cache"], "cold_runs": 2,
                   "warm_procs": 2, "warm_samples": 10, "min_sample_s": 0.005, "max_warmup_s": 1.0, "timeout_s": 300.0,
                   "seed": 1, "threads": None, "deterministic": False},
        "sync_policy": "synchronous", "dataset": {"id": "matmul-64-float32-seed1", "sha256": None}, "device": None,
        "versions": {}, "correctness": None, "policies": policies, "memory": {}, "flags": [], "unmeasured_runs": [],
        "limitations": [],
    }  # fmt: skip
    data.update(fields)
    return decode(data, CaseResult)


@pytest.fixture
def fixture_case():
    """make_case, with make_run as its `.run` (for tests that build case results by hand)."""
    make_case.run = make_run
    return make_case


def ok_unless_busy(case) -> bool:
    """A real run's case is ok, or warn only because a busy machine left too few clean runs for a
    figure (contention is a timing: no test may depend on it). `case`: a case file's JSON or a
    CaseResult."""
    status, reason = (case["status"], case["reason"]) if isinstance(case, dict) else (case.status, case.reason)
    return status == "ok" or (status == "warn" and reason.startswith("figures withheld (") and " were contended" in reason)
