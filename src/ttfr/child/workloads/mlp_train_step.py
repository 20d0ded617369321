"""One SGD training step of a small MLP: forward, backward, optimizer update.

Network: width -> width (tanh) -> width (tanh) -> 1, mean squared error, batch of 128.
`size` is the width. The step returns the six updated parameters and the loss (computed
before the update), so every framework's first call can be checked against the float64
NumPy implementation, which is also the NumPy backend (hand-written backward pass).
"""

import numpy as np

BATCH = 128
LEARNING_RATE = 0.05
TOLERANCE = {"float32": 2e-4, "float64": 1e-10}


def make_inputs(size, dtype, seed):
    rng = np.random.default_rng(seed)

    def layer(fan_in, fan_out):
        weight = rng.standard_normal((fan_in, fan_out)) / np.sqrt(fan_in)
        bias = rng.uniform(-0.1, 0.1, fan_out)
        return [weight, bias]

    params = layer(size, size) + layer(size, size) + layer(size, 1)
    x = rng.standard_normal((BATCH, size))
    y = np.sin(x[:, :1]) + 0.1 * rng.standard_normal((BATCH, 1))
    return [v.astype(dtype) for v in params + [x, y]]


def _numpy_step(np_module, w1, b1, w2, b2, w3, b3, x, y):
    h1 = np_module.tanh(x @ w1 + b1)
    h2 = np_module.tanh(h1 @ w2 + b2)
    diff = h2 @ w3 + b3 - y
    loss = np_module.mean(diff * diff)
    g_out = (2.0 / diff.size) * diff
    g_w3 = h2.T @ g_out
    g_b3 = g_out.sum(axis=0)
    g_h2 = (g_out @ w3.T) * (1.0 - h2 * h2)
    g_w2 = h1.T @ g_h2
    g_b2 = g_h2.sum(axis=0)
    g_h1 = (g_h2 @ w2.T) * (1.0 - h1 * h1)
    g_w1 = x.T @ g_h1
    g_b1 = g_h1.sum(axis=0)
    lr = LEARNING_RATE
    params = (w1, b1, w2, b2, w3, b3)
    grads = (g_w1, g_b1, g_w2, g_b2, g_w3, g_b3)
    # Cast keeps float32 inputs float32 (python-float lr would otherwise be harmless, but be explicit).
    return tuple((p - lr * g).astype(p.dtype, copy=False) for p, g in zip(params, grads)) + (loss,)


def reference(inputs):
    return list(_numpy_step(np, *(v.astype(np.float64) for v in inputs)))


def numpy_fn(np_module):
    def mlp_train_step(*arrays):
        return _numpy_step(np_module, *arrays)

    return mlp_train_step


def jax_fn(jax):
    jnp = jax.numpy

    def loss_fn(params, x, y):
        w1, b1, w2, b2, w3, b3 = params
        h = jnp.tanh(x @ w1 + b1)
        h = jnp.tanh(h @ w2 + b2)
        diff = h @ w3 + b3 - y
        return jnp.mean(diff * diff)

    def mlp_train_step(w1, b1, w2, b2, w3, b3, x, y):
        params = (w1, b1, w2, b2, w3, b3)
        loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
        return tuple(p - LEARNING_RATE * g for p, g in zip(params, grads)) + (loss,)

    return mlp_train_step


def torch_build(torch, compile_fn, inputs):
    """The user's pattern: compiled forward+loss, eager .backward() and torch.optim.SGD.

    torch.compile compiles the backward graph lazily at the first .backward(), so the first
    call of the returned step includes both compiles.
    """
    *param_values, x, y = inputs
    params = [p.clone().requires_grad_(True) for p in param_values]
    optimizer = torch.optim.SGD(params, lr=LEARNING_RATE)

    def loss_fn(w1, b1, w2, b2, w3, b3, x, y):
        h = torch.tanh(x @ w1 + b1)
        h = torch.tanh(h @ w2 + b2)
        diff = h @ w3 + b3 - y
        return torch.mean(diff * diff)

    compiled_loss = compile_fn(loss_fn)

    def mlp_train_step():
        optimizer.zero_grad(set_to_none=True)
        loss = compiled_loss(*params, x, y)
        loss.backward()
        optimizer.step()
        return tuple(p.detach() for p in params) + (loss.detach(),)

    return mlp_train_step, ()
