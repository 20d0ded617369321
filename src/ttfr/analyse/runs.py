"""One journal entry -> one run's figures: cold-start spans from the marks, resources,
the run's cache check, the digest comparison, and a warm process's samples."""

from __future__ import annotations

import math
import statistics

from ttfr.analyse import contention, loops, sync_check
from ttfr.measure import cache, catalog

COLD_METRICS = ("interpreter_s", "import_s", "setup_s", "first_call_s", "second_call_s", "ttfr_s", "process_s")
USER_IMPORT = "user_import_s"  # a user's case: importing the case's own module, after the runtime stack
STAGE_METRICS = (
    "wrap_s", "trace_s", "lower_s", "compile_s", "dynamo_s", "aot_autograd_s", "inductor_s",
    "backward_compile_s", "first_execute_s",
)  # fmt: skip
_DIGEST_RTOL = {"float32": 1e-3, "float64": 1e-8}


def run_metrics(entry: dict) -> dict:
    """Seconds between the parent's spawn mark, the worker's marks and the reap."""
    record = entry.get("record") or {}
    marks = record.get("marks_ns") or {}
    spawn = entry["spawn_ns"]

    def span(start, end):
        return (end - start) / 1e9 if start is not None and end is not None else None

    user_imported = "user_imported" in marks
    metrics = {
        "interpreter_s": span(spawn, marks.get("main")),
        "import_s": span(marks.get("main"), marks.get("imported")),
        "setup_s": span(marks.get("user_imported" if user_imported else "imported"), marks.get("setup")),
        "first_call_s": span(marks.get("setup"), marks.get("first")),
        "second_call_s": span(marks.get("second_start"), marks.get("second")),
        "ttfr_s": span(spawn, marks.get("first")),
        "process_s": span(spawn, entry.get("reaped_ns")),
    }
    if user_imported:
        metrics[USER_IMPORT] = span(marks.get("imported"), marks.get("user_imported"))
    return metrics


def _resources(entry: dict) -> dict:
    record = entry.get("record") or {}
    own = record.get("rusage_self") or {}
    tree = entry.get("rusage") or {}
    return {
        "peak_rss_bytes": own.get("max_rss_bytes"),
        "tree_peak_rss_bytes": tree.get("max_rss_bytes"),
        "cpu_user_s": tree.get("user_s"),
        "cpu_sys_s": tree.get("sys_s"),
        "involuntary_switches": tree.get("involuntary_switches"),
    }


def _digest_differs(digest: dict | None, reference: dict | None, dtype: str) -> bool:
    if not digest or not reference:
        return False
    if None in (digest["sum"], digest["sum_sq"], reference["sum"], reference["sum_sq"]):
        return False  # a sum that overflowed float64 (written as null) cannot be compared
    rtol = _DIGEST_RTOL[dtype]
    scale = math.sqrt(max(reference["sum_sq"], 0.0) * max(reference["count"], 1)) or 1.0
    return (
        digest["count"] != reference["count"]
        or abs(digest["sum_sq"] - reference["sum_sq"]) > rtol * max(abs(reference["sum_sq"]), 1e-300)
        or abs(digest["sum"] - reference["sum"]) > rtol * scale
    )


def run_view(entry: dict, case: catalog.Case, reference_digest: dict | None) -> dict:
    record = entry.get("record") or {}
    backend = case.backend_info
    counts = cache.hit_miss(backend.cache_counters, (record.get("cache") or {}).get("end"))
    outcome, reason = entry["outcome"], entry["reason"]
    if outcome == "ok" and _digest_differs(record.get("digest"), reference_digest, case.dtype):
        outcome, reason = "invalid-measurement", "result differs from the case's checked run (digest mismatch)"
    view = {
        "index": entry["index"],
        "round": entry["round"],
        "outcome": outcome,
        "reason": reason,
        "metrics": run_metrics(entry),
        "stages": {k: v for k, v in (record.get("stages_s") or {}).items() if k in STAGE_METRICS},
        "resources": _resources(entry),
        "cache": cache.verify(
            entry["policy"],
            backend.compiles,
            counts,
            entry["cache_dir"]["entries_before"],
            entry["cache_dir"]["entries_after"],
            backend.cache_counters,
        ),  # fmt: skip
        "host": entry.get("host"),
        "exit_code": entry.get("exit_code"),
    }
    if counts:
        view["cache"]["counters"] = counts
    if backend.cache_counters == catalog.DIRECTORY_ENTRIES and entry["cache_dir"].get("by_directory"):
        view["cache"]["by_directory"] = entry["cache_dir"]["by_directory"]
    loop = loops.run_loop(record.get("loop"))
    if loop is not None:
        view["loop"] = loop
    if outcome == "ok":
        view["contention"] = contention.cold_run(record.get("sched"), view["metrics"]["process_s"], entry.get("host"),
                                                 entry.get("rusage"))  # fmt: skip
        view["threadpools"] = record.get("threadpools")  # BLAS/OpenMP libraries and thread counts
    if outcome != "ok":
        view["output_tail"] = entry.get("output_tail")
    return view


def warm_view(entry: dict, case: catalog.Case, reference_digest: dict | None) -> dict:
    view = run_view(entry, case, reference_digest)
    warm = (entry.get("record") or {}).get("warm")
    if view["outcome"] == "ok" and not warm:
        view["outcome"], view["reason"] = "invalid-measurement", "warm process returned no samples"
    if warm:
        view.update(
            samples_s=warm["samples_s"],
            inner_loops=warm["inner_loops"],
            median_s=statistics.median(warm["samples_s"]),
            warmup={"per_call_s": warm["warmup_per_call_s"], "stable": warm["warmup_stable"]},
            sync_check=sync_check.judge(warm, case.backend_info.barrier),
            contention=contention.warm_process(warm.get("sample_evidence"), entry.get("host")),
            tick=contention.tick_quantised(warm["samples_s"], (warm.get("sample_evidence") or {}).get("wall_s")),
        )
    return view
