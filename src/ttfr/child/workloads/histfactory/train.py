"""The significance-training loop: an MLP scores synthetic signal events, a soft histogram
turns the scores into the signal template of the workspace's signal sample, the loss is
-Z0 = -sqrt(q0 + eps) from the profiled q0, and Adam steps.

Every engine starts from the same seeded events and weights and uses the same soft
histogram (NextStat's definitions, so its own `SoftHistogram` can be used for it):
- kde: a Gaussian kernel at each bin centre, each event normalised across the bins;
- sigmoid: sigmoid((x - lo)/tau) - sigmoid((x - hi)/tau) per bin, not normalised;
bandwidth 0.5 x the bin width. The template keeps the nominal's total yield.
dq0/d(template) comes from the engine (envelope theorem, or NextStat's q0_like), and
the chain rule to the weights from the framework's autodiff.

The native engines warm-start: each step's two fits start from the previous step's optima
(the first from the model's initial values). Adam moves the template a little per step, so
the free fit needs a few Newton steps instead of a fit from scratch, and the conditional
fit (mu = 0: the template does not enter it) one step to confirm its optimum.
"""

from __future__ import annotations

import math
import time

import numpy as np

from ttfr.child.workloads.histfactory import native, native_inputs

EVENTS = 400
HIDDEN = 16
STEPS = 20
LEARNING_RATE = 0.05
BETAS = (0.9, 0.999)
ADAM_EPS = 1e-8
Z0_EPS = 1e-12
VARIANTS = ("kde", "sigmoid")
TIMED_VARIANT = "kde"
PARAMS = ("w1", "b1", "w2", "b2")


def initial_state(seed: int) -> dict:
    rng = np.random.default_rng(seed + 104729)
    events = rng.normal([0.6, 0.4], [0.9, 0.8], size=(EVENTS, 2))
    return {
        "events": events,
        "w1": rng.standard_normal((2, HIDDEN)) / math.sqrt(2.0),
        "b1": rng.uniform(-0.1, 0.1, HIDDEN),
        "w2": rng.standard_normal((HIDDEN, 1)) / math.sqrt(HIDDEN),
        "b2": np.zeros(1),
    }


def edges(n_bins: int) -> np.ndarray:
    return np.linspace(0.0, 1.0, n_bins + 1)


def template(xp, params, events, bin_edges, total, variant):
    """Signal template (n_bins) from network weights, with any NumPy-like namespace."""
    w1, b1, w2, b2 = params
    logits = xp.tanh(events @ w1 + b1) @ w2 + b2
    scores = 1.0 / (1.0 + xp.exp(-logits[:, 0]))
    lo, hi = bin_edges[:-1], bin_edges[1:]
    bandwidth = 0.5 * (hi[0] - lo[0])
    x = scores[:, None]
    if variant == "kde":
        kernel = xp.exp(-0.5 * ((x - 0.5 * (lo + hi)) / bandwidth) ** 2)
        hist = xp.sum(kernel / xp.sum(kernel, axis=1, keepdims=True), axis=0)
    else:
        hist = xp.sum(1.0 / (1.0 + xp.exp(-(x - lo) / bandwidth)) - 1.0 / (1.0 + xp.exp(-(x - hi) / bandwidth)), axis=0)
    return total * hist / xp.sum(hist)


class Crossings:
    """The seconds a training step spends moving arrays between runtimes (issue 28): each crossing
    is timed on its own as it happens (a host read of a device array waits for it, so the wait is
    the crossing's), summed per step and taken by `run_loop`."""

    def __init__(self):
        self.seconds = 0.0

    def __call__(self, convert, *args, **kwargs):
        start = time.perf_counter()
        result = convert(*args, **kwargs)
        self.seconds += time.perf_counter() - start
        return result

    def add(self, seconds: float) -> None:
        self.seconds += max(0.0, seconds)

    def take(self) -> float:
        seconds, self.seconds = self.seconds, 0.0
        return seconds


def run_loop(step, steps: int = STEPS, crossings: Crossings | None = None) -> dict:
    """Run `steps` steps; losses, per-step times, the first step apart; with `crossings`, each step's
    seconds spent converting between runtimes and their share of the median step (the first apart)."""
    losses, times, converting = [], [], []
    if crossings is not None:
        crossings.take()
    for _ in range(steps):
        start = time.perf_counter()
        loss = step()
        times.append(time.perf_counter() - start)
        losses.append(float(loss))
        if crossings is not None:
            converting.append(crossings.take())
    loop = {
        "losses": losses,
        "first_step_s": times[0],
        "step_s_median": float(np.median(times[1:])) if steps > 1 else None,
        "step_s": times,
    }
    if crossings is not None:
        later = converting[1:] if steps > 1 else converting
        loop["conversion_s"] = converting
        loop["conversion_share"] = float(np.median(later) / np.median(times[1:] if steps > 1 else times))
    return loop


