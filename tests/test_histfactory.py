"""HistFactory: generator, dense model parity with pyhf, native fits, the gate, loading."""

import json

import numpy as np
import pytest
from conftest import have

from ttfr.child.workloads.histfactory import array_ops, dense, gate, likelihood, native_inputs, problems, reference
from ttfr.child.workloads.histfactory import workspace as hf_workspace
from ttfr.errors import UsageError
from ttfr.measure import datasets

pyhf = pytest.importorskip("pyhf")
SMALL = ("simple", "complex8p", "thu184p")


def pyhf_model(spec, backend="numpy"):
    pyhf.set_backend(backend, precision="64b")
    workspace = pyhf.Workspace(spec)  # validates against pyhf's JSON schema
    model = workspace.model()
    return model, workspace.data(model)


def pyhf_schema_errors(spec) -> list[str]:
    """The workspace against pyhf's own installed schema (workspace.json and the defs.json it refers to), by
    jsonschema-rs: pyhf.schema.validate's pure-Python validator is superlinear in the workspace (ladder2000 alone
    took 17-30 s, against 0.1 s). The small presets also go through pyhf.Workspace, which validates its way."""
    import jsonschema_rs

    from pathlib import Path

    folder = Path(pyhf.schema.path) / pyhf.schema.version
    schema, defs = (json.loads((folder / name).read_text()) for name in ("workspace.json", "defs.json"))
    registry = jsonschema_rs.Registry([(defs["$id"], defs), (schema["$id"], schema)])
    validator = jsonschema_rs.Draft6Validator(schema, registry=registry, base_uri=schema["$id"])
    return [error.message for error in validator.iter_errors(spec)]


def test_pyhf_schema_errors_refuses_what_pyhf_refuses():
    spec = hf_workspace.preset("complex8p", seed=3)
    broken = json.loads(json.dumps(spec))
    broken["channels"][0]["samples"][0]["modifiers"][0]["type"] = "bogus"
    with pytest.raises(pyhf.exceptions.InvalidSpecification):
        pyhf.schema.validate(broken, "workspace.json")
    assert pyhf_schema_errors(spec) == [] and pyhf_schema_errors(broken)


# The ladders take seconds to generate (and their pyhf models minutes to build): the spread tier's.
@pytest.mark.parametrize("name", [n if n in SMALL else pytest.param(n, marks=pytest.mark.slow) for n in hf_workspace.PRESETS])
def test_every_preset_is_a_valid_workspace_with_its_parameter_count(name):
    spec = hf_workspace.preset(name, seed=3)
    assert pyhf_schema_errors(spec) == []
    knobs = hf_workspace.PRESETS[name]
    assert hf_workspace.count_parameters(spec) == knobs.n_parameters
    if name in SMALL:  # building the ladder's pyhf models takes minutes
        assert pyhf_model(spec)[0].config.npars == knobs.n_parameters
    signal_channel, signal_sample = hf_workspace.find_signal(spec)
    sample = next(s for c in spec["channels"] if c["name"] == signal_channel for s in c["samples"] if s["name"] == signal_sample)
    assert {m["type"] for m in sample["modifiers"]} <= {"normfactor", "normsys", "lumi"}  # NextStat-safe signal


def test_preset_sizes_match_the_catalogue():
    from ttfr.measure import catalog

    assert {n: hf_workspace.PRESETS[n].n_parameters for n in hf_workspace.PRESETS} == catalog.HF_PRESET_SIZES


def test_generator_is_deterministic_per_seed():
    a, b, c = (hf_workspace.canonical_bytes(hf_workspace.preset("thu184p", s)) for s in (1, 1, 2))
    assert a == b != c


def _perturbed(model: dense.DenseModel, seed: int) -> np.ndarray:
    """A point that also exercises |alpha| > 1 (the interpolations' outer branches)."""
    point = dense.evaluation_point(model, seed)
    rng = np.random.default_rng(seed)
    for i, p in enumerate(model.parameters):
        if p.kind in ("normsys", "histosys"):
            point[i] = rng.choice([-1.7, -0.6, 0.4, 1.3])
    return point


def _by_name(model, point, names):
    values = dict(zip(model.names, point))
    return np.array([values[n] for n in names])


