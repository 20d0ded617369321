"""The HistFactory training loop at the limit: native JAX's training step and profiled q0
at 184 parameters (thu184p) on this CPU, interleaved against a baseline implementation.

Two server processes hold the same problem, one importing ttfr from this tree, one from
`--baseline REV` (default: the last commit before the fits were reworked), each compiled
and warmed up before timing. Rounds alternate between them in a seeded random order, so
drift on this shared machine reaches both alike; only one process runs at a time. Per
round and implementation:
- step: a fresh 20-step training run (weights, Adam state and the fits' warm starts back
  at the start, the compiled step kept), the median of steps 2..20;
- q0: the profiled q0 with its signal gradient from the model's initial values (both fits
  from scratch, as `hf_profiled_q0` times it), the median of `--calls` calls.
Prints the medians over rounds, the ratio current / baseline with a bootstrap CI over the
rounds (scipy.stats.bootstrap), iteration counts, and the agreement of the results
(20-step losses, q0, dq0/ds); exits 1 when a target is missed or the results disagree.

Targets (issue 11): <= 2.4 ms per training step and <= 3 ms per profiled q0 at 184
parameters, parity unchanged.

    .venv/bin/python benchmarks/hf_limit.py [--rounds 15] [--calls 20] [--preset thu184p]
        [--baseline REV] [--seed 0]
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import random
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BASELINE = "35282c7"  # the Gauss-Newton fits with reverse-mode Jacobians and a 184 x 184 solve
TARGETS_S = {"step": 2.4e-3, "q0": 3.0e-3}
LOSS_ATOL, Q0_ATOL, GRAD_RTOL = 1e-8, 1e-9, 1e-6


# ------------------------------------------------------------------------- server side
class Server:
    """One implementation's compiled step and q0 on one problem, timed on request."""

    def __init__(self, preset: str, seed: int):
        import jax

        jax.config.update("jax_enable_x64", True)
        import jax.numpy as jnp

        from ttfr.child.workloads.histfactory import dense, native, native_inputs, problems, train
        from ttfr.child.workloads.histfactory import workspace as hf_workspace

        self.jax, self.train = jax, train
        spec = hf_workspace.preset(preset, seed)
        signal = hf_workspace.find_signal(spec)
        model = dense.compile_workspace(spec, signal)
        point = dict(zip(model.names, dense.evaluation_point(model, seed)))
        problem = problems.Problem(json.dumps(spec).encode(), point, signal, seed)
        _model, host = native_inputs.dense_inputs(problem)
        inputs = [jnp.asarray(x) for x in host]
        arrays, e = native_inputs.split_native(inputs)
        state_args = (seed, model.inits()) if len(inspect.signature(train.native_state_inputs).parameters) > 1 else (seed,)
        self.first_state = [jnp.asarray(x) for x in train.native_state_inputs(*state_args)]
        self.trainer = train.JaxTrainer(jax, inputs + self.first_state, train.TIMED_VARIANT)
        fns = native.jax_functions(jax)
        self.q0 = jax.jit(lambda s: fns["q0_and_grad"](e["init"], e["free"], e["lower"], e["upper"], s, arrays))
        self.signal = e["signal"]
        self.n_parameters = len(model.names)
        self.training()  # compile and warm up both
        self.q0_calls(3)

    def training(self) -> dict:
        self.trainer.state = list(self.first_state)
        losses, times = [], []
        for _ in range(self.train.STEPS):
            start = time.perf_counter()
            losses.append(self.trainer.step())  # float(): waits for the result
            times.append(time.perf_counter() - start)
        return {"losses": losses, "step_s": statistics.median(times[1:])}

    def q0_calls(self, calls: int) -> dict:
        times = []
        for _ in range(calls):
            start = time.perf_counter()
            out = self.jax.block_until_ready(self.q0(self.signal))
            times.append(time.perf_counter() - start)
        return {"q0_s": statistics.median(times), "q0": float(out[0]), "grad": [float(v) for v in out[1]],
                "iterations": int(out[3])}  # fmt: skip


