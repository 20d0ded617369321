"""From journal entries to case results: derive each run's figures, summarise them,
verify cache policies and sync, decide each case's status, and compute break-even.

Figures of a failed case are null, never 0.0; its runs stay in the artifact as raw data.
"""

from __future__ import annotations

import math
import statistics

from ttfr.analyse import stats, sync_check
from ttfr.measure import cache, catalog
from ttfr.measure.plan import Plan, gate_failure
from ttfr.measure.spec import COLD_CACHE, POLICIES, WARM_CACHE, WARM_PROCESS

CASE_SCHEMA = "ttfr.case_result.v1"
COLD_METRICS = ("interpreter_s", "import_s", "setup_s", "first_call_s", "second_call_s", "ttfr_s", "process_s")
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

    return {
        "interpreter_s": span(spawn, marks.get("main")),
        "import_s": span(marks.get("main"), marks.get("imported")),
        "setup_s": span(marks.get("imported"), marks.get("setup")),
        "first_call_s": span(marks.get("setup"), marks.get("first")),
        "second_call_s": span(marks.get("second_start"), marks.get("second")),
        "ttfr_s": span(spawn, marks.get("first")),
        "process_s": span(spawn, entry.get("reaped_ns")),
    }


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
    rtol = _DIGEST_RTOL[dtype]
    scale = math.sqrt(max(reference["sum_sq"], 0.0) * max(reference["count"], 1)) or 1.0
    return (
        digest["count"] != reference["count"]
        or abs(digest["sum_sq"] - reference["sum_sq"]) > rtol * max(abs(reference["sum_sq"]), 1e-300)
        or abs(digest["sum"] - reference["sum"]) > rtol * scale
    )


def _run_view(entry: dict, case: catalog.Case, reference_digest: dict | None) -> dict:
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
        ),  # fmt: skip
        "host": entry.get("host"),
        "exit_code": entry.get("exit_code"),
    }
    if counts:
        view["cache"]["counters"] = counts
    if outcome != "ok":
        view["output_tail"] = entry.get("output_tail")
    return view


def _summaries(views: list[dict], names, key) -> dict:
    ok = [v for v in views if v["outcome"] == "ok"]
    return {name: stats.summarize([v[key].get(name) for v in ok if v[key].get(name) is not None]) for name in names}


def _cache_overview(views: list[dict]) -> dict:
    verdicts = [v["cache"]["verdict"] for v in views if v["outcome"] == "ok"]
    flags = sorted({f for v in views if v["outcome"] == "ok" for f in v["cache"]["flags"]})
    if not verdicts:
        verdict = "unverified"
    elif "flagged" in verdicts:
        verdict = "flagged"
    elif all(x == "not_applicable" for x in verdicts):
        verdict = "not_applicable"
    elif all(x == "verified" for x in verdicts):
        verdict = "verified"
    else:
        verdict = "unverified"
    hits = [v["cache"].get("hits") for v in views if v["outcome"] == "ok" and v["cache"].get("hits") is not None]
    misses = [v["cache"].get("misses") for v in views if v["outcome"] == "ok" and v["cache"].get("misses") is not None]
    return {
        "verdict": verdict,
        "flags": flags,
        "hits_total": sum(hits) if hits else None,
        "misses_total": sum(misses) if misses else None,
        "runs_verified": verdicts.count("verified"),
        "runs": len(verdicts),
    }


def _cold_policy(views: list[dict]) -> dict:
    flags = []
    ttfr = [v["metrics"]["ttfr_s"] if v["outcome"] == "ok" else None for v in sorted(views, key=lambda v: v["index"])]
    outlier = stats.first_run_outlier(ttfr)
    if outlier:
        flags.append({"flag": "first_run_outlier", "metric": "ttfr_s", **outlier})
    cache_overview = _cache_overview(views)
    flags.extend({"flag": f} for f in cache_overview["flags"])
    return {
        "runs": views,
        "summary": _summaries(views, COLD_METRICS, "metrics"),
        "stages_summary": {k: s for k, s in _summaries(views, STAGE_METRICS, "stages").items() if s},
        "cache_verification": cache_overview,
        "flags": flags,
    }


def _warm_view(entry: dict, case: catalog.Case, reference_digest: dict | None) -> dict:
    view = _run_view(entry, case, reference_digest)
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
        )
    return view


