"""What every strategy shares: the loop over segments the worker's driver runs, with its
host<->device copies timed apart from the compute, and a segment's (padded) host arrays."""

from __future__ import annotations

import time

import numpy as np

from ttfr.child.workloads import loop_mlp

STEP_NAME = "loop_mlp_step"  # the jitted step's name, as JAX's compile events give it


class SegmentLoop:
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


def padded(segment, pad, params):
    """Host arrays of a segment, padded to its buckets when `pad` (params None: carried)."""
    x, y = segment.x, segment.y
    if pad:
        x, y, mask = loop_mlp.pad_batch(x, y, loop_mlp.bucket(segment.batch))
        if params is not None:
            params = loop_mlp.pad_params(params, loop_mlp.bucket(segment.width))
    else:
        mask = np.ones((segment.batch, 1), dtype=x.dtype)
    return params, x, y, mask
