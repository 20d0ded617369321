"""Contention detection on real warm workers of `numpy_matmul_512_f32` (OpenBLAS, one thread
per usable core): how often ttfr flags a process that shared its cores with a CPU-bound
neighbour, and how often it flags one that did not.

One busy loop (`while True: pass`, pinned to one core) runs for the whole benchmark and is
switched on and off (SIGCONT / SIGSTOP) at random moments (exponential on/off periods, mean
`--period` s), independently of the workers. Each worker's sampling window (system-wide
monotonic clock, recorded by the worker) is lined up with the loop's on-intervals:

- contaminated: the loop ran for >= `--contaminated` of the window (default 50%);
- clean: the loop never ran during the window, nor in the 0.2 s before it;
- in between: reported, not scored.

Each process is judged as `ttfr run` judges it (analyse/contention.py). Targets: flagged
>= 95% of contaminated processes, <= 2% of clean ones (>= 100 of each). The median of the
contaminated processes' warm medians is also compared with the clean ones' (the number a
user would be given without the flag).

    .venv/bin/python benchmarks/contention.py [--processes 300] [--period 1.0] [--json FILE]
"""

import argparse
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import threading
import time

from _harness import worker_job
from scipy import stats as sps

from ttfr.analyse import contention
from ttfr.child import hostinfo
from ttfr.measure import spawn
from ttfr.model.journal import Host

TARGET_DETECTION, TARGET_FALSE_FLAGS = 0.95, 0.02


class BusyLoop:
    """A CPU-bound neighbour on one core, toggled at random moments; keeps its on-intervals."""

    def __init__(self, period_s: float, seed: int):
        core = min(os.sched_getaffinity(0))
        code = f"import os\nos.sched_setaffinity(0, {{{core}}})\nwhile True: pass"
        self.proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.DEVNULL)
        time.sleep(0.3)
        self.proc.send_signal(signal.SIGSTOP)
        self.on_since: int | None = None
        self.intervals: list[tuple[int, int]] = []
        self.period_s = period_s
        self.rng = random.Random(seed)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._toggle, daemon=True)
        self.lock = threading.Lock()

    def _toggle(self):
        on = False
        while not self.stop.wait(self.rng.expovariate(1 / self.period_s)):
            on = not on
            with self.lock:
                now = time.monotonic_ns()
                self.proc.send_signal(signal.SIGCONT if on else signal.SIGSTOP)
                if on:
                    self.on_since = now
                else:
                    self.intervals.append((self.on_since, now))
                    self.on_since = None

    def start(self):
        self.thread.start()

    def close(self):
        self.stop.set()
        self.thread.join()
        with self.lock:
            if self.on_since is not None:
                self.intervals.append((self.on_since, time.monotonic_ns()))
        self.proc.kill()
        self.proc.wait()

    def on_fraction(self, start: int, end: int) -> float:
        with self.lock:
            spans = list(self.intervals) + ([(self.on_since, time.monotonic_ns())] if self.on_since else [])
        covered = sum(max(0, min(end, b) - max(start, a)) for a, b in spans)
        return covered / (end - start) if end > start else 0.0


def _rate(count: int, total: int) -> str:
    if not total:
        return "0/0"
    low, high = sps.binomtest(count, total).proportion_ci(confidence_level=0.95, method="exact")
    return f"{count}/{total} = {count / total:.1%} (95% CI {low:.1%}-{high:.1%})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=300)
    parser.add_argument("--period", type=float, default=1.0, help="mean seconds between toggles of the busy loop")
    parser.add_argument("--contaminated", type=float, default=0.5, help="share of the window the loop must cover")
    parser.add_argument("--samples", type=int, default=10)
    parser.add_argument("--min-sample-s", type=float, default=0.01)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--case", default="numpy:matmul:512", help="adapter:workload:size, e.g. jax:mlp_train_step:256 "
                        "(XLA's own threads wait for each other on small machines: the false-flag test)")  # fmt: skip
    parser.add_argument("--json", help="write every process's evidence here")
    args = parser.parse_args()
    spawn.ensure_worker_bytecode()
    adapter, workload, size = args.case.split(":")
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    loop = BusyLoop(args.period, args.seed)
    loop.start()
    rows = []
    started = time.monotonic()
    try:
        for index in range(args.processes):
            job = worker_job(mode="warm", adapter=f"{adapter}_backend", compile=adapter == "jax", workload=workload,
                             size=int(size), dtype="float32", samples=args.samples, min_sample_s=args.min_sample_s,
                             max_warmup_s=0.5)  # fmt: skip
            runnable_start, usable = hostinfo.runnable_tasks(), hostinfo.usable_cpus()
            result = spawn.run_worker(job, dict(os.environ), 120.0, python=sys.executable)
            host = Host(runnable_start=runnable_start, usable_cores=usable, runnable_end=hostinfo.runnable_tasks())
            warm = result.record.warm if result.record else None
            if result.outcome != "ok" or not warm:
                print(f"worker failed: {result.outcome}: {result.reason}", file=sys.stderr)
                continue
            evidence = warm.sample_evidence
            start, end = evidence.window_ns
            verdict = contention.warm_process(evidence, host)
            rows.append({
                "on_fraction": loop.on_fraction(start, end),
                "on_before": loop.on_fraction(start - 200_000_000, start),
                "median_s": statistics.median(warm.samples_s),
                "flagged": verdict.contended,
                "median_wait_fraction": verdict.median_wait_fraction,
                "others_cores": verdict.others_cores,
                "samples_contended": verdict.samples_contended,
                "tick": contention.tick_quantised(warm.samples_s, evidence.wall_s),
            })  # fmt: skip
            if (index + 1) % 25 == 0:
                print(f"  {index + 1}/{args.processes}, {(time.monotonic() - started) / 60:.1f} min", file=sys.stderr)
    finally:
        loop.close()
    dirty = [r for r in rows if r["on_fraction"] >= args.contaminated]
    clean = [r for r in rows if r["on_fraction"] == 0 and r["on_before"] == 0]
    between = len(rows) - len(dirty) - len(clean)
    detected, false_flags = sum(r["flagged"] for r in dirty), sum(r["flagged"] for r in clean)
    print(f"\n{adapter} {workload} {size} f32 warm processes ({len(rows)}; {between} partly contaminated, not scored), "
          f"{os.cpu_count()} CPUs, busy loop on one core toggled every ~{args.period:g} s")  # fmt: skip
    print(f"  contaminated (loop on >= {args.contaminated:.0%} of the window) flagged: {_rate(detected, len(dirty))}"
          f"   target >= {TARGET_DETECTION:.0%}")  # fmt: skip
    print(f"  clean flagged (false flags):                      {_rate(false_flags, len(clean))}"
          f"   target <= {TARGET_FALSE_FLAGS:.0%}")  # fmt: skip
    if dirty and clean:
        dirty_median = statistics.median(r["median_s"] for r in dirty)
        clean_median = statistics.median(r["median_s"] for r in clean)
        print(f"  warm median: clean {clean_median * 1e3:.3f} ms, contaminated {dirty_median * 1e3:.3f} ms "
              f"({dirty_median / clean_median:.2f}x) — what an unflagged run would report")  # fmt: skip
        waits = sorted(r["median_wait_fraction"] or 0 for r in clean)
        print(f"  clean processes' median run-queue wait: p50 {waits[len(waits) // 2]:.2%}, max {waits[-1]:.2%}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)
    ok = dirty and clean and detected / len(dirty) >= TARGET_DETECTION and false_flags / len(clean) <= TARGET_FALSE_FLAGS
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
