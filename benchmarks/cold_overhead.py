"""Harness cold overhead: ttfr's no-op case (`python_noop_1_f64`) against `python -I -c pass`.

Both are spawned from this process and timed on the same clock, interleaved in random
order per round. ttfr_s ends at the no-op's first result; the baseline ends when the
bare interpreter is reaped, so the ratio charges ttfr for its worker start-up
(`-P -c` boot, job parsing, adapter import) but not for its teardown. process_s (spawn to
reap, including writing the JSON record) is reported too. Target: median ratio <= 1.15.

    .venv/bin/python benchmarks/cold_overhead.py [rounds]
"""

import random
import statistics
import sys

from _harness import run_worker, spawn_to_reap_s, worker_job


def main(rounds: int) -> None:
    bare, ttfr, process = [], [], []
    order = random.Random(0)
    for _ in range(rounds):
        arms = ["bare", "ttfr"]
        order.shuffle(arms)
        for arm in arms:
            if arm == "bare":
                bare.append(spawn_to_reap_s([sys.executable, "-I", "-c", "pass"]))
            else:
                _, metrics = run_worker(worker_job())
                ttfr.append(metrics.ttfr_s)
                process.append(metrics.process_s)
    per_round = [t / b for t, b in zip(ttfr, bare)]
    base = statistics.median(bare)
    print(f"rounds: {rounds} (interleaved, random order)")
    print(f"python -I -c pass      median {base * 1e3:7.2f} ms")
    print(f"ttfr noop ttfr_s       median {statistics.median(ttfr) * 1e3:7.2f} ms")
    print(f"ttfr noop process_s    median {statistics.median(process) * 1e3:7.2f} ms")
    ratio = statistics.median(ttfr) / base
    print(f"ratio ttfr_s / bare    {ratio:.3f} (per-round median {statistics.median(per_round):.3f}; target <= 1.15)")
    print(f"ratio process_s / bare {statistics.median(process) / base:.3f}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 100)
