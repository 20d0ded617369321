"""Shared test helpers: fake run results for the scheduler and analysis tests."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ttfr.measure import catalog
from ttfr.measure.spawn import RunResult

# The NextStat contracts are AGPL: read from beside the checkout (or $TTFR_NEXTSTAT_SCHEMAS), never copied in.
SHARED_SCHEMAS = Path(
    os.environ.get("TTFR_NEXTSTAT_SCHEMAS") or Path(__file__).resolve().parents[2] / "shared" / "reference" / "nextstat-schemas"
)


@pytest.fixture(autouse=True)
def figures_drawn_only_where_asked(request, monkeypatch):
    """report.html's figures are drawn by matplotlib (~2 s a page): every fake run writes the
    page with each figure's SVG stubbed (its table, layout and escaping still real); a test
    marked `figures` draws them for real."""
    if request.node.get_closest_marker("figures"):
        return
    from ttfr.report import plots

    def stub_svg(fig):
        plots._pyplot().close(fig)
        return '<svg xmlns="http://www.w3.org/2000/svg" data-stub="figure not drawn in this test"></svg>'

    monkeypatch.setattr(plots, "_svg", stub_svg)


@pytest.fixture(autouse=True)
def fresh_catalog():
    """Users' cases and commands are added to this process's catalogue: every test gets it back
    as it was (a registered command would otherwise show up in later tests' catalogued cases)."""
    saved = dict(catalog.WORKLOADS)
    yield
    catalog.WORKLOADS.clear()
    catalog.WORKLOADS.update(saved)


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
    return RunResult(
        outcome=outcome,
        reason=reason,
        record=record,
        spawn_ns=spawn_ns,
        reaped_ns=spawn_ns + process_ns,
        exit_code=0 if outcome == "ok" else 1,
        rusage={"user_s": 0.4, "sys_s": 0.1, "max_rss_bytes": 120 << 20, "involuntary_switches": 5},
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
