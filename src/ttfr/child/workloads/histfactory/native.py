"""ttfr's own HistFactory engine in JAX and PyTorch: NLL with gradients, maximum-likelihood
fits and the discovery statistic q0 with its gradient with respect to the signal histogram.

Fits: projected Newton with Levenberg-Marquardt damping over the free parameters; a
parameter at a bound whose gradient pushes outwards is held (active set). The gradient is
exact; the Hessian is Gauss-Newton (Fisher scoring): J^T diag(n/nu^2) J from the analytic
Jacobian J = d nu/d theta (likelihood.expected_and_jacobian) plus the constraints' exact
diagonal. That drops only sum_b (1 - n_b/nu_b) d^2 nu_b, small near the minimum. J has one
row per bin, so the Newton system is solved through the bins (_newton_direction: a
(bins + unconstrained) system instead of a parameters x parameters one; 41 + 4 instead of
184 at thu184p).
Converged when the projected gradient's largest component is below GRADIENT_TOL, or when
an accepted, barely damped step moves no parameter by more than STEP_TOL (relative to
1 + |theta|): Gauss-Newton converges linearly here (~10x per step), so the point is
then ~STEP_TOL/10 from the minimum. A trial point is accepted when its NLL is no higher
than the current one's by more than the NLL's rounding (F_NOISE relative): near the
minimum the NLL cannot rank points any more, and without that allowance the damping grew
until the iteration cap (35 iterations for a q0 at 184 parameters, 13 with it). At most
MAX_ITERATIONS steps (a fixed bound, so JAX can compile the loop).

q0 = 2 (NLL(mu=0, profiled) - NLL(free fit)), 0 when mu_hat <= 0 (the POI's lower bound is
0, as in pyhf). Its signal gradient uses the envelope theorem, not differentiation through
the fits: at a minimum the derivative of the profiled NLL with respect to s equals the
partial derivative at the fitted parameters, so dq0/ds = 2 (dNLL/ds(theta_0) - dNLL/ds(theta_hat)).
Both fits start from the model's initial values, or from `starts` (e.g. the previous
training step's optima: a warm start); q0_and_grad returns the optima for that.
The POI is parameter 0 of the dense model.
"""

from __future__ import annotations

import copy

import numpy as np

from ttfr.child.workloads.histfactory.array_ops import Ops
from ttfr.child.workloads.histfactory.likelihood import (
    constraint_grad_and_curvature,
    expected_and_jacobian,
    jacobian_index,
    nll,
    nll_from_expected,
    signal_gradient,
)
from ttfr.child.workloads.histfactory.native_inputs import split_native

MAX_ITERATIONS = 100
GRADIENT_TOL = 1e-9
STEP_TOL = 1e-8
F_NOISE = 1e-13  # the NLL's rounding, relative to max(1, |NLL|)
CONVERGED_DAMPING = 1e-3  # damping / smallest curvature above which a step is too short to say the fit converged
INITIAL_DAMPING = 1e-6
POI = 0


