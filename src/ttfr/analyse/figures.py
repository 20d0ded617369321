"""Reading a case result's published figures (pure: reports and the terminal use it
without loading the statistics stack)."""

from __future__ import annotations

from ttfr.model.policies import COLD_CACHE, WARM_CACHE, WARM_PROCESS


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


def policy_metric(case_result: dict, policy: str, metric: str) -> dict | None:
    """One metric's summary (median, CI, ...) under one policy; None when not measured."""
    return ((case_result["policies"].get(policy) or {}).get("summary") or {}).get(metric)