WITH_EVERY_MODIFIER = {
    "channels": [
        {"name": "A", "samples": [
            {"name": "sig", "data": [4.0, 9.0, 3.0], "modifiers": [
                {"name": "mu", "type": "normfactor", "data": None}, {"name": "lumi", "type": "lumi", "data": None},
                {"name": "xs", "type": "normsys", "data": {"hi": 1.1, "lo": 0.85}}]},
            {"name": "bkg", "data": [50.0, 40.0, 30.0], "modifiers": [
                {"name": "lumi", "type": "lumi", "data": None},
                {"name": "jes", "type": "histosys", "data": {"hi_data": [53.0, 41.0, 28.0], "lo_data": [48.0, 39.5, 31.0]}},
                {"name": "bxs", "type": "normsys", "data": {"hi": 1.05, "lo": 0.9}},
                {"name": "stat_A", "type": "staterror", "data": [3.0, 2.5, 0.0]},
                {"name": "free", "type": "shapefactor", "data": None}]},
            {"name": "other", "data": [10.0, 12.0, 8.0], "modifiers": [
                {"name": "stat_A", "type": "staterror", "data": [1.0, 1.5, 1.0]},
                {"name": "unc_other", "type": "shapesys", "data": [2.0, 0.0, 1.5]}]},
        ]},
        {"name": "B", "samples": [
            {"name": "sig", "data": [2.0, 1.0], "modifiers": [{"name": "mu", "type": "normfactor", "data": None}]},
            {"name": "bkg", "data": [20.0, 25.0], "modifiers": [
                {"name": "jes", "type": "histosys", "data": {"hi_data": [21.0, 24.0], "lo_data": [19.0, 26.5]}},
                {"name": "bxs", "type": "normsys", "data": {"hi": 1.07, "lo": 0.95}},
                {"name": "k_bkg", "type": "normfactor", "data": None}]},
        ]},
    ],
    "observations": [{"name": "A", "data": [66.0, 63.0, 40.0]}, {"name": "B", "data": [23.0, 27.0]}],
    "measurements": [{"name": "m", "config": {"poi": "mu", "parameters": [
        {"name": "lumi", "auxdata": [1.0], "sigmas": [0.02], "bounds": [[0.9, 1.1]], "inits": [1.0]},
        {"name": "k_bkg", "bounds": [[0.5, 2.0]], "inits": [1.1]}]}}],
    "version": "1.0.0",
}  # fmt: skip


@pytest.mark.parametrize("name", ["simple", "complex8p", "thu184p", "every_modifier"])
def test_dense_nll_matches_pyhf_to_1e_10(name):
    spec = WITH_EVERY_MODIFIER if name == "every_modifier" else hf_workspace.preset(name, seed=2)
    model = dense.compile_workspace(spec, hf_workspace.find_signal(spec))
    pyhf_m, data = pyhf_model(spec)
    assert sorted(model.names) == sorted(pyhf_m.config.par_names)
    names = pyhf_m.config.par_names
    assert np.allclose(_by_name(model, model.inits(), names), pyhf_m.config.suggested_init())
    assert np.allclose(_by_name(model, model.bounds(), names), pyhf_m.config.suggested_bounds())
    assert list(_by_name(model, model.fixed(), names)) == list(pyhf_m.config.suggested_fixed())
    ops = array_ops.Ops("numpy", np)
    for seed in range(3):
        point = _perturbed(model, seed)
        ours = likelihood.nll(ops, point, model.signal_nominal(), model.arrays)
        reference = -pyhf_m.logpdf(_by_name(model, point, names), data)[0]
        assert abs(ours - reference) <= 1e-10 * abs(reference)