def _warm_policy(views: list[dict]) -> dict:
    ok = [v for v in views if v["outcome"] == "ok"]
    flags = []
    unsynced = [v["index"] for v in ok if v["sync_check"]["unsynchronised"]]
    if unsynced:
        flags.append({"flag": "unsynchronised", "processes": unsynced})
    unstable = [v["index"] for v in ok if not v["warmup"]["stable"]]
    if unstable:
        flags.append({"flag": "warmup_unstable", "processes": unstable})
    return {
        "procs": views,
        "summary": {
            "call_s": stats.summarize([v["median_s"] for v in ok]),
            "samples_per_process": len(ok[0]["samples_s"]) if ok else None,
        },
        "flags": flags,
    }


def _null_summaries(policy: dict) -> None:
    if "summary" in policy:
        policy["summary"] = {k: None for k in policy["summary"]}
    if "stages_summary" in policy:
        policy["stages_summary"] = {}


def _status(entries: list[dict], policies: dict, check: dict | None, stopped: str | None):
    for entry in entries:
        if entry["outcome"] == "unavailable":
            return "warn", entry["reason"]
    if check is not None and not check.get("passed"):
        error = check.get("max_normalised_error")
        shown = "n/a" if error is None else f"{error:.3g}"
        detail = f" ({check['detail']})" if check.get("detail") else ""
        return "failed", (
            f"result_mismatch: max normalised error {shown} > tolerance {check['tolerance']:.3g} "
            f"against the {check['reference']} reference{detail}"
        )
    if stopped:
        return "failed", stopped
    failed_runs = []
    for name, policy in policies.items():
        runs = policy.get("runs") or policy.get("procs") or []
        bad = [r for r in runs if r["outcome"] != "ok"]
        if runs and len(bad) == len(runs):
            first = bad[0]
            return "failed", f"every {name} run failed; first: {first['outcome']}: {first['reason']}"
        failed_runs.extend(f"{name}#{r['index']} {r['outcome']}" for r in bad)
    if failed_runs:
        return "warn", f"{len(failed_runs)} run(s) failed and are excluded from the figures: " + "; ".join(failed_runs)
    return "ok", None


def dataset_id(case: catalog.Case, spec) -> str:
    if case.workload in catalog.HF_WORKLOADS:
        name = "custom" if spec.custom_size == case.size else catalog.HF_PRESET_BY_SIZE[case.size]
        return f"histfactory-{name}-{case.size}p-seed{spec.seed}"
    return f"{case.workload}-{case.size}-{case.dtype}-seed{spec.seed}"