def _newton_direction(ops, p, expected, jac, free, lower, upper, lam, arrays):
    """The damped Gauss-Newton step over the active parameters: (projected gradient, step,
    damping relative to the smallest positive curvature of an active parameter).

    Solves (U^T U + D) delta = g with U = diag(sqrt(n)/nu) J (bins x parameters) and D the
    constraints' curvature + damping (held parameters: a unit diagonal, zero column and
    gradient, so they do not move). Constrained parameters (D > 0) are eliminated through
    the bins: with r = U delta, delta_c = (g_c - U_c^T r) / D_c and M = I + U_c D_c^-1 U_c^T
    (bins x bins, positive definite), r = M^-1 (U_u delta_u + U_c D_c^-1 g_c), and the few
    unconstrained parameters solve (D_u + U_u^T M^-1 U_u) delta_u = g_u - U_u^T M^-1 U_c D_c^-1 g_c.
    One Cholesky of M instead of one of the parameters x parameters matrix (41 vs 184 at
    thu184p); the dense system when that is not larger."""
    xp = ops.xp
    observed = arrays["observed"]
    c_grad, curvature = constraint_grad_and_curvature(ops, p, arrays)
    g = -(jac.T @ (observed / expected - 1.0)) + c_grad
    active = free & ~((p <= lower) & (g > 0)) & ~((p >= upper) & (g < 0))
    mask = xp.where(active, 1.0 + 0.0 * p, 0.0 * p)
    g = g * mask
    rows = (xp.sqrt(observed) / expected)[:, None] * jac * mask[None, :]
    diagonal = curvature * mask + (1.0 - mask) + lam
    # How hard the step is damped: lam against the smallest curvature (Gauss-Newton diagonal)
    # of a parameter that can move; a step damped well below its Newton length says nothing
    # about convergence.
    hessian_diagonal = xp.sum(rows * rows, 0) + curvature * mask
    movable = active & (hessian_diagonal > 0)
    relative_damping = lam / xp.min(xp.where(movable, hessian_diagonal, xp.inf + 0.0 * p))
    cons, unc = arrays["cons_idx"], arrays["unc_idx"]
    n_bins, n_unc = observed.shape[0], unc.shape[0]
    if n_bins + n_unc >= p.shape[0]:  # static: few parameters, the dense system is the smaller
        return g, ops.spd_solve(rows.T @ rows + xp.diag(diagonal), g[:, None])[:, 0], relative_damping
    u_c, d_c, g_c = rows[:, cons], diagonal[cons], g[cons]
    scaled = u_c / d_c[None, :]
    bins_block = xp.diag(xp.ones_like(observed)) + scaled @ u_c.T
    if n_unc == 0:  # static: every parameter constrained (a POI with a constraint term)
        r = ops.spd_solve(bins_block, (scaled @ g_c)[:, None])[:, 0]
        return g, ops.segment_sum((g_c - u_c.T @ r) / d_c, cons, p.shape[0]), relative_damping
    u_u = rows[:, unc]
    solved = ops.spd_solve(bins_block, ops.concat([u_u, (scaled @ g_c)[:, None]], 1))  # M^-1 [U_u, U_c D_c^-1 g_c]
    schur = xp.diag(diagonal[unc]) + u_u.T @ solved[:, :n_unc]
    step_u = ops.solve(schur, (g[unc] - u_u.T @ solved[:, n_unc])[:, None])[:, 0]
    r = solved[:, :n_unc] @ step_u + solved[:, n_unc]
    step_c = (g_c - u_c.T @ r) / d_c
    # Back to parameter order: the two index sets are a partition, so the scatter-add sets.
    return g, ops.segment_sum(ops.concat([step_c, step_u], 0), ops.concat([cons, unc], 0), p.shape[0]), relative_damping


def _converged(xp, g, p, trial, accept, relative_damping):
    small_gradient = xp.max(xp.abs(g)) < GRADIENT_TOL
    barely_damped = relative_damping <= CONVERGED_DAMPING
    small_step = accept & barely_damped & (xp.max(xp.abs(trial - p) / (1.0 + xp.abs(p))) <= STEP_TOL)
    return small_gradient | small_step


def nll_and_grads(ops, pars, signal, arrays, index):
    """(NLL, dNLL/d signal, dNLL/d parameters) without reverse mode: the analytic Jacobian of
    the expected bins, the constraints' exact gradient and the signal block's slopes (the
    pieces the fits use). Fewer, simpler kernels than jax.value_and_grad's: where each kernel's
    fixed cost dominates (small models), the faster form."""
    expected, jac = expected_and_jacobian(ops, pars, signal, arrays, index)
    c_grad, _curvature = constraint_grad_and_curvature(ops, pars, arrays)
    g_pars = -(jac.T @ (arrays["observed"] / expected - 1.0)) + c_grad
    g_signal = signal_gradient(ops, pars, expected, arrays, signal.shape[0])
    return nll_from_expected(ops, expected, pars, arrays), g_signal, g_pars


def _q0_from_fits(free_fit, cond_fit):
    """q0 (raw, before the mu_hat > 0 cut) and whether it counts, from the two fits' NLLs."""
    muhat = free_fit[0][POI]
    raw = 2.0 * (cond_fit[1] - free_fit[1])
    return muhat, raw, (muhat > 0) & (raw > 0)


