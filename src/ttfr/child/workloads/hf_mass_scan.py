"""The physics sweep: profiled q0 and its signal gradient over signal hypotheses and over
binnings of a workspace — the loop a mass scan or a binning optimisation runs.

Iterations: HYPOTHESES signal templates at the workspace's binning (a Gaussian bump moved
across the signal channel, the nominal's total kept: same shapes, new values), then the
nominal signal at each binning of SPLITS (every bin of the signal's channel split in m,
binnings.split_bins: new bin and parameter counts, so a compiler sees new shapes). Each
iteration's result is q0 followed by dq0/ds.

Strategies: naive on every engine (native JAX jits one q0 function and calls it with each
binning's arrays: one compile for the hypotheses, one per binning; native torch builds an
engine per binning; pyhf and NextStat an engine per binning); for native JAX also vmapped
(the hypotheses in one batched call through the while-loop fits) and aot (every binning's
executable compiled before the loop, serialised into the AOT directory, loaded by later
runs). Gate: parity with the pyhf reference at the workspace's binning, and every
iteration's q0 and gradient equal to a naive recomputation on the same engine.
"""

from __future__ import annotations


import numpy as np

from ttfr.child.workloads.aot_store import JaxExecutables
from ttfr.child.workloads.called_kernels import CalledKernels
from ttfr.child.workloads.histfactory import (
    array_ops,
    binnings,
    dense,
    engines,
    gate,
    likelihood,
    native,
    native_inputs,
    problems,
)
from ttfr.child.workloads.histfactory import workspace as hf_workspace

LOOP = True
HYPOTHESES = 6
SPLITS = (2, 3, 4)
# No inputs_for: each binning's engine or arrays are built inside the loop, as a scan does.
load_inputs = problems.load_problem
dataset_sha256 = problems.dataset_sha256
AGREEMENT_RTOL = 1e-6  # a strategy's q0 and gradient against the naive recomputation
Q0_NAME = "q0_and_grad"  # the jitted function's name in JAX's compile events


def templates(nominal: np.ndarray, count: int = HYPOTHESES) -> list[np.ndarray]:
    """Signal hypotheses: a Gaussian bump at `count` positions across the bins, plus a floor
    (every yield positive), scaled to the nominal's total."""
    x = (np.arange(nominal.size) + 0.5) / nominal.size
    out = []
    for centre in np.linspace(0.15, 0.85, count):
        shape = np.exp(-0.5 * ((x - centre) / 0.2) ** 2) + 0.05
        out.append(nominal.sum() * shape / shape.sum())
    return out


def binned_problem(problem: problems.Problem, m: int) -> problems.Problem:
    """The problem at the binning with the signal channel's bins split in m (initial values
    as the point: the gate's evaluation point belongs to the workspace's own binning)."""
    if m == 1:
        return problem
    spec = binnings.split_bins(problem.spec, problem.signal[0], m)
    model = dense.compile_workspace(spec, problem.signal)
    point = dict(zip(model.names, model.inits()))
    return problems.Problem(hf_workspace.canonical_bytes(spec), point, problem.signal, problem.seed)


def iterations(problem: problems.Problem) -> list[tuple[str, int, np.ndarray | None]]:
    """(label, split factor, template; None: the binning's nominal signal)."""
    nominal = problem.signal_nominal()
    hypotheses = [(f"hypothesis {i + 1} of {HYPOTHESES}", 1, t) for i, t in enumerate(templates(nominal))]
    return hypotheses + [(f"binning: signal channel bins x {m}", m, None) for m in SPLITS]


class _Scan:
    """Iterations over (binning, template); `engine_for(m)` builds a binning's engine once
    per loop run (the first time it is needed), `evaluate(engine, template)` gives (q0, grad)."""

    loaded = 0
    functions = None
    expected_compiles = None

    def __init__(self, runtime, problem):
        self.runtime, self.problem = runtime, problem
        self.plan = iterations(problem)
        self.labels = [label for label, _m, _t in self.plan]
        self.problems = {}
        self.engines = {}

    def binned(self, m):
        if m not in self.problems:
            self.problems[m] = binned_problem(self.problem, m)
        return self.problems[m]

    def iteration(self, index):
        if index == 0:
            self.engines = {}  # every loop run builds its engines again, as a scan does
        _label, m, template = self.plan[index]
        if m not in self.engines:
            self.engines[m] = self.engine_for(m)
        signal = self.binned(m).signal_nominal() if template is None else template
        q0, grad = self.evaluate(self.engines[m], signal)
        # q0 then its gradient, for each template evaluated (one, or a batch of them)
        rows = zip(np.atleast_1d(np.asarray(q0, dtype=float)), np.atleast_2d(np.asarray(grad, dtype=float)))
        return np.concatenate([np.concatenate([[q], g]) for q, g in rows])

    def output(self, results):
        return [np.concatenate(results)]


class _EngineScan(_Scan):
    """pyhf and NextStat: an engine object per binning."""

    def engine_for(self, m):
        return engines.inputs_for(self.runtime, self.binned(m))

    def evaluate(self, engine, signal):
        q0, grad, *_ = engine.q0_and_grad(np.asarray(signal, dtype=float))
        return q0, grad


