"""A loop strategy by framework and name (ttfr.measure.catalog.LOOP_STRATEGIES)."""

from __future__ import annotations

from ttfr.child.workloads.loop_strategies import jax_loops, numpy_loops, torch_loops
from ttfr.child.workloads.loop_strategies.segments import Segment

BUILDERS = {"numpy": numpy_loops.STRATEGIES, "jax": jax_loops.STRATEGIES, "torch": torch_loops.STRATEGIES}


def build(runtime, strategy: str, segments: list[Segment]):
    builders = BUILDERS[runtime.framework]
    if strategy not in builders:
        raise ValueError(f"strategy {strategy!r} does not apply to {runtime.framework}; it has: {', '.join(builders)}")
    if strategy == "vmapped" and any(s.params is None for s in segments):
        raise ValueError("vmapped batches independent segments; this loop carries its parameters from one to the next")
    return builders[strategy](runtime, segments)
