"""The worker's pure helpers (job words, result check, digest, the NumPy reference step): no processes."""

import numpy as np
import pytest

from ttfr.child import worker
from ttfr.child.workloads import matmul, mlp_train_step


def test_bad_job_words_are_refused():
    with pytest.raises(SystemExit, match="bad job word"):
        worker.parse_job(["mode=cold", "colour=blue"])


def test_check_catches_a_wrong_result():
    inputs = matmul.make_inputs(8, "float32", 0)
    right = [np.asarray(inputs[0] @ inputs[1])]
    wrong = [right[0] * 1.01]
    assert worker._check(matmul, inputs, right, "float32")["passed"]
    failed = worker._check(matmul, inputs, wrong, "float32")
    assert not failed["passed"] and failed["max_normalised_error"] == pytest.approx(0.01, rel=1e-3)
    shape = worker._check(matmul, inputs, [right[0][:4]], "float32")
    assert not shape["passed"] and "shape" in shape["detail"]


def test_digest_notices_non_finite_values():
    assert worker._digest([np.array([1.0, np.nan])])["finite"] is False
    assert worker._digest([np.array([3.0, 4.0])]) == {"sum": 7.0, "sum_sq": 25.0, "count": 2, "finite": True}


def test_numpy_train_step_gradient_matches_finite_differences():
    # The hand-written backward pass is the float64 reference of every backend: check it.
    inputs = [a.astype(np.float64) for a in mlp_train_step.make_inputs(6, "float64", 1)]
    *params, x, y = inputs
    lr = mlp_train_step.LEARNING_RATE

    def loss(ps):
        return mlp_train_step._numpy_step(np, *ps, x, y)[-1]

    updated = mlp_train_step._numpy_step(np, *params, x, y)
    for index in range(len(params)):
        analytic = (params[index] - updated[index]) / lr
        flat = params[index].reshape(-1)
        for position in (0, flat.size - 1):
            shifted = [p.copy() for p in params]
            eps = 1e-6
            shifted[index].reshape(-1)[position] += eps
            plus = loss(shifted)
            shifted[index].reshape(-1)[position] -= 2 * eps
            minus = loss(shifted)
            assert analytic.reshape(-1)[position] == pytest.approx((plus - minus) / (2 * eps), rel=1e-5, abs=1e-9)
