"""What the four HistFactory workloads share inside the worker: reading the problem (in the
timed setup, as a user reads a workspace), preparing it for each engine, the reference
values and the gate check (parity with pyhf's NumPy backend and finite differences).
"""

from __future__ import annotations

import json
import math

import numpy as np

from ttfr.child.workloads.histfactory import dense

# Parity gates (f64), from the issue: NLL relative, q0 absolute.
NLL_RTOL = 1e-8
Q0_ATOL = 1e-4
# Finite-difference gates: max |autodiff - FD| / max(1, max |FD|).
FD_TOLERANCE = {"nll": 1e-6, "q0": 1e-3}
FD_STEP = {"nll": 1e-4, "q0": 1e-3}  # relative to max(1, |s_b|)
# Inputs after the dense arrays, in this order (native engines).
EXTRA_INPUTS = ("point", "signal", "init", "free", "lower", "upper")


class Problem:
    """A workspace read from disk, its signal sample and the evaluation point (by name)."""

    def __init__(self, raw: bytes, point: dict, signal: tuple[str, str], seed: int = 0):
        self.seed = seed
        self.raw = raw
        self.text = raw.decode("utf-8")
        self.spec = json.loads(self.text)
        self.point = point
        self.signal = signal

    def signal_nominal(self) -> np.ndarray:
        return np.asarray(signal_sample(self.spec, self.signal)["data"], dtype=np.float64)


def signal_sample(spec: dict, signal: tuple[str, str]) -> dict:
    """The sample entry (in `spec`, not a copy) of the (channel, sample) being differentiated."""
    channel, sample = signal
    for c in spec["channels"]:
        if c["name"] == channel:
            for s in c["samples"]:
                if s["name"] == sample:
                    return s
    raise KeyError(f"no sample {sample!r} in channel {channel!r}")


def load_problem(job: dict) -> Problem:
    with open(job["workspace"], "rb") as fh:
        raw = fh.read()
    with open(job["point"], encoding="utf-8") as fh:
        point = json.load(fh)
    channel, _, sample = job["signal"].partition("/")
    return Problem(raw, point, (channel, sample), int(job.get("seed", 0)))


def dataset_sha256(problem: Problem) -> str:
    import hashlib

    return hashlib.sha256(problem.raw).hexdigest()


def dense_inputs(problem: Problem) -> tuple[dense.DenseModel, list]:
    """The native engines' inputs: the dense arrays, then EXTRA_INPUTS (host NumPy)."""
    model = dense.compile_workspace(problem.spec, problem.signal)
    bounds = model.bounds()
    extras = {
        "point": np.array([problem.point[name] for name in model.names]),
        "signal": model.signal_nominal(),
        "init": model.inits(),
        "free": ~model.fixed(),
        "lower": bounds[:, 0].copy(),
        "upper": bounds[:, 1].copy(),
    }
    return model, [model.arrays[name] for name in dense.ARRAY_NAMES] + [extras[name] for name in EXTRA_INPUTS]


def split_native(inputs) -> tuple[dict, dict]:
    n = len(dense.ARRAY_NAMES)
    return dict(zip(dense.ARRAY_NAMES, inputs[:n])), dict(zip(EXTRA_INPUTS, inputs[n:]))


def inputs_for(runtime, problem: Problem):
    """What `runtime.put` receives: dense arrays for JAX/torch, an engine for pyhf/NextStat."""
    framework = runtime.framework
    if framework in ("jax", "torch"):
        return dense_inputs(problem)[1]
    if framework == "pyhf":
        from ttfr.child.workloads.histfactory.pyhf_engine import PyhfEngine

        return PyhfEngine(runtime.pyhf, runtime.variant, problem)
    if framework == "nextstat":
        from ttfr.child.workloads.histfactory.nextstat_engine import NextstatEngine

        return NextstatEngine(runtime.nextstat, problem)
    raise ValueError(f"no HistFactory engine for framework {framework!r}")


# ------------------------------------------------------------------------------ reference
def reference_values(problem: Problem, n_parameters: int) -> dict:
    """NLL at the evaluation point and q0 with the workspace's signal, from pyhf's NumPy
    backend (q0 from its JAX backend above 200 parameters, where NumPy's SciPy fits with
    finite-difference gradients take too long); computed once per workspace."""
    import pyhf

    backend = "numpy" if n_parameters <= 200 else "jax"
    previous = pyhf.get_backend()  # a pyhf engine in this process must keep its own backend
    try:
        from ttfr.child.workloads.histfactory.pyhf_engine import FIT_TOLERANCE, set_backend

        set_backend(pyhf, backend)
        values = _pyhf_values(pyhf, problem, backend)
        values["engine"] += f", SciPy tolerance {FIT_TOLERANCE:g}"
        return values
    finally:
        pyhf.set_backend(*previous)