@pytest.mark.slow  # pyhf's JAX autodiff, jitted: one XLA compile of its graph
@pytest.mark.skipif(not (have("jax") and have("torch")), reason="needs jax and torch")
def test_native_gradients_match_pyhf_autodiff_and_each_other():
    import jax
    import torch

    jax.config.update("jax_enable_x64", True)
    spec = WITH_EVERY_MODIFIER
    model = dense.compile_workspace(spec, hf_workspace.find_signal(spec))
    pyhf_m, data = pyhf_model(spec, "jax")
    names = pyhf_m.config.par_names
    point = _perturbed(model, 1)
    reference = jax.jit(jax.grad(lambda p: -pyhf_m.logpdf(p, jax.numpy.asarray(data))[0]))(
        jax.numpy.asarray(_by_name(model, point, names))
    )
    arrays_j = {k: jax.numpy.asarray(v) for k, v in model.arrays.items()}
    jops = array_ops.Ops("jax", jax.numpy)
    _, (g_jax, s_jax) = jax.jit(jax.value_and_grad(lambda p, s: likelihood.nll(jops, p, s, arrays_j), argnums=(0, 1)))(
        jax.numpy.asarray(point), jax.numpy.asarray(model.signal_nominal())
    )
    assert np.allclose(_by_name(model, np.asarray(g_jax), names), reference, rtol=1e-10, atol=1e-10)
    p_t = torch.tensor(point, requires_grad=True)
    s_t = torch.tensor(model.signal_nominal(), requires_grad=True)
    likelihood.nll(array_ops.Ops("torch", torch), p_t, s_t, {k: torch.from_numpy(v) for k, v in model.arrays.items()}).backward()
    assert np.allclose(p_t.grad.numpy(), np.asarray(g_jax), rtol=1e-12, atol=1e-12)
    assert np.allclose(s_t.grad.numpy(), np.asarray(s_jax), rtol=1e-12, atol=1e-12)


@pytest.mark.slow  # JAX and torch autodiff through every engine (seconds each)
@pytest.mark.skipif(not (have("jax") and have("torch")), reason="needs jax and torch")
@pytest.mark.parametrize("name", ["complex8p", "thu184p", "every_modifier"])
def test_analytic_jacobian_and_signal_gradient_match_autodiff_in_every_framework(name):
    """The fits' Jacobian is written by hand (every interpolation branch, every linear
    factor's product rule, the scatter into (bin, parameter)): reverse-mode autodiff of the
    expected bins is the reference, and NumPy, JAX and torch must all agree with it."""
    import jax
    import torch

    jax.config.update("jax_enable_x64", True)
    spec = WITH_EVERY_MODIFIER if name == "every_modifier" else hf_workspace.preset(name, seed=2)
    model = dense.compile_workspace(spec, hf_workspace.find_signal(spec))
    n = len(model.names)
    signal = model.signal_nominal()
    jops = array_ops.Ops("jax", jax.numpy)
    arrays_j = {k: jax.numpy.asarray(v) for k, v in model.arrays.items()}
    arrays_t = {k: torch.from_numpy(v) for k, v in model.arrays.items()}
    # The references jitted: one compile for the three points, not JAX's op-by-op dispatch of each (~3x slower)
    reference_jacobian = jax.jit(jax.jacrev(lambda p: likelihood.expected_bins(jops, p, signal, arrays_j)))
    reference_signal_gradient = jax.jit(jax.grad(lambda p, s: likelihood.nll(jops, p, s, arrays_j), argnums=1))
    for seed in range(3):  # _perturbed: |alpha| > 1 and < 1 on both sides, linear factors != 1
        point = _perturbed(model, seed)
        reference = np.asarray(reference_jacobian(point))
        assert np.count_nonzero(reference) > n  # a real Jacobian, not a few columns
        expected = np.asarray(likelihood.expected_bins(jops, point, signal, arrays_j))
        residual = np.asarray(model.arrays["observed"]) / expected - 1.0
        nll_signal = np.asarray(reference_signal_gradient(point, signal))
        for ops, arrays, as_array in (
            (array_ops.Ops("numpy", np), model.arrays, np.asarray),
            (jops, arrays_j, jax.numpy.asarray),
            (array_ops.Ops("torch", torch), arrays_t, torch.from_numpy),
        ):
            index = likelihood.jacobian_index(ops, arrays, n)
            nu, jac = likelihood.expected_and_jacobian(ops, as_array(point), as_array(signal), arrays, index)
            assert np.allclose(np.asarray(nu), expected, rtol=1e-13, atol=0)
            assert np.allclose(np.asarray(jac), reference, rtol=1e-12, atol=1e-12), ops.framework
            gradient = likelihood.signal_gradient(ops, as_array(point), nu, arrays, signal.size)
            assert np.allclose(np.asarray(gradient), nll_signal, rtol=1e-12, atol=1e-14), ops.framework
        assert np.abs(residual).max() > 0  # the signal gradient test is not 0 == 0


