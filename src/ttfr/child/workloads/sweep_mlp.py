"""A hyperparameter sweep: K short trainings (20 SGD steps each) of the loop MLP over a
seeded sample of a grid where the learning rate, the hidden width and the batch size vary.
Width and batch change shapes, so a compiler sees a new program for each new pair.

`size` is K: the first K configurations of a seeded permutation of the grid, so a longer
sweep starts with a shorter one's configurations (cost against K reads off one timeline).
Inputs: the configuration table (K x [width, batch, learning rate], float64), then per
configuration its batch and initial parameters. The loop's result is every configuration's
20 losses (K x 20), checked against the float64 NumPy sweep.

Strategies (the job's `strategy`), each in `build_loop`:
- naive: one jitted / compiled step, called with whatever shapes come (a compile per new pair);
- bucketed: width and batch padded to powers of two, the batch masked (a compile per bucket);
- vmapped: all K configurations padded to the largest and trained as one batched call (one compile);
- dynamic: one program for every shape (torch.compile(dynamic=True); JAX: jax.export with
  symbolic width and batch, traced once, compiled per concrete shape);
- aot: every needed shape compiled before the loop (`.lower().compile()`), serialised into
  the case's AOT directory (TTFR_AOT_DIR, a cache directory of ttfr's cache policies) and,
  where a previous run left them there, loaded instead of compiled.
"""

import itertools
import os

import numpy as np

from ttfr.child.workloads import loop_mlp

LOOP = True
WIDTHS = (32, 48, 64, 96, 128)
BATCHES = (40, 64, 100, 128, 200)
RATES = (0.02, 0.05, 0.1)
GRID_SIZE = len(WIDTHS) * len(BATCHES) * len(RATES)
TOLERANCE = {"float32": 5e-4, "float64": 1e-9}
PER_CONFIG = 8  # x, y and the six parameters
STEP_NAME = "loop_mlp_step"


def configs(k, seed):
    """The first `k` (width, batch, learning rate) of the grid's seeded permutation."""
    grid = list(itertools.product(WIDTHS, BATCHES, RATES))
    order = np.random.default_rng([seed, 7919]).permutation(len(grid))
    return [grid[i] for i in order[:k]]


def make_inputs(size, dtype, seed):
    table = np.array(configs(size, seed), dtype=np.float64)
    inputs = [table]
    for index, (width, batch, _lr) in enumerate(configs(size, seed)):
        rng = np.random.default_rng([seed, index])
        inputs += loop_mlp.make_batch(rng, batch, dtype) + loop_mlp.init_params(rng, width, dtype)
    return inputs


def _unpack(inputs):
    """[(width, batch, lr, x, y, params)] per configuration."""
    table, rest = inputs[0], inputs[1:]
    out = []
    for index, (width, batch, lr) in enumerate(table):
        arrays = rest[index * PER_CONFIG : (index + 1) * PER_CONFIG]
        out.append((int(width), int(batch), float(lr), arrays[0], arrays[1], list(arrays[2:])))
    return out


def reference(inputs):
    runs = [loop_mlp.numpy_train([p.astype(np.float64) for p in params], x.astype(np.float64), y.astype(np.float64), lr)[0]
            for _w, _b, lr, x, y, params in _unpack(inputs)]  # fmt: skip
    return [np.stack(runs)]


def _label(width, batch, lr):
    return f"width {width}, batch {batch}, lr {lr:g}"


class _Loop:
    """What the worker's loop driver (ttfr/child/loop.py) runs: `iteration(i)` returns the
    i-th configuration's losses, finished, on the host."""

    functions = (STEP_NAME,)
    loaded = 0

    def __init__(self, configs, expected_compiles):
        self.configs = configs
        self.labels = [_label(w, b, lr) for w, b, lr, *_ in configs]
        self.expected_compiles = expected_compiles

    def output(self, results):
        return [np.stack(results)]


def _distinct(shapes):
    return len(set(shapes))


