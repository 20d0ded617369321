"""Signal-gradient accuracy as a workload: one call computes the autodiff gradient of the
NLL with respect to the signal histogram and its central finite differences (two NLL
evaluations per bin), and returns (max |error|, max relative error, normalised error).

Every gradient case's gate records the same figures; this case times the check itself.
"""

import numpy as np

from ttfr.child.workloads.histfactory import engines, gate, native, native_inputs, problems

load_inputs, inputs_for, dataset_sha256 = problems.load_problem, engines.inputs_for, problems.dataset_sha256
STEP = gate.FD_STEP["nll"]


def jax_fn(jax):
    jnp = jax.numpy
    functions = native.jax_functions(jax)

    def hf_fd_check(*inputs):
        arrays, e = native_inputs.split_native(inputs)
        point, signal = e["point"], e["signal"]
        gradient = functions["value_and_grads"](point, signal, arrays)[1][1]
        steps = STEP * jnp.maximum(1.0, jnp.abs(signal))
        shifts = jnp.diag(steps)
        at = jax.vmap(lambda s: functions["value"](point, s, arrays))
        fd = (at(signal + shifts) - at(signal - shifts)) / (2.0 * steps)
        error = jnp.abs(gradient - fd)
        relative = jnp.max(error / jnp.maximum(jnp.abs(fd), 1e-12))
        return jnp.max(error), relative, jnp.max(error) / jnp.maximum(1.0, jnp.max(jnp.abs(fd)))

    return hf_fd_check


def torch_build(torch, compile_fn, inputs):
    engine, point, signal = native.torch_engine(torch, compile_fn, inputs)

    def hf_fd_check():
        gradient = engine.value_and_grads(point, signal)[2]
        steps = STEP * torch.clamp(torch.abs(signal), min=1.0)
        shifts = torch.diag(steps)
        # Every bin's two points in one batched call (engine.values: the NLL vmapped over
        # signals), not 2 x bins calls from a Python loop.
        at = engine.values(point, torch.cat([signal + shifts, signal - shifts]))
        n = signal.shape[0]
        fd = (at[:n] - at[n:]) / (2.0 * steps)
        error = torch.abs(gradient - fd)
        relative = (error / torch.clamp(torch.abs(fd), min=1e-12)).max()
        return error.max(), relative, error.max() / torch.clamp(fd.abs().max(), min=1.0)

    return hf_fd_check, ()


def engine_build(runtime, engine):
    signal = engine.problem.signal_nominal()

    def hf_fd_check():
        report = gate.fd_report(engine.nll_signal_grad(signal), gate.central_differences(engine.nll, signal, STEP), "nll")
        return np.array(report["max_abs_error"]), np.array(report["max_rel_error"]), np.array(report["normalised_error"])

    return hf_fd_check, ()


def check(runtime, inputs, problem, host_first, job):
    engine = native.probe(runtime, inputs)
    check = gate.gate(engine, problem, job.reference or None, fd_of="nll")
    check["timed_call_normalised_error"] = float(host_first[2])
    return check