@pytest.mark.parametrize("name", ["simple", "complex8p", "thu184p", "every_modifier", "thu184p_all_constrained"])
def test_newton_step_through_the_bins_equals_the_dense_solve(name):
    """_newton_direction eliminates the constrained parameters through the bins; the step
    must be the one the parameters x parameters Gauss-Newton system gives, with parameters
    held at a bound (outward gradient: an unconstrained and a constrained one) and a fixed
    one not moving; `all_constrained` takes the path with no unconstrained parameter."""
    from ttfr.child.workloads.histfactory import native

    preset = name.removesuffix("_all_constrained")
    spec = WITH_EVERY_MODIFIER if preset == "every_modifier" else hf_workspace.preset(preset, seed=2)
    model = dense.compile_workspace(spec, hf_workspace.find_signal(spec))
    ops, arrays = array_ops.Ops("numpy", np), dict(model.arrays)
    n = len(model.names)
    assert sorted(np.concatenate([arrays["cons_idx"], arrays["unc_idx"]])) == list(range(n))
    if preset != name:  # as if every parameter had a constraint term (the POI's curvature stays 0)
        arrays["cons_idx"], arrays["unc_idx"] = np.arange(n), np.arange(0)
    bounds = model.bounds()
    point = _perturbed(model, 0)
    index = likelihood.jacobian_index(ops, arrays, n)
    nu, jac = likelihood.expected_and_jacobian(ops, point, model.signal_nominal(), arrays, index)

    def gradient_at(point):
        c_grad, curvature = likelihood.constraint_grad_and_curvature(ops, point, arrays)
        return -(jac.T @ (arrays["observed"] / nu - 1.0)) + c_grad, curvature

    def hold(i) -> bool:  # put parameter i at a bound where its gradient pushes outwards
        original = point[i]
        for side, outwards in ((0, 1.0), (1, -1.0)):
            point[i] = bounds[i, side]
            if outwards * gradient_at(point)[0][i] > 0:
                return True
        point[i] = original
        return False

    free = ~model.fixed()
    held = [int(model.arrays["unc_idx"][-1])]
    assert hold(held[0])
    constrained = [int(i) for i in model.arrays["cons_idx"] if free[i]]
    held += [i for i in constrained[:-1] if hold(i)][:1]  # a constrained one too, where one can be
    free[constrained[-1]] = False  # a fixed parameter inside the structured elimination
    assert len(held) == 2 or preset != "thu184p"  # thu184p has a constrained one that can be held
    lam = 1e-3
    g, step, damping = native._newton_direction(ops, point, nu, jac, free, bounds[:, 0], bounds[:, 1], lam, arrays)
    gradient, curvature = gradient_at(point)
    active = free & ~((point <= bounds[:, 0]) & (gradient > 0)) & ~((point >= bounds[:, 1]) & (gradient < 0))
    assert not active[held].any() and active.sum() < n
    a = np.flatnonzero(active)
    hessian = jac.T @ ((arrays["observed"] / nu**2)[:, None] * jac) + np.diag(curvature)
    expected_step = np.zeros(n)
    expected_step[a] = np.linalg.solve(hessian[np.ix_(a, a)] + lam * np.eye(a.size), gradient[a])
    assert np.allclose(g, np.where(active, gradient, 0.0), rtol=0, atol=1e-12)
    assert np.allclose(step, expected_step, rtol=1e-8, atol=1e-12)
    assert np.all(step[~active] == 0.0)
    diagonal = np.diag(hessian)[a]
    assert damping == pytest.approx(lam / diagonal[diagonal > 0].min(), rel=1e-12)
    structured = len(arrays["observed"]) + len(arrays["unc_idx"]) < n
    assert structured == (name != "simple")  # both paths of _newton_direction are covered


@pytest.mark.slow  # JAX and torch in-process
@pytest.mark.skipif(not (have("jax") and have("torch")), reason="needs jax and torch")
def test_a_failed_factorisation_gives_nan_in_jax_and_torch_alike():
    """The fits reject a step that is not finite; torch's _ex solves (used so compiled
    kernels stay cacheable) must give NaN on failure, as JAX does, not a finite wrong step."""
    import jax
    import torch

    jax.config.update("jax_enable_x64", True)
    not_positive, singular, rhs = -np.eye(3), np.zeros((3, 3)), np.ones((3, 1))
    jops, tops = array_ops.Ops("jax", jax.numpy), array_ops.Ops("torch", torch)
    assert np.isnan(np.asarray(jops.spd_solve(jax.numpy.asarray(not_positive), jax.numpy.asarray(rhs)))).all()
    assert np.isnan(tops.spd_solve(torch.from_numpy(not_positive), torch.from_numpy(rhs)).numpy()).all()
    assert np.isnan(tops.solve(torch.from_numpy(singular), torch.from_numpy(rhs)).numpy()).all()
    good = np.diag([2.0, 4.0, 8.0])
    assert np.allclose(tops.spd_solve(torch.from_numpy(good), torch.from_numpy(rhs)).numpy(), [[0.5], [0.25], [0.125]])
    assert np.allclose(tops.solve(torch.from_numpy(good), torch.from_numpy(rhs)).numpy(), [[0.5], [0.25], [0.125]])


