"""A hyperparameter sweep: K short trainings (20 SGD steps each) of the loop MLP over a
seeded sample of a grid where the learning rate, the hidden width and the batch size vary.
Width and batch change shapes, so a compiler sees a new program for each new pair.

`size` is K: the first K configurations of a seeded permutation of the grid, so a longer
sweep starts with a shorter one's configurations (cost against K reads off one timeline).
Inputs: the configuration table (K x [width, batch, learning rate], float64), then per
configuration its batch and initial parameters. The loop's result is every configuration's
20 losses (K x 20), checked against the float64 NumPy sweep. The strategies are in
loop_strategies/.
"""

import itertools

import numpy as np

from ttfr.child.workloads import loop_mlp
from ttfr.child.workloads.loop_strategies import builders
from ttfr.child.workloads.loop_strategies.segments import Segment, numpy_reference

LOOP = True
# 64 (width, batch) shapes, so a sweep of 16 meets about 15 of them (a random search over
# architecture and batch size); powers of two are rare, as in a real search space.
WIDTHS = (24, 32, 40, 48, 64, 80, 96, 128)
BATCHES = (32, 48, 64, 80, 100, 128, 160, 200)
RATES = (0.02, 0.05, 0.1)
GRID_SIZE = len(WIDTHS) * len(BATCHES) * len(RATES)
TOLERANCE = {"float32": 5e-4, "float64": 1e-9}
_PER_CONFIG = 8  # x, y and the six parameters


def configs(k, seed):
    """The first `k` (width, batch, learning rate) of the grid's seeded permutation."""
    grid = list(itertools.product(WIDTHS, BATCHES, RATES))
    order = np.random.default_rng([seed, 7919]).permutation(len(grid))
    return [grid[i] for i in order[:k]]


def make_inputs(size, dtype, seed):
    inputs = [np.array(configs(size, seed), dtype=np.float64)]
    for index, (width, batch, _lr) in enumerate(configs(size, seed)):
        rng = np.random.default_rng([seed, index])
        inputs += loop_mlp.make_batch(rng, batch, dtype) + loop_mlp.init_params(rng, width, dtype)
    return inputs


def segments(inputs):
    """One training per configuration, each from its own initial parameters."""
    out = []
    for index, (width, batch, lr) in enumerate(inputs[0]):
        x, y, *params = inputs[1 + index * _PER_CONFIG : 1 + (index + 1) * _PER_CONFIG]
        label = f"width {int(width)}, batch {int(batch)}, lr {lr:g}"
        out.append(Segment(label, int(width), int(batch), float(lr), x, y, params, loop_mlp.STEPS))
    return out


def reference(inputs):
    return [np.stack(numpy_reference(segments(inputs)))]


def build_loop(runtime, job, inputs):
    return builders.build(runtime, job.strategy or "naive", segments(inputs))
