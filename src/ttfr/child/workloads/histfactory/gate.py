"""The HistFactory gate: parity with the pyhf reference (NLL relative, q0 absolute) and the
signal gradient against central finite differences."""

from __future__ import annotations

import math

import numpy as np

from ttfr.child.workloads.histfactory.problems import Problem
from ttfr.child.workloads.histfactory.reference import cached_reference

# Parity gates (f64): NLL relative, q0 absolute.
NLL_RTOL = 1e-8
Q0_ATOL = 1e-4
# Finite-difference gates: max |autodiff - FD| / max(1, max |FD|).
FD_TOLERANCE = {"nll": 1e-6, "q0": 1e-3}
FD_STEP = {"nll": 1e-4, "q0": 1e-3}  # relative to max(1, |s_b|)


def central_differences(function, signal: np.ndarray, relative_step: float) -> np.ndarray:
    gradient = np.empty_like(signal)
    for b in range(signal.size):
        step = relative_step * max(1.0, abs(signal[b]))
        up, down = signal.copy(), signal.copy()
        up[b] += step
        down[b] -= step
        gradient[b] = (function(up) - function(down)) / (2.0 * step)
    return gradient


def fd_report(autodiff: np.ndarray, fd: np.ndarray, kind: str) -> dict:
    error = np.abs(np.asarray(autodiff, dtype=float) - fd)
    scale = max(1.0, float(np.max(np.abs(fd))))
    normalised = float(np.max(error)) / scale
    relative = error / np.maximum(np.abs(fd), 1e-12)
    return {
        "of": kind,
        "max_abs_error": float(np.max(error)),
        "max_rel_error": float(np.max(relative)),
        "normalised_error": normalised,
        "relative_step": FD_STEP[kind],
        "bins": int(fd.size),
        "tolerance": FD_TOLERANCE[kind],
        "passed": bool(math.isfinite(normalised) and normalised <= FD_TOLERANCE[kind]),
    }


def gate(
    engine, problem: Problem, reference_path: str | None, *, nll_value=None, q0_value=None, fd_of=None, gradient=None
) -> dict:
    """Parity with the reference (NLL relative, q0 absolute) and, for gradient workloads,
    the FD check of the signal gradient (`gradient`: the one the timed call returned).
    Values the timed call produced are passed in; the others are computed here with the
    same engine."""
    signal = problem.signal_nominal()
    reference = cached_reference(problem, engine.n_parameters, reference_path)
    if nll_value is None:
        nll_value = engine.nll(signal)
    if q0_value is None:
        q0_value = engine.q0(signal)
    nll_diff = abs(nll_value - reference["nll"]) / max(abs(reference["nll"]), 1e-300)
    q0_diff = abs(q0_value - reference["q0"])
    parity = {
        "nll": {"engine": nll_value, "reference": reference["nll"], "rel_diff": nll_diff, "tolerance": NLL_RTOL,
                "passed": nll_diff <= NLL_RTOL},
        "q0": {"engine": q0_value, "reference": reference["q0"], "abs_diff": q0_diff, "tolerance": Q0_ATOL,
               "passed": q0_diff <= Q0_ATOL},
    }  # fmt: skip
    check = {"reference": reference["engine"], "parity": parity}
    failures = [f"{k} parity {v.get('rel_diff', v.get('abs_diff')):.3g} > {v['tolerance']:g}" for k, v in parity.items()
                if not v["passed"]]  # fmt: skip
    normalised = [nll_diff / NLL_RTOL, q0_diff / Q0_ATOL]
    if fd_of:
        function = engine.nll if fd_of == "nll" else engine.q0
        if gradient is not None:
            autodiff = gradient
        else:
            autodiff = engine.nll_signal_grad(signal) if fd_of == "nll" else engine.q0_signal_grad(signal)
        fd = fd_report(autodiff, central_differences(function, signal, FD_STEP[fd_of]), fd_of)
        check["fd"] = fd
        normalised.append(fd["normalised_error"] / fd["tolerance"])
        if not fd["passed"]:
            failures.append(f"signal gradient vs finite differences {fd['normalised_error']:.3g} > {fd['tolerance']:g}")
    check.update(
        # Expressed in units of each gate's tolerance, so 1.0 is the pass line for all of them.
        max_normalised_error=float(max(normalised)),
        tolerance=1.0,
        passed=not failures,
    )
    if failures:
        check["detail"] = "; ".join(failures)
    return check