@pytest.mark.slow  # jitted JAX fits (~4 s)
@pytest.mark.skipif(not have("jax"), reason="needs jax")
def test_fits_stop_at_the_nll_resolution_and_warm_starts_converge_to_the_same_point():
    """At 184 parameters the conditional fit reaches the NLL's rounding before a 1e-9
    gradient: a fit that then only rejects steps runs to 35 iterations (the old stop); it
    must stop by its step size instead. From the previous template's optima (a training
    step's warm start) the fits land on the same q0 and gradient in fewer iterations."""
    import jax

    from ttfr.child.workloads.histfactory import native

    jax.config.update("jax_enable_x64", True)
    spec = hf_workspace.preset("thu184p", seed=0)
    model = dense.compile_workspace(spec, hf_workspace.find_signal(spec))
    arrays = {k: jax.numpy.asarray(v) for k, v in model.arrays.items()}
    b = model.bounds()
    q0_fn = jax.jit(native.jax_functions(jax)["q0_and_grad"])

    def q0(signal, starts=None):
        return q0_fn(model.inits(), ~model.fixed(), b[:, 0], b[:, 1], signal, arrays, starts)

    first = q0(model.signal_nominal())
    assert bool(first[4]) and int(first[3]) <= 20
    moved = model.signal_nominal() * np.linspace(0.9, 1.1, model.signal_nominal().size)
    cold, warm = q0(moved), q0(moved, first[5])
    assert bool(cold[4]) and bool(warm[4])
    assert int(warm[3]) < int(cold[3])
    assert abs(float(warm[0]) - float(cold[0])) <= 1e-9
    assert np.allclose(np.asarray(warm[1]), np.asarray(cold[1]), rtol=1e-7, atol=1e-10)
    for a, c in zip(warm[5], cold[5]):
        assert np.allclose(np.asarray(a), np.asarray(c), rtol=0, atol=1e-7)


@pytest.mark.slow  # pyhf's and our fits, and finite differences through a jitted fit
@pytest.mark.skipif(not have("jax"), reason="needs jax")
@pytest.mark.parametrize("name", ["complex8p", "every_modifier"])
def test_native_q0_matches_pyhf_and_its_gradient_matches_finite_differences(name):
    import jax

    from ttfr.child.workloads.histfactory import native

    jax.config.update("jax_enable_x64", True)
    spec = WITH_EVERY_MODIFIER if name == "every_modifier" else hf_workspace.preset(name, seed=1)
    model = dense.compile_workspace(spec, hf_workspace.find_signal(spec))
    pyhf_m, data = pyhf_model(spec)
    init, bounds = pyhf_m.config.suggested_init(), pyhf_m.config.suggested_bounds()
    reference = float(pyhf.infer.test_statistics.q0(0.0, data, pyhf_m, init, bounds, pyhf_m.config.suggested_fixed()))
    functions = native.jax_functions(jax)
    b = model.bounds()
    arrays = {k: jax.numpy.asarray(v) for k, v in model.arrays.items()}
    q0_fn = jax.jit(lambda s: functions["q0_and_grad"](model.inits(), ~model.fixed(), b[:, 0], b[:, 1], s, arrays))
    q0, grad, muhat, _iterations, converged, _optima = q0_fn(model.signal_nominal())
    assert bool(converged) and float(muhat) > 0
    assert abs(float(q0) - reference) <= 1e-4
    fd = gate.central_differences(lambda s: float(q0_fn(s)[0]), model.signal_nominal(), 1e-4)
    assert np.allclose(np.asarray(grad), fd, atol=1e-5)


