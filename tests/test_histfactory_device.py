"""The torch HistFactory engine keeps its work on the device (issue 27, item 10): the Newton fit
reads one flag per iteration and sends nothing to the device, and hf_fd_check evaluates its
finite-difference points in one batched call. Same results as the host-driven forms they replace."""

import json

import numpy as np
import pytest
from conftest import have

from ttfr.child.workloads import hf_fd_check
from ttfr.child.workloads.histfactory import dense, native, native_inputs, problems
from ttfr.child.workloads.histfactory import workspace as hf_workspace

torch = pytest.importorskip("torch")
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

# The smallest preset and a 184-parameter one (its Newton steps go through the bins).
PRESETS = ("simple", "thu184p")


def _engine(name, device="cpu"):
    spec = hf_workspace.preset(name, seed=0)
    model = dense.compile_workspace(spec, hf_workspace.find_signal(spec))
    arrays = {k: torch.from_numpy(v).to(device) for k, v in model.arrays.items()}
    bounds = model.bounds()
    host = (model.inits(), ~model.fixed(), bounds[:, 0].copy(), bounds[:, 1].copy(), model.signal_nominal())
    return native.TorchEngine(torch, lambda fn: fn, arrays), [torch.from_numpy(x).to(device) for x in host]


def _fits(args):
    """(free fit's arguments, conditional fit's (mu = 0, held)), as q0_and_grad makes them."""
    init, free, lower, upper, signal = args
    cond_init, cond_free = init.clone(), free.clone()
    cond_init[native.POI], cond_free[native.POI] = 0.0, False
    return (init, free, lower, upper, signal), (cond_init, cond_free, lower, upper, signal)


def _host_driven_fit(engine, pars, free, lower, upper, signal):
    """TorchEngine.fit as it was: the accept test on Python floats, the damping a Python float
    sent to the device every iteration, up to five reads of device values per iteration. Also
    counts the rejected steps."""
    p = torch.clamp(pars, lower, upper)
    f, expected, jac = engine.evaluate(p, signal)
    lam, converged, iterations, rejected = native.INITIAL_DAMPING, False, 0, 0
    while iterations < native.MAX_ITERATIONS:
        iterations += 1
        lam_t = torch.tensor(lam, dtype=p.dtype, device=p.device)
        g, delta, damping = native._newton_direction(engine.ops, p, expected, jac, free, lower, upper, lam_t, engine.arrays)
        trial = torch.clamp(p - delta, lower, upper)
        f_trial, expected_trial, jac_trial = engine.evaluate(trial, signal)
        accept = bool(torch.isfinite(f_trial)) and float(f_trial) <= float(f) + native.F_NOISE * max(1.0, abs(float(f)))
        done = bool(native._converged(torch, g, p, trial, torch.tensor(accept), damping))
        if accept:
            p, f, expected, jac, lam = trial, f_trial, expected_trial, jac_trial, lam * 0.2
        else:
            lam *= 10.0
            rejected += 1
        if done:
            converged = True
            break
    return p, f, expected, iterations, converged, rejected


class _HostReads(TorchDispatchMode):
    """Counts what makes a host wait for or feed a device: reads of a tensor's value
    (item(), bool(), float(): aten._local_scalar_dense) and tensors made from host data
    (torch.tensor(...): aten.lift_fresh)."""

    def __init__(self):
        super().__init__()
        self.reads = self.uploads = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.reads += func is torch.ops.aten._local_scalar_dense.default
        self.uploads += func in (torch.ops.aten.lift_fresh.default, torch.ops.aten.lift_fresh_copy.default)
        return func(*args, **(kwargs or {}))


def _random_start(args, seed=0):
    """A start drawn inside the bounds (clipped to +-5): far enough from the optimum that both
    presets' fits reject steps (the damping grows as well as shrinks)."""
    init, free, lower, upper, _signal = args
    low, high = torch.clamp(lower, min=-5.0), torch.clamp(upper, max=5.0)
    drawn = low + (high - low) * torch.rand(init.shape, generator=torch.Generator().manual_seed(seed), dtype=init.dtype)
    return torch.where(free, drawn, init)


