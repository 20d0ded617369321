"""The warm regime's sync check on real JAX workers: false flags on synchronised calls and
misses on deliberately unsynchronised ones (job `sync=False`: the timed loop dispatches
without `block_until_ready`; the trailing check still uses it), each in fresh processes,
on an idle machine and beside a busy loop pinned to one core.

Arms per workload: synchronised / unsynchronised x idle / busy, `--processes` fresh warm
processes each, interleaved (the order of the four arms alternates every round). One busy
loop (`python -c "while True: pass"`, pinned to one core) runs for the whole benchmark and
is stopped (SIGSTOP) for the idle arms. Every process is judged by ttfr's rule
(analyse/sync_check.py), by each of its three triggers alone (the readiness probe, the
trailing barrier's wait in calls, the overlap ratio), and by the old rule (trailing sync >= 5% of the sample
or doubling ratio < 1.5). Quick-profile warm settings by default.

Workloads: matmul_64, the smallest array call of the suite yet asynchronous on XLA's CPU
client (computations under 1000 flops run inline, with nothing to catch) and the hardest to
catch (its calls can finish as fast as they are dispatched: then nothing is in flight after
the loop, and a miss is a process whose samples measured pipelined throughput rather than
synchronised latency); and fused_chain_4096, the case of the reported false flag (doubling
1.13x), 1-4 calls a sample. Targets: false flags <= 2%, misses 0. ~7 min on 2 cores.

    .venv/bin/python benchmarks/sync_check.py [--processes 50] [--workloads matmul:64,fused_chain:4096]
        [--samples 10] [--json FILE]
"""

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time

from _harness import run_worker, worker_job
from scipy import stats as sps

from ttfr.analyse import sync_check

OLD_TRAILING_LIMIT, OLD_DOUBLING_MIN = 0.05, 1.5  # the rule this benchmark replaced
TARGET_FALSE_FLAGS = 0.02
ARMS = [(True, False), (False, False), (False, True), (True, True)]  # (synchronised, busy), ABBA-like


def _old_rule(warm) -> bool:
    trailing, doubling = warm.trailing_sync_fraction, warm.doubling_ratios
    return statistics.median(trailing) >= OLD_TRAILING_LIMIT or statistics.median(doubling) < OLD_DOUBLING_MIN


def _evidence(warm) -> dict:
    """What one warm process's record (a RunRecord's WarmRecord) says about its synchronisation."""
    inner = warm.inner_loops
    waited = [f * inner for f in warm.trailing_sync_fraction]
    pending = warm.pending_after_loop or []
    return {
        "inner_loops": inner,
        "per_call_s": statistics.median(warm.samples_s),
        "pending_samples": sum(pending),
        "waited_calls_median": statistics.median(waited),
        "waited_calls_min": min(waited),
        "trailing_fraction_median": statistics.median(warm.trailing_sync_fraction),
        "trailing_s_median": statistics.median(f * s * inner for f, s in zip(warm.trailing_sync_fraction, warm.samples_s)),
        "doubling_median": statistics.median(warm.doubling_ratios),
        "flagged": sync_check.judge(warm, True).unsynchronised,
        "flagged_by_probe": any(pending),
        "flagged_by_timing": statistics.median(waited) >= sync_check.SYNC_OUTSTANDING_CALLS_LIMIT,
        "overlap_ratio": sync_check.overlap_ratio(warm),
        "flagged_by_overlap": (sync_check.overlap_ratio(warm) or 1.0) < sync_check.SYNC_OVERLAP_LIMIT,
        "flagged_old_rule": _old_rule(warm),
    }


def _rate(count: int, total: int) -> str:
    low, high = sps.binomtest(count, total).proportion_ci(confidence_level=0.95, method="exact")
    return f"{count}/{total} = {count / total:.1%} (95% CI {low:.1%}-{high:.1%})"


def _spread(values: list[float], unit: str = "", scale: float = 1.0) -> str:
    values = sorted(v * scale for v in values)
    return f"{values[0]:.3g} / {statistics.median(values):.3g} / {values[-1]:.3g}{unit}"