class _DenseEngine:
    """A numpy engine for the gate: right by default, wrong where told to be."""

    def __init__(self, spec, *, nll_offset=0.0, gradient_scale=1.0):
        self.model = dense.compile_workspace(spec, hf_workspace.find_signal(spec))
        self.point = dense.evaluation_point(self.model, 0)
        self.n_parameters = len(self.point)
        self.ops = array_ops.Ops("numpy", np)
        self.nll_offset, self.gradient_scale = nll_offset, gradient_scale

    def nll(self, signal):
        return float(likelihood.nll(self.ops, self.point, signal, self.model.arrays)) + self.nll_offset

    def nll_signal_grad(self, signal):
        exact = gate.central_differences(lambda s: likelihood.nll(self.ops, self.point, s, self.model.arrays), signal, 1e-5)
        return exact * self.gradient_scale

    def q0(self, signal):
        return self.reference_q0


def _problem(spec):
    model = dense.compile_workspace(spec, hf_workspace.find_signal(spec))
    point = dict(zip(model.names, dense.evaluation_point(model, 0)))
    text = json.dumps(spec)
    return problems.Problem(text.encode(), point, hf_workspace.find_signal(spec))


@pytest.mark.parametrize(
    "engine_kwargs, passes, detail",
    [
        ({}, True, None),
        ({"gradient_scale": 1.01}, False, "signal gradient vs finite differences"),
        ({"nll_offset": 1e-5}, False, "nll parity"),
    ],
)
def test_the_gate_fails_a_wrong_gradient_or_a_wrong_nll(tmp_path, engine_kwargs, passes, detail):
    spec = hf_workspace.preset("complex8p", seed=1)
    problem = _problem(spec)
    values = reference.reference_values(problem, 8)
    engine = _DenseEngine(spec, **engine_kwargs)
    engine.reference_q0 = values["q0"]
    check = gate.gate(engine, problem, str(tmp_path / "ref.json"), fd_of="nll")
    assert check["passed"] is passes
    assert (check["max_normalised_error"] <= 1.0) is passes
    # only the scaled gradient is off; a wrong NLL still has the right gradient
    assert (check["fd"]["max_abs_error"] < 1e-6) is ("gradient_scale" not in engine_kwargs)
    assert check["fd"]["bins"] == 2
    if detail:
        assert detail in check["detail"]
    cached = json.loads((tmp_path / "ref.json").read_text())
    assert cached["nll"] == pytest.approx(values["nll"]) and "pyhf" in cached["engine"]


def test_user_workspace_errors_say_what_is_wrong(tmp_path):
    bad_json = tmp_path / "bad.json"
    bad_json.write_text("{not json")
    with pytest.raises(UsageError, match="not JSON"):
        datasets.load_user_workspace(str(bad_json))
    not_hf = tmp_path / "other.json"
    not_hf.write_text(json.dumps({"channels": []}))
    with pytest.raises(UsageError, match="'channels' must be a non-empty list"):
        datasets.load_user_workspace(str(not_hf))
    spec = hf_workspace.preset("complex8p")
    spec["observations"][0]["data"] = [1.0]
    mismatched = tmp_path / "mismatch.json"
    mismatched.write_text(json.dumps(spec))
    with pytest.raises(UsageError, match="has 2 bins, the observation has 1"):
        datasets.load_user_workspace(str(mismatched))
    good = tmp_path / "good.json"
    good.write_text(json.dumps(hf_workspace.preset("complex8p")))
    with pytest.raises(UsageError, match="it has: SR0/signal"):
        datasets.load_user_workspace(str(good), signal="SR9/signal")
    loaded = datasets.load_user_workspace(str(good), signal="SR1/signal")
    assert (loaded.size, loaded.signal, loaded.name[:7]) == (8, ("SR1", "signal"), "custom-")
    with pytest.raises(UsageError, match="cannot read it"):
        datasets.load_user_workspace(str(tmp_path / "missing.json"))


def test_user_workspace_size_becomes_the_histfactory_case_size(tmp_path):
    from ttfr.measure.spec import RunRequest, build_spec

    path = tmp_path / "ws.json"
    path.write_text(json.dumps(WITH_EVERY_MODIFIER))
    spec = build_spec(RunRequest(workloads="hf_nll_grad", backends="jax_jit_cpu", workspace=str(path)))
    size = hf_workspace.count_parameters(WITH_EVERY_MODIFIER)
    assert [c.id for c in spec.cases] == [f"jax_jit_cpu_hf_nll_grad_custom_{size}_f64"]
    with pytest.raises(UsageError, match="presets"):
        build_spec(RunRequest(workloads="hf_nll_grad", backends="jax_jit_cpu", sizes="77"))


