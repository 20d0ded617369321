"""A JAX (and NumPy, PyTorch) function as a ttfr case:

ttfr run --case-file examples/jax_softplus.py --backends jax_jit_cpu,numpy,torch_eager_cpu
"""

import numpy as np

from ttfr.cases import Case

case = Case("softplus_sum", sizes=(1_000, 100_000), dtypes=("float32", "float64"),
            description="sum of softplus over a seeded vector")  # fmt: skip


@case.inputs
def inputs(size, dtype, seed):
    return [np.random.default_rng(seed).standard_normal(size).astype(dtype)]


@case.reference
def reference(x):
    return [np.logaddexp(0.0, x.astype(np.float64)).sum()]


@case.numpy
def build_numpy(np):
    return lambda x: np.logaddexp(0.0, x).sum()


@case.jax
def build_jax(jax):
    return lambda x: jax.numpy.sum(jax.nn.softplus(x))


@case.torch
def build_torch(torch, compile, device):
    return compile(lambda x: torch.nn.functional.softplus(x).sum())
