"""The few array operations that differ between NumPy, jax.numpy and torch, so that the
HistFactory NLL (likelihood.py) and the native fits (native.py) are written once for all three."""

from __future__ import annotations

import numpy as np


class Ops:
    """The few operations that differ between NumPy, jax.numpy and torch (`solve`: a linear
    system, (n, n) x (n, k); `spd_solve`: a symmetric positive definite one, by Cholesky
    where there is one)."""

    def __init__(self, framework: str, module):
        self.framework = framework
        self.xp = module
        if framework == "jax":
            import jax

            self.segment_sum = lambda data, ids, n: jax.ops.segment_sum(data, ids, num_segments=n)
            self.concat = module.concatenate
            self.ones1 = lambda like: module.ones((1,), dtype=like.dtype)
            self.zeros = lambda n, like: module.zeros((n,), dtype=like.dtype)
            from jax.scipy.linalg import cho_factor, cho_solve

            self.spd_solve = lambda matrix, rhs: cho_solve(cho_factor(matrix, lower=True), rhs)
            self.solve = module.linalg.solve
        elif framework == "torch":
            self.segment_sum = lambda data, ids, n: module.zeros(n, dtype=data.dtype, device=data.device).index_add(0, ids, data)
            self.concat = module.cat
            self.ones1 = lambda like: module.ones(1, dtype=like.dtype, device=like.device)
            self.zeros = lambda n, like: module.zeros(n, dtype=like.dtype, device=like.device)
            self.spd_solve, self.solve = _torch_spd_solve(module), _torch_solve(module)
        else:
            self.segment_sum = lambda data, ids, n: np.bincount(ids, weights=data, minlength=n)
            self.concat = np.concatenate
            self.ones1 = lambda like: np.ones(1, dtype=like.dtype)
            self.zeros = lambda n, like: np.zeros(n, dtype=like.dtype)
            self.spd_solve = self.solve = np.linalg.solve


# torch's _ex forms: no error check, which torch.compile would turn into an effectful node
# that keeps the graph out of Inductor's FX graph cache. A failed factorisation (info != 0)
# gives NaN, as in JAX, and the fit rejects that step.
def _torch_spd_solve(torch):
    def spd_solve(matrix, rhs):
        factor, info = torch.linalg.cholesky_ex(matrix)
        return torch.where(info == 0, torch.cholesky_solve(rhs, factor), torch.nan)

    return spd_solve


def _torch_solve(torch):
    def solve(matrix, rhs):
        result, info = torch.linalg.solve_ex(matrix, rhs)
        return torch.where(info == 0, result, torch.nan)

    return solve
