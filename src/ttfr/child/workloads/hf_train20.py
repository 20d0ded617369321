"""The 20-step significance-training loop end to end: the timed unit is the whole loop, so a
cold run's total is process start, imports, setup, every compile the loop triggers and all
20 steps — "analysis step time with compilation in the loop" — per engine, under every cache
policy. The timeline shows what the first step pays.

Each engine trains as in `hf_train_loop` (MLP -> soft histogram -> -Z0 -> Adam, the KDE
variant): native JAX jits the whole step; native torch runs its Newton loops over its
compiled (or eager) kernels; pyhf its SciPy fits; NextStat its torch layer. Every run of the
loop starts from the same seeded weights, so the 20 losses repeat run after run. Gate: the
engine's NLL and q0 parity with the pyhf reference at the evaluation point, and 20 finite
losses.

Compile counts: native JAX builds one executable (the step); native torch.compile one graph
per kernel the loop calls; pyhf's JAX backend compiles what pyhf decides (counted, no
expectation).
"""

import numpy as np

from ttfr.child.workloads import hf_train_loop
from ttfr.child.workloads.called_kernels import CalledKernels
from ttfr.child.workloads.histfactory import gate, native, problems, train

LOOP = True
load_inputs = problems.load_problem
inputs_for = hf_train_loop.inputs_for
dataset_sha256 = problems.dataset_sha256


class _Training:
    """One training run per loop run: `reset()` at step 1 puts the weights (and Adam's
    state, and the fits' warm starts) back where they started, keeping whatever the engine
    compiled."""

    loaded = 0

    def __init__(self, functions, expected_compiles, new_trainer, reset=None):
        self.labels = [f"step {i + 1}" for i in range(train.STEPS)]
        self.functions, self._expected = functions, expected_compiles
        self.new_trainer, self.reset = new_trainer, reset
        self.trainer = None

    @property
    def expected_compiles(self):
        return self._expected

    def iteration(self, index):
        if index == 0:
            if self.trainer is None or self.reset is None:
                self.trainer = self.new_trainer()
            else:
                self.reset(self.trainer)
        return np.array([float(self.trainer.step())])

    def output(self, results):
        return [np.concatenate(results)]


class _TorchTraining(_Training):
    """Native torch: with torch.compile, one graph per compiled kernel the loop calls (static
    shapes), known once it ran: the driver reads the expectation after the loop."""

    def __init__(self, torch, inputs, variant, compiles):
        self.torch, self.inputs, self.variant, self.compiles = torch, inputs, variant, compiles
        self.kernels = CalledKernels(torch, compiles)
        super().__init__(None, None, self._new_trainer, self._reset)

    @property
    def expected_compiles(self):
        return self.kernels.expected()

    def _new_trainer(self):
        trainer = hf_train_loop.native_torch_trainer(self.torch, self.kernels.compile_fn, self.inputs, self.variant)
        self.first = [p.detach().clone() for p in trainer.params]
        return trainer

    def _reset(self, trainer):
        torch = self.torch
        with torch.no_grad():
            for p, first in zip(trainer.params, self.first):
                p.copy_(first)
        trainer.optimizer = torch.optim.Adam(trainer.params, lr=train.LEARNING_RATE, betas=train.BETAS, eps=train.ADAM_EPS)
        trainer.q0_and_grad.reset()  # the fits start from the initial values again


def build_loop(runtime, job, inputs):
    variant = train.TIMED_VARIANT
    if runtime.framework == "jax":
        first_state = list(inputs[len(inputs) - len(train.TRAIN_INPUTS) :])

        def reset(trainer):
            trainer.state = list(first_state)

        # the whole step is one jitted function, `step` (train.jax_step)
        return _Training(("step",), 1, lambda: train.JaxTrainer(runtime.jax, inputs, variant), reset)
    if runtime.framework == "torch":
        return _TorchTraining(runtime.torch, inputs, variant, runtime.compiles)
    # pyhf, NextStat: a fresh trainer on the engine built in setup, every loop run
    return _Training(None, None, lambda: hf_train_loop.engine_trainer(runtime, inputs, variant))


def check(runtime, inputs, problem, host_first, job):
    result = gate.gate(native.probe(runtime, inputs), problem, job.reference or None)
    losses = np.asarray(host_first[0], dtype=float)
    result["train_loop"] = {"steps": train.STEPS, train.TIMED_VARIANT: {"losses": [float(v) for v in losses]}}
    if losses.size != train.STEPS or not np.isfinite(losses).all():
        result["passed"] = False
        result["detail"] = "; ".join(filter(None, [result.get("detail"), "the 20 losses are not all finite"]))
    return result