class _JaxScan(_Scan):
    """Native JAX: one jitted q0 for every binning (new shapes: a new executable)."""

    functions = (Q0_NAME,)

    def __init__(self, runtime, problem):
        super().__init__(runtime, problem)
        self.jax, self.device = runtime.jax, runtime.device
        self.functions_of = native.jax_functions(self.jax)
        self.q0 = self.jax.jit(self.functions_of["q0_and_grad"])
        self.expected_compiles = 1 + len(SPLITS)

    def engine_for(self, m):
        """The binning's arrays on the device, and the function that evaluates them."""
        return self.runtime.put(engines.inputs_for(self.runtime, self.binned(m))), self.q0

    def evaluate(self, engine, signal):
        inputs, function = engine
        arrays, e = native_inputs.split_native(inputs)
        q0, grad, *_ = function(e["init"], e["free"], e["lower"], e["upper"], self.jax.numpy.asarray(signal), arrays)
        return q0, grad


class _JaxBatchedScan(_JaxScan):
    """The hypotheses in one vmapped call (one iteration), then the binnings as naive."""

    def __init__(self, runtime, problem):
        super().__init__(runtime, problem)
        jax = self.jax
        self.batched = jax.jit(jax.vmap(self.functions_of["q0_and_grad"], in_axes=(None, None, None, None, 0, None)))
        hypotheses = [p for p in self.plan if p[2] is not None]
        self.plan = [(f"all {len(hypotheses)} hypotheses, batched", 1, np.stack([t for _l, _m, t in hypotheses]))] + [
            p for p in self.plan if p[2] is None
        ]
        self.labels = [label for label, _m, _t in self.plan]

    def evaluate(self, engine, signal):
        inputs, function = engine
        return super().evaluate((inputs, self.batched if np.ndim(signal) == 2 else function), signal)


class _JaxAheadOfTimeScan(_JaxScan):
    """Every binning's executable compiled before the loop, or loaded from the AOT directory."""

    def __init__(self, runtime, problem):
        super().__init__(runtime, problem)
        self.executables = {}
        self.splits = sorted({m for _l, m, _t in self.plan})
        self.prepare_label = f"ahead of time: {len(self.splits)} binning(s) compiled or loaded"

    def prepare(self):
        digest = problems.dataset_sha256(self.problem)[:16]
        store = JaxExecutables(self.jax, self.device, f"hf_q0-{digest}",
                               sources=(native, dense, likelihood, array_ops, binnings, engines))  # fmt: skip
        for m in self.splits:
            arrays, e = native_inputs.split_native(self.engine_for(m)[0])

            def compile_ahead(arrays=arrays, e=e):  # traced only when not loaded
                return self.q0.trace(e["init"], e["free"], e["lower"], e["upper"], e["signal"], arrays).lower().compile()

            self.executables[m] = store.get(f"split{m}", compile_ahead)
        self.loaded = store.loaded
        self.expected_compiles = len(self.splits) - self.loaded

    def engine_for(self, m):
        return super().engine_for(m)[0], self.executables.get(m)


class _TorchScan(_Scan):
    """Native torch: an engine per binning, its kernels compiled (torch.compile) or eager."""

    def __init__(self, runtime, problem):
        super().__init__(runtime, problem)
        self.torch, self.device = runtime.torch, runtime.device
        self.kernels = CalledKernels(runtime.torch, runtime.compiles)

    @property
    def expected_compiles(self):  # one graph per compiled kernel called (static shapes)
        return self.kernels.expected()

    def engine_for(self, m):
        arrays, e = native_inputs.split_native(self.runtime.put(engines.inputs_for(self.runtime, self.binned(m))))
        return native.TorchEngine(self.torch, self.kernels.compile_fn, arrays), e

    def evaluate(self, engine_and_extras, signal):
        engine, e = engine_and_extras
        signal = self.torch.as_tensor(np.asarray(signal), dtype=e["signal"].dtype, device=self.device)
        q0, grad, *_ = engine.q0_and_grad(e["init"], e["free"], e["lower"], e["upper"], signal)
        return float(q0), grad.detach().cpu().numpy()


def build_loop(runtime, job, problem):
    strategy = job.strategy or "naive"
    framework = runtime.framework
    if framework == "jax":
        builders = {"naive": _JaxScan, "vmapped": _JaxBatchedScan, "aot": _JaxAheadOfTimeScan}
    elif framework == "torch":
        builders = {"naive": _TorchScan}
    else:
        builders = {"naive": _EngineScan}
    if strategy not in builders:
        raise ValueError(f"strategy {strategy!r} does not apply to {framework}; it has: {', '.join(builders)}")
    return builders[strategy](runtime, problem)


def check(runtime, problem, host_problem, host_first, job):
    """Parity at the workspace's binning, then every iteration against naive on this engine."""
    probe = native.probe(runtime, runtime.put(engines.inputs_for(runtime, problem)))
    result = gate.gate(probe, problem, job.reference or None)
    naive = build_loop(runtime, job.replace(strategy="naive"), problem)
    expected = naive.output([naive.iteration(i) for i in range(len(naive.labels))])[0]
    got = np.asarray(host_first[0], dtype=float)
    if got.shape != expected.shape:
        error = None
    else:
        error = float(np.max(np.abs(got - expected))) / max(1.0, float(np.max(np.abs(expected))))
    agrees = error is not None and np.isfinite(got).all() and error <= AGREEMENT_RTOL
    result["scan"] = {"iterations": len(naive.labels), "max_normalised_error_vs_naive": error, "tolerance": AGREEMENT_RTOL,
                      "q0": [float(v) for v in got[:1]]}  # fmt: skip
    if not agrees:
        result["passed"] = False
        shown = "n/a (shapes differ)" if error is None else f"{error:.3g}"
        result["detail"] = "; ".join(filter(None, [result.get("detail"), f"scan differs from naive: {shown}"]))
    return result