# ---------------------------------------------------------------------------------- JAX
def jax_functions(jax):
    """Pure functions over (*dense arrays, ...) for jax.jit."""
    jnp = jax.numpy
    lax = jax.lax
    ops = Ops("jax", jnp)

    def value(pars, signal, arrays):
        return nll(ops, pars, signal, arrays)

    value_and_grads = jax.value_and_grad(value, argnums=(0, 1))

    def fit(pars, free, lower, upper, signal, arrays):
        """(optimum, NLL there, expected bins there, iterations, converged)."""
        index = jacobian_index(ops, arrays, pars.shape[0])

        def evaluate(p):
            expected, jac = expected_and_jacobian(ops, p, signal, arrays, index)
            return nll_from_expected(ops, expected, p, arrays), expected, jac

        def step(state):
            p, f, expected, jac, lam, it, _done = state
            g, delta, damping = _newton_direction(ops, p, expected, jac, free, lower, upper, lam, arrays)
            trial = jnp.clip(p - delta, lower, upper)
            f_trial, expected_trial, jac_trial = evaluate(trial)
            accept = jnp.isfinite(f_trial) & (f_trial <= f + F_NOISE * jnp.maximum(1.0, jnp.abs(f)))
            done = _converged(jnp, g, p, trial, accept, damping)

            def pick(new, old):
                return jnp.where(accept, new, old)

            lam_next = jnp.where(accept, lam * 0.2, lam * 10.0)
            return pick(trial, p), pick(f_trial, f), pick(expected_trial, expected), pick(jac_trial, jac), lam_next, it + 1, done

        def keep_going(state):
            return (~state[6]) & (state[5] < MAX_ITERATIONS)

        p0 = jnp.clip(pars, lower, upper)
        init = (p0, *evaluate(p0), jnp.asarray(INITIAL_DAMPING, p0.dtype), 0, jnp.asarray(False))
        p, f, expected, _jac, _lam, iterations, converged = lax.while_loop(keep_going, step, init)
        return p, f, expected, iterations, converged

    def q0_and_grad(init, free, lower, upper, signal, arrays, starts=None):
        """(q0, dq0/ds, mu_hat, iterations of both fits, both converged, (free optimum,
        conditional optimum)); `starts`: the fits' starting points, else `init`."""
        init, free = jnp.asarray(init), jnp.asarray(free)
        start_free, start_cond = (init, init) if starts is None else (jnp.asarray(x) for x in starts)
        free_fit = fit(start_free, free, lower, upper, signal, arrays)
        cond_fit = fit(start_cond.at[POI].set(0.0), free.at[POI].set(False), lower, upper, signal, arrays)
        muhat, raw, positive = _q0_from_fits(free_fit, cond_fit)
        n_signal = signal.shape[0]
        grad = 2.0 * (
            signal_gradient(ops, cond_fit[0], cond_fit[2], arrays, n_signal)
            - signal_gradient(ops, free_fit[0], free_fit[2], arrays, n_signal)
        )
        return (
            jnp.where(positive, raw, 0.0),
            jnp.where(positive, grad, 0.0),
            muhat,
            free_fit[3] + cond_fit[3],
            free_fit[4] & cond_fit[4],
            (free_fit[0], cond_fit[0]),
        )

    return {
        "value": value,
        "value_and_grads": value_and_grads,
        "q0_and_grad": q0_and_grad,
    }


# -------------------------------------------------------------------------------- PyTorch
def _vmappable(ops):
    """`ops` with a scatter-add that torch.compile batches right. Under torch.compile(vmap(...))
    torch 2.13 sums `torch.zeros(n).index_add(0, ids, batched)` over the batch (the fresh,
    unbatched destination); a destination made from the data (`new_zeros`) is batched with it.
    vmap of an already compiled function is no way round: dynamo runs it eagerly."""
    batched = copy.copy(ops)
    batched.segment_sum = lambda data, ids, n: data.new_zeros(n).index_add(0, ids, data)
    return batched


def _torch_accepts(torch, f_trial, f):
    """The trial point's acceptance, on the device: finite and no higher than the current NLL
    by more than its rounding. In float64 whatever the dtype: the rule the host-driven loop
    applied to Python floats, bit for bit."""
    f_trial, f = f_trial.to(torch.float64), f.to(torch.float64)
    return torch.isfinite(f_trial) & (f_trial <= f + F_NOISE * torch.clamp(torch.abs(f), min=1.0))