def build_loop(runtime, job, inputs):
    strategy = job.strategy or "naive"
    builders = _BUILDERS[runtime.framework]
    if strategy not in builders:
        raise ValueError(f"strategy {strategy!r} does not apply to {runtime.framework}; it has: {', '.join(builders)}")
    return builders[strategy](runtime, job, _unpack(inputs))


# ---------------------------------------------------------------------------- NumPy
class _NumpyNaive(_Loop):
    def iteration(self, index):
        _w, _b, lr, x, y, params = self.configs[index]
        return loop_mlp.numpy_train(params, x, y, np.asarray(lr, dtype=x.dtype))[0]


# ------------------------------------------------------------------------------ JAX
class _JaxSequential(_Loop):
    """One configuration per iteration through `self.call(params, x, y, mask, lr)`,
    with the arrays put on the device inside the iteration (as a sweep loads its data)."""

    def __init__(self, runtime, configs, expected_compiles, call, pad=False):
        super().__init__(configs, expected_compiles)
        self.jax, self.device, self.call, self.pad = runtime.jax, runtime.device, call, pad

    def arrays(self, index):
        width, batch, lr, x, y, params = self.configs[index]
        if self.pad:
            x, y, mask = loop_mlp.pad_batch(x, y, loop_mlp.bucket(batch))
            params = loop_mlp.pad_params(params, loop_mlp.bucket(width))
        else:
            mask = np.ones((batch, 1), dtype=x.dtype)
        put = self.jax.device_put
        return tuple(put(p, self.device) for p in params), put(x, self.device), put(y, self.device), \
            put(mask, self.device), put(np.asarray(lr, dtype=x.dtype), self.device)  # fmt: skip

    def iteration(self, index):
        params, x, y, mask, lr = self.arrays(index)
        call = self.call_for(index)
        losses = []
        for _ in range(loop_mlp.STEPS):
            params, loss = call(params, x, y, mask, lr)
            losses.append(loss)
        return np.asarray(self.jax.device_get(losses))

    def call_for(self, index):
        return self.call


def _shape(config, pad=False):
    width, batch = config[0], config[1]
    return (loop_mlp.bucket(width), loop_mlp.bucket(batch)) if pad else (width, batch)


def _jax_naive(runtime, job, configs):
    jax = runtime.jax
    call = jax.jit(loop_mlp.jax_step(jax, masked=False))
    return _JaxSequential(runtime, configs, _distinct(_shape(c) for c in configs), call)


def _jax_bucketed(runtime, job, configs):
    jax = runtime.jax
    call = jax.jit(loop_mlp.jax_step(jax, masked=True))
    return _JaxSequential(runtime, configs, _distinct(_shape(c, pad=True) for c in configs), call, pad=True)


class _JaxBatched(_Loop):
    """All configurations padded to the largest width and batch, stacked, and trained in
    one vmapped call per step: a single iteration."""

    def __init__(self, runtime, configs):
        super().__init__(configs, 1)
        self.jax, self.device = runtime.jax, runtime.device
        self.call = self.jax.jit(self.jax.vmap(loop_mlp.jax_step(self.jax, masked=True)))
        self.labels = [f"all {len(configs)} configurations, batched"]

    def iteration(self, _index):
        width = max(c[0] for c in self.configs)
        rows = max(c[1] for c in self.configs)
        padded = []
        for _w, _b, _lr, x, y, params in self.configs:
            xp, yp, mask = loop_mlp.pad_batch(x, y, rows)
            padded.append((loop_mlp.pad_params(params, width), xp, yp, mask))
        put = self.jax.device_put
        dtype = self.configs[0][3].dtype
        params = tuple(put(np.stack([p[0][i] for p in padded]), self.device) for i in range(6))
        x, y, mask = (put(np.stack([p[j] for p in padded]), self.device) for j in (1, 2, 3))
        lr = put(np.array([c[2] for c in self.configs], dtype=dtype), self.device)
        losses = []
        for _ in range(loop_mlp.STEPS):
            params, loss = self.call(params, x, y, mask, lr)
            losses.append(loss)
        return np.asarray(self.jax.device_get(losses)).T  # K x STEPS

    def output(self, results):
        return [results[0]]


