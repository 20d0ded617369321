"""The loop strategies, per framework, over a loop described as segments.

A segment is one iteration of the loop: `steps` SGD steps of the loop MLP on one batch,
starting from its own initial parameters (a sweep's configuration) or from where the previous
segment left them (`params` None: a training loop over ragged batches). A loop's result is
every segment's losses.

Strategies (ttfr.measure.catalog.LOOP_STRATEGIES):
- naive: one jitted / compiled step called with whatever shapes come (a compile per new shape);
- bucketed: width and batch padded to powers of two, the batch masked (a compile per bucket);
- vmapped: independent segments padded to the largest shape, stacked, and trained in one
  batched call per step (one compile; a loop whose segments carry state cannot be batched);
- dynamic: one program for every shape (torch.compile(dynamic=True); JAX: jax.export with a
  symbolic width and batch, traced and lowered once, compiled by XLA per concrete shape);
- aot: every needed shape compiled before the loop (`.lower().compile()`), serialised into
  the case's AOT directory (TTFR_AOT_DIR, one of ttfr's cache directories, so the cache
  policies apply) and, where an earlier run left them there, loaded instead of compiled.

Every strategy moves its data to the device inside the loop, as a loop loads its data, and
its losses back to the host at each iteration's end; it times both copies (`take_transfer_s`),
each waited for: the inputs put on the device are waited on before the compute starts, and the
compute is waited on (the runtime's barrier) before the losses are copied back, so neither is
charged to the other.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

import numpy as np

from ttfr.child.workloads import loop_mlp

STEP_NAME = "loop_mlp_step"  # the jitted step's name, as JAX's compile events give it


@dataclass(frozen=True)
class Segment:
    label: str
    width: int
    batch: int
    lr: float
    x: np.ndarray
    y: np.ndarray
    params: list | None  # initial parameters; None: continue from the previous segment's
    steps: int

    def shape(self, pad: bool = False) -> tuple[int, int]:
        if pad:
            return loop_mlp.bucket(self.width), loop_mlp.bucket(self.batch)
        return self.width, self.batch


def distinct_shapes(segments, pad=False) -> int:
    return len({s.shape(pad) for s in segments})


def numpy_reference(segments) -> list:
    """Every segment's losses, float64 NumPy, no padding."""
    losses, params = [], None
    for s in segments:
        start = [p.astype(np.float64) for p in s.params] if s.params is not None else params
        run, params = loop_mlp.numpy_train(start, s.x.astype(np.float64), s.y.astype(np.float64), s.lr, s.steps)
        losses.append(run)
    return losses


class _Loop:
    """What the worker's loop driver runs (ttfr.child.contracts.Loop). A strategy that moves
    its data copies it with `to_device` and `to_host`, which time the copies; `barrier`
    (the runtime's sync; None: a synchronous runtime) waits for device work."""

    functions = (STEP_NAME,)
    loaded = 0
    barrier = None
    moves_data = True  # False: the loop never leaves the host (take_transfer_s gives None)

    def __init__(self, segments, expected_compiles):
        self.segments = segments
        self.labels = [s.label for s in segments]
        self.expected_compiles = expected_compiles
        self._transfer_ns = 0

    def output(self, results):
        return [np.stack(results)]

    def take_transfer_s(self) -> float | None:
        """The seconds the host<->device copies took since the last call (None: no device)."""
        if not self.moves_data:
            return None
        seconds, self._transfer_ns = self._transfer_ns / 1e9, 0
        return seconds

    def to_device(self, put, arrays):
        """`put` of each host array, timed, waited for (the copies' time is not the compute's)."""
        start = time.perf_counter_ns()
        moved = [put(a) for a in arrays]
        if self.barrier is not None:
            self.barrier(moved)
        self._transfer_ns += time.perf_counter_ns() - start
        return moved

    def to_host(self, fetch, result):
        """`fetch(result)` as host data, the compute waited for first and the copy timed."""
        if self.barrier is not None:
            self.barrier(result)  # the compute's time, not the copy's
        start = time.perf_counter_ns()
        host = fetch(result)
        self._transfer_ns += time.perf_counter_ns() - start
        return host


