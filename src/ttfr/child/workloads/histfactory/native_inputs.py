"""The native JAX/torch engines' inputs: the dense arrays of a compiled workspace, then the
evaluation point, signal, initial values, free mask and bounds (host NumPy), in one fixed order;
and the compact form that packs the arrays into two flat buffers. What the engines and the
workloads that feed them agree on, apart from either."""

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
JACOBIAN_INDEX = "jacobian_index"  # packed beside the model's arrays (likelihood.jacobian_index)


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
