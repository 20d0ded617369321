"""The discovery statistic q0 with its gradient with respect to the signal histogram.

q0 = 2 (NLL(mu=0, profiled) - NLL(free fit)), 0 with a zero gradient when mu_hat <= 0.
Both fits run in every call. dq0/ds uses the envelope theorem (the partial derivative of
the NLL at each fitted point), not differentiation through the optimiser. Gate: q0 and
NLL parity with pyhf, and dq0/ds against central finite differences of q0.
"""

from ttfr.child.workloads.histfactory import engines, gate, native, native_inputs, problems

load_inputs, inputs_for, dataset_sha256 = problems.load_problem, engines.inputs_for, problems.dataset_sha256


def jax_fn(jax):
    functions = native.jax_functions(jax)

    def hf_profiled_q0(*inputs):
        arrays, e = native_inputs.split_native(inputs)
        q0, grad, muhat, *_rest = functions["q0_and_grad"](e["init"], e["free"], e["lower"], e["upper"], e["signal"], arrays)
        return q0, grad, muhat

    return hf_profiled_q0


def torch_build(torch, compile_fn, inputs):
    arrays, e = native_inputs.split_native(inputs)
    engine = native.TorchEngine(torch, compile_fn, arrays)

    def hf_profiled_q0():
        q0, grad, muhat, *_rest = engine.q0_and_grad(e["init"], e["free"], e["lower"], e["upper"], e["signal"])
        return q0, grad, muhat

    return hf_profiled_q0, ()


def engine_build(runtime, engine):
    signal = engine.problem.signal_nominal()

    def hf_profiled_q0():
        return engine.q0_and_grad(signal)

    return hf_profiled_q0, ()


def check(runtime, inputs, problem, host_first, job):
    engine = native.probe(runtime, inputs)
    return gate.gate(engine, problem, job.reference or None, q0_value=float(host_first[0]), fd_of="q0", gradient=host_first[1])
