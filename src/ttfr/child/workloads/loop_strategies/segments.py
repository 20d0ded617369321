"""A loop described as segments, and its float64 NumPy reference.

A segment is one iteration of the loop: `steps` SGD steps of the loop MLP on one batch,
starting from its own initial parameters (a sweep's configuration) or from where the previous
segment left them (`params` None: a training loop over ragged batches). A loop's result is
every segment's losses.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ttfr.child.workloads import loop_mlp


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
