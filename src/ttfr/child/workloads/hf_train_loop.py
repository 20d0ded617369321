"""One step of the significance-training loop (MLP -> soft histogram -> -Z0 -> Adam), timed;
the gate runs the full 20-step loop for both soft-histogram variants (KDE and sigmoid) and
records each loss trajectory and per-step times, the first step apart.

Per engine: native JAX jits the whole step (network, template, both fits, envelope
gradient, pullback, Adam); native torch runs its Newton loops over compiled (or eager)
kernels with autograd for the network; NextStat uses its torch layer (`NextStatZ0`, its
`SoftHistogram`); pyhf runs its SciPy fits on a workspace rebuilt from the template.
The timed step's native fits start from the model's initial values on both engines (JAX's
pure step is called on the same state every time, torch's trainer is told not to
warm-start); the gate's 20-step loops warm-start each step's fits from the previous step's
optima, as a training loop does, and their per-step median is the reference row's figure.
"""

import time

import numpy as np

from ttfr.child.workloads.histfactory import engines, gate, native, native_inputs, problems, train

load_inputs = problems.load_problem
dataset_sha256 = problems.dataset_sha256


def inputs_for(runtime, problem):
    prepared = engines.inputs_for(runtime, problem)
    if runtime.framework in ("jax", "torch"):
        _arrays, extra = native_inputs.split_native(prepared)
        return prepared + train.native_state_inputs(problem.seed, extra["init"])
    return prepared


def jax_fn(jax):
    return train.jax_step(jax, train.TIMED_VARIANT)


def native_torch_trainer(torch, compile_fn, inputs, variant, engine=None, warm_start=True):
    """A torch trainer on the native engine; `warm_start`: each step's fits start at the last
    step's optima (a training loop), else at the initial values (the timed step, as JAX's)."""
    n_native = len(inputs) - len(train.TRAIN_INPUTS)
    arrays, e = native_inputs.split_native(inputs[:n_native])
    # the state stays where the engine's arrays are (CUDA: no host round trip, no mixed devices)
    state = dict(zip(train.TRAIN_INPUTS, inputs[n_native:]))
    engine = engine or native.TorchEngine(torch, compile_fn, arrays)
    signal = e["signal"]

    def q0_and_grad_from(template, starts):
        return engine.q0_and_grad(e["init"], e["free"], e["lower"], e["upper"], template, starts)

    q0_and_grad = train.WarmStarted(q0_and_grad_from) if warm_start else (lambda t: q0_and_grad_from(t, None)[:2])
    trainer = train.TorchTrainer(torch, state, signal.numel(), float(signal.sum()), variant, q0_and_grad=q0_and_grad,
                                 compile_fn=compile_fn, device=signal.device)  # fmt: skip
    trainer.engine = engine
    return trainer


def torch_build(torch, compile_fn, inputs):
    trainer = native_torch_trainer(torch, compile_fn, inputs, train.TIMED_VARIANT, warm_start=False)
    step = trainer.step_output
    return step, ()


def engine_trainer(runtime, engine, variant):
    problem = engine.problem
    state = train.initial_state(problem.seed)
    signal = problem.signal_nominal()
    n_bins, total = signal.size, float(signal.sum())
    if runtime.framework == "nextstat":
        import nextstat.torch as nextstat_torch
        import torch

        histogram = nextstat_torch.SoftHistogram(torch.tensor(train.edges(n_bins)), bandwidth="auto", mode=variant)
        channel, sample = problem.signal
        crossings = train.Crossings()
        mle = _TimedMle(engine.mle)

        def z0_layer(template):
            # NextStat's layer converts inside (torch -> a float64 buffer, lists -> torch): its time
            # outside the Rust call is the crossing (conversions and the layer's glue)
            start, rust_before = time.perf_counter(), mle.seconds
            z0 = nextstat_torch.discovery_z0(template, mle=mle, model=engine.model, channel=channel, sample=sample,
                                             eps=train.Z0_EPS)  # fmt: skip
            crossings.add(time.perf_counter() - start - (mle.seconds - rust_before))
            return z0

        return train.TorchTrainer(torch, state, n_bins, total, variant, z0_layer=z0_layer, histogram=histogram,
                                  crossings=crossings)  # fmt: skip

    def q0_and_grad(template):
        q0, grad, _muhat = engine.q0_and_grad(np.asarray(template, dtype=float))
        return q0, grad

    if runtime.variant == "jax":
        import jax

        return train.EagerJaxTrainer(jax, state, n_bins, total, variant, q0_and_grad)
    import torch

    crossings = train.Crossings()
    return train.TorchTrainer(torch, state, n_bins, total, variant, q0_and_grad=lambda t: q0_and_grad(crossings(t.numpy)),
                              crossings=crossings)  # fmt: skip


class _TimedMle:
    """NextStat's MLE with its q0 call timed (the Rust work inside NextStat's torch layer)."""

    def __init__(self, mle):
        self.mle, self.seconds = mle, 0.0

    def q0_like_loss_and_grad_nominal(self, *args, **kwargs):
        start = time.perf_counter()
        try:
            return self.mle.q0_like_loss_and_grad_nominal(*args, **kwargs)
        finally:
            self.seconds += time.perf_counter() - start

    def __getattr__(self, name):
        return getattr(self.mle, name)


def engine_build(runtime, engine):
    return engine_trainer(runtime, engine, train.TIMED_VARIANT).step_output, ()


def _fresh_trainer(runtime, inputs, variant):
    if runtime.framework == "jax":
        return train.JaxTrainer(runtime.jax, inputs, variant)
    if runtime.framework == "torch":
        timed_trainer = runtime.call.__self__  # the bound `step_output` of the timed trainer
        return native_torch_trainer(runtime.torch, lambda fn: fn, inputs, variant, timed_trainer.engine)
    return engine_trainer(runtime, inputs, variant)


def check(runtime, inputs, problem, host_first, job):
    engine = native.probe(runtime, inputs)
    check = gate.gate(engine, problem, job.reference or None)
    loops = {}
    for variant in train.VARIANTS:
        trainer = _fresh_trainer(runtime, inputs, variant)
        loops[variant] = train.run_loop(trainer.step, crossings=getattr(trainer, "crossings", None))
    check["train_loop"] = {"steps": train.STEPS, "first_loss_of_timed_call": float(np.ravel(host_first[0])[0]), **loops}
    finite = all(np.isfinite(loop["losses"]).all() for loop in loops.values())
    if not finite:
        check["passed"] = False
        check["detail"] = "; ".join(filter(None, [check.get("detail"), "non-finite loss in the 20-step loop"]))
    return check
