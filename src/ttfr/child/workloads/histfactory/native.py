"""ttfr's own HistFactory engine in JAX and PyTorch: NLL with gradients, maximum-likelihood
fits and the discovery statistic q0 with its gradient with respect to the signal histogram.

Fits: projected Newton with Levenberg-Marquardt damping over the free parameters; a
parameter at a bound whose gradient pushes outwards is held (active set). The gradient is
exact; the Hessian is Gauss-Newton (Fisher scoring): J^T diag(n/nu^2) J from the Jacobian
J = d nu/d theta (one reverse pass per bin) plus the constraints' exact diagonal. That
drops only sum_b (1 - n_b/nu_b) d^2 nu_b, small near the minimum, and is ~50x cheaper than
the exact Hessian at 184 parameters (0.65 ms vs 34 ms per step in JAX on CPU).
Converged when the projected gradient's largest component is below GRADIENT_TOL or the NLL
stops moving; at most MAX_ITERATIONS steps (a fixed bound, so JAX can compile the loop).

q0 = 2 (NLL(mu=0, profiled) - NLL(free fit)), 0 when mu_hat <= 0 (the POI's lower bound is
0, as in pyhf). Its signal gradient uses the envelope theorem, not differentiation through
the fits: at a minimum the derivative of the profiled NLL with respect to s equals the
partial derivative at the fitted parameters, so dq0/ds = 2 (dNLL/ds(theta_0) - dNLL/ds(theta_hat)).
The POI is parameter 0 of the dense model.
"""

from __future__ import annotations

import numpy as np

from ttfr.child.workloads.histfactory.dense import (
    Ops,
    constraint_grad_and_curvature,
    expected_bins,
    nll,
    nll_from_expected,
)
from ttfr.child.workloads.histfactory.engines import split_native

MAX_ITERATIONS = 100
GRADIENT_TOL = 1e-9
RELATIVE_NLL_TOL = 1e-15
POI = 0


def _gauss_newton(ops, jac, expected, pars, arrays):
    """(NLL, exact gradient, Gauss-Newton Hessian) from nu and its Jacobian."""
    xp = ops.xp
    observed = arrays["observed"]
    c_grad, c_curvature = constraint_grad_and_curvature(ops, pars, arrays)
    gradient = -(jac.T @ (observed / expected - 1.0)) + c_grad
    weights = observed / (expected * expected)
    hessian = jac.T @ (weights[:, None] * jac) + xp.diag(c_curvature)
    return nll_from_expected(ops, expected, pars, arrays), gradient, hessian


