"""Issue 29's cases and target: JAX (jit matmul, the HistFactory NLL + gradients, the MLP train
step) and torch.compile (the MLP step) at N = 1, 2, 4, 8 under every sharing mode, in the quick
profile (one group per case, mode and N), within 5 minutes on this 2-core machine.

    .venv/bin/python benchmarks/concurrency.py [--sizes 1,2,4,8] [--cases A,B] [--limit-s 300]

Prints, per case, TTFR p50 / p95 and the time until all N had a result per mode and N, the compile
dedup ratio, whether the cache was whole afterwards, the run-queue wait (queueing for a CPU, which
N > 2 cannot avoid here) and the warm-up-first advice; then the run's wall time against the limit
(exit 1 above it).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ttfr.artifacts.reader import load_finished
from ttfr.model.base import present

CASES = ("jax_jit_cpu_matmul_512_f32", "jax_jit_cpu_hf_nll_grad_8_f64", "jax_jit_cpu_mlp_train_step_64_f32",
         "torch_compile_cpu_mlp_train_step_64_f32")  # fmt: skip


def seconds(value) -> str:
    return "—" if value is None else f"{value:.2f}"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1,2,4,8")
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--limit-s", type=float, default=300.0)
    args = parser.parse_args(argv)
    ttfr = str(Path(sys.executable).with_name("ttfr"))
    with tempfile.TemporaryDirectory() as out:
        argv = [ttfr, "run", "--cases", args.cases, "--concurrency", args.sizes, "--cache-policy", "cold-cache",
                "--cold-runs", "1", "--warm-procs", "1", "--no-html", "--out", out]  # fmt: skip
        started = time.monotonic()
        subprocess.run(argv, check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wall = time.monotonic() - started
        (result,) = [p for p in Path(out).iterdir() if p.is_dir()]
        cases = load_finished(result).cases  # verified: schemas and hashes, as every reader does
    print(f"{'case / mode':48} {'N':>2} {'p50':>6} {'p95':>6} {'all N':>6} {'dedup':>6} {'whole':>5} {'runq':>6}")
    for case in cases:
        together = case.concurrency
        if not present(together):
            print(f"{case.case}: no groups ({case.status}: {case.reason})")
            continue
        for point in together.points:
            dedup = point.dedup_ratio
            print(f"{case.case + ' ' + point.mode:48} {point.n:>2} {seconds(point.ttfr_p50_s):>6} "
                  f"{seconds(point.ttfr_p95_s):>6} {seconds(point.all_results_s):>6} "
                  f"{'—' if dedup is None else f'{dedup:.2f}':>6} {str(point.whole):>5} "
                  f"{seconds(point.runq_wait_s):>6}")  # fmt: skip
        for advice in together.fan_out:
            print(f"  N={advice.n}: all together {seconds(advice.together_s)} s, warm-up first "
                  f"{seconds(advice.warm_up_first_s)} s (saving {seconds(advice.saving_s)} s)")  # fmt: skip
    print(f"\nwall time {wall:.0f} s (limit {args.limit_s:.0f} s): {'met' if wall <= args.limit_s else 'MISSED'}")
    return 0 if wall <= args.limit_s else 1


if __name__ == "__main__":
    sys.exit(main())