def _start_busy_loop() -> subprocess.Popen:
    core = min(os.sched_getaffinity(0))
    code = f"import os\nos.sched_setaffinity(0, {{{core}}})\nwhile True: pass"
    busy = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.DEVNULL)
    time.sleep(0.5)  # let it pin itself before it is stopped
    busy.send_signal(signal.SIGSTOP)
    return busy


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=50, help="fresh warm processes per arm and workload")
    parser.add_argument("--workloads", default="matmul:64,fused_chain:4096", help="workload:size,... (float32)")
    parser.add_argument("--samples", type=int, default=10)
    parser.add_argument("--min-sample-s", type=float, default=0.005)
    parser.add_argument("--max-warmup-s", type=float, default=1.0)
    parser.add_argument("--json", help="write every process's evidence here")
    args = parser.parse_args()
    os.environ.setdefault("JAX_PLATFORMS", "cpu")  # as the jax_jit_cpu backend's worker environment
    workloads = [(name, int(size)) for name, size in (item.split(":") for item in args.workloads.split(","))]
    results = {(w, synced, busy): [] for w in workloads for synced, busy in ARMS}
    started = time.monotonic()
    busy_loop = _start_busy_loop()
    try:
        for index in range(args.processes):
            arms = ARMS if index % 2 == 0 else ARMS[::-1]
            for synced, busy in arms:
                busy_loop.send_signal(signal.SIGCONT if busy else signal.SIGSTOP)
                for name, size in workloads:
                    job = worker_job(mode="warm", adapter="jax_backend", compile=True, workload=name, size=size,
                                     dtype="float32", samples=args.samples, min_sample_s=args.min_sample_s,
                                     max_warmup_s=args.max_warmup_s, sync=synced)  # fmt: skip
                    record, _ = run_worker(job)
                    results[(name, size), synced, busy].append(_evidence(record.warm))
            if (index + 1) % 10 == 0:
                print(f"  {index + 1}/{args.processes} rounds, {(time.monotonic() - started) / 60:.1f} min",
                      file=sys.stderr, flush=True)  # fmt: skip
    finally:
        busy_loop.kill()
        busy_loop.wait()
    elapsed = time.monotonic() - started

    print(f"{args.processes} fresh warm processes per arm; samples {args.samples}, min_sample_s {args.min_sample_s}, "
          f"max_warmup_s {args.max_warmup_s}; busy = a spinning process pinned to one of {os.cpu_count()} cores; "
          f"{elapsed / 60:.1f} min")  # fmt: skip
    print(
        "rule: the last result pending after the timed loop in any sample, or the trailing barrier waiting >= "
        f"{sync_check.SYNC_OUTSTANDING_CALLS_LIMIT:g} call's time in the median sample, or calls as timed faster than "
        f"{sync_check.SYNC_OVERLAP_LIMIT:g}x the same calls each waited on (analyse/sync_check.py); "
        "old rule: trailing fraction >= 5% or doubling ratio < 1.5"
    )
    rules = ("flagged", "flagged_by_probe", "flagged_by_timing", "flagged_by_overlap", "flagged_old_rule")
    totals = {(synced, rule): [0, 0] for synced in (True, False) for rule in rules}
    for name, size in workloads:
        case = f"jax_jit_cpu_{name}_{size}_f32"
        for synced, busy in sorted(ARMS, key=lambda arm: (not arm[0], arm[1])):
            rows = results[(name, size), synced, busy]
            wrong = {}
            for rule in rules:
                flags = sum(r[rule] for r in rows)
                wrong[rule] = flags if synced else len(rows) - flags
                totals[synced, rule][0] += wrong[rule]
                totals[synced, rule][1] += len(rows)
            print(
                f"\n{case} {'synchronised ' if synced else 'dispatch-only'} {'busy' if busy else 'idle'}: "
                f"{'false flags' if synced else 'misses'} {_rate(wrong['flagged'], len(rows))}; "
                f"probe alone {wrong['flagged_by_probe']}, timing alone {wrong['flagged_by_timing']}, "
                f"overlap alone {wrong['flagged_by_overlap']}, "
                f"old rule {wrong['flagged_old_rule']}"
            )
            print(
                "    min / median / max over processes:"
                f" pending samples {_spread([r['pending_samples'] for r in rows])} of {args.samples};"
                f" barrier waited (calls, median sample) {_spread([r['waited_calls_median'] for r in rows])};"
                f" (min sample) {_spread([r['waited_calls_min'] for r in rows])}"
            )
            for r in rows:
                if r["flagged"] is synced:  # a false flag or a miss
                    print(
                        f"    {'flagged' if synced else 'missed'}: last result pending in {r['pending_samples']} of "
                        f"{args.samples} samples; barrier waited {r['trailing_s_median'] * 1e6:.3g} us = "
                        f"{r['waited_calls_median']:.2g} calls' time (median sample); "
                        f"{r['per_call_s'] * 1e6:.3g} us per call; inner {r['inner_loops']}"
                    )
            print(
                f"    trailing barrier {_spread([r['trailing_s_median'] for r in rows], ' us', 1e6)};"
                f" trailing fraction {_spread([r['trailing_fraction_median'] for r in rows])};"
                f" doubling {_spread([r['doubling_median'] for r in rows])};"
                f" overlap ratio {_spread([r['overlap_ratio'] for r in rows])};"
                f" per call {_spread([r['per_call_s'] for r in rows], ' us', 1e6)};"
                f" inner {_spread([r['inner_loops'] for r in rows])}"
            )
    labels = {"flagged": "rule", "flagged_by_probe": "probe alone", "flagged_by_timing": "timing alone",
              "flagged_by_overlap": "overlap alone", "flagged_old_rule": "old rule"}  # fmt: skip
    print(f"\nall workloads, idle and busy (target: false flags <= {TARGET_FALSE_FLAGS:.0%}, misses 0):")
    for rule in rules:
        print(f"  {labels[rule]:13s} false flags {_rate(*totals[True, rule])}; misses {_rate(*totals[False, rule])}")
    print("reproduce: .venv/bin/python benchmarks/sync_check.py " + " ".join(sys.argv[1:]))
    if args.json:
        serialisable = {f"{n}_{s}|{'sync' if y else 'nosync'}|{'busy' if b else 'idle'}": rows
                        for ((n, s), y, b), rows in results.items()}  # fmt: skip
        with open(args.json, "w") as handle:
            json.dump(serialisable, handle, indent=1)


if __name__ == "__main__":
    main()
