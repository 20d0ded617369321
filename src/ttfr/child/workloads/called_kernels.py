"""torch.compile that counts the graphs a loop really compiles (the HistFactory loops'
expected compile count on native torch)."""

from __future__ import annotations


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