def _pyhf_values(pyhf, problem: Problem, backend: str) -> dict:
    workspace = pyhf.Workspace(problem.spec)
    model = workspace.model()
    data = pyhf.tensorlib.astensor(workspace.data(model))
    pars = pyhf.tensorlib.astensor([problem.point[name] for name in model.config.par_names])
    nll = -float(model.logpdf(pars, data)[0])
    q0 = float(
        pyhf.infer.test_statistics.q0(
            0.0, data, model, model.config.suggested_init(), model.config.suggested_bounds(), model.config.suggested_fixed()
        )
    )
    return {"engine": f"pyhf {pyhf.__version__} ({backend} backend)", "nll": nll, "q0": q0}


def cached_reference(problem: Problem, n_parameters: int, path: str | None) -> dict:
    if path:
        try:
            with open(path, encoding="utf-8") as fh:
                return json.load(fh)
        except (OSError, ValueError):
            pass
    values = reference_values(problem, n_parameters)
    if path:
        import os

        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(values, fh)
        os.replace(tmp, path)
    return values


# ------------------------------------------------------------------------------ the gate
def central_differences(function, signal: np.ndarray, relative_step: float) -> np.ndarray:
    gradient = np.empty_like(signal)
    for b in range(signal.size):
        step = relative_step * max(1.0, abs(signal[b]))
        up, down = signal.copy(), signal.copy()
        up[b] += step
        down[b] -= step
        gradient[b] = (function(up) - function(down)) / (2.0 * step)
    return gradient


def fd_report(autodiff: np.ndarray, fd: np.ndarray, kind: str) -> dict:
    error = np.abs(np.asarray(autodiff, dtype=float) - fd)
    scale = max(1.0, float(np.max(np.abs(fd))))
    normalised = float(np.max(error)) / scale
    relative = error / np.maximum(np.abs(fd), 1e-12)
    return {
        "of": kind,
        "max_abs_error": float(np.max(error)),
        "max_rel_error": float(np.max(relative)),
        "normalised_error": normalised,
        "relative_step": FD_STEP[kind],
        "bins": int(fd.size),
        "tolerance": FD_TOLERANCE[kind],
        "passed": bool(math.isfinite(normalised) and normalised <= FD_TOLERANCE[kind]),
    }


def gate(engine, problem: Problem, job: dict, *, nll_value=None, q0_value=None, fd_of=None, gradient=None) -> dict:
    """Parity with the reference (NLL relative, q0 absolute) and, for gradient workloads,
    the FD check of the signal gradient (`gradient`: the one the timed call returned).
    Values the timed call produced are passed in; the others are computed here with the
    same engine."""
    signal = problem.signal_nominal()
    reference = cached_reference(problem, engine.n_parameters, job.get("reference"))
    if nll_value is None:
        nll_value = engine.nll(signal)
    if q0_value is None:
        q0_value = engine.q0(signal)
    nll_diff = abs(nll_value - reference["nll"]) / max(abs(reference["nll"]), 1e-300)
    q0_diff = abs(q0_value - reference["q0"])
    parity = {
        "nll": {"engine": nll_value, "reference": reference["nll"], "rel_diff": nll_diff, "tolerance": NLL_RTOL,
                "passed": nll_diff <= NLL_RTOL},
        "q0": {"engine": q0_value, "reference": reference["q0"], "abs_diff": q0_diff, "tolerance": Q0_ATOL,
               "passed": q0_diff <= Q0_ATOL},
    }  # fmt: skip
    check = {"reference": reference["engine"], "parity": parity}
    failures = [f"{k} parity {v.get('rel_diff', v.get('abs_diff')):.3g} > {v['tolerance']:g}" for k, v in parity.items()
                if not v["passed"]]  # fmt: skip
    normalised = [nll_diff / NLL_RTOL, q0_diff / Q0_ATOL]
    if fd_of:
        function = engine.nll if fd_of == "nll" else engine.q0
        if gradient is not None:
            autodiff = gradient
        else:
            autodiff = engine.nll_signal_grad(signal) if fd_of == "nll" else engine.q0_signal_grad(signal)
        fd = fd_report(autodiff, central_differences(function, signal, FD_STEP[fd_of]), fd_of)
        check["fd"] = fd
        normalised.append(fd["normalised_error"] / fd["tolerance"])
        if not fd["passed"]:
            failures.append(f"signal gradient vs finite differences {fd['normalised_error']:.3g} > {fd['tolerance']:g}")
    check.update(
        # Expressed in units of each gate's tolerance, so 1.0 is the pass line for all of them.
        max_normalised_error=float(max(normalised)),
        tolerance=1.0,
        passed=not failures,
    )
    if failures:
        check["detail"] = "; ".join(failures)
    return check