def _jax_vmapped(runtime, job, configs):
    return _JaxBatched(runtime, configs)


class _JaxExported(_JaxSequential):
    """jax.export with a symbolic width and batch: traced and lowered once (at the first
    iteration), then compiled by XLA once per concrete shape."""

    functions = ("call_exported", STEP_NAME)  # the wrapper compiled per shape; the step traced once

    def __init__(self, runtime, configs):
        super().__init__(runtime, configs, _distinct(_shape(c) for c in configs), None)
        self.exported = None

    def call_for(self, index):
        if self.exported is None:
            jax = self.jax
            from jax import export

            dtype = self.configs[0][3].dtype
            width, batch = export.symbolic_shape("width, batch")
            f = loop_mlp.FEATURES

            def spec(*shape):
                return jax.ShapeDtypeStruct(shape, dtype)

            params = (spec(f, width), spec(width), spec(width, width), spec(width), spec(width, 1), spec(1))
            step = jax.jit(loop_mlp.jax_step(jax, masked=False))
            self.exported = export.export(step)(params, spec(batch, f), spec(batch, 1), spec(batch, 1), spec())
        return self.exported.call


def _jax_dynamic(runtime, job, configs):
    return _JaxExported(runtime, configs)


class _JaxAheadOfTime(_JaxSequential):
    """Every distinct shape compiled before the loop, or loaded from the AOT directory."""

    def __init__(self, runtime, job, configs):
        shapes = sorted({_shape(c) for c in configs})
        super().__init__(runtime, configs, len(shapes), None)
        self.shapes, self.dtype = shapes, configs[0][3].dtype
        self.directory = os.environ.get("TTFR_AOT_DIR") or None
        self.executables = {}
        self.prepare_label = f"ahead of time: {len(shapes)} shape(s) compiled or loaded"

    def _path(self, shape):
        version = self.jax.__version__
        return os.path.join(self.directory, f"{STEP_NAME}-jax{version}-{self.dtype}-w{shape[0]}-b{shape[1]}.xla")

    def prepare(self):
        import pickle

        from jax.experimental import serialize_executable

        jax = self.jax
        step = jax.jit(loop_mlp.jax_step(jax, masked=False))
        f = loop_mlp.FEATURES
        for width, batch in self.shapes:
            path = self._path((width, batch)) if self.directory else None
            if path and os.path.exists(path):
                with open(path, "rb") as blob:  # ttfr's own scratch cache directory
                    self.executables[(width, batch)] = serialize_executable.deserialize_and_load(*pickle.load(blob))
                self.loaded += 1
                continue

            def spec(*shape):
                return jax.ShapeDtypeStruct(shape, self.dtype)

            params = (spec(f, width), spec(width), spec(width, width), spec(width), spec(width, 1), spec(1))
            compiled = step.trace(params, spec(batch, f), spec(batch, 1), spec(batch, 1), spec()).lower().compile()
            self.executables[(width, batch)] = compiled
            if path:
                os.makedirs(self.directory, exist_ok=True)
                with open(path + ".tmp", "wb") as blob:
                    pickle.dump(serialize_executable.serialize(compiled), blob)
                os.replace(path + ".tmp", path)
        self.expected_compiles = len(self.shapes) - self.loaded

    def call_for(self, index):
        return self.executables[_shape(self.configs[index])]


def _jax_aot(runtime, job, configs):
    return _JaxAheadOfTime(runtime, job, configs)


# ---------------------------------------------------------------------------- torch
def _torch_compile(runtime, fn, dynamic, configs):
    """torch.compile for a compiling backend (eager: the function itself). The recompile
    limit is raised to the sweep's length, so the naive loop really compiles every shape
    rather than falling back to eager after torch's default limit of 8."""
    if not runtime.compiles:
        return fn
    torch = runtime.torch
    config = torch._dynamo.config

    for name in ("recompile_limit", "cache_size_limit"):
        if hasattr(config, name):
            setattr(config, name, max(getattr(config, name), len(configs) + 8))
    return torch.compile(fn, dynamic=dynamic)


