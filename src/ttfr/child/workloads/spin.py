"""Calibrated pure-Python work for `ttfr selftest`: each call runs a loop of `size` thousand
iterations; TTFR_SPIN_EXTRA (a fraction, read at setup) adds that much real extra work,
which is how the self-test injects a known slowdown into one arm. Imports nothing."""

import os

TOLERANCE = {"float64": 0.0}


def make_inputs(size, dtype, seed):
    extra = float(os.environ.get("TTFR_SPIN_EXTRA", "0"))
    return [int(round(size * 1000 * (1.0 + extra)))]


def reference(inputs):
    return []


def work(iterations):
    total = 0
    for i in range(iterations):
        total += i
    return total


def python_fn():
    return work


def dataset_sha256(inputs):
    import hashlib

    return hashlib.sha256(f"spin:{inputs[0]}".encode()).hexdigest()


def measured_ratio(size, extra, repeats=25):
    """The injected slowdown as it really is: the plain and the longer loop timed
    alternately in this process, median of the ratios (`ttfr selftest`'s truth)."""
    import statistics
    import time

    base, more = int(round(size * 1000)), int(round(size * 1000 * (1.0 + extra)))
    ratios = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        work(base)
        t1 = time.perf_counter()
        work(more)
        t2 = time.perf_counter()
        ratios.append((t2 - t1) / (t1 - t0))
    return statistics.median(ratios)
