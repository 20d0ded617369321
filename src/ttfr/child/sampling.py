"""Warm-regime sampling inside the worker: warm-up until stable, calibrate the inner loop,
take samples, and gather the sync check's evidence (standard library only).

Every timed call is followed by the backend's sync (when it has one), so a sample is the
latency of calls whose results are ready, not of queued dispatches. `sync` is what the
timed loop calls after each call (None: nothing, as for synchronous backends, or on purpose
when a job tests the check with `sync=False`); `barrier` is the runtime's real barrier
(None for synchronous backends), used untimed between samples and timed as the trailing
check after each one; `ready` is the runtime's non-blocking "is this result finished?"
probe (None where the adapter has none).
"""

import itertools
import math
import time

from ttfr.child import hostinfo

_clock = time.perf_counter_ns
_process_cpu = time.process_time_ns  # every thread of the worker (BLAS pools included)


def _timed_loop(call, args, sync, count):
    """Nanoseconds for `count` synced calls, and the last output."""
    output = None
    repeat = itertools.repeat(None, count)
    if sync is None:
        start = _clock()
        for _ in repeat:
            output = call(*args)
        end = _clock()
    else:
        start = _clock()
        for _ in repeat:
            output = call(*args)
            sync(output)
        end = _clock()
    return end - start, output


def _relative_spread(values):
    low, high = min(values), max(values)
    return (high - low) / low if low > 0 else math.inf


def calibrate(call, args, sync, min_sample_s, max_warmup_s, stable_within=0.05, window=3):
    """Warm up until `window` consecutive per-call times agree within `stable_within`
    (or the budget runs out) and choose the inner loop count for one sample."""
    min_sample_ns = min_sample_s * 1e9
    elapsed, _ = _timed_loop(call, args, sync, 1)
    inner = max(1, math.ceil(min_sample_ns / max(elapsed, 1)))
    history = []
    started = _clock()
    stable = False
    while True:
        elapsed, _ = _timed_loop(call, args, sync, inner)
        per_call = elapsed / inner
        history.append(per_call / 1e9)
        if len(history) >= window and _relative_spread(history[-window:]) <= stable_within:
            stable = True
            break
        if len(history) >= window and (_clock() - started) / 1e9 >= max_warmup_s:
            break
        # Re-estimate from the fastest batch so far: early batches are the slow ones.
        inner = max(1, math.ceil(min_sample_ns / max(min(history) * 1e9, 1)))
    return {"inner_loops": inner, "warmup_per_call_s": history, "stable": stable}


def sample(call, args, sync, inner, count, barrier=None, ready=None):
    """`count` samples of `inner` synced calls each, as seconds per call, and the sync
    check's evidence after each sample, outside the timed region: whether the last result
    was still pending (`ready`, the runtime's non-blocking probe, when it has one; a loop that
    waited on every call leaves it finished), and the cost of the trailing `barrier` as a
    fraction of the sample (≈0 when the loop really waited: the barrier then finds the
    result ready). Each sample starts with nothing queued, because the previous one's
    trailing barrier drained the runtime. `barrier` defaults to `sync`."""
    barrier = sync if barrier is None else barrier
    per_call, trailing, pending = [], [], []
    evidence = {"wall_s": [], "cpu_s": [], "runq_wait_s": []}
    window_start = time.monotonic_ns()  # system-wide clock: lines samples up with other processes' events
    machine_before, own_before = hostinfo.busy_cpu_seconds(), _process_cpu()
    for _ in range(count):
        # Contention evidence, read around (not inside) the timed loop: CPU time of every
        # thread, and the time threads spent runnable without a CPU.
        cpu_before, sched_before = _process_cpu(), hostinfo.thread_schedstats()
        elapsed, output = _timed_loop(call, args, sync, inner)
        cpu_after, sched_after = _process_cpu(), hostinfo.thread_schedstats()
        evidence["wall_s"].append(elapsed / 1e9)
        evidence["cpu_s"].append((cpu_after - cpu_before) / 1e9)
        waited = sched_after[1] - sched_before[1] if sched_before and sched_after else None
        evidence["runq_wait_s"].append(None if waited is None else max(waited, 0) / 1e9)
        per_call.append(elapsed / inner / 1e9)
        if ready is not None:
            pending.append(not ready(output))
        if barrier is not None:
            t0 = _clock()
            barrier(output)
            trailing.append(((_clock() - t0) / 1e9) / (elapsed / 1e9) if elapsed else 0.0)
    evidence["window_ns"] = [window_start, time.monotonic_ns()]
    machine_after, own_after = hostinfo.busy_cpu_seconds(), _process_cpu()
    # CPU seconds the rest of the machine used during the window (10 ms resolution).
    evidence["others_cpu_s"] = (
        None
        if machine_before is None or machine_after is None
        else (machine_after - machine_before) - (own_after - own_before) / 1e9
    )
    return per_call, trailing, pending, evidence


def doubling_ratios(call, args, sync, inner, repeats=3, barrier=None):
    """Time inner and 2*inner calls, interleaved, each from an idle runtime (the barrier
    drains it, untimed): real work doubles the time. Reported evidence, not a flag (see
    analyse/sync_check.py): dispatching without waiting doubles too."""
    barrier = sync if barrier is None else barrier
    ratios = []
    for _ in range(repeats):
        single, output = _timed_loop(call, args, sync, inner)
        if barrier is not None:
            barrier(output)
        double, output = _timed_loop(call, args, sync, 2 * inner)
        if barrier is not None:
            barrier(output)
        ratios.append(double / single if single else math.inf)
    return ratios


def overlap_check(call, args, sync, barrier, inner, repeats=9):
    """Seconds per call of `inner` calls made as the timed loop makes them (`sync` after
    each) and of `inner` calls each waited on by the `barrier`, interleaved in ABBA order,
    each loop from an idle runtime (drained, untimed). When the timed loop waits on every
    result the two loops are the same and equally fast; when it lets calls overlap (dispatch
    without waiting) it is faster, even if nothing is left in flight at its end. None for
    runtimes without a barrier."""
    if barrier is None:
        return None
    as_timed, each_waited = [], []
    for index in range(repeats):
        for timed in (True, False) if index % 2 == 0 else (False, True):
            elapsed, output = _timed_loop(call, args, sync if timed else barrier, inner)
            barrier(output)
            (as_timed if timed else each_waited).append(elapsed / inner / 1e9)
    return {"as_timed_s": as_timed, "each_waited_s": each_waited}
