"""Is a warm process's timed call really synchronised? Judged from the evidence the worker
took beside its samples (trailing sync cost, doubling ratios)."""

from __future__ import annotations

import statistics

SYNC_TRAILING_LIMIT = 0.05  # a trailing sync must cost < 5% of the sample
SYNC_DOUBLING_MIN = 1.5  # doubling the calls must (at least roughly) double the time


def judge(warm: dict, has_sync: bool) -> dict:
    trailing = warm.get("trailing_sync_fraction") or []
    doubling = warm.get("doubling_ratios") or []
    trailing_median = statistics.median(trailing) if trailing else None
    doubling_median = statistics.median(doubling) if doubling else None
    problems = []
    if has_sync and trailing_median is not None and trailing_median >= SYNC_TRAILING_LIMIT:
        problems.append(f"trailing sync costs {trailing_median:.1%} of a sample (limit {SYNC_TRAILING_LIMIT:.0%})")
    if doubling_median is not None and doubling_median < SYNC_DOUBLING_MIN:
        problems.append(f"doubling the calls scaled time by only {doubling_median:.2f}x")
    return {
        "trailing_sync_fraction_median": trailing_median,
        "doubling_ratio_median": doubling_median,
        "unsynchronised": bool(problems),
        "problems": problems,
    }