# ---------------------------------------------------------------------------- NumPy
class _NumpyNaive(_Loop):
    moves_data = False

    def __init__(self, segments):
        super().__init__(segments, None)
        self.params = None

    def iteration(self, index):
        s = self.segments[index]
        start = s.params if s.params is not None else self.params
        losses, self.params = loop_mlp.numpy_train(start, s.x, s.y, np.asarray(s.lr, dtype=s.x.dtype), s.steps)
        return losses


# ------------------------------------------------------------------------------ JAX
def _padded(segment, pad, params):
    """Host arrays of a segment, padded to its buckets when `pad` (params None: carried)."""
    x, y = segment.x, segment.y
    if pad:
        x, y, mask = loop_mlp.pad_batch(x, y, loop_mlp.bucket(segment.batch))
        if params is not None:
            params = loop_mlp.pad_params(params, loop_mlp.bucket(segment.width))
    else:
        mask = np.ones((segment.batch, 1), dtype=x.dtype)
    return params, x, y, mask


class _JaxSequential(_Loop):
    """One segment per iteration through `call_for(index)(params, x, y, mask, lr)`."""

    def __init__(self, runtime, segments, expected_compiles, call=None, pad=False):
        super().__init__(segments, expected_compiles)
        self.jax, self.device, self.call, self.pad = runtime.jax, runtime.device, call, pad
        self.barrier = self.jax.block_until_ready
        self.params = None

    def _put(self, array):
        return self.jax.device_put(array, self.device)

    def _get(self, arrays):
        return np.asarray(self.jax.device_get(arrays))

    def iteration(self, index):
        s = self.segments[index]
        params, x, y, mask = _padded(s, self.pad, s.params)
        fresh = list(params) if params is not None else []
        *fresh, x, y, mask, lr = self.to_device(self._put, [*fresh, x, y, mask, np.asarray(s.lr, dtype=s.x.dtype)])
        params = tuple(fresh) if params is not None else self.params
        call = self.call_for(index)
        losses = []
        for _ in range(s.steps):
            params, loss = call(params, x, y, mask, lr)
            losses.append(loss)
        self.params = params
        return self.to_host(self._get, losses)

    def call_for(self, index):
        return self.call


def _jax_specs(jax, dtype, width, batch):
    def spec(*shape):
        return jax.ShapeDtypeStruct(shape, dtype)

    f = loop_mlp.FEATURES
    params = (spec(f, width), spec(width), spec(width, width), spec(width), spec(width, 1), spec(1))
    return params, spec(batch, f), spec(batch, 1), spec(batch, 1), spec()


def _jax_naive(runtime, segments):
    call = runtime.jax.jit(loop_mlp.jax_step(runtime.jax, masked=False))
    return _JaxSequential(runtime, segments, distinct_shapes(segments), call)


def _jax_bucketed(runtime, segments):
    call = runtime.jax.jit(loop_mlp.jax_step(runtime.jax, masked=True))
    return _JaxSequential(runtime, segments, distinct_shapes(segments, pad=True), call, pad=True)


class _JaxExported(_JaxSequential):
    """jax.export with a symbolic width and batch: traced and lowered once (at the first
    iteration), then compiled by XLA once per concrete shape."""

    functions = ("call_exported", STEP_NAME)  # the wrapper compiled per shape; the step traced once

    def __init__(self, runtime, segments):
        super().__init__(runtime, segments, distinct_shapes(segments))
        self.exported = None

    def call_for(self, index):
        if self.exported is None:
            from jax import export

            width, batch = export.symbolic_shape("width, batch")
            step = self.jax.jit(loop_mlp.jax_step(self.jax, masked=False))
            self.exported = export.export(step)(*_jax_specs(self.jax, self.segments[0].x.dtype, width, batch))
        return self.exported.call


