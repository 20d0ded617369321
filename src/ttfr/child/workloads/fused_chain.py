"""A fusion-heavy elementwise/reduction chain over an (n, 256) batch.

affine -> GELU (tanh form) -> row layer-norm -> row softmax -> softmax-weighted row sum.
Compilers fuse this into a few kernels; eager runtimes launch one op per step.
"""

import math

import numpy as np

COLUMNS = 256
TOLERANCE = {"float32": 1e-4, "float64": 1e-10}
_GELU_C = math.sqrt(2.0 / math.pi)


def make_inputs(size, dtype, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((size, COLUMNS))
    gamma = rng.uniform(0.5, 1.5, COLUMNS)
    beta = rng.uniform(-0.5, 0.5, COLUMNS)
    return [v.astype(dtype) for v in (x, gamma, beta)]


def _chain(xp, x, gamma, beta):
    # One body for numpy, jax.numpy and torch: all three take axis=/keepdims= and amax.
    y = x * gamma + beta
    g = 0.5 * y * (1.0 + xp.tanh(_GELU_C * (y + 0.044715 * y * y * y)))
    centred = g - xp.mean(g, axis=-1, keepdims=True)
    var = xp.mean(centred * centred, axis=-1, keepdims=True)
    z = centred / xp.sqrt(var + 1e-5)
    e = xp.exp(z - xp.amax(z, axis=-1, keepdims=True))
    s = e / xp.sum(e, axis=-1, keepdims=True)
    return (xp.sum(s * x, axis=-1),)


def reference(inputs):
    return list(_chain(np, *(v.astype(np.float64) for v in inputs)))


def numpy_fn(np_module):
    def fused_chain(x, gamma, beta):
        return _chain(np_module, x, gamma, beta)

    return fused_chain


def jax_fn(jax):
    def fused_chain(x, gamma, beta):
        return _chain(jax.numpy, x, gamma, beta)

    return fused_chain


def torch_build(torch, compile_fn, inputs):
    def fused_chain(x, gamma, beta):
        return _chain(torch, x, gamma, beta)

    return compile_fn(fused_chain), inputs
