"""One training loop over N batches of ragged length: the dynamic-shape case.

The loop MLP (width 64) takes one SGD step per batch, carrying its parameters from batch
to batch; the batch lengths come from a seeded log-uniform distribution on [16, 256], so
almost every batch has a length no earlier one had and a compiler sees a new shape at
almost every step. `size` is N (a longer loop starts with a shorter one's batches).
Inputs: the lengths (float64), the initial parameters, then each batch. The loop's result
is the N losses, checked against the float64 NumPy loop. Strategies: naive, bucketed,
dynamic, aot (loop_strategies/); batching the steps (vmapped) cannot apply, each step
starts from the previous one's parameters.
"""

import numpy as np

from ttfr.child.workloads import loop_mlp
from ttfr.child.workloads.loop_strategies import builders
from ttfr.child.workloads.loop_strategies.segments import Segment, numpy_reference

LOOP = True
WIDTH = 64
LEARNING_RATE = 0.05
SHORTEST, LONGEST = 16, 256
TOLERANCE = {"float32": 5e-4, "float64": 1e-9}


def lengths(n, seed):
    """The first `n` batch lengths of the seeded stream."""
    rng = np.random.default_rng([seed, 104723])
    draws = np.exp(rng.uniform(np.log(SHORTEST), np.log(LONGEST + 1), size=n))
    return [int(v) for v in np.clip(np.floor(draws), SHORTEST, LONGEST)]


def make_inputs(size, dtype, seed):
    rng = np.random.default_rng([seed, 1])
    inputs = [np.array(lengths(size, seed), dtype=np.float64)] + loop_mlp.init_params(rng, WIDTH, dtype)
    for index, length in enumerate(lengths(size, seed)):
        inputs += loop_mlp.make_batch(np.random.default_rng([seed, 2, index]), length, dtype)
    return inputs


def segments(inputs):
    """One step per batch; the first from the initial parameters, the rest carry on."""
    table, params, batches = inputs[0], list(inputs[1:7]), inputs[7:]
    out = []
    for index, length in enumerate(table):
        x, y = batches[2 * index], batches[2 * index + 1]
        out.append(Segment(f"batch {index + 1}, length {int(length)}", WIDTH, int(length), LEARNING_RATE,
                           x, y, params if index == 0 else None, 1))  # fmt: skip
    return out


def reference(inputs):
    return [np.stack(numpy_reference(segments(inputs)))]


def build_loop(runtime, job, inputs):
    return builders.build(runtime, job.strategy or "naive", segments(inputs))
