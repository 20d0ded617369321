"""A whole analysis script, measured as a command:

    ttfr run --command "python examples/line_fit_script.py --points 64" --first-result-mark

It fits a straight line with JAX (least squares by gradient descent, one jitted step) and
calls `ttfr_mark.first_result()` once its first fitted value exists: ttfr's time to first
result stops there, and the rest of the script (more steps, writing output) is "after first
result". Run alone, the mark does nothing. `--first-result "^fit:"` instead would stop at the
line it prints; neither stops at the exit.
"""

import argparse

import jax
import jax.numpy as jnp
import ttfr_mark


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--points", type=int, default=64)
    parser.add_argument("--steps", type=int, default=200)
    args = parser.parse_args()

    x = jnp.linspace(0.0, 1.0, args.points)
    y = 3.0 * x + 0.5 + 0.01 * jnp.sin(40.0 * x)

    @jax.jit
    def step(params):
        def loss(p):
            return jnp.mean((p[0] * x + p[1] - y) ** 2)

        value, grad = jax.value_and_grad(loss)(params)
        return params - 0.5 * grad, value

    params, loss = step(jnp.zeros(2))
    print(f"fit: first loss {float(loss):.4f}", flush=True)
    ttfr_mark.first_result()  # the first result exists: everything above is what it cost

    for _ in range(args.steps):
        params, loss = step(params)
    print(f"slope {float(params[0]):.3f}, intercept {float(params[1]):.3f}, loss {float(loss):.2e}")


if __name__ == "__main__":
    main()