def _code_digest(modules) -> str:
    """The modules whose code the executables compile, hashed: an edit to them makes new file
    names, so an executable of older code is never loaded."""
    import hashlib

    digest = hashlib.sha256()
    for module in modules:
        with open(module.__file__, "rb") as source:
            digest.update(source.read())
    return digest.hexdigest()[:12]


def aot_cuda_toolkit_missing(torch, device) -> str | None:
    """AOTInductor on CUDA compiles its package with nvcc: without a CUDA toolkit (CUDA_HOME) it
    fails mid-run with "CUDA_HOME not set" (pytorch#150442). The reason it cannot, or None."""
    if getattr(device, "type", device) != "cuda":
        return None
    from torch.utils import cpp_extension

    if cpp_extension.CUDA_HOME is None:
        return "missing_dependency: a CUDA toolkit (nvcc; CUDA_HOME) for AOTInductor on CUDA"
    return None


class AheadOfTimeStore:
    """Compiled programs kept in the AOT directory (TTFR_AOT_DIR, one of the case's cache
    directories, so the cache policies empty or fill it), one file per key:
    `get(key, load, build)` returns `load(path)` for a stored one, or `build(tmp)`, which
    compiles and writes the file at `tmp` (None: no directory, keep it in memory), then moves
    it into place. File names carry `stem` (the runtime's versions and platform) and a hash
    of `sources`, the modules whose code is compiled: an edit never loads an older program.
    A file that cannot be loaded costs a compile, never the run."""

    def __init__(self, stem: str, suffix: str, sources=()):
        self.directory = os.environ.get("TTFR_AOT_DIR") or None
        self.stem, self.suffix = f"{stem}-{_code_digest(sources)}", suffix
        self.loaded = 0

    def get(self, key: str, load, build):
        path = os.path.join(self.directory, f"{self.stem}-{key}{self.suffix}") if self.directory else None
        if path and os.path.exists(path):
            try:
                program = load(path)
            except Exception:  # noqa: BLE001 - a stale or damaged file costs a compile, never the run
                program = None
            if program is not None:
                self.loaded += 1
                return program
        if not path:
            return build(None)
        os.makedirs(self.directory, exist_ok=True)
        tmp = f"{path}.tmp{self.suffix}"
        program = build(tmp)
        os.replace(tmp, path)
        return program


class JaxExecutables(AheadOfTimeStore):
    """Compiled JAX executables (`jax.experimental.serialize_executable`): `get(key, compile)`
    loads the one stored under `key`, or calls `compile()` (trace, lower, compile: nothing of
    it is needed for a load) and stores it; for the jax, jaxlib and platform compiled for.
    `needs_lapack`: the executables call LAPACK (see _load)."""

    def __init__(self, jax, device, stem: str, sources=(), needs_lapack: bool = False):
        import jaxlib

        super().__init__(f"{stem}-jax{jax.__version__}-jaxlib{jaxlib.__version__}-{device.platform}", ".xla", sources)
        self.jax = jax
        self._lapack_pending = needs_lapack

    def get(self, key: str, compile):
        return super().get(key, self._load, lambda tmp: self._store(compile(), tmp))

    @staticmethod
    def _store(executable, tmp):
        if tmp:
            import pickle

            from jax.experimental import serialize_executable

            with open(tmp, "wb") as blob:
                pickle.dump(serialize_executable.serialize(executable), blob)
        return executable

    def _load(self, path):
        import pickle

        from jax.experimental import serialize_executable

        if self._lapack_pending:
            # A deserialised executable that calls LAPACK (a solve, say) crashes the process
            # (SIGSEGV, jaxlib 0.10.2 on CPU) unless LAPACK's kernels were registered first,
            # which the first linalg call does.
            jnp = self.jax.numpy
            jnp.linalg.solve(jnp.eye(2), jnp.ones(2)).block_until_ready()
            self._lapack_pending = False
        with open(path, "rb") as blob:  # written by this case's own earlier run (its cache directory)
            return serialize_executable.deserialize_and_load(*pickle.load(blob))


