"""The reference values every engine's gate compares with: pyhf's own NLL and q0 for the
problem's workspace, computed once per workspace and cached in the run's scratch area."""

from __future__ import annotations

import json

from ttfr.child.workloads.histfactory.problems import Problem


def reference_values(problem: Problem, n_parameters: int) -> dict:
    """NLL at the evaluation point and q0 with the workspace's signal, from pyhf's NumPy
    backend (q0 from its JAX backend above 200 parameters, where NumPy's SciPy fits with
    finite-difference gradients take too long); computed once per workspace."""
    import pyhf

    from ttfr.child.backends.pyhf_backend import FIT_TOLERANCE, set_backend  # pyhf's settings, as its engine runs

    backend = "numpy" if n_parameters <= 200 else "jax"
    previous = pyhf.get_backend()  # a pyhf engine in this process must keep its own backend
    try:
        set_backend(pyhf, backend)
        values = _pyhf_values(pyhf, problem, backend)
        values["engine"] += f", SciPy tolerance {FIT_TOLERANCE:g}"
        return values
    finally:
        pyhf.set_backend(*previous)


def _pyhf_values(pyhf, problem: Problem, backend: str) -> dict:
    workspace = pyhf.Workspace(problem.spec)
    model = workspace.model()
    data = pyhf.tensorlib.astensor(workspace.data(model))
    pars = pyhf.tensorlib.astensor([problem.point[name] for name in model.config.par_names])
    nll = -float(model.logpdf(pars, data)[0])
    q0 = float(
        pyhf.infer.test_statistics.q0(
            0.0, data, model, model.config.suggested_init(), model.config.suggested_bounds(), model.config.suggested_fixed()
        )
    )
    return {"engine": f"pyhf {pyhf.__version__} ({backend} backend)", "nll": nll, "q0": q0}


def cached_reference(problem: Problem, n_parameters: int, path: str | None) -> dict:
    if path:
        try:
            with open(path, encoding="utf-8") as fh:
                return json.load(fh)
        except (OSError, ValueError):
            pass
    values = reference_values(problem, n_parameters)
    if path:
        import os

        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(values, fh)
        os.replace(tmp, path)
    return values
