"""A pyhf maximum-likelihood fit as a ttfr case (NumPy backend, SciPy's optimiser).

    ttfr run --case-file examples/pyhf_fit.py --backends numpy

`size` is the number of bins of a signal + uncorrelated-background model; the inputs are
its seeded observed counts. The fit's result (best-fit parameters) is checked against a
fit with a much tighter tolerance.
"""

import numpy as np

from ttfr.cases import Case

case = Case("pyhf_mle_fit", sizes=(4, 32), dtypes=("float64",), tolerance={"float64": 1e-3},
            description="pyhf MLE fit of a signal + uncorrelated-background model with `size` bins")  # fmt: skip


def _model(n_bins):
    import pyhf

    pyhf.set_backend("numpy")
    signal = list(np.linspace(5.0, 15.0, n_bins))
    background = list(np.full(n_bins, 50.0))
    uncertainty = list(np.full(n_bins, 7.0))
    return pyhf, pyhf.simplemodels.uncorrelated_background(signal, background, uncertainty)


@case.inputs
def inputs(size, dtype, seed):
    rng = np.random.default_rng(seed)
    observed = rng.poisson(50.0 + 0.8 * np.linspace(5.0, 15.0, size)).astype(dtype)
    return [observed]


def _fit(observed, tolerance):
    pyhf, model = _model(observed.size)
    data = np.concatenate([observed, model.config.auxdata])
    return np.asarray(pyhf.infer.mle.fit(data, model, par_bounds=None, tolerance=tolerance))


@case.reference
def reference(observed):
    return [_fit(np.asarray(observed, dtype=np.float64), 1e-12)]


@case.numpy
def build(np_module):
    return lambda observed: _fit(observed, 1e-8)
