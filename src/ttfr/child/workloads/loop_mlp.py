"""The small MLP that the loop workloads train, for every framework and strategy.

features -> width (tanh) -> width (tanh) -> 1, squared error, plain SGD. A 0/1 mask over
the batch rows makes a padded batch compute the unpadded loss (sum over real rows / their
count), and zero-padded hidden units stay exactly zero under SGD (their weights only ever
get zero gradients), so padding changes shapes, not results.

The float64 NumPy step (hand-written backward pass) is the loops' reference and the NumPy
backend's implementation.
"""

import numpy as np

FEATURES = 8
STEPS = 20  # SGD steps per training run


def init_params(rng, width, dtype):
    def layer(fan_in, fan_out):
        return [rng.standard_normal((fan_in, fan_out)) / np.sqrt(fan_in), rng.uniform(-0.1, 0.1, fan_out)]

    return [p.astype(dtype) for p in layer(FEATURES, width) + layer(width, width) + layer(width, 1)]


def make_batch(rng, batch, dtype):
    x = rng.standard_normal((batch, FEATURES))
    y = np.sin(x[:, :1]) + 0.5 * x[:, 1:2] + 0.1 * rng.standard_normal((batch, 1))
    return [x.astype(dtype), y.astype(dtype)]


def bucket(n: int) -> int:
    """The power of two a padded dimension is rounded up to."""
    return 1 << (int(n) - 1).bit_length()


def pad_params(params, width):
    """Zero-pad the hidden units to `width` (the padded units stay zero under SGD)."""
    w1, b1, w2, b2, w3, b3 = params
    extra = width - b1.shape[0]
    return [
        np.pad(w1, ((0, 0), (0, extra))),
        np.pad(b1, (0, extra)),
        np.pad(w2, ((0, extra), (0, extra))),
        np.pad(b2, (0, extra)),
        np.pad(w3, ((0, extra), (0, 0))),
        b3,
    ]


def pad_batch(x, y, rows):
    """Zero-pad the batch to `rows` and the mask that keeps the padding out of the loss."""
    extra = rows - x.shape[0]
    mask = np.concatenate([np.ones((x.shape[0], 1)), np.zeros((extra, 1))]).astype(x.dtype)
    return np.pad(x, ((0, extra), (0, 0))), np.pad(y, ((0, extra), (0, 0))), mask


def explicit_gradients(xp, params, x, y, mask):
    """The masked loss and its gradients with the backward pass written out, in any
    namespace with NumPy's operators (NumPy, torch)."""
    w1, b1, w2, b2, w3, b3 = params
    h1 = xp.tanh(x @ w1 + b1)
    h2 = xp.tanh(h1 @ w2 + b2)
    diff = (h2 @ w3 + b3 - y) * mask
    count = mask.sum()
    loss = (diff * diff).sum() / count
    g_out = (2.0 / count) * diff
    g_h2 = (g_out @ w3.T) * (1.0 - h2 * h2)
    g_h1 = (g_h2 @ w2.T) * (1.0 - h1 * h1)
    return loss, (x.T @ g_h1, g_h1.sum(0), h1.T @ g_h2, g_h2.sum(0), h2.T @ g_out, g_out.sum(0))


def numpy_step(params, x, y, mask, lr):
    """One SGD step (float64 or float32 NumPy); the loss is computed before the update."""
    loss, grads = explicit_gradients(np, params, x, y, mask)
    return [(p - lr * g).astype(p.dtype, copy=False) for p, g in zip(params, grads)], loss


def numpy_train(params, x, y, lr, steps=STEPS):
    """The losses of `steps` SGD steps on one batch (no padding)."""
    mask = np.ones((x.shape[0], 1), dtype=x.dtype)
    losses = []
    for _ in range(steps):
        params, loss = numpy_step(params, x, y, mask, lr)
        losses.append(loss)
    return np.asarray(losses), params


def loss(xp, params, x, y, mask, masked):
    """The squared error (over the rows the mask keeps, when `masked`), in jax.numpy or torch."""
    w1, b1, w2, b2, w3, b3 = params
    h = xp.tanh(x @ w1 + b1)
    h = xp.tanh(h @ w2 + b2)
    diff = h @ w3 + b3 - y
    if masked:
        return xp.sum(mask * diff * diff) / xp.sum(mask)
    return xp.mean(diff * diff)


def jax_loss(jax, masked):
    def loss_fn(params, x, y, mask):
        return loss(jax.numpy, params, x, y, mask, masked)

    return loss_fn


def jax_step(jax, masked):
    """`loop_mlp_step(params, x, y, mask, lr) -> (params, loss)`; the mask is ignored unmasked."""
    loss_fn = jax_loss(jax, masked)

    def loop_mlp_step(params, x, y, mask, lr):
        loss, grads = jax.value_and_grad(loss_fn)(params, x, y, mask)
        return tuple(p - lr * g for p, g in zip(params, grads)), loss

    return loop_mlp_step


def torch_loss(torch, masked):
    def loop_mlp_loss(w1, b1, w2, b2, w3, b3, x, y, mask):
        return loss(torch, (w1, b1, w2, b2, w3, b3), x, y, mask, masked)

    return loop_mlp_loss


def torch_explicit_step(torch):
    """One SGD step with the backward pass written out (no autograd), as a module
    `torch.export` can trace and AOTInductor can package: `forward(*params, x, y, mask, lr)
    -> (*params, loss)`, the masked loss of `torch_loss`. (AOTInductor fails on an exported
    `torch.func` gradient in torch 2.13: a data-dependent guard in constant folding.)"""

    class ExplicitStep(torch.nn.Module):
        def forward(self, w1, b1, w2, b2, w3, b3, x, y, mask, lr):
            params = (w1, b1, w2, b2, w3, b3)
            loss, grads = explicit_gradients(torch, params, x, y, mask)
            return (*(p - lr * g for p, g in zip(params, grads)), loss)

    return ExplicitStep()


def torch_batched_step(torch):
    """One SGD step of K stacked (padded, masked) trainings: torch.func.grad inside vmap."""
    from torch.func import grad_and_value, vmap

    def one(params, x, y, mask, lr):
        grads, value = grad_and_value(lambda ps: loss(torch, ps, x, y, mask, masked=True))(params)
        return tuple(p - lr * g for p, g in zip(params, grads)), value

    return vmap(one)
