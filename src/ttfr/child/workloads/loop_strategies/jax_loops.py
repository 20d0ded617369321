"""JAX's strategies: naive, bucketed, dynamic (jax.export), aot and vmapped."""

from __future__ import annotations

import numpy as np

from ttfr.child.workloads import loop_mlp
from ttfr.child.workloads.aot_store import JaxExecutables
from ttfr.child.workloads.loop_strategies.batched import BatchedLoop
from ttfr.child.workloads.loop_strategies.segment_loop import STEP_NAME, SegmentLoop, padded
from ttfr.child.workloads.loop_strategies.segments import distinct_shapes


class _JaxSequential(SegmentLoop):
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
        params, x, y, mask = padded(s, self.pad, s.params)
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


def _jax_vmapped(runtime, segments):
    jax = runtime.jax
    call = jax.jit(jax.vmap(loop_mlp.jax_step(jax, masked=True)))
    return BatchedLoop(segments, 1, lambda a: jax.device_put(a, runtime.device), call,
                       lambda losses: np.asarray(jax.device_get(losses)), jax.block_until_ready)  # fmt: skip


STRATEGIES = {"naive": _jax_naive, "bucketed": _jax_bucketed, "vmapped": _jax_vmapped, "dynamic": _JaxExported,
              "aot": _JaxAheadOfTime}  # fmt: skip