class _TorchSequential(_Loop):
    def __init__(self, runtime, configs, expected_compiles, loss_fn, pad=False):
        super().__init__(configs, expected_compiles if runtime.compiles else None)
        self.torch, self.device, self.loss_fn, self.pad = runtime.torch, runtime.device, loss_fn, pad

    def iteration(self, index):
        torch = self.torch
        width, batch, lr, x, y, params = self.configs[index]
        if self.pad:
            x, y, mask = loop_mlp.pad_batch(x, y, loop_mlp.bucket(batch))
            params = loop_mlp.pad_params(params, loop_mlp.bucket(width))
        else:
            mask = np.ones((batch, 1), dtype=x.dtype)
        params = [torch.from_numpy(p).to(self.device) for p in params]
        x, y, mask = (torch.from_numpy(a).to(self.device) for a in (x, y, mask))
        return loop_mlp.torch_train(torch, self.loss_fn, params, x, y, mask, lr).cpu().numpy()


def _torch_naive(runtime, job, configs):
    loss = _torch_compile(runtime, loop_mlp.torch_loss(runtime.torch, masked=False), False, configs)
    return _TorchSequential(runtime, configs, _distinct(_shape(c) for c in configs), loss)


def _torch_bucketed(runtime, job, configs):
    loss = _torch_compile(runtime, loop_mlp.torch_loss(runtime.torch, masked=True), False, configs)
    return _TorchSequential(runtime, configs, _distinct(_shape(c, pad=True) for c in configs), loss, pad=True)


def _torch_dynamic(runtime, job, configs):
    loss = _torch_compile(runtime, loop_mlp.torch_loss(runtime.torch, masked=False), True, configs)
    return _TorchSequential(runtime, configs, 1, loss)


class _TorchBatched(_Loop):
    def __init__(self, runtime, configs):
        super().__init__(configs, 1 if runtime.compiles else None)
        self.torch, self.device = runtime.torch, runtime.device
        self.call = _torch_compile(runtime, loop_mlp.torch_batched_step(runtime.torch), False, configs)
        self.labels = [f"all {len(configs)} configurations, batched"]

    def iteration(self, _index):
        torch = self.torch
        width = max(c[0] for c in self.configs)
        rows = max(c[1] for c in self.configs)
        padded = []
        for _w, _b, _lr, x, y, params in self.configs:
            xp, yp, mask = loop_mlp.pad_batch(x, y, rows)
            padded.append((loop_mlp.pad_params(params, width), xp, yp, mask))

        def put(array):
            return torch.from_numpy(array).to(self.device)

        params = tuple(put(np.stack([p[0][i] for p in padded])) for i in range(6))
        x, y, mask = (put(np.stack([p[j] for p in padded])) for j in (1, 2, 3))
        lr = put(np.array([c[2] for c in self.configs], dtype=self.configs[0][3].dtype))
        losses = []
        for _ in range(loop_mlp.STEPS):
            params, loss = self.call(params, x, y, mask, lr)
            losses.append(loss)
        return torch.stack(losses).T.cpu().numpy()

    def output(self, results):
        return [results[0]]


def _torch_vmapped(runtime, job, configs):
    return _TorchBatched(runtime, configs)


_BUILDERS = {
    "numpy": {"naive": lambda runtime, job, configs: _NumpyNaive(configs, None)},
    "jax": {"naive": _jax_naive, "bucketed": _jax_bucketed, "vmapped": _jax_vmapped, "dynamic": _jax_dynamic,
            "aot": _jax_aot},
    "torch": {"naive": _torch_naive, "bucketed": _torch_bucketed, "vmapped": _torch_vmapped,
              "dynamic": _torch_dynamic},
}  # fmt: skip
