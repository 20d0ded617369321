"""Compile in the loop: `sweep_mlp` (K 20-step trainings over a seeded grid of learning rate,
width and batch size) under every strategy, in one real `ttfr run` (rounds interleave the
strategies, so drift on this shared machine reaches them alike).

Targets (issue 11):
- JAX on CPU, K = 16, cold cache: the best strategy's total (process start to the loop's last
  result, median of the runs) is at most 1/3 of naive's, with the compile counts that explain it;
- torch.compile (--torch): static (naive) and dynamic shapes compile exactly as many graphs as
  expected (naive: one per distinct shape; dynamic: one), with their totals; and AOT
  (torch.export + AOTInductor packages per shape, loaded from a warm cache).
Also `ragged_batches` (N batches of ragged length) on JAX, every strategy, counts checked, and
with --hf the HistFactory training loop end to end (`hf_train20`, TTFR + 20 steps) per engine.

Prints each strategy's figures from suite.json's `loops` rows (the same the report shows) and
the ratios; exits 1 when a target is missed or a compile count is off its expectation.

    .venv/bin/python benchmarks/loops.py [--k 16] [--profile quick] [--torch] [--torch-k 4] [--ragged 50]
        [--hf 8,184] [--seed 0] [--keep DIR]
"""

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path


SEED = ["--seed", "0"]


def ttfr_run(out: Path, args: list[str]) -> tuple[float, dict]:
    argv = [sys.executable, "-m", "ttfr", "run", "--out", str(out), *SEED, *args]
    started = time.monotonic()
    done = subprocess.run(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    wall = time.monotonic() - started
    if done.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(argv)} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    (root,) = [p for p in out.iterdir() if p.is_dir()]
    return wall, json.loads((root / "suite.json").read_text())


def _s(summary) -> str:
    return "n/a" if not summary else f"{summary['median']:.3f} s"


def print_rows(rows: list[dict]) -> None:
    print(f"{'policy':<26} {'strategy':<9} {'K':>3} {'total':>9} {'loop':>9} {'compile':>8} {'compiles':>13} "
          f"{'vs naive':>8} {'<= naive from k':>15}")  # fmt: skip
    for r in rows:
        share = "n/a" if r["compile_share"] is None else f"{100 * r['compile_share']:.0f}%"
        counts = f"{r['compiles']} (exp {r['expected_compiles']})"
        ratio = "n/a" if r["vs_naive"] is None else f"{r['vs_naive']:.2f}"
        print(f"{r['policy']:<26} {r['strategy']:<9} {r['size']:>3} {_s(r['total_s']):>9} {_s(r['loop_s']):>9} "
              f"{share:>8} {counts:>13} {ratio:>8} {str(r['overtakes_naive_at_k'] or '-'):>15}")  # fmt: skip


