"""Warm timing overhead: ttfr's calibrated per-call time for a no-op call against a bare
`time.perf_counter_ns()` loop (the cost of one timer read per iteration), interleaved.

The no-op runs in ttfr's real worker (warm mode, calibrated inner loop); the bare loop
runs here. Target: the no-op's per-call time <= 60 ns.

    .venv/bin/python benchmarks/warm_overhead.py [rounds]
"""

import statistics
import sys
import time

from _harness import run_worker, worker_job


def bare_loop_ns(iterations: int = 2_000_000) -> float:
    clock = time.perf_counter_ns
    start = clock()
    for _ in range(iterations):
        clock()
    return (clock() - start) / iterations


def main(rounds: int) -> None:
    noop_ns, bare_ns = [], []
    for index in range(rounds):
        job = worker_job(mode="warm", samples=30, min_sample_s=0.01, max_warmup_s=0.5)
        if index % 2:
            bare_ns.append(bare_loop_ns())
        record, _ = run_worker(job)
        noop_ns.append(statistics.median(record.warm.samples_s) * 1e9)
        if not index % 2:
            bare_ns.append(bare_loop_ns())
    print(f"rounds: {rounds} (interleaved)")
    print(f"bare perf_counter_ns() loop  median {statistics.median(bare_ns):6.1f} ns per iteration")
    print(f"ttfr no-op call (calibrated) median {statistics.median(noop_ns):6.1f} ns per call (target <= 60 ns)")
    print(f"ratio no-op / bare loop      {statistics.median(noop_ns) / statistics.median(bare_ns):.2f}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 20)
