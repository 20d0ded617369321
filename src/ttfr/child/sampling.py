"""Warm-regime sampling inside the worker: warm-up until stable, calibrate the inner loop,
take samples, and check the sync policy (standard library only).

Every timed call is followed by the backend's sync (when it has one), so a sample is the
latency of calls whose results are ready, not of queued dispatches.
"""

import itertools
import math
import time

_clock = time.perf_counter_ns


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


def sample(call, args, sync, inner, count):
    """`count` samples of `inner` synced calls each, as seconds per call, plus the trailing
    sync cost after each sample (≈0 when the timed region really waited)."""
    per_call, trailing = [], []
    for _ in range(count):
        elapsed, output = _timed_loop(call, args, sync, inner)
        per_call.append(elapsed / inner / 1e9)
        if sync is not None:
            t0 = _clock()
            sync(output)
            trailing.append(((_clock() - t0) / 1e9) / (elapsed / 1e9) if elapsed else 0.0)
    return per_call, trailing


def doubling_ratios(call, args, sync, inner, repeats=3):
    """Time inner and 2*inner calls, interleaved: real work doubles the time."""
    ratios = []
    for _ in range(repeats):
        single, _ = _timed_loop(call, args, sync, inner)
        double, _ = _timed_loop(call, args, sync, 2 * inner)
        ratios.append(double / single if single else math.inf)
    return ratios