class _JaxAheadOfTime(_JaxSequential):
    """Every distinct shape compiled before the loop, or loaded from the AOT directory."""

    def __init__(self, runtime, segments):
        self.shapes = sorted({s.shape() for s in segments})
        super().__init__(runtime, segments, len(self.shapes))
        self.dtype = segments[0].x.dtype
        self.executables = {}
        self.prepare_label = f"ahead of time: {len(self.shapes)} shape(s) compiled or loaded"

    def prepare(self):
        step = self.jax.jit(loop_mlp.jax_step(self.jax, masked=False))
        store = JaxExecutables(self.jax, self.device, f"{STEP_NAME}-{self.dtype}", sources=(loop_mlp,))
        for width, batch in self.shapes:
            specs = _jax_specs(self.jax, self.dtype, width, batch)

            def compile_ahead(specs=specs):  # traced only when not loaded
                return step.trace(*specs).lower().compile()

            self.executables[(width, batch)] = store.get(f"w{width}-b{batch}", compile_ahead)
        self.loaded = store.loaded
        self.expected_compiles = len(self.shapes) - self.loaded

    def call_for(self, index):
        return self.executables[self.segments[index].shape()]


def _stacked(segments):
    """Independent segments padded to the largest width and batch, stacked on a leading axis."""
    width, rows = max(s.width for s in segments), max(s.batch for s in segments)
    padded = [(loop_mlp.pad_params(s.params, width), *loop_mlp.pad_batch(s.x, s.y, rows)) for s in segments]
    params = [np.stack([p[0][i] for p in padded]) for i in range(6)]
    x, y, mask = (np.stack([p[j] for p in padded]) for j in (1, 2, 3))
    return params, x, y, mask, np.array([s.lr for s in segments], dtype=segments[0].x.dtype)


class _Batched(_Loop):
    """All segments trained together in one vmapped call per step: a single iteration."""

    def __init__(self, segments, expected_compiles, put, call, fetch, barrier, stack=None):
        super().__init__(segments, expected_compiles)
        # stack: the steps' losses as one device array (None: fetch takes the list); fetch: -> host (steps x K)
        self.put, self.call, self.fetch, self.barrier, self.stack = put, call, fetch, barrier, stack
        self.labels = [f"all {len(segments)} configurations, batched"]

    def iteration(self, _index):
        params, x, y, mask, lr = _stacked(self.segments)
        *params, x, y, mask, lr = self.to_device(self.put, [*params, x, y, mask, lr])
        params = tuple(params)
        losses = []
        for _ in range(self.segments[0].steps):
            params, loss = self.call(params, x, y, mask, lr)
            losses.append(loss)
        return self.to_host(self.fetch, self.stack(losses) if self.stack else losses).T  # segments x steps

    def output(self, results):
        return [results[0]]


def _jax_vmapped(runtime, segments):
    jax = runtime.jax
    call = jax.jit(jax.vmap(loop_mlp.jax_step(jax, masked=True)))
    return _Batched(segments, 1, lambda a: jax.device_put(a, runtime.device), call,
                    lambda losses: np.asarray(jax.device_get(losses)), jax.block_until_ready)  # fmt: skip


# ---------------------------------------------------------------------------- torch
def _torch_compile(runtime, fn, dynamic, segments):
    """torch.compile on a compiling backend (eager: the function itself). The recompile limit
    is raised to the loop's length, so the naive loop really compiles every shape rather than
    falling back to eager after torch's default limit of 8 (what a user's loop would do)."""
    if not runtime.compiles:
        return fn
    config = runtime.torch._dynamo.config
    for name in ("recompile_limit", "cache_size_limit"):
        if hasattr(config, name):
            setattr(config, name, max(getattr(config, name), len(segments) + 8))
    return runtime.torch.compile(fn, dynamic=dynamic)