def build_case_result(case: catalog.Case, plan: Plan, entries: list[dict]) -> dict:
    spec = plan.spec
    backend = case.backend_info
    base = {
        "schema": CASE_SCHEMA,
        "case": case.id,
        "backend": case.backend,
        "workload": case.workload,
        "size": case.size,
        "dtype": case.dtype,
        "config": {
            "profile": spec.profile,
            "policies": list(spec.policies),
            "cold_runs": spec.cold_runs,
            "warm_procs": spec.warm_procs,
            "warm_samples": spec.warm_samples,
            "min_sample_s": spec.min_sample_s,
            "max_warmup_s": spec.max_warmup_s,
            "timeout_s": spec.timeout_s,
            "seed": spec.seed,
            "threads": spec.threads,
            "deterministic": spec.deterministic,
        },
        "sync_policy": backend.sync_policy,
        "dataset": {"id": dataset_id(case, spec), "sha256": None},
        "device": None,
        "versions": {},
        "correctness": None,
        "policies": {},
        "memory": {},
        "flags": [],
        "unmeasured_runs": [],
        "limitations": [*cache.LIMITATIONS, *backend.limitations],
    }
    if case.id in plan.unavailable:
        base.update(status="warn", reason=plan.unavailable[case.id])
        return base

    entries = sorted(entries, key=lambda e: (e["round"], e["index"]))
    checked = [e for e in entries if (e.get("record") or {}).get("check")]
    check = checked[0]["record"]["check"] if checked else None
    failed_checks = [e["record"]["check"] for e in checked if not e["record"]["check"]["passed"]]
    if failed_checks:
        check = failed_checks[0]
    reference_digest = next(
        (e["record"].get("digest") for e in checked if e["outcome"] == "ok"),
        next((e["record"].get("digest") for e in entries if e["outcome"] == "ok" and e.get("record")), None),
    )
    records = [e["record"] for e in entries if e.get("record") and e["outcome"] == "ok"]
    if records:
        base["device"] = records[0].get("device")
        base["versions"] = records[0].get("versions") or {}
        base["memory"].update(records[0].get("memory") or {})
    if checked and checked[0]["record"].get("dataset_sha256"):
        base["dataset"]["sha256"] = checked[0]["record"]["dataset_sha256"]
    base["correctness"] = check

    policies = {}
    for policy in POLICIES:
        if policy not in spec.policies:
            continue
        measured = [e for e in entries if e["measured"] and e["policy"] == policy]
        if policy == WARM_PROCESS:
            policies[policy] = _warm_policy([_warm_view(e, case, reference_digest) for e in measured])
        else:
            policies[policy] = _cold_policy([_run_view(e, case, reference_digest) for e in measured])
    base["unmeasured_runs"] = [
        {"kind": e["kind"], "outcome": e["outcome"], "reason": e["reason"]} for e in entries if not e["measured"]
    ]
    stopped = next(
        (f"{e['kind']} run {e['outcome']}: {e['reason']}" for e in entries if not e["measured"] and e["outcome"] != "ok"),
        None,
    )
    status, reason = _status(entries, policies, check, stopped)
    base.update(status=status, reason=reason, policies=policies)

    cold = policies.get(COLD_CACHE) or policies.get(WARM_CACHE)
    if cold:
        rss = [r["resources"]["peak_rss_bytes"] for r in cold["runs"] if r["outcome"] == "ok"]
        base["memory"]["peak_rss_bytes"] = stats.summarize([v for v in rss if v is not None])
    for name, policy in policies.items():
        base["flags"].extend({"policy": name, **flag} for flag in policy["flags"])
        if any(r["outcome"] == "invalid-measurement" for r in policy.get("runs", policy.get("procs", []))):
            base["flags"].append({"policy": name, "flag": "invalid_measurement"})
    if status == "failed":
        for policy in policies.values():
            _null_summaries(policy)
        base["memory"]["peak_rss_bytes"] = None
    return base


def headline(case_result: dict) -> dict:
    """The few numbers a suite index and a summary table show (None when not measured)."""

    def median(policy, metric):
        value = policy_metric(case_result, policy, metric)
        return value["median"] if value else None

    return {
        "ttfr_cold_cache_median_s": median(COLD_CACHE, "ttfr_s"),
        "ttfr_warm_cache_median_s": median(WARM_CACHE, "ttfr_s"),
        "warm_call_median_s": median(WARM_PROCESS, "call_s"),
    }


def _calls_to_break_even(start_a, start_b, call_a, call_b):
    """Smallest n with start_b + (n-1) call_b <= start_a + (n-1) call_a, where A starts
    faster (start_a <= start_b); None when B never catches up."""
    if call_b >= call_a:
        return None
    return 1 + max(0, math.ceil((start_b - start_a) / (call_a - call_b)))


def break_even(case_results: list[dict]) -> list[dict]:
    """For every workload/size/dtype and every pair of measured backends: after how many
    calls the slower-starting backend has caught up, with a range from the CIs."""
    groups: dict[tuple, list[dict]] = {}
    for result in case_results:
        if result["status"] == "failed":
            continue
        groups.setdefault((result["workload"], result["size"], result["dtype"]), []).append(result)
    rows = []
    for (workload, size, dtype), members in sorted(groups.items()):
        for cold_policy in (COLD_CACHE, WARM_CACHE):
            figures = []
            for result in members:
                cold = policy_metric(result, cold_policy, "ttfr_s")
                warm = policy_metric(result, WARM_PROCESS, "call_s")
                if cold and warm:
                    figures.append((result["backend"], cold, warm))
            figures.sort(key=lambda f: (f[1]["median"], f[0]))
            for i, (name_a, cold_a, warm_a) in enumerate(figures):
                for name_b, cold_b, warm_b in figures[i + 1 :]:
                    calls = _calls_to_break_even(cold_a["median"], cold_b["median"], warm_a["median"], warm_b["median"])
                    ci = [c["median_ci"] for c in (cold_a, cold_b, warm_a, warm_b)]
                    best = _calls_to_break_even(ci[0]["high"], ci[1]["low"], ci[2]["high"], ci[3]["low"])
                    worst = _calls_to_break_even(ci[0]["low"], ci[1]["high"], ci[2]["low"], ci[3]["high"])
                    rows.append({
                        "workload": workload, "size": size, "dtype": dtype, "cold_policy": cold_policy,
                        "fast_start": name_a, "slow_start": name_b,
                        "fast_start_ttfr_s": cold_a["median"], "slow_start_ttfr_s": cold_b["median"],
                        "fast_start_call_s": warm_a["median"], "slow_start_call_s": warm_b["median"],
                        "calls": calls, "calls_range": [best, worst],
                    })  # fmt: skip
    return rows


