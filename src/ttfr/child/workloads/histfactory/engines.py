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


# Up to this many Jacobian entries (bins x parameters) a compiled call is dominated by fixed
# per-argument and per-kernel costs, and the compact form wins: at complex8p (4 x 8) 22 us
# against 61 us for 29 arguments through jax.value_and_grad; at mid72p (12 x 72) and thu184p
# (41 x 184) the arithmetic dominates and the plain form is faster (50 vs 79 us, 90 vs 200 us).
COMPACT_JACOBIAN = 256
JACOBIAN_INDEX = "jacobian_index"  # packed beside the model's arrays (dense.jacobian_index)


def is_small(arrays: dict, n_parameters: int) -> bool:
    return int(arrays["observed"].shape[0]) * n_parameters <= COMPACT_JACOBIAN


def pack(xp, arrays: dict) -> tuple[tuple, object, object]:
    """The dense arrays as two flat buffers, one of floats and one of integers, and the static
    layout that cuts them back ((name, buffer, offset, shape) per array): a compiled call then
    takes 2 arguments for the model instead of 23."""
    layout, floats, ints, sizes = [], [], [], {"f": 0, "i": 0}
    for name, array in arrays.items():
        buffer = "f" if array.dtype.kind == "f" else "i"
        layout.append((name, buffer, sizes[buffer], tuple(int(d) for d in array.shape)))
        sizes[buffer] += int(np.prod(array.shape))
        (floats if buffer == "f" else ints).append(xp.reshape(array, (-1,)))
    return tuple(layout), xp.concatenate(floats), xp.concatenate(ints)


def unpack(layout: tuple, floats, ints) -> dict:
    """`pack`'s arrays again (static slices of the two buffers)."""
    out = {}
    for name, buffer, offset, shape in layout:
        source = floats if buffer == "f" else ints
        out[name] = source[offset : offset + int(np.prod(shape))].reshape(shape)
    return out


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
