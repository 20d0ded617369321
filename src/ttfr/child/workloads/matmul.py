"""Dense matrix product C = A @ B of two seeded n x n matrices."""

import numpy as np

# Normalised max error (max|out - ref| / max|ref|) allowed against the float64 reference.
TOLERANCE = {"float32": 2e-4, "float64": 1e-10}


def make_inputs(size, dtype, seed):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((size, size)).astype(dtype) for _ in range(2)]


def reference(inputs):
    a, b = (x.astype(np.float64) for x in inputs)
    return [a @ b]


def numpy_fn(np_module):
    def matmul(a, b):
        return (np_module.matmul(a, b),)

    return matmul


def jax_fn(jax):
    def matmul(a, b):
        return (jax.numpy.matmul(a, b),)

    return matmul


def torch_build(torch, compile_fn, inputs):
    def matmul(a, b):
        return (torch.matmul(a, b),)

    return compile_fn(matmul), inputs
