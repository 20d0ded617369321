"""Case results -> suite figures: the summary, break-even points between backends, and the
HistFactory scaling rows."""

from __future__ import annotations

import math

from ttfr.analyse.figures import headline, policy_metric
from ttfr.measure import catalog
from ttfr.model.policies import COLD_CACHE, WARM_CACHE, WARM_PROCESS


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
        # A --workspace file and the preset of its size are different problems: never paired.
        key = (result["workload"], result["size"], result["dtype"], result["dataset"]["id"])
        groups.setdefault(key, []).append(result)
    rows = []
    for (workload, size, dtype, dataset), members in sorted(groups.items()):
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
                        "workload": workload, "size": size, "dtype": dtype, "dataset": dataset, "cold_policy": cold_policy,
                        "fast_start": name_a, "slow_start": name_b,
                        "fast_start_ttfr_s": cold_a["median"], "slow_start_ttfr_s": cold_b["median"],
                        "fast_start_call_s": warm_a["median"], "slow_start_call_s": warm_b["median"],
                        "calls": calls, "calls_range": [best, worst],
                    })  # fmt: skip
    return rows


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
            "dataset": result["dataset"]["id"],
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