# ---------------------------------------------------------------------------------- JAX
def jax_functions(jax):
    """Pure functions over (*dense arrays, ...) for jax.jit."""
    jnp = jax.numpy
    lax = jax.lax
    ops = Ops("jax", jnp)

    def value(pars, signal, arrays):
        return nll(ops, pars, signal, arrays)

    value_and_grads = jax.value_and_grad(value, argnums=(0, 1))
    signal_grad = jax.grad(value, argnums=1)

    def newton_terms(pars, signal, arrays):
        expected_and_aux = jax.jacrev(lambda p: (expected_bins(ops, p, signal, arrays),) * 2, has_aux=True)
        jac, expected = expected_and_aux(pars)
        return _gauss_newton(ops, jac, expected, pars, arrays)

    def fit(pars, free, lower, upper, signal, arrays):
        def projected(p, g, free):
            at_lower = (p <= lower) & (g > 0)
            at_upper = (p >= upper) & (g < 0)
            return free & ~at_lower & ~at_upper

        def step(state):
            p, f, lam, it, done = state
            _f, g, h = newton_terms(p, signal, arrays)
            active = projected(p, g, free)
            mask = active.astype(p.dtype)
            g_free = g * mask
            h = h * jnp.outer(mask, mask) + jnp.diag(1.0 - mask)
            trial = jnp.clip(p - jnp.linalg.solve(h + lam * jnp.eye(p.shape[0]), g_free), lower, upper)
            f_trial = value(trial, signal, arrays)
            accept = jnp.isfinite(f_trial) & (f_trial <= f)
            small_gradient = jnp.max(jnp.abs(g_free)) < GRADIENT_TOL
            stalled = accept & (jnp.abs(f - f_trial) <= RELATIVE_NLL_TOL * jnp.maximum(1.0, jnp.abs(f)))
            p_next = jnp.where(accept, trial, p)
            f_next = jnp.where(accept, f_trial, f)
            lam_next = jnp.where(accept, lam * 0.2, lam * 10.0)
            return p_next, f_next, lam_next, it + 1, small_gradient | stalled

        def keep_going(state):
            return (~state[4]) & (state[3] < MAX_ITERATIONS)

        p0 = jnp.clip(pars, lower, upper)
        init = (p0, value(p0, signal, arrays), jnp.asarray(1e-6, p0.dtype), 0, jnp.asarray(False))
        p, f, _lam, iterations, converged = lax.while_loop(keep_going, step, init)
        return p, f, iterations, converged

    def q0_and_grad(init, free, lower, upper, signal, arrays):
        init, free = jnp.asarray(init), jnp.asarray(free)
        p_free, f_free, it_free, ok_free = fit(init, free, lower, upper, signal, arrays)
        conditional_init = init.at[POI].set(0.0)
        p_cond, f_cond, it_cond, ok_cond = fit(conditional_init, free.at[POI].set(False), lower, upper, signal, arrays)
        muhat = p_free[POI]
        raw = 2.0 * (f_cond - f_free)
        positive = (muhat > 0) & (raw > 0)
        q0 = jnp.where(positive, raw, 0.0)
        grad = 2.0 * (signal_grad(p_cond, signal, arrays) - signal_grad(p_free, signal, arrays))
        return q0, jnp.where(positive, grad, 0.0), muhat, it_free + it_cond, ok_free & ok_cond

    return {
        "value": value,
        "value_and_grads": value_and_grads,
        "q0_and_grad": q0_and_grad,
    }


# -------------------------------------------------------------------------------- PyTorch
class TorchEngine:
    """The same algorithm in PyTorch: the Newton loop runs in Python, its per-step kernel
    (value, gradient and Hessian via torch.func) goes through `compile_fn` (identity for
    eager, torch.compile for the compiled backend)."""

    def __init__(self, torch, compile_fn, arrays: dict):
        from torch.func import grad, grad_and_value, jacrev

        self.torch = torch
        self.arrays = arrays
        ops = Ops("torch", torch)

        def value(pars, signal):
            return nll(ops, pars, signal, arrays)

        def value_and_grads(pars, signal):
            (g_pars, g_signal), out = grad_and_value(value, argnums=(0, 1))(pars, signal)
            return out, g_pars, g_signal

        def newton_kernel(pars, signal):
            jac, expected = jacrev(lambda p: (expected_bins(ops, p, signal, arrays),) * 2, has_aux=True)(pars)
            return _gauss_newton(ops, jac, expected, pars, arrays)

        def signal_grad(pars, signal):
            return grad(value, argnums=1)(pars, signal)

        self.value = compile_fn(value)
        self.value_and_grads = compile_fn(value_and_grads)
        self.newton_kernel = compile_fn(newton_kernel)
        self.signal_grad = compile_fn(signal_grad)

    def fit(self, pars, free, lower, upper, signal):
        torch = self.torch
        p = torch.clamp(pars, lower, upper)
        f = self.value(p, signal)
        lam = 1e-6
        eye = torch.eye(p.shape[0], dtype=p.dtype, device=p.device)
        converged = False
        iterations = 0
        while iterations < MAX_ITERATIONS:
            iterations += 1
            f, g, h = self.newton_kernel(p, signal)
            active = free & ~((p <= lower) & (g > 0)) & ~((p >= upper) & (g < 0))
            mask = active.to(p.dtype)
            g_free = g * mask
            h = h * torch.outer(mask, mask) + torch.diag(1.0 - mask)
            trial = torch.clamp(p - torch.linalg.solve(h + lam * eye, g_free), lower, upper)
            f_trial = self.value(trial, signal)
            accept = bool(torch.isfinite(f_trial)) and bool(f_trial <= f)
            small_gradient = float(torch.max(torch.abs(g_free))) < GRADIENT_TOL
            stalled = accept and abs(float(f - f_trial)) <= RELATIVE_NLL_TOL * max(1.0, abs(float(f)))
            if accept:
                p, f, lam = trial, f_trial, lam * 0.2
            else:
                lam *= 10.0
            if small_gradient or stalled:
                converged = True
                break
        return p, f, iterations, converged

    def q0_and_grad(self, init, free, lower, upper, signal):
        torch = self.torch
        p_free, f_free, it_free, ok_free = self.fit(init, free, lower, upper, signal)
        conditional_init = init.clone()
        conditional_init[POI] = 0.0
        conditional_free = free.clone()
        conditional_free[POI] = False
        p_cond, f_cond, it_cond, ok_cond = self.fit(conditional_init, conditional_free, lower, upper, signal)
        muhat = p_free[POI]
        raw = 2.0 * (f_cond - f_free)
        if not (float(muhat) > 0 and float(raw) > 0):
            zero = torch.zeros((), dtype=signal.dtype, device=signal.device)
            return zero, torch.zeros_like(signal), muhat, it_free + it_cond, ok_free and ok_cond
        grad = 2.0 * (self.signal_grad(p_cond, signal) - self.signal_grad(p_free, signal))
        return raw, grad, muhat, it_free + it_cond, ok_free and ok_cond


