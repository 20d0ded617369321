"""vmapped, for JAX and torch alike: independent segments padded to the largest shape,
stacked, and trained together in one batched call per step."""

from __future__ import annotations

import numpy as np

from ttfr.child.workloads import loop_mlp
from ttfr.child.workloads.loop_strategies.segment_loop import SegmentLoop


def _stacked(segments):
    """Independent segments padded to the largest width and batch, stacked on a leading axis."""
    width, rows = max(s.width for s in segments), max(s.batch for s in segments)
    padded = [(loop_mlp.pad_params(s.params, width), *loop_mlp.pad_batch(s.x, s.y, rows)) for s in segments]
    params = [np.stack([p[0][i] for p in padded]) for i in range(6)]
    x, y, mask = (np.stack([p[j] for p in padded]) for j in (1, 2, 3))
    return params, x, y, mask, np.array([s.lr for s in segments], dtype=segments[0].x.dtype)


class BatchedLoop(SegmentLoop):
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