# ------------------------------------------------------------------ native JAX (pure step)
# The carried state, then the events (fixed); start_*: where the next step's fits start.
TRAIN_INPUTS = (
    PARAMS + tuple(f"m_{p}" for p in PARAMS) + tuple(f"v_{p}" for p in PARAMS) + ("t", "start_free", "start_cond", "events")
)


def native_state_inputs(seed: int, init) -> list:
    """The training state's first values; `init`: the model's initial parameter values."""
    state = initial_state(seed)
    zeros = {f"{kind}_{p}": np.zeros_like(state[p]) for kind in ("m", "v") for p in PARAMS}
    starts = {"start_free": np.array(init, dtype=float), "start_cond": np.array(init, dtype=float)}
    values = {**state, **zeros, "t": np.zeros(()), **starts}
    return [values[name] for name in TRAIN_INPUTS]


class WarmStarted:
    """q0_and_grad(template) -> (q0, grad) from `q0_and_grad_from(template, starts)` (a native
    engine's, returning the optima last), each call's fits starting at the last call's
    optima; `reset()` goes back to the model's initial values (a new training run)."""

    def __init__(self, q0_and_grad_from):
        self.q0_and_grad_from = q0_and_grad_from
        self.starts = None

    def __call__(self, template):
        q0, grad, *_rest, self.starts = self.q0_and_grad_from(template, self.starts)
        return q0, grad

    def reset(self):
        self.starts = None


def jax_step(jax, variant: str):
    """The whole step as one pure function of (*native inputs, *TRAIN_INPUTS) returning
    (-Z0, *the next state without the events); the bin count and the template's total come
    from the signal input (static shape, traced sum)."""
    jnp = jax.numpy
    functions = native.jax_functions(jax)
    b1, b2 = BETAS

    def step(*inputs):
        n_native = len(inputs) - len(TRAIN_INPUTS)
        arrays, e = native_inputs.split_native(inputs[:n_native])
        s = dict(zip(TRAIN_INPUTS, inputs[n_native:]))
        params = tuple(s[p] for p in PARAMS)
        bin_edges = jnp.linspace(0.0, 1.0, e["signal"].shape[0] + 1)
        total = jnp.sum(e["signal"])
        signal, pullback = jax.vjp(lambda ps: template(jnp, ps, s["events"], bin_edges, total, variant), params)
        starts = (s["start_free"], s["start_cond"])
        q0, dq0, _muhat, _it, _ok, optima = functions["q0_and_grad"](
            e["init"], e["free"], e["lower"], e["upper"], signal, arrays, starts
        )
        z0 = jnp.sqrt(q0 + Z0_EPS)
        (grads,) = pullback(-0.5 / z0 * dq0)
        t = s["t"] + 1.0
        m = tuple(b1 * s[f"m_{p}"] + (1 - b1) * g for p, g in zip(PARAMS, grads))
        v = tuple(b2 * s[f"v_{p}"] + (1 - b2) * g * g for p, g in zip(PARAMS, grads))
        new = tuple(
            w - LEARNING_RATE * (mi / (1 - b1**t)) / (jnp.sqrt(vi / (1 - b2**t)) + ADAM_EPS) for w, mi, vi in zip(params, m, v)
        )
        return (-z0, *new, *m, *v, t, *optima)

    return step


class JaxTrainer:
    """The pure JAX step, jitted, with its state carried from call to call."""

    def __init__(self, jax, inputs, variant):
        self.crossings = Crossings()  # none: the whole step is one jitted JAX program
        self.step_fn = jax.jit(jax_step(jax, variant))
        n_native = len(inputs) - len(TRAIN_INPUTS)
        self.fixed, self.state = list(inputs[:n_native]), list(inputs[n_native:])

    def step(self):
        loss, *updated = self.step_fn(*self.fixed, *self.state)
        self.state = list(updated) + [self.state[-1]]  # the events stay
        return float(loss)


