"""Is a warm process's timed call really synchronised? Judged from the evidence the worker
took beside its samples (child/sampling.py), outside the timed region.

Evidence, per sample of `inner_loops` calls: `pending_after_loop`, whether the last result
was still unfinished when the timed loop ended (the adapter's non-blocking probe, e.g.
`jax.Array.is_ready`; empty where the adapter has none); `trailing_sync_fraction`, what the
runtime's real barrier then cost, as a fraction of the sample. Per process:
`doubling_ratios`, the time of 2*inner calls over that of inner calls.

The rule, for backends with a barrier (JAX, CUDA): `unsynchronised` when
- the last result was still pending after the timed loop in any sample, or
- in the median sample, the trailing barrier still waited at least one call's time:
  fraction * inner_loops (= barrier seconds / the sample's seconds per call) >= 1, or
- calls as timed ran faster than the same calls each waited on (below).

A loop that waited on every call leaves nothing queued: its last result is finished by
construction (no timing involved, so no load can make it look pending: one pending sample
is enough), and the trailing barrier costs only its own overhead (µs), less than one call,
since every call of the loop paid a dispatch and a wait on that same barrier. A
dispatch-only loop leaves its last call running, and the barrier waits for it and for
whatever is queued behind it (JAX's CPU client runs calls in order, up to 32 in flight).
Counted in calls, not as a fraction of the sample: a given backlog's fraction shrinks as the
calibrated inner loop grows, so the old "< 5% of the sample" let dispatch-only matmul_64
pass. The median sample for the timing: a preemption inside one barrier inflates that
sample only.

What no check after the timed loop can see: a dispatch-only loop whose calls finish as fast
as they are dispatched (JAX CPU matmul_64 on an idle machine, in some processes), so that
nothing is in flight when the loop ends. Its samples measure pipelined throughput, below
the synchronised per-call latency by the per-call cost of waiting. The third trigger
catches it by comparison, not by timing against a limit in seconds:
- calls as timed ran faster than SYNC_OVERLAP_LIMIT x the same calls each waited on by the
  barrier (`overlap`: nine loops of each, alternating within milliseconds in one process,
  fastest against fastest). A timed loop that waits on every result *is* the waited loop,
  so the two agree however loaded the machine: contention only adds time, and the fastest
  of nine alternating loops of each escapes it alike.

The doubling ratio is recorded (`doubling_ratio_median`) but flags nothing: a dispatch-only
loop doubles too (twice the dispatches, or twice the executions once the queue is full), and
contention moves it either way (process medians as low as 0.94 and 1.12 on synchronised
fused_chain_4096 and matmul_64 beside a busy core; the old limit was 1.5). Synchronous
backends (no barrier) return finished results by construction: nothing to catch, never
flagged. Measured: benchmarks/sync_check.py.
"""

from __future__ import annotations

import statistics

from ttfr.model.run_figures import SyncCheck
from ttfr.model.record import Overlap, WarmRecord

SYNC_OUTSTANDING_CALLS_LIMIT = 1.0  # the trailing barrier may wait less than one call's time
# Calls as timed may not run faster than this fraction of the same calls each waited on.
SYNC_OVERLAP_LIMIT = 0.75


def overlap_ratio(warm: WarmRecord) -> float | None:
    """The fastest loop of calls as timed over the fastest loop of calls each waited on
    (the fastest: contention only ever adds time, and the loops alternate within ms)."""
    overlap = warm.overlap or Overlap()
    as_timed, each_waited = overlap.as_timed_s or [], overlap.each_waited_s or []
    if not as_timed or not each_waited or min(each_waited) <= 0:
        return None
    return min(as_timed) / min(each_waited)


def judge(warm: WarmRecord, has_sync: bool) -> SyncCheck:
    trailing = warm.trailing_sync_fraction or []
    pending = warm.pending_after_loop or []
    doubling = [d for d in warm.doubling_ratios or [] if d is not None]  # null: an infinite ratio
    trailing_median = statistics.median(trailing) if trailing else None
    doubling_median = statistics.median(doubling) if doubling else None
    overlap = overlap_ratio(warm)
    problems = []
    if has_sync and any(pending):
        problems.append(f"the last result was still pending after the timed loop in {sum(pending)} of {len(pending)} samples")
    if has_sync and trailing:
        # The median sample's barrier seconds over its seconds per call (inner_loops is the same for every sample).
        waited_calls = trailing_median * warm.inner_loops
        if waited_calls >= SYNC_OUTSTANDING_CALLS_LIMIT:
            problems.append(
                f"after the timed loop the barrier still waited {waited_calls:.3g} calls' time "
                f"({trailing_median:.1%} of a sample; median of {len(trailing)} samples; "
                f"limit {SYNC_OUTSTANDING_CALLS_LIMIT:g} call)"
            )
    if has_sync and overlap is not None and overlap < SYNC_OVERLAP_LIMIT:
        problems.append(
            f"calls as timed ran {overlap:.2f}x the time of the same calls each waited on (fastest loops; "
            f"limit {SYNC_OVERLAP_LIMIT:g}): the timed calls overlapped"
        )
    return SyncCheck(
        trailing_sync_fraction_median=trailing_median,
        doubling_ratio_median=doubling_median,
        overlap_ratio=overlap,
        unsynchronised=bool(problems),
        problems=problems,
    )
