"""pyhf 0.7 as an engine, through its public API, with its NumPy, JAX or PyTorch backend.

pyhf builds its model from concrete JSON numbers, so the signal histogram is not a
differentiable input of `model.logpdf`. The signal sample carries only multiplicative
modifiers here (normfactor, normsys, lumi), so its rates are linear in its nominal
yields: nu(theta, s') = nu(theta) + (s'/s - 1) * nu_signal(theta), with nu_signal from
`model.main_model.expected_data(pars, return_by_sample=True)`. The NLL built from that,
pyhf's `poisson_logpdf` and `model.constraint_logpdf`, equals `-model.logpdf` at s' = s
and is differentiable in s' by the backend's autodiff (JAX, PyTorch). The NumPy backend
has no autodiff: its gradients are central finite differences.

q0 runs pyhf's own fits (`pyhf.infer.test_statistics.q0`, SciPy's SLSQP with the
backend's gradients) at the pyhf adapter's FIT_TOLERANCE: SciPy's default (ftol 1e-6) stops ~2e-4
short in q0 at 184 parameters, which fails the parity gate and makes finite differences of
q0 noise. dq0/ds uses the envelope theorem at the two fitted points. A signal
other than the workspace's (the training loop) rebuilds the workspace, as a pyhf user
would.
"""

from __future__ import annotations

import copy

import numpy as np

from ttfr.child.workloads.histfactory.gate import central_differences
from ttfr.child.workloads.histfactory.problems import signal_sample

FD_RELATIVE_STEP = 1e-6


class PyhfEngine:
    def __init__(self, pyhf, variant: str, problem):
        self.pyhf = pyhf
        self.variant = variant
        self.problem = problem
        self.tl = pyhf.tensorlib
        self.nominal_host = problem.signal_nominal()
        self._build(problem.spec)
        self.point = self.tl.astensor([problem.point[name] for name in self.model.config.par_names])
        self.n_parameters = self.model.config.npars
        self._value_and_grads = self._make_value_and_grads()

    def _build(self, spec: dict) -> None:
        pyhf, tl = self.pyhf, self.tl
        workspace = pyhf.Workspace(spec)
        model = workspace.model()
        data = tl.astensor(workspace.data(model))
        n_main = sum(model.config.channel_nbins.values())
        channel, sample = self.problem.signal
        self.model, self.data = model, data
        self.main, self.aux = data[:n_main], data[n_main:]
        self.sample_index = model.config.samples.index(sample)
        self.bins = model.config.channel_slices[channel]
        nominal = np.asarray(signal_sample(spec, self.problem.signal)["data"], dtype=np.float64)
        if np.any(nominal == 0):
            raise ValueError("the signal sample has a zero nominal bin: its per-bin factor cannot be read from rates")
        self.nominal = tl.astensor(nominal)

    def nll_tensor(self, pars, signal):
        tl = self.tl
        by_sample = self.model.main_model.expected_data(pars, return_by_sample=True)
        total = tl.sum(by_sample, axis=0)
        signal_rates = by_sample[self.sample_index][self.bins]
        patched = total[self.bins] + (signal / self.nominal - 1.0) * signal_rates
        total = tl.concatenate([total[: self.bins.start], patched, total[self.bins.stop :]])
        main = tl.sum(tl.poisson_logpdf(self.main, total))
        return -(main + self.model.constraint_logpdf(self.aux, pars))

    # ---- value and gradients, per backend
    def _make_value_and_grads(self):
        if self.variant == "jax":
            import jax

            return jax.jit(jax.value_and_grad(self.nll_tensor, argnums=(0, 1)))
        if self.variant == "pytorch":
            import torch

            def value_and_grads(pars, signal):
                pars = pars.detach().requires_grad_(True)
                signal = signal.detach().requires_grad_(True)
                value = self.nll_tensor(pars, signal)
                g_pars, g_signal = torch.autograd.grad(value, (pars, signal))
                return value.detach(), (g_pars, g_signal)

            return value_and_grads
        return self._finite_difference_grads

    def _finite_difference_grads(self, pars, signal):
        value = self.nll_tensor(pars, signal)
        pars, signal = np.asarray(pars, dtype=float), np.asarray(signal, dtype=float)
        g_pars = central_differences(lambda p: self.nll_tensor(p, signal), pars, FD_RELATIVE_STEP)
        g_signal = central_differences(lambda s: self.nll_tensor(pars, s), signal, FD_RELATIVE_STEP)
        return value, (g_pars, g_signal)

    # ---- the timed calls
    def nll_grads_call(self):
        signal = self.tl.astensor(self.nominal_host)

        def hf_nll_grad():
            value, (g_pars, g_signal) = self._value_and_grads(self.point, signal)
            return value, g_signal, g_pars

        return hf_nll_grad, ()

    def q0_and_grad(self, signal_host):
        """(q0, dq0/ds, muhat) for a signal histogram (host array)."""
        pyhf, tl = self.pyhf, self.tl
        if not np.array_equal(signal_host, self.nominal_host):
            spec = copy.deepcopy(self.problem.spec)
            signal_sample(spec, self.problem.signal)["data"] = [float(v) for v in signal_host]
            self._build(spec)
            self.nominal_host = np.asarray(signal_host, dtype=float).copy()
            self._value_and_grads = self._make_value_and_grads()
        model = self.model
        q0, (pars_cond, pars_free) = pyhf.infer.test_statistics.q0(
            0.0, self.data, model, model.config.suggested_init(), model.config.suggested_bounds(),
            model.config.suggested_fixed(), return_fitted_pars=True,
        )  # fmt: skip
        poi = model.config.poi_index
        muhat = float(tl.tolist(pars_free)[poi])
        signal = tl.astensor(signal_host)
        if float(q0) <= 0.0 or muhat <= 0.0:
            return float(q0), np.zeros_like(signal_host), muhat
        g_cond = self._value_and_grads(pars_cond, signal)[1][1]
        g_free = self._value_and_grads(pars_free, signal)[1][1]
        return float(q0), 2.0 * (np.asarray(tl.tolist(g_cond)) - np.asarray(tl.tolist(g_free))), muhat

    # ---- what the gate asks of every engine (host values)
    def nll(self, signal_host) -> float:
        return float(self.tl.tolist(self.nll_tensor(self.point, self.tl.astensor(signal_host))))

    def nll_signal_grad(self, signal_host) -> np.ndarray:
        g = self._value_and_grads(self.point, self.tl.astensor(signal_host))[1][1]
        return np.asarray(self.tl.tolist(g), dtype=float)

    def q0(self, signal_host) -> float:
        return self.q0_and_grad(np.asarray(signal_host, dtype=float))[0]

    def q0_signal_grad(self, signal_host) -> np.ndarray:
        return self.q0_and_grad(np.asarray(signal_host, dtype=float))[1]

    def to_host(self, output) -> list[np.ndarray]:
        return [np.asarray(self.tl.tolist(x) if not isinstance(x, (float, np.ndarray)) else x, dtype=float) for x in output]