FIT_INPUTS = ("init", "free", "lower", "upper")


@pytest.mark.slow  # JAX and torch training loops through the profiled fit
@pytest.mark.skipif(not (have("jax") and have("torch")), reason="needs jax and torch")
def test_training_loops_agree_across_frameworks():
    import jax
    import torch

    from ttfr.child.workloads.histfactory import native, native_inputs, train

    jax.config.update("jax_enable_x64", True)
    spec = hf_workspace.preset("complex8p", seed=3)
    problem = _problem(spec)
    _model, host_inputs = native_inputs.dense_inputs(problem)
    state_inputs = train.native_state_inputs(0, native_inputs.split_native(host_inputs)[1]["init"])
    jax_trainer = train.JaxTrainer(jax, [jax.numpy.asarray(x) for x in host_inputs + state_inputs], "sigmoid")
    arrays, extra = native_inputs.split_native([torch.as_tensor(x) for x in host_inputs])
    engine = native.TorchEngine(torch, lambda fn: fn, arrays)
    signal = extra["signal"].numpy()
    torch_trainer = train.TorchTrainer(
        torch, train.initial_state(0), signal.size, float(signal.sum()), "sigmoid",
        q0_and_grad=train.WarmStarted(lambda t, starts: engine.q0_and_grad(*(extra[k] for k in FIT_INPUTS), t, starts)),
    )  # fmt: skip
    jax_losses = [jax_trainer.step() for _ in range(5)]
    torch_losses = [float(torch_trainer.step()) for _ in range(5)]
    assert np.allclose(jax_losses, torch_losses, atol=1e-7)
    assert jax_losses[-1] < jax_losses[0]  # -Z0 goes down: the network learns


def test_the_compact_form_packs_and_unpacks_every_array_exactly():
    """native_inputs.pack: two flat buffers and a static layout; unpack gives every array back
    (values, shapes, dtypes) — the compact JAX call's model is the model."""
    for name in ("simple", "complex8p", "mid72p"):
        spec = hf_workspace.preset(name, seed=1)
        model = dense.compile_workspace(spec, hf_workspace.find_signal(spec))
        layout, floats, ints = native_inputs.pack(np, model.arrays)
        assert floats.dtype.kind == "f" and ints.dtype.kind == "i"
        back = native_inputs.unpack(layout, floats, ints)
        assert list(back) == list(dense.ARRAY_NAMES)
        for key, array in model.arrays.items():
            assert back[key].shape == array.shape and back[key].dtype.kind == array.dtype.kind
            assert np.array_equal(back[key], array), (name, key)


def test_only_small_models_take_the_compact_form():
    """The compact form wins where fixed costs dominate (measured: 8 parameters 2.5x faster,
    72 and 184 slower); the rule is the Jacobian's size."""

    def small(name):
        spec = hf_workspace.preset(name, seed=0)
        model = dense.compile_workspace(spec, hf_workspace.find_signal(spec))
        return native_inputs.is_small(model.arrays, len(model.names))

    assert [small(n) for n in ("simple", "complex8p", "mid72p", "thu184p")] == [True, True, False, False]


