"""A problem prepared for each engine: dense arrays for the native JAX/torch engines, an
engine object for pyhf and NextStat."""

from __future__ import annotations

import numpy as np

from ttfr.child.workloads.histfactory import dense
from ttfr.child.workloads.histfactory.problems import Problem

# Inputs after the dense arrays, in this order (native engines).
EXTRA_INPUTS = ("point", "signal", "init", "free", "lower", "upper")


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


def torch_engine(torch, compile_fn, inputs):
    """The native torch engine on a problem's inputs, with the point and signal it is evaluated at."""
    from ttfr.child.workloads.histfactory import native

    arrays, extra = split_native(inputs)
    return native.TorchEngine(torch, compile_fn, arrays), extra["point"], extra["signal"]


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
