"""Was a figure measured on a busy machine? Evidence and flags per run and per case.

- `contended`: the worker waited for a CPU. Per warm sample, the time its threads spent
  runnable without a CPU (run-queue wait, /proc/self/task/*/schedstat) above
  `WAIT_FRACTION` of the sample's wall time; a warm process is contended when more than
  `CONTENDED_SAMPLE_SHARE` of its samples are. A cold run is contended when its threads'
  run-queue wait exceeds `WAIT_FRACTION` of its process time. Either is also contended when
  more runnable entities than usable cores belonged to others both before the spawn and
  after the reap (/proc/loadavg; the evidence where a kernel has no schedstat).
- `process_disagreement`: the warm processes' medians differ by more than their
  within-process spread explains (Kruskal-Wallis across processes, p < `DISAGREEMENT_P`)
  and by more than `DISAGREEMENT_RATIO`.
- `tick_quantised`: most samples sit on multiples of a scheduler tick (1, 4 or 10 ms) at two
  or more distinct multiples: the signature of a thread that waits for the next tick.

Everything is evidence recorded beside the figures; nothing here removes a value.
"""

from __future__ import annotations

import math
import statistics

WAIT_FRACTION = 0.05
CONTENDED_SAMPLE_SHARE = 0.2
DISAGREEMENT_P = 0.01
DISAGREEMENT_RATIO = 1.10
TICKS_S = (0.001, 0.004, 0.010)
TICK_TOLERANCE = 0.025  # of the tick: a random value lands this close to a multiple 5% of the time
TICK_SHARE = 0.6
TICK_MIN_SAMPLES = 5


def _others_runnable(host: dict | None) -> bool:
    """More runnable entities than cores belonged to others before and after the run."""
    usable_cores = (host or {}).get("usable_cores")
    if not host or not usable_cores:
        return False
    counts = [host.get("runnable_start"), host.get("runnable_end")]
    if any(c is None for c in counts):
        return False
    # /proc/loadavg counts the reader (ttfr's parent) as running at both readings.
    return all(c[0] - 1 >= usable_cores for c in counts)


def warm_process(evidence: dict | None, host: dict | None) -> dict:
    """A warm process's contention evidence: per-sample wait fractions and the verdict."""
    waits = []
    if evidence:
        for wall, waited in zip(evidence.get("wall_s") or [], evidence.get("runq_wait_s") or []):
            if waited is not None and wall:
                waits.append(waited / wall)
    cpu_wall = [
        cpu / wall for wall, cpu in zip((evidence or {}).get("wall_s") or [], (evidence or {}).get("cpu_s") or []) if wall
    ]
    contended_samples = sum(w > WAIT_FRACTION for w in waits)
    by_samples = bool(waits) and contended_samples > CONTENDED_SAMPLE_SHARE * len(waits)
    by_runnable = _others_runnable(host)
    reasons = []
    if by_samples:
        reasons.append(
            f"{contended_samples}/{len(waits)} samples waited for a CPU > {WAIT_FRACTION:.0%} of their time "
            f"(median wait {statistics.median(waits):.1%})"
        )
    if by_runnable:
        reasons.append(f"other runnable tasks filled all {host['usable_cores']} usable cores before and after the process")
    return {
        "contended": by_samples or by_runnable,
        "reasons": reasons,
        "samples_contended": contended_samples if waits else None,
        "samples_with_evidence": len(waits),
        "median_wait_fraction": statistics.median(waits) if waits else None,
        "max_wait_fraction": max(waits) if waits else None,
        "median_cpu_per_wall": statistics.median(cpu_wall) if cpu_wall else None,
    }


def cold_run(sched: dict | None, process_s: float | None, host: dict | None) -> dict:
    """A cold run's contention evidence: its threads' run-queue wait against its process time."""
    fraction = None
    if sched and sched.get("runq_wait_s") is not None and process_s:
        fraction = sched["runq_wait_s"] / process_s
    by_wait = fraction is not None and fraction > WAIT_FRACTION
    by_runnable = _others_runnable(host)
    reasons = []
    if by_wait:
        reasons.append(f"its threads waited for a CPU {fraction:.1%} of the process time")
    if by_runnable:
        reasons.append(f"other runnable tasks filled all {host['usable_cores']} usable cores before and after the run")
    return {"contended": by_wait or by_runnable, "reasons": reasons, "wait_fraction": fraction}


def process_disagreement(samples_by_process: list[list[float]]) -> dict | None:
    """Do the warm processes measure different things? None below two processes."""
    groups = [[s for s in g if s is not None and math.isfinite(s)] for g in samples_by_process]
    groups = [g for g in groups if len(g) >= 3]
    if len(groups) < 2:
        return None
    from scipy import stats as sps

    medians = [statistics.median(g) for g in groups]
    if min(medians) <= 0:
        return None
    ratio = max(medians) / min(medians)
    try:
        p_value = float(sps.kruskal(*groups).pvalue)
    except ValueError:  # every value identical
        p_value = 1.0
    if math.isnan(p_value):
        p_value = 1.0
    return {
        "disagree": bool(p_value < DISAGREEMENT_P and ratio > DISAGREEMENT_RATIO),
        "p_value": p_value,
        "max_over_min_median": ratio,
        "process_medians_s": medians,
    }


def tick_quantised(samples_s: list[float], sample_wall_s: list[float] | None = None) -> dict | None:
    """Do the samples' wall times sit on a grid of scheduler ticks? Judged on each sample's
    whole timed loop (what a tick quantises), as offsets from the shortest one: a thread that
    repeatedly waits out a neighbour's time slice lands whole ticks apart (20, 24, 28 ms)."""
    walls = [w for w in (sample_wall_s or samples_s) if w is not None and math.isfinite(w)]
    if len(walls) < TICK_MIN_SAMPLES:
        return None
    for tick in sorted(TICKS_S, reverse=True):
        candidates = [w for w in walls if w >= 2 * tick]
        if len(candidates) < TICK_MIN_SAMPLES:
            continue
        base = min(candidates)
        steps = [(w - base) / tick for w in candidates]
        on_grid = [round(step) for step in steps if abs(step - round(step)) <= TICK_TOLERANCE]
        share = len(on_grid) / len(walls)
        # Two grid points at least, each held by two samples: noise around one value is not a grid.
        held = [k for k in set(on_grid) if on_grid.count(k) >= 2]
        if share >= TICK_SHARE and len(held) >= 2:
            return {"quantised": True, "tick_s": tick, "share": share, "steps": sorted(held)}
    return {"quantised": False, "tick_s": None, "share": None, "steps": []}
