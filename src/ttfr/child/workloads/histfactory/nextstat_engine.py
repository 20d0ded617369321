"""NextStat (PyPI CPU wheel, Rust core) as an engine.

- NLL and its parameter gradient: `model.nll`, `model.grad_nll` (parameters in NextStat's
  order, mapped by name).
- Signal gradient of the NLL: the CPU wheel has no API for it (`signal_jacobian` needs
  CUDA), so it is computed from NextStat's own expected rates: the signal sample enters
  linearly, dNLL/ds_b = (1 - n_b / nu_b) * nu_signal_b / s_b.
- q0 and dq0/ds: `MaximumLikelihoodEstimator(tol=1e-12).q0_like_loss_and_grad_nominal`,
  NextStat's profiled discovery statistic with its signal gradient; it refuses signal
  samples with shape or aux modifiers (histosys, staterror, shapesys), which is reported.
"""

from __future__ import annotations

import numpy as np

MLE_TOLERANCE = 1e-12


class NextstatEngine:
    def __init__(self, nextstat, problem):
        self.nextstat = nextstat
        self.problem = problem
        self.model = nextstat.from_pyhf(problem.text)
        names = self.model.parameter_names()
        self.point = [float(problem.point[name]) for name in names]
        self.n_parameters = len(names)
        self.mle = nextstat.MaximumLikelihoodEstimator(tol=MLE_TOLERANCE)
        self.channel, self.sample = problem.signal
        self.observed = np.asarray(
            next(c["y"] for c in self.model.observed_main_by_channel() if c["channel_name"] == self.channel), dtype=float
        )

    def _set_signal(self, signal) -> None:
        # Always set: NextStat's torch layer and q0_like also move this nominal.
        signal = np.asarray(signal, dtype=float)
        self.model.set_sample_nominal(channel=self.channel, sample=self.sample, nominal=[float(v) for v in signal])

    def _signal_gradient(self, signal) -> np.ndarray:
        channel = next(c for c in self.model.expected_main_by_channel_sample(self.point) if c["channel_name"] == self.channel)
        rates = np.asarray(next(s["y"] for s in channel["samples"] if s["sample_name"] == self.sample), dtype=float)
        total = np.asarray(channel["total"], dtype=float)
        return (1.0 - self.observed / total) * rates / np.asarray(signal, dtype=float)

    # ---- the timed calls
    def nll_grads_call(self):
        model, point, signal = self.model, self.point, self.problem.signal_nominal()

        def hf_nll_grad():
            return model.nll(point), self._signal_gradient(signal), model.grad_nll(point)

        return hf_nll_grad, ()

    def q0_and_grad(self, signal):
        signal = [float(v) for v in signal]
        q0, grad = self.mle.q0_like_loss_and_grad_nominal(self.model, channel=self.channel, sample=self.sample, nominal=signal)
        return float(q0), np.asarray(grad, dtype=float)

    # ---- what the gate asks of every engine
    def nll(self, signal) -> float:
        self._set_signal(signal)
        return float(self.model.nll(self.point))

    def nll_signal_grad(self, signal) -> np.ndarray:
        self._set_signal(signal)
        return self._signal_gradient(signal)

    def q0(self, signal) -> float:
        return self.q0_and_grad(signal)[0]

    def q0_signal_grad(self, signal) -> np.ndarray:
        return self.q0_and_grad(signal)[1]

    def to_host(self, output) -> list[np.ndarray]:
        return [np.asarray(x, dtype=float) for x in output]