# ------------------------------------------------------------------ the gate's view (host)
class JaxProbe:
    """NLL, q0 and their signal gradients at host values, jitted (after timing)."""

    def __init__(self, jax, inputs):
        self.jax = jax
        functions = jax_functions(jax)
        arrays, extra = split_native(inputs)
        self.extra = extra
        self.n_parameters = int(extra["point"].shape[0])
        self._value = jax.jit(lambda s: functions["value"](extra["point"], s, arrays))
        self._signal_grad = jax.jit(lambda s: functions["value_and_grads"](extra["point"], s, arrays)[1][1])
        self._q0 = jax.jit(
            lambda s: functions["q0_and_grad"](extra["init"], extra["free"], extra["lower"], extra["upper"], s, arrays)
        )

    def nll(self, signal) -> float:
        return float(self._value(signal))

    def nll_signal_grad(self, signal) -> np.ndarray:
        return np.asarray(self._signal_grad(signal))

    def q0(self, signal) -> float:
        return float(self._q0(signal)[0])

    def q0_signal_grad(self, signal) -> np.ndarray:
        return np.asarray(self._q0(signal)[1])


class TorchProbe:
    def __init__(self, torch, inputs):
        self.torch = torch
        arrays, extra = split_native(inputs)
        self.extra = extra
        self.engine = TorchEngine(torch, lambda fn: fn, arrays)
        self.n_parameters = int(extra["point"].shape[0])
        self.like = extra["signal"]

    def _tensor(self, signal):
        return self.torch.as_tensor(np.asarray(signal), dtype=self.like.dtype, device=self.like.device)

    def nll(self, signal) -> float:
        return float(self.engine.value(self.extra["point"], self._tensor(signal)))

    def nll_signal_grad(self, signal) -> np.ndarray:
        return self.engine.value_and_grads(self.extra["point"], self._tensor(signal))[2].cpu().numpy()

    def _q0(self, signal):
        e = self.extra
        return self.engine.q0_and_grad(e["init"], e["free"], e["lower"], e["upper"], self._tensor(signal))

    def q0(self, signal) -> float:
        return float(self._q0(signal)[0])

    def q0_signal_grad(self, signal) -> np.ndarray:
        return self._q0(signal)[1].cpu().numpy()


def probe(runtime, inputs):
    """The gate's engine for a runtime: native probes for JAX/torch, the engine itself otherwise."""
    if runtime.framework == "jax":
        return JaxProbe(runtime.jax, inputs)
    if runtime.framework == "torch":
        return TorchProbe(runtime.torch, inputs)
    return inputs
