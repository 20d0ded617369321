"""torch's strategies: naive, bucketed and dynamic (torch.compile, or eager), aot
(AOTInductor packages) and vmapped (torch.func)."""

from __future__ import annotations

from functools import partial

import numpy as np

from ttfr.child.workloads import loop_mlp
from ttfr.child.precompiled import TorchAoti
from ttfr.child.workloads.aot_store import AheadOfTimeStore
from ttfr.child.workloads.loop_strategies.batched import BatchedLoop
from ttfr.child.workloads.loop_strategies.segment_loop import STEP_NAME, SegmentLoop, padded
from ttfr.child.workloads.loop_strategies.segments import distinct_shapes


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


class _TorchSequential(SegmentLoop):
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
        params, x, y, mask = padded(s, self.pad, s.params)
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


def aot_cuda_toolkit_missing(torch, device) -> str | None:
    """AOTInductor on CUDA compiles its package with nvcc: without a CUDA toolkit (CUDA_HOME) it
    fails mid-run with "CUDA_HOME not set" (pytorch#150442). The reason it cannot, or None."""
    if getattr(device, "type", device) != "cuda":
        return None
    from torch.utils import cpp_extension

    if cpp_extension.CUDA_HOME is None:
        return "missing_dependency: a CUDA toolkit (nvcc; CUDA_HOME) for AOTInductor on CUDA"
    return None


class _TorchAheadOfTime(SegmentLoop):
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
                return TorchAoti.open_package(torch, TorchAoti.package(torch, exported, tmp))

            self.runners[(width, batch)] = store.get(f"w{width}-b{batch}", partial(TorchAoti.open_package, torch), build)
        self.loaded = store.loaded
        self.expected_compiles = len(self.shapes) - self.loaded

    def iteration(self, index):
        torch = self.torch
        s = self.segments[index]
        params, x, y, mask = padded(s, False, s.params)

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
    return BatchedLoop(segments, 1 if runtime.compiles else None, lambda a: torch.from_numpy(a).to(runtime.device), call,
                       _torch_to_numpy, runtime.sync, stack=torch.stack)  # fmt: skip


STRATEGIES = {"naive": _torch_naive, "bucketed": _torch_bucketed, "vmapped": _torch_vmapped, "dynamic": _torch_dynamic,
              "aot": _TorchAheadOfTime}  # fmt: skip