@pytest.mark.slow  # JAX compiles both forms for four workspaces
@pytest.mark.skipif(not have("jax"), reason="needs jax")
@pytest.mark.parametrize("name", ["simple", "complex8p", "mid72p", "thu184p", "every_modifier"])
def test_analytic_nll_and_gradients_match_reverse_mode_on_every_preset(name):
    """native.nll_and_grads (the compact call's arithmetic: analytic Jacobian, constraint and
    signal gradients) against jax.value_and_grad of the NLL, at points on every interpolation
    branch; and hf_nll_grad's JAX call, compact or plain, returns the same three outputs."""
    import jax

    from ttfr.child.workloads import hf_nll_grad
    from ttfr.child.workloads.histfactory import native, native_inputs

    jax.config.update("jax_enable_x64", True)
    spec = WITH_EVERY_MODIFIER if name == "every_modifier" else hf_workspace.preset(name, seed=3)
    model = dense.compile_workspace(spec, hf_workspace.find_signal(spec))
    ops = array_ops.Ops("jax", jax.numpy)
    arrays = {k: jax.numpy.asarray(v) for k, v in model.arrays.items()}
    index = likelihood.jacobian_index(ops, arrays, len(model.names))
    signal = jax.numpy.asarray(model.signal_nominal())
    reference = jax.jit(jax.value_and_grad(lambda p, s: likelihood.nll(ops, p, s, arrays), argnums=(0, 1)))
    analytic = jax.jit(lambda p, s: native.nll_and_grads(ops, p, s, arrays, index))
    for seed in range(3):
        point = jax.numpy.asarray(_perturbed(model, seed))
        value, (g_point, g_signal) = reference(point, signal)
        got = analytic(point, signal)
        assert np.isclose(float(got[0]), float(value), rtol=1e-13, atol=0)
        assert np.allclose(np.asarray(got[1]), np.asarray(g_signal), rtol=1e-11, atol=1e-12)
        assert np.allclose(np.asarray(got[2]), np.asarray(g_point), rtol=1e-11, atol=1e-12)
        assert np.abs(np.asarray(g_point)).max() > 0
    inputs = list(model.arrays[k] for k in dense.ARRAY_NAMES) + [
        np.asarray(_perturbed(model, 0)), model.signal_nominal(), model.inits(), ~model.fixed(),
        model.bounds()[:, 0].copy(), model.bounds()[:, 1].copy()]  # fmt: skip
    inputs = [jax.numpy.asarray(x) for x in inputs]
    function, args = hf_nll_grad.jax_build(jax, inputs)
    assert len(args) == (4 if native_inputs.is_small(model.arrays, len(model.names)) else len(inputs))
    built, plain = jax.jit(function)(*args), jax.jit(hf_nll_grad.jax_fn(jax))(*inputs)
    for mine, theirs in zip(built, plain):
        assert np.allclose(np.asarray(mine), np.asarray(theirs), rtol=1e-11, atol=1e-12)


def test_the_torch_trainer_keeps_every_tensor_on_the_engines_device():
    """On CUDA the trainer rebuilt its weights, events and bin edges on the CPU while the engine's
    arrays were on cuda:0 (issue 27, item 1): torch's `meta` device stands in for CUDA here."""
    torch = pytest.importorskip("torch")
    from ttfr.child.workloads.histfactory import train

    meta = torch.device("meta")
    seen = []

    def q0_and_grad(template):
        seen.append(template.device)
        return torch.tensor(2.0, dtype=torch.float64, device=meta), torch.zeros_like(template)

    trainer = train.TorchTrainer(torch, train.initial_state(0), 4, 100.0, "kde", q0_and_grad=q0_and_grad, device=meta)
    assert {p.device for p in trainer.params} == {meta} and trainer.events.device == meta
    trainer.step()  # mixed devices raise here
    assert seen == [meta]


def test_a_training_steps_crossings_between_runtimes_are_timed_apart_and_summed_per_step(monkeypatch):
    """Issue 28: each step's seconds converting between runtimes, and their share of the median step."""
    from ttfr.child.workloads.histfactory import train

    clock = {"now": 0.0}
    monkeypatch.setattr(train.time, "perf_counter", lambda: clock["now"])
    crossings = train.Crossings()

    def convert(value):
        clock["now"] += 0.002  # a crossing of 2 ms
        return value

    def step():
        clock["now"] += 0.008  # 8 ms of compute
        crossings(convert, 1.0)
        return -1.0

    loop = train.run_loop(step, steps=4, crossings=crossings)
    assert loop["conversion_s"] == pytest.approx([0.002] * 4)
    assert loop["conversion_share"] == pytest.approx(0.2) and loop["step_s_median"] == pytest.approx(0.010)
    assert "conversion_s" not in train.run_loop(step, steps=2)  # no crossings asked: none recorded


def test_the_torch_trainer_times_an_engines_numpy_results_as_crossings_and_a_native_engines_as_none():
    torch = pytest.importorskip("torch")
    from ttfr.child.workloads.histfactory import train

    def host_engine(template):  # pyhf's NumPy answers: converted into torch every step
        return 2.0, np.zeros(template.shape[0])

    def native_engine(template):  # the native torch engine's: already tensors
        return torch.tensor(2.0, dtype=torch.float64), torch.zeros_like(template)

    for engine, crossed in ((host_engine, True), (native_engine, False)):
        trainer = train.TorchTrainer(torch, train.initial_state(0), 4, 100.0, "kde", q0_and_grad=engine)
        trainer.step()
        assert (trainer.crossings.take() > 0) is crossed, engine.__name__