class CalledKernels:
    """torch.compile with static shapes (when the backend compiles) that records which
    kernels a loop really calls with which argument shapes: dynamo compiles one graph for
    each (kernel code, shapes), which is the loop's expected compile count (known once it
    ran; the driver reads it after the loop). Static, because torch's default turns a
    dimension dynamic after it changes once, and the count would follow its heuristics."""

    def __init__(self, torch, compiles: bool):
        self.torch, self.compiles, self.called = torch, compiles, set()

    def compile_fn(self, fn):
        if not self.compiles:
            return fn
        compiled = self.torch.compile(fn, dynamic=False)

        def call(*args, **kwargs):
            self.called.add((fn.__code__, tuple(tuple(getattr(a, "shape", ())) for a in args)))
            return compiled(*args, **kwargs)

        return call

    def expected(self) -> int | None:
        return len(self.called) if self.compiles else None


class _TorchSequential(_Loop):
    """The user's pattern per segment: (compiled) forward + loss, eager backward, SGD."""

    def __init__(self, runtime, segments, expected_compiles, loss_fn, pad=False):
        super().__init__(segments, expected_compiles if runtime.compiles else None)
        self.torch, self.device, self.loss_fn, self.pad = runtime.torch, runtime.device, loss_fn, pad
        self.barrier = runtime.sync  # CUDA: torch.cuda.synchronize; CPU: None (synchronous)
        self.params = self.optimizer = None

    def _copy(self, array):  # copied: SGD updates the parameters in place, and the host arrays are the next run's start
        return self.torch.from_numpy(array).to(self.device, copy=True)

    def _put(self, array):
        return self.torch.from_numpy(array).to(self.device)

    def iteration(self, index):
        torch = self.torch
        s = self.segments[index]
        params, x, y, mask = _padded(s, self.pad, s.params)
        if params is not None:
            self.params = [p.requires_grad_(True) for p in self.to_device(self._copy, params)]
            self.optimizer = torch.optim.SGD(self.params, lr=s.lr)
        x, y, mask = self.to_device(self._put, (x, y, mask))
        losses = []
        for _ in range(s.steps):
            self.optimizer.zero_grad(set_to_none=True)
            loss = self.loss_fn(*self.params, x, y, mask)
            loss.backward()
            self.optimizer.step()
            losses.append(loss.detach())
        return self.to_host(_torch_to_numpy, torch.stack(losses))


def _torch_to_numpy(tensor):
    return tensor.cpu().numpy()


def _torch_naive(runtime, segments):
    loss = _torch_compile(runtime, loop_mlp.torch_loss(runtime.torch, masked=False), False, segments)
    return _TorchSequential(runtime, segments, distinct_shapes(segments), loss)


def _torch_bucketed(runtime, segments):
    loss = _torch_compile(runtime, loop_mlp.torch_loss(runtime.torch, masked=True), False, segments)
    return _TorchSequential(runtime, segments, distinct_shapes(segments, pad=True), loss, pad=True)


def _torch_dynamic(runtime, segments):
    if runtime.compiles:
        # Without this, sizes equal at the first compile share one symbol ("duck sizing"): a
        # first batch as long as the width gives a graph for width == batch only, and the
        # next shape recompiles. One program for every shape is what this strategy means.
        import torch.fx.experimental._config as fx_config

        fx_config.use_duck_shape = False
    loss = _torch_compile(runtime, loop_mlp.torch_loss(runtime.torch, masked=False), True, segments)
    return _TorchSequential(runtime, segments, 1, loss)