@pytest.mark.slow  # ~10 eager torch fits
@pytest.mark.parametrize("name", PRESETS)
def test_the_device_fit_is_the_host_driven_fit_bit_for_bit(name):
    engine, args = _engine(name)
    rejected = 0
    for start in (args[0], _random_start(args)):
        for fit_args in _fits([start, *args[1:]]):
            p, f, expected, iterations, converged = engine.fit(*fit_args)
            *reference, rejects = _host_driven_fit(engine, *fit_args)
            rejected += rejects
            assert type(iterations) is int and type(converged) is bool
            assert (iterations, converged) == (reference[3], reference[4]) and converged
            for mine, theirs in zip((p, f, expected), reference[:3]):
                assert torch.equal(mine, theirs)
    assert rejected > 0  # the rejected step's branch (lam * 10) is compared too
    # q0_and_grad on the two fits: q0 = 2 (NLL_cond - NLL_free) where mu_hat > 0
    q0, grad, muhat, iterations, converged, _optima = engine.q0_and_grad(*args)
    free, cond = (_host_driven_fit(engine, *fit_args) for fit_args in _fits(args))
    assert iterations == free[3] + cond[3] and converged is True and float(muhat) == float(free[0][native.POI])
    expected_q0 = 2.0 * (float(cond[1]) - float(free[1]))
    assert float(q0) == (expected_q0 if float(muhat) > 0 and expected_q0 > 0 else 0.0)
    assert grad.shape == args[4].shape and bool(torch.isfinite(grad).all())


@pytest.mark.slow
@pytest.mark.parametrize("name", PRESETS)
def test_a_fit_reads_one_device_value_per_iteration_and_sends_none(name):
    """On a GPU each read of a device value is a synchronisation and each torch.tensor(...) a
    host-to-device copy: the fit may read only its stop flag. The host-driven loop, counted
    the same way, read two values (a trial NLL that is not finite) to five and sent two an iteration."""
    engine, args = _engine(name)
    for fit_args in _fits([_random_start(args), *args[1:]]):
        with _HostReads() as counted:
            iterations = engine.fit(*fit_args)[3]
        assert counted.reads == iterations and counted.uploads == 0
        with _HostReads() as old:
            old_iterations = _host_driven_fit(engine, *fit_args)[3]
        assert old.reads >= 2 * old_iterations and old.uploads >= old_iterations  # the counter sees what it must


@pytest.mark.parametrize("name", PRESETS)
def test_a_newton_iteration_reads_no_device_value(name):
    """`step`, the whole iteration (direction, trial, accept, update, stop test), runs on torch's
    `meta` device, which has no values: any read on the host would raise there."""
    meta = torch.device("meta")
    engine, (init, free, lower, upper, signal) = _engine(name, device=meta)
    damping = torch.full((), native.INITIAL_DAMPING, dtype=torch.float64, device=meta)
    state = (init, *engine.evaluate(init, signal), damping)
    *after, done = engine.step(*state, free, lower, upper, signal)
    assert [(t.shape, t.dtype) for t in after] == [(t.shape, t.dtype) for t in state]
    assert {t.device for t in (*after, done)} == {meta} and done.shape == () and done.dtype == torch.bool


def _fd_inputs(name):
    spec = hf_workspace.preset(name, seed=1)
    model = dense.compile_workspace(spec, hf_workspace.find_signal(spec))
    point = dict(zip(model.names, dense.evaluation_point(model, 0)))
    problem = problems.Problem(json.dumps(spec).encode(), point, hf_workspace.find_signal(spec))
    return [torch.from_numpy(x) for x in native_inputs.dense_inputs(problem)[1]]


def _per_bin_figures(engine, point, signal):
    """hf_fd_check's figures as the per-bin loop computed them (2 x bins NLL calls)."""
    gradient = engine.value_and_grads(point, signal)[2]
    steps = hf_fd_check.STEP * torch.clamp(torch.abs(signal), min=1.0)
    fd = torch.stack([
        (engine.value(point, signal + steps[b] * basis) - engine.value(point, signal - steps[b] * basis)) / (2 * steps[b])
        for b, basis in enumerate(torch.eye(signal.shape[0], dtype=signal.dtype))
    ])  # fmt: skip
    error = torch.abs(gradient - fd)
    return error.max(), (error / torch.clamp(torch.abs(fd), min=1e-12)).max(), error.max() / torch.clamp(fd.abs().max(), min=1.0)


