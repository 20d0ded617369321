"""NumPy's one strategy: naive (no compiler, no device)."""

from __future__ import annotations

import numpy as np

from ttfr.child.workloads import loop_mlp
from ttfr.child.workloads.loop_strategies.segment_loop import SegmentLoop


class _NumpyNaive(SegmentLoop):
    moves_data = False

    def __init__(self, segments):
        super().__init__(segments, None)
        self.params = None

    def iteration(self, index):
        s = self.segments[index]
        start = s.params if s.params is not None else self.params
        losses, self.params = loop_mlp.numpy_train(start, s.x, s.y, np.asarray(s.lr, dtype=s.x.dtype), s.steps)
        return losses


STRATEGIES = {"naive": lambda runtime, segments: _NumpyNaive(segments)}