class _TorchAheadOfTime(_Loop):
    """Every distinct shape exported (`torch.export`) and compiled by AOTInductor into a
    package in the AOT directory before the loop, or loaded from there when an earlier run
    left it; the loop then calls the packages (the explicit-backward step: no autograd)."""

    def __init__(self, runtime, segments):
        self.shapes = sorted({s.shape() for s in segments})
        super().__init__(segments, len(self.shapes))
        self.torch, self.device, self.barrier = runtime.torch, runtime.device, runtime.sync
        self.dtype = segments[0].x.dtype
        self.runners, self.params = {}, None
        self.prepare_label = f"ahead of time: {len(self.shapes)} shape(s) packaged or loaded"

    def _example(self, width, batch):
        rng = np.random.default_rng(0)
        params = loop_mlp.init_params(rng, width, self.dtype)
        x, y = loop_mlp.make_batch(rng, batch, self.dtype)
        arrays = [*params, x, y, np.ones((batch, 1), dtype=self.dtype), np.asarray(0.1, dtype=self.dtype)]
        return tuple(self.torch.from_numpy(a).to(self.device) for a in arrays)

    def prepare(self):
        torch = self.torch
        missing = aot_cuda_toolkit_missing(torch, self.device)
        if missing:
            from ttfr.child.backends import Unavailable

            raise Unavailable(missing)
        step = loop_mlp.torch_explicit_step(torch)
        # A package is only valid for the torch build and device it was compiled for.
        runtime = f"torch{torch.__version__}-{self.device.type}".replace("+", "_")
        store = AheadOfTimeStore(f"{STEP_NAME}-{runtime}-{self.dtype}", ".pt2", sources=(loop_mlp,))
        for width, batch in self.shapes:

            def build(tmp, width=width, batch=batch):
                exported = torch.export.export(step, self._example(width, batch))
                package = torch._inductor.aoti_compile_and_package(exported, **({"package_path": tmp} if tmp else {}))
                return torch._inductor.aoti_load_package(package)

            self.runners[(width, batch)] = store.get(f"w{width}-b{batch}", torch._inductor.aoti_load_package, build)
        self.loaded = store.loaded
        self.expected_compiles = len(self.shapes) - self.loaded

    def iteration(self, index):
        torch = self.torch
        s = self.segments[index]
        params, x, y, mask = _padded(s, False, s.params)

        def put(array):
            return torch.from_numpy(np.ascontiguousarray(array)).to(self.device)

        fresh = list(params) if params is not None else []
        *fresh, x, y, mask, lr = self.to_device(put, [*fresh, x, y, mask, np.asarray(s.lr, dtype=s.x.dtype)])
        state = tuple(fresh) if params is not None else self.params
        run = self.runners[s.shape()]
        losses = []
        for _ in range(s.steps):
            *state, loss = run(*state, x, y, mask, lr)
            losses.append(loss)
        self.params = tuple(state)
        return self.to_host(_torch_to_numpy, torch.stack(losses))


def _torch_vmapped(runtime, segments):
    torch = runtime.torch
    call = _torch_compile(runtime, loop_mlp.torch_batched_step(torch), False, segments)
    return _Batched(segments, 1 if runtime.compiles else None, lambda a: torch.from_numpy(a).to(runtime.device), call,
                    _torch_to_numpy, runtime.sync, stack=torch.stack)  # fmt: skip


BUILDERS = {
    "numpy": {"naive": lambda runtime, segments: _NumpyNaive(segments)},
    "jax": {"naive": _jax_naive, "bucketed": _jax_bucketed, "vmapped": _jax_vmapped, "dynamic": _JaxExported,
            "aot": _JaxAheadOfTime},
    "torch": {"naive": _torch_naive, "bucketed": _torch_bucketed, "vmapped": _torch_vmapped, "dynamic": _torch_dynamic,
              "aot": _TorchAheadOfTime},
}  # fmt: skip


def build(runtime, strategy: str, segments: list[Segment]):
    builders = BUILDERS[runtime.framework]
    if strategy not in builders:
        raise ValueError(f"strategy {strategy!r} does not apply to {runtime.framework}; it has: {', '.join(builders)}")
    if strategy == "vmapped" and any(s.params is None for s in segments):
        raise ValueError("vmapped batches independent segments; this loop carries its parameters from one to the next")
    return builders[strategy](runtime, segments)