@pytest.mark.slow
@pytest.mark.parametrize("name", ("complex8p", "thu184p"))
def test_fd_check_in_one_batched_call_gives_the_per_bin_loops_figures(name):
    inputs = _fd_inputs(name)
    function, call_args = hf_fd_check.torch_build(torch, lambda fn: fn, inputs)
    engine, point, signal = native.torch_engine(torch, lambda fn: fn, inputs)
    batched, looped = function(*call_args), _per_bin_figures(engine, point, signal)
    for mine, theirs in zip(batched, looped):
        assert abs(float(mine) - float(theirs)) <= 1e-10 * max(1.0, abs(float(theirs)))
    stacked = torch.stack([signal, 1.5 * signal, signal + 2.0])
    assert torch.equal(engine.values(point, stacked), torch.stack([engine.value(point, s) for s in stacked]))


@pytest.mark.torch_compile
@pytest.mark.slow
@pytest.mark.contention_safe
@pytest.mark.skipif(not have("torch"), reason="needs torch")
def test_compiled_fits_and_batched_nll_compile_once_and_agree_with_eager():
    """Two graphs for the fits (the start's evaluation and `step`): the Jacobian enters `step`
    with the layout `step` returns, else it recompiles at the second iteration. And the batched
    NLL: torch.compile(vmap(...)) summed the scatter-add into a fresh destination over the batch
    (torch 2.13), every row the same wrong NLL; native._vmappable's form must hold."""
    from torch._dynamo.utils import counters

    inputs = _fd_inputs("complex8p")
    engine, point, signal = native.torch_engine(torch, lambda fn: torch.compile(fn, dynamic=False), inputs)
    eager = native.torch_engine(torch, lambda fn: fn, inputs)[0]
    _arrays, extra = native_inputs.split_native(inputs)
    q0_args = (extra["init"], extra["free"], extra["lower"], extra["upper"], signal)
    before = counters["stats"]["unique_graphs"]
    compiled_q0, eager_q0 = engine.q0_and_grad(*q0_args), eager.q0_and_grad(*q0_args)
    assert counters["stats"]["unique_graphs"] - before == 2
    assert compiled_q0[3] == eager_q0[3] and compiled_q0[4] is eager_q0[4] is True
    assert abs(float(compiled_q0[0]) - float(eager_q0[0])) <= 1e-9
    stacked = torch.stack([signal * (1.0 + 0.01 * i) for i in range(4)])
    assert np.allclose(engine.values(point, stacked).numpy(), eager.values(point, stacked).numpy(), rtol=1e-12, atol=0)


def test_torch_cuda_histfactory_cases_declare_launch_bound_fits_and_atomic_scatter_adds():
    """What a case on torch + CUDA declares of the native engine (catalog's workload_notes, in its
    sync_policy): the fitting workloads' figures are launch-bound, and every HistFactory
    workload's results are not bit-deterministic (index_add atomics). No other case says so."""
    from ttfr.measure import catalog

    fits = {"hf_profiled_q0", "hf_train_loop", "hf_train20", "hf_mass_scan_naive"}
    on_cuda = {b.name for b in catalog.BACKENDS.values() if b.framework == "torch" and b.device == "gpu"}
    assert {"torch_eager_cuda", "torch_compile_cuda"} <= on_cuda
    for backend in catalog.BACKENDS.values():
        for name, workload in catalog.WORKLOADS.items():
            if not catalog.supports(backend, workload):
                continue
            policy = catalog.Case(backend.name, name, 8, workload.dtypes[0], info=workload).sync_policy
            assert ("launch-bound" in policy) == (backend.name in on_cuda and name in fits), (backend.name, name)
            assert ("not bit-deterministic" in policy) == (backend.name in on_cuda and name in catalog.HF_WORKLOADS)
        for name, _note in backend.workload_notes:
            assert catalog.supports(backend, catalog.WORKLOADS[name]), (backend.name, name)