def serve(preset: str, seed: int) -> None:
    server = Server(preset, seed)
    import ttfr

    print(json.dumps({"ready": True, "ttfr": str(Path(ttfr.__file__).parent), "parameters": server.n_parameters}), flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        reply = server.training() if request["what"] == "step" else server.q0_calls(request["calls"])
        print(json.dumps(reply), flush=True)


# ------------------------------------------------------------------------- client side
class Client:
    def __init__(self, name: str, src: Path, preset: str, seed: int):
        env = {**os.environ, "PYTHONPATH": str(src)}
        argv = [sys.executable, __file__, "--serve", "--preset", preset, "--seed", str(seed)]
        self.name = name
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
        hello = self._read()
        if not Path(hello["ttfr"]).resolve().is_relative_to(src.resolve()):
            raise SystemExit(f"{name}: imported ttfr from {hello['ttfr']}, not from {src}")
        self.parameters = hello["parameters"]

    def _read(self) -> dict:
        line = self.proc.stdout.readline()
        if not line:
            raise SystemExit(f"{self.name}: the server exited ({self.proc.wait()})")
        return json.loads(line)

    def ask(self, what: str, calls: int) -> dict:
        self.proc.stdin.write(json.dumps({"what": what, "calls": calls}) + "\n")
        self.proc.stdin.flush()
        return self._read()

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait()


def baseline_tree(rev: str, into: Path) -> Path:
    archive = into / "baseline.tar"
    subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", "-o", str(archive), rev, "src"], check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(into, filter="data")
    return into / "src"


def ratio_ci(current: list[float], baseline: list[float], seed: int) -> tuple[float, float, float]:
    """Median of the per-round ratios and its 95% bootstrap CI."""
    from scipy import stats

    ratios = [c / b for c, b in zip(current, baseline)]
    ci = stats.bootstrap((ratios,), statistics.median, n_resamples=2000, random_state=seed, method="percentile")
    return statistics.median(ratios), ci.confidence_interval.low, ci.confidence_interval.high


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--calls", type=int, default=20, help="q0 calls per round")
    parser.add_argument("--preset", default="thu184p")
    parser.add_argument("--baseline", default=BASELINE, help="the git revision to compare with")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        return serve(args.preset, args.seed)

    with tempfile.TemporaryDirectory() as scratch:
        baseline_src = baseline_tree(args.baseline, Path(scratch))
        clients = {"current": Client("current", ROOT / "src", args.preset, args.seed),
                   "baseline": Client("baseline", baseline_src, args.preset, args.seed)}  # fmt: skip
        print(f"{args.preset} ({clients['current'].parameters} parameters), baseline {args.baseline}, "
              f"{args.rounds} interleaved rounds, seed {args.seed}", flush=True)  # fmt: skip
        order = random.Random(args.seed)
        results = {(name, what): [] for name in clients for what in ("step", "q0")}
        for _ in range(args.rounds):
            tasks = [(name, what) for name in clients for what in ("step", "q0")]
            order.shuffle(tasks)
            for name, what in tasks:
                results[name, what].append(clients[name].ask(what, args.calls))
        for client in clients.values():
            client.close()

    failures = []
    print(f"\n{'':8s} {'current':>11s} {'baseline':>11s} {'current/baseline (95% CI)':>28s} {'target':>9s}")
    for what, key in (("step", "step_s"), ("q0", "q0_s")):
        current = [r[key] for r in results["current", what]]
        baseline = [r[key] for r in results["baseline", what]]
        ratio, low, high = ratio_ci(current, baseline, args.seed)
        median = statistics.median(current)
        met = median <= TARGETS_S[what]
        failures += [] if met else [f"{what} {median * 1e3:.2f} ms > {TARGETS_S[what] * 1e3:.1f} ms"]
        print(f"{what:8s} {median * 1e3:8.2f} ms {statistics.median(baseline) * 1e3:8.2f} ms "
              f"{ratio:10.3f} ({low:.3f}-{high:.3f}) {'<=' if met else '>'} {TARGETS_S[what] * 1e3:.1f} ms")  # fmt: skip

    q_cur, q_base = results["current", "q0"][-1], results["baseline", "q0"][-1]
    l_cur, l_base = results["current", "step"][-1]["losses"], results["baseline", "step"][-1]["losses"]
    loss_diff = max(abs(a - b) for a, b in zip(l_cur, l_base))
    grad_diff = max(abs(a - b) for a, b in zip(q_cur["grad"], q_base["grad"])) / max(abs(v) for v in q_base["grad"])
    print(f"\nfit iterations per q0 from the initial values: current {q_cur['iterations']}, baseline {q_base['iterations']}")
    print(f"agreement: 20-step losses max |diff| {loss_diff:.2e} (<= {LOSS_ATOL:g}), q0 |diff| "
          f"{abs(q_cur['q0'] - q_base['q0']):.2e} (<= {Q0_ATOL:g}), "
          f"dq0/ds max rel diff {grad_diff:.2e} (<= {GRAD_RTOL:g})")  # fmt: skip
    if loss_diff > LOSS_ATOL or abs(q_cur["q0"] - q_base["q0"]) > Q0_ATOL or grad_diff > GRAD_RTOL:
        failures.append("the implementations disagree")
    if failures:
        print("MISSED: " + "; ".join(failures))
        raise SystemExit(1)


if __name__ == "__main__":
    main()
