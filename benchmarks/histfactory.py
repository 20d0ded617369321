"""HistFactory engines: warm NLL + gradient of every engine as a ratio to NextStat's, and
cold TTFR per engine, for the complex8p, mid72p and thu184p presets.

Part 1 runs `ttfr run --workloads hf_nll_grad` over all CPU engines: fresh processes,
rounds interleaved across engines, cold-cache TTFR and warm-process call medians.
Part 2 times the core calls in this process, interleaved round by round: NextStat's
`nll + grad_nll` (its Rust core; no signal gradient) against our native JAX engine's
value and gradients (parameters and signal: hf_nll_grad's own call, compact on a small model)
and pyhf's JAX backend, each synchronised per call. JAX runs CPU computations inline in this
process, as the native engine's worker does (pyhf_jax's worker does not: part 1 has its figure).
Targets (native JAX at thu184p): warm ratio to NextStat <= 1.0, >= 3x faster than pyhf_jax.

    .venv/bin/python benchmarks/histfactory.py [--cold-runs N] [--warm-procs N] [--rounds N]
"""

import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ENGINES = ("jax_jit_cpu", "torch_eager_cpu", "torch_compile_cpu", "pyhf_numpy", "pyhf_jax", "pyhf_pytorch", "nextstat")
PRESETS = ("complex8p", "mid72p", "thu184p")


def ms(seconds):
    return "—" if seconds is None else f"{seconds * 1e3:9.3f} ms"


def part1(cold_runs: int, warm_procs: int, seed: int) -> None:
    with tempfile.TemporaryDirectory() as out:
        command = [sys.executable, "-m", "ttfr", "run", "--workloads", "hf_nll_grad", "--backends", ",".join(ENGINES),
                   "--workspace-preset", ",".join(PRESETS), "--cold-runs", str(cold_runs), "--warm-procs", str(warm_procs),
                   "--cache-policy", "cold-cache,warm", "--seed", str(seed), "--out", out]  # fmt: skip
        print("$", " ".join(command[1:]), flush=True)
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode not in (0, 1):
            raise SystemExit(done.stdout[-2000:] + done.stderr[-2000:])
        root = next(Path(out).iterdir())
        rows = json.loads((root / "suite.json").read_text())["scaling"]
    print(f"\nPart 1: ttfr run, {cold_runs} cold runs and {warm_procs} warm processes per engine (medians)")
    print(f"{'engine':18s} {'params':>6s} {'cold TTFR':>12s} {'warm call':>12s} {'warm / nextstat':>16s}")
    for params in sorted({r["parameters"] for r in rows}):
        group = {r["engine"]: r for r in rows if r["parameters"] == params}
        base = (group.get("nextstat") or {}).get("warm_call_s")
        for engine in ENGINES:
            row = group.get(engine)
            if not row:
                continue
            ratio = f"{row['warm_call_s'] / base:16.2f}" if base and row["warm_call_s"] else f"{'—':>16s}"
            print(f"{engine:18s} {params:6d} {ms(row['ttfr_cold_cache_s']):>12s} {ms(row['warm_call_s']):>12s} {ratio}")


def _timed(call, repeats):
    call()
    start = time.perf_counter()
    for _ in range(repeats):
        call()
    return (time.perf_counter() - start) / repeats


def _core_calls(name: str, seed: int) -> tuple[int, dict]:
    """The three core calls of one preset: NextStat, native JAX, pyhf on JAX."""
    import jax
    import jax.numpy as jnp
    import nextstat
    import pyhf

    from ttfr.child.backends import pyhf_backend
    from ttfr.child.workloads.histfactory import dense, native_inputs, nextstat_engine, problems, pyhf_engine
    from ttfr.child.workloads.histfactory import workspace as hf_workspace

    spec = hf_workspace.preset(name, seed)
    signal = hf_workspace.find_signal(spec)
    model = dense.compile_workspace(spec, signal)
    point = dict(zip(model.names, dense.evaluation_point(model, seed)))
    problem = problems.Problem(json.dumps(spec).encode(), point, signal, seed)
    from ttfr.child.workloads import hf_nll_grad

    inputs = [jnp.asarray(x) for x in native_inputs.dense_inputs(problem)[1]]
    function, args = hf_nll_grad.jax_build(jax, inputs)
    jitted = jax.jit(function)
    ns = nextstat_engine.NextstatEngine(nextstat, problem)
    pyhf_backend.set_backend(pyhf, "jax")
    pyhf_call = pyhf_engine.PyhfEngine(pyhf, "jax", problem).nll_grads_call()[0]
    return len(model.names), {
        "nextstat": (lambda: (ns.model.nll(ns.point), ns.model.grad_nll(ns.point)), 2000),
        "jax": (lambda: jax.block_until_ready(jitted(*args)), 2000),
        "pyhf_jax": (lambda: jax.block_until_ready(pyhf_call()), 300),
    }


def part2(rounds: int, seed: int) -> None:
    import jax

    jax.config.update("jax_enable_x64", True)
    jax.config.update("jax_cpu_enable_async_dispatch", False)  # as the native engine's worker (catalog: inline_cpu)
    print(f"\nPart 2: core calls in one process, {rounds} interleaved rounds (median per call)")
    header = ("params", "nextstat nll+grad", "native JAX", "pyhf_jax", "JAX/nextstat", "pyhf_jax/JAX")
    print("{:>6s} {:>18s} {:>12s} {:>12s} {:>13s} {:>13s}".format(*header))
    order = random.Random(seed)
    for name in PRESETS:
        n_params, calls = _core_calls(name, seed)
        times = {k: [] for k in calls}
        for _ in range(rounds):
            names = list(calls)
            order.shuffle(names)
            for key in names:
                call, repeats = calls[key]
                times[key].append(_timed(call, repeats))
        med = {k: statistics.median(v) for k, v in times.items()}
        ratios = (med["jax"] / med["nextstat"], med["pyhf_jax"] / med["jax"])
        print(f"{n_params:6d} {ms(med['nextstat']):>18s} {ms(med['jax']):>12s} {ms(med['pyhf_jax']):>12s} "
              f"{ratios[0]:13.2f} {ratios[1]:13.2f}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cold-runs", type=int, default=3)
    parser.add_argument("--warm-procs", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--skip-run", action="store_true", help="only part 2")
    args = parser.parse_args()
    if not args.skip_run:
        part1(args.cold_runs, args.warm_procs, args.seed)
    part2(args.rounds, args.seed)


if __name__ == "__main__":
    main()