class TorchEngine:
    """The same algorithm in PyTorch: the Newton loop runs in Python, its kernels (value
    with gradients, its batched form over signals, the expected bins with their Jacobian,
    one whole Newton iteration) go through `compile_fn` (identity for eager, torch.compile
    for the compiled backend).

    The fit's state stays on the device (jax_functions' fit is the model: the accept decision,
    the damping and the update are `torch.where`s in `step`); the loop reads one flag per
    iteration, whether to stop, and sends nothing to the device. On a GPU its figures are
    launch-bound: small kernels and that one synchronisation per iteration. CUDA's index_add
    (the scatter-adds, array_ops.Ops.segment_sum) adds with atomics: not bit-deterministic there."""

    def __init__(self, torch, compile_fn, arrays: dict):
        from torch.func import grad_and_value, vmap

        self.torch = torch
        self.arrays = arrays
        ops = self.ops = Ops("torch", torch)
        index = jacobian_index(ops, arrays, int(arrays["cons_idx"].shape[0] + arrays["unc_idx"].shape[0]))

        def value(pars, signal):
            return nll(ops, pars, signal, arrays)

        def value_and_grads(pars, signal):
            (g_pars, g_signal), out = grad_and_value(value, argnums=(0, 1))(pars, signal)
            return out, g_pars, g_signal

        def evaluate(pars, signal):
            expected, jac = expected_and_jacobian(ops, pars, signal, arrays, index)
            return nll_from_expected(ops, expected, pars, arrays), expected, jac

        def step(p, f, expected, jac, lam, free, lower, upper, signal):
            """One damped Newton iteration: the next (p, f, expected, jac, lam) and whether the
            fit has converged. `lam` is float64 (the damping the host loop kept as a Python float)."""
            g, delta, damping = _newton_direction(ops, p, expected, jac, free, lower, upper, lam.to(p.dtype), arrays)
            trial = torch.clamp(p - delta, lower, upper)
            f_trial, expected_trial, jac_trial = evaluate(trial, signal)
            accept = _torch_accepts(torch, f_trial, f)
            done = _converged(torch, g, p, trial, accept, damping)

            def pick(new, old):
                return torch.where(accept, new, old)

            lam_next = torch.where(accept, lam * 0.2, lam * 10.0)
            return pick(trial, p), pick(f_trial, f), pick(expected_trial, expected), pick(jac_trial, jac), lam_next, done

        batched_ops = _vmappable(ops)

        def values(pars, signals):
            """NLLs at a stack of signals (one per row) in one call: the finite differences' points."""
            return vmap(lambda s: nll(batched_ops, pars, s, arrays))(signals)

        self.value = compile_fn(value)
        self.values = compile_fn(values)
        self.value_and_grads = compile_fn(value_and_grads)
        self.evaluate = compile_fn(evaluate)
        self.step = compile_fn(step)

    def fit(self, pars, free, lower, upper, signal):
        """(optimum, NLL there, expected bins there, iterations (int), converged (bool))."""
        torch = self.torch
        p = torch.clamp(pars, lower, upper)
        f, expected, jac = self.evaluate(p, signal)
        # The Jacobian is a slice of a padded table; `step` returns it whole (contiguous): the
        # same layout from the first iteration on, else torch.compile recompiles `step` once.
        lam = torch.full((), INITIAL_DAMPING, dtype=torch.float64, device=p.device)
        state = (p, f, expected, jac.contiguous(), lam)
        iterations, converged = 0, False
        while not converged and iterations < MAX_ITERATIONS:
            *state, done = self.step(*state, free, lower, upper, signal)
            iterations += 1
            converged = bool(done)  # the iteration's one host synchronisation
        p, f, expected, _jac, _lam = state
        return p, f, expected, iterations, converged

    def q0_and_grad(self, init, free, lower, upper, signal, starts=None):
        start_free, start_cond = (init, init) if starts is None else starts
        free_fit = self.fit(start_free, free, lower, upper, signal)
        conditional_init = start_cond.clone()
        conditional_init[POI] = 0.0
        conditional_free = free.clone()
        conditional_free[POI] = False
        cond_fit = self.fit(conditional_init, conditional_free, lower, upper, signal)
        muhat, raw, positive = _q0_from_fits(free_fit, cond_fit)
        iterations, converged, optima = free_fit[3] + cond_fit[3], free_fit[4] and cond_fit[4], (free_fit[0], cond_fit[0])
        n_signal = signal.shape[0]
        grad = 2.0 * (
            signal_gradient(self.ops, cond_fit[0], cond_fit[2], self.arrays, n_signal)
            - signal_gradient(self.ops, free_fit[0], free_fit[2], self.arrays, n_signal)
        )
        # q0 = 0 where mu_hat <= 0, chosen on the device (as in JAX) rather than by reading `positive`
        where = self.torch.where
        return where(positive, raw, 0.0), where(positive, grad, 0.0), muhat, iterations, converged, optima


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


def torch_engine(torch, compile_fn, inputs):
    """The native torch engine on a problem's inputs, with the point and signal it is evaluated at."""
    arrays, extra = split_native(inputs)
    return TorchEngine(torch, compile_fn, arrays), extra["point"], extra["signal"]
