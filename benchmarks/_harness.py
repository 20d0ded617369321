"""Shared by the benchmark scripts: run ttfr's real worker the way `ttfr run` does."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from ttfr.analyse import runs
from ttfr.child.job import Job
from ttfr.measure import spawn

spawn.ensure_worker_bytecode()  # as `ttfr run` does before its first run


def worker_job(adapter="python_backend", workload="noop", size=1, dtype="float64", mode="cold", **extra) -> Job:
    return Job(mode=mode, adapter=adapter, workload=workload, size=size, dtype=dtype, **extra)


def run_worker(job: Job):
    """(record, metrics) of one real worker process (a RunRecord and Metrics)."""
    result = spawn.run_worker(job, dict(os.environ), 120.0, python=sys.executable)
    if result.outcome != "ok":
        raise SystemExit(f"worker failed: {result.outcome}: {result.reason}\n{result.output_tail}")
    return result.record, runs.run_metrics(result.spawn_ns, result.reaped_ns, result.record)


def spawn_to_reap_s(argv: list[str]) -> float:
    """Wall time of a process from just before spawn to reaping, like ttfr's process_s."""
    start = time.monotonic_ns()
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)  # fmt: skip
    proc.wait()
    return (time.monotonic_ns() - start) / 1e9