def pending_cases(plan: Plan, entries: list[dict]) -> list[str]:
    """Cases with tasks neither journaled nor skipped because their case was stopped."""
    done = {e["task"] for e in entries}
    stopped = {e["case"] for e in entries if gate_failure(e)}
    return sorted({t.case.id for t in plan.tasks if t.key not in done and t.case.id not in stopped})


def suite_summary(case_results: list[dict], pending: list[str]) -> dict:
    """Counts, the worst measured case by TTFR, and failed/warned cases listed apart."""
    worst = None
    for result in case_results:
        if result["status"] == "failed":
            continue
        figures = headline(result)
        for policy, key in ((COLD_CACHE, "ttfr_cold_cache_median_s"), (WARM_CACHE, "ttfr_warm_cache_median_s")):
            value = figures[key]
            if value is not None:
                if worst is None or value > worst["ttfr_median_s"]:
                    worst = {"case": result["case"], "ttfr_median_s": value, "policy": policy}
                break
    by_status = {s: [r for r in case_results if r["status"] == s] for s in ("ok", "warn", "failed")}
    return {
        "n_cases": len(case_results) + len(pending),
        "n_ok": len(by_status["ok"]),
        "n_warn": len(by_status["warn"]),
        "n_failed": len(by_status["failed"]),
        "n_pending": len(pending),
        "worst_case": worst,
        "failed": [{"case": r["case"], "reason": r["reason"]} for r in by_status["failed"]],
        "warned": [{"case": r["case"], "reason": r["reason"]} for r in by_status["warn"]],
    }


def policy_metric(case_result: dict, policy: str, metric: str) -> dict | None:
    """One metric's summary (median, CI, ...) under one policy; None when not measured."""
    return ((case_result["policies"].get(policy) or {}).get("summary") or {}).get(metric)


def _with_ci(row: dict, stem: str, summary: dict | None) -> None:
    """row[stem_s], row[stem_ci_low_s], row[stem_ci_high_s] from a metric summary (None if absent)."""
    ci = (summary or {}).get("median_ci") or {}
    row[f"{stem}_s"] = summary["median"] if summary else None
    row[f"{stem}_ci_low_s"], row[f"{stem}_ci_high_s"] = ci.get("low"), ci.get("high")


def scaling_rows(case_results: list[dict]) -> list[dict]:
    """Plot-ready figures of the HistFactory cases against their parameter count."""
    rows = []
    for result in case_results:
        if result["workload"] not in catalog.HF_WORKLOADS or result["status"] == "failed":
            continue
        first_call = policy_metric(result, COLD_CACHE, "first_call_s")
        check = result.get("correctness") or {}
        fd = check.get("fd") or {}
        parity = check.get("parity") or {}
        loop = (check.get("train_loop") or {}).get("kde") or {}
        row = {
            "workload": result["workload"],
            "engine": result["backend"],
            "parameters": result["size"],
            "status": result["status"],
        }
        _with_ci(row, "ttfr_cold_cache", policy_metric(result, COLD_CACHE, "ttfr_s"))
        _with_ci(row, "ttfr_warm_cache", policy_metric(result, WARM_CACHE, "ttfr_s"))
        _with_ci(row, "warm_call", policy_metric(result, WARM_PROCESS, "call_s"))
        row |= {
            "first_call_cold_s": first_call["median"] if first_call else None,
            "nll_parity_rel": (parity.get("nll") or {}).get("rel_diff"),
            "q0_parity_abs": (parity.get("q0") or {}).get("abs_diff"),
            "fd_max_abs_error": fd.get("max_abs_error"),
            "fd_max_rel_error": fd.get("max_rel_error"),
            "train_first_step_s": loop.get("first_step_s"),
            "train_step_s": loop.get("step_s_median"),
            "train_loss_first": (loop.get("losses") or [None])[0],
            "train_loss_last": (loop.get("losses") or [None])[-1],
        }
        rows.append(row)
    return sorted(rows, key=lambda r: (r["workload"], r["parameters"], r["engine"]))
