"""HistFactory NLL at a fixed parameter point, with its gradient with respect to the signal
sample's nominal histogram and with respect to all parameters, in one call.

Output: (NLL, dNLL/d signal histogram, dNLL/d parameters). Gate: NLL parity with pyhf's
NumPy backend, q0 parity, and the signal gradient against central finite differences.
"""

from ttfr.child.workloads.histfactory import engines, gate, native, native_inputs, problems

load_inputs, inputs_for, dataset_sha256 = problems.load_problem, engines.inputs_for, problems.dataset_sha256


def jax_fn(jax):
    functions = native.jax_functions(jax)

    def hf_nll_grad(*inputs):
        arrays, extra = native_inputs.split_native(inputs)
        value, (g_point, g_signal) = functions["value_and_grads"](extra["point"], extra["signal"], arrays)
        return value, g_signal, g_point

    return hf_nll_grad


def jax_build(jax, inputs):
    """The JAX function and the arguments it is called with. A small model is called in its
    compact form (native_inputs.pack: 4 arguments instead of 29; gradients from the analytic
    Jacobian instead of reverse mode), where fixed costs per argument and per kernel are most
    of the call; a larger one as the plain jax.value_and_grad of the NLL."""
    arrays, extra = native_inputs.split_native(inputs)
    if not native_inputs.is_small(arrays, int(extra["point"].shape[0])):
        return jax_fn(jax), tuple(inputs)
    from ttfr.child.workloads.histfactory.array_ops import Ops
    from ttfr.child.workloads.histfactory.likelihood import jacobian_index

    import numpy as np

    ops = Ops("jax", jax.numpy)
    # Packed on the host and put once: eager jax.numpy ops here would each compile a kernel (a
    # third of a cold first call). The Jacobian's scatter positions depend on the model only.
    host = {name: np.asarray(array) for name, array in arrays.items()}
    index = jacobian_index(Ops("numpy", np), host, int(extra["point"].shape[0]))
    layout, floats, ints = native_inputs.pack(np, {**host, native_inputs.JACOBIAN_INDEX: index})
    device = _device_of(extra["point"])
    floats, ints = jax.device_put(floats, device), jax.device_put(ints, device)

    def hf_nll_grad(floats, ints, point, signal):
        model = native_inputs.unpack(layout, floats, ints)
        return native.nll_and_grads(ops, point, signal, model, model[native_inputs.JACOBIAN_INDEX])

    return hf_nll_grad, (floats, ints, extra["point"], extra["signal"])


def _device_of(array):
    """The device an input array lives on (the packed buffers go there too)."""
    devices = getattr(array, "devices", None)
    return next(iter(devices())) if devices else None


def torch_build(torch, compile_fn, inputs):
    engine, point, signal = native.torch_engine(torch, compile_fn, inputs)

    def hf_nll_grad():
        value, g_point, g_signal = engine.value_and_grads(point, signal)
        return value, g_signal, g_point

    return hf_nll_grad, ()


def engine_build(runtime, engine):
    return engine.nll_grads_call()


def check(runtime, inputs, problem, host_first, job):
    engine = native.probe(runtime, inputs)
    return gate.gate(engine, problem, job.reference or None, nll_value=float(host_first[0]), fd_of="nll", gradient=host_first[1])