# ------------------------------------------------------------- PyTorch-based training steps
class TorchTrainer:
    """Torch network + Adam; dq0/d(template) from `q0_and_grad(template) -> (q0, grad)`,
    or, with `z0_layer`, a torch layer returning Z0 directly (NextStat's NextStatZ0)."""

    def __init__(self, torch, state: dict, n_bins: int, total: float, variant: str, q0_and_grad=None,
                 z0_layer=None, histogram=None, compile_fn=None, device=None, crossings=None):  # fmt: skip
        """`device`: where the engine's arrays are (CUDA): every tensor of the trainer is made there,
        so no step mixes devices or goes through the host (issue 27)."""
        self.torch = torch
        dtype = torch.float64
        self.device = device = device if device is not None else torch.device("cpu")

        def made(value):
            return torch.as_tensor(value, dtype=dtype, device=device).clone()

        self.params = [made(state[p]).requires_grad_(True) for p in PARAMS]
        self.events = made(state["events"])
        self.optimizer = torch.optim.Adam(self.params, lr=LEARNING_RATE, betas=BETAS, eps=ADAM_EPS)
        bin_edges = made(edges(n_bins))
        compile_fn = compile_fn or (lambda fn: fn)
        if histogram is not None:  # e.g. NextStat's SoftHistogram: scores -> histogram

            def make_template(params, events):
                w1, b1, w2, b2 = params
                scores = torch.sigmoid((torch.tanh(events @ w1 + b1) @ w2 + b2)[:, 0])
                hist = histogram(scores)
                return total * hist / hist.sum()

            self.template = make_template
        else:
            self.template = compile_fn(lambda params, events: template(torch, params, events, bin_edges, total, variant))
        self.q0_and_grad = q0_and_grad
        self.z0_layer = z0_layer
        # the engine's own crossings (torch -> NumPy for pyhf; NextStat's layer) are timed where they are made
        self.crossings = crossings if crossings is not None else Crossings()

    def _to_torch(self, value, here):
        if isinstance(value, self.torch.Tensor):  # a native engine's result: no crossing
            return self.torch.as_tensor(value, **here)
        return self.crossings(self.torch.as_tensor, value, **here)

    def step(self):
        torch = self.torch
        self.optimizer.zero_grad(set_to_none=True)
        signal = self.template(self.params, self.events)
        if self.z0_layer is not None:
            loss = -self.z0_layer(signal)
            loss.backward()
        else:
            q0, dq0 = self.q0_and_grad(signal.detach())
            here = {"dtype": signal.dtype, "device": signal.device}  # the engine's results, on the template's device
            z0 = torch.sqrt(self._to_torch(q0, here) + Z0_EPS)
            signal.backward(-0.5 / z0 * self._to_torch(dq0, here))
            loss = -z0
        self.optimizer.step()
        return loss.detach()

    def step_output(self):
        loss = self.step()
        return (loss, *(p.detach() for p in self.params))


class EagerJaxTrainer:
    """pyhf with its JAX backend: the network and pullback in eager JAX, q0 from pyhf's
    fits (not traceable), Adam in NumPy."""

    def __init__(self, jax, state: dict, n_bins: int, total: float, variant: str, q0_and_grad):
        self.jax = jax
        jnp = jax.numpy
        self.params = [np.asarray(state[p]) for p in PARAMS]
        self.m = [np.zeros_like(p) for p in self.params]
        self.v = [np.zeros_like(p) for p in self.params]
        self.t = 0
        events, bin_edges = jnp.asarray(state["events"]), jnp.asarray(edges(n_bins))
        self.template = lambda ps: template(jnp, ps, events, bin_edges, total, variant)
        self.q0_and_grad = q0_and_grad
        self.crossings = Crossings()  # NumPy <-> JAX, four times a step

    def step(self):
        jax = self.jax
        cross = self.crossings
        signal, pullback = jax.vjp(self.template, tuple(cross(jax.numpy.asarray, p) for p in self.params))
        q0, dq0 = self.q0_and_grad(cross(np.asarray, signal))  # waits for the template: the wait is the crossing's
        z0 = math.sqrt(q0 + Z0_EPS)
        (grads,) = pullback(cross(jax.numpy.asarray, -0.5 / z0 * np.asarray(dq0)))
        self.t += 1
        b1, b2 = BETAS
        for i, g in enumerate(grads):
            g = cross(np.asarray, g)
            self.m[i] = b1 * self.m[i] + (1 - b1) * g
            self.v[i] = b2 * self.v[i] + (1 - b2) * g * g
            m_hat, v_hat = self.m[i] / (1 - b1**self.t), self.v[i] / (1 - b2**self.t)
            self.params[i] = self.params[i] - LEARNING_RATE * m_hat / (np.sqrt(v_hat) + ADAM_EPS)
        return -z0

    def step_output(self):
        return (np.asarray(self.step()), *self.params)