def counts_off(rows: list[dict]) -> list[str]:
    return [f"{r['case']} ({r['policy']}): {r['compiles']} compiles, expected {r['expected_compiles']}"
            for r in rows if r["expected_compiles"] is not None and r["compiles"] != r["expected_compiles"]]  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--k", type=int, default=16, help="sweep_mlp length on JAX (0: skip)")
    parser.add_argument("--profile", default="quick")
    parser.add_argument("--torch", action="store_true", help="also torch.compile's static and dynamic shapes")
    parser.add_argument("--torch-k", type=int, default=4, help="sweep length for torch (each cold compile takes seconds)")
    parser.add_argument("--ragged", type=int, default=50, help="ragged_batches length on JAX (0: skip)")
    parser.add_argument("--hf", default="", help="hf_train20 end to end at these parameter counts (e.g. 8,184)")
    # pyhf's SciPy fits take ~14 s a step at 184 parameters: name pyhf_* here for small workspaces only
    parser.add_argument("--hf-backends", default="jax_jit_cpu,torch_eager_cpu,nextstat")
    parser.add_argument("--seed", type=int, default=0, help="the sweep's configurations and ragged lengths (and round order)")
    parser.add_argument("--keep", type=Path, help="write the result directories here")
    args = parser.parse_args()
    SEED[1] = str(args.seed)
    out = args.keep or Path(tempfile.mkdtemp(prefix="ttfr-loops-"))
    failures = []

    if args.k:  # 0: skip
        wall, suite = ttfr_run(out / "jax", ["--workloads", "sweep_mlp", "--backends", "jax_jit_cpu", "--sizes", str(args.k),
                                             "--profile", args.profile, "--cache-policy", "cold-cache,warm-cache"])  # fmt: skip
        rows = [r for r in suite.get("loops", []) if r["backend"] == "jax_jit_cpu"]
        print(f"== sweep_mlp K={args.k}, jax_jit_cpu, profile {args.profile} ({wall:.0f} s)")
        print_rows(rows)
        failures += counts_off(rows)
        for policy in ("cold-process/cold-cache", "cold-process/warm-cache"):
            mine = {r["strategy"]: r for r in rows if r["policy"] == policy and r["total_s"]}
            if "naive" not in mine:
                failures.append(f"{policy}: no naive figure")
                continue
            best = min((r for s, r in mine.items() if s != "naive"), key=lambda r: r["total_s"]["median"])
            ratio = best["total_s"]["median"] / mine["naive"]["total_s"]["median"]
            print(f"{policy}: best strategy {best['strategy']} at {ratio:.2f} x naive's total "
                  f"({best['compiles']} compiles against naive's {mine['naive']['compiles']})")  # fmt: skip
            if policy == "cold-process/cold-cache" and ratio > 1 / 3:
                failures.append(f"cold cache: best strategy {best['strategy']} is {ratio:.2f} x naive, target <= 0.33")

    if args.ragged:
        wall, suite = ttfr_run(out / "ragged", [
            "--workloads", "ragged_batches", "--backends", "jax_jit_cpu", "--sizes", str(args.ragged),
            "--profile", args.profile, "--cache-policy", "cold-cache,warm-cache"])  # fmt: skip
        rows = suite.get("loops", [])
        print(f"\n== ragged_batches N={args.ragged}, jax_jit_cpu ({wall:.0f} s)")
        print_rows(rows)
        failures += counts_off(rows)

    if args.torch:
        wall, suite = ttfr_run(out / "torch", [
            "--workloads", "sweep_mlp_naive,sweep_mlp_dynamic,sweep_mlp_aot", "--backends", "torch_compile_cpu",
            "--sizes", str(args.torch_k), "--profile", args.profile, "--cache-policy", "cold-cache,warm-cache"])  # fmt: skip
        rows = suite.get("loops", [])
        print(f"\n== sweep_mlp K={args.torch_k}, torch_compile_cpu, naive (static), dynamic and AOT ({wall:.0f} s)")
        print_rows(rows)
        failures += counts_off(rows)
        if {r["strategy"] for r in rows} != {"naive", "dynamic", "aot"}:
            failures.append("torch: naive, dynamic or aot gave no loop figures")

    if args.hf:
        wall, suite = ttfr_run(out / "hf", [
            "--workloads", "hf_train20", "--backends", args.hf_backends, "--sizes", args.hf,
            "--profile", args.profile, "--cache-policy", "cold-cache,warm-cache"])  # fmt: skip
        print(f"\n== hf_train20 (the 20-step loop end to end) at {args.hf} parameters ({wall:.0f} s)")
        print(f"{'policy':<26} {'engine':<16} {'size':>5} {'total':>9} {'loop':>9} {'compiles':>13}")
        for r in suite.get("loops", []):
            counts = f"{r['compiles']} (exp {r['expected_compiles']})"
            print(f"{r['policy']:<26} {r['backend']:<16} {r['size']:>5} {_s(r['total_s']):>9} {_s(r['loop_s']):>9} {counts:>13}")
        failures += counts_off(suite.get("loops", []))

    print(f"\nresults: {out}")
    for failure in failures:
        print("MISSED:", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
