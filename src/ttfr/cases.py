"""Your own cases: declare them in a Python file and measure them with
`ttfr run --case-file FILE` under the same protocol as ttfr's built-in workloads.

    import numpy as np
    from ttfr.cases import Case

    case = Case("softplus_sum", sizes=(1_000, 100_000), dtypes=("float32", "float64"))

    @case.inputs                      # host NumPy arrays, from the size, dtype and seed
    def inputs(size, dtype, seed):
        return [np.random.default_rng(seed).standard_normal(size).astype(dtype)]

    @case.reference                   # optional: the expected outputs, float64
    def reference(x):
        return [np.logaddexp(0.0, x.astype(np.float64)).sum()]

    @case.jax                         # the function to time; ttfr jits it unless it is jitted
    def build_jax(jax):
        return lambda x: jax.numpy.sum(jax.nn.softplus(x))

    @case.torch                       # `compile`: torch.compile on torch_compile_* backends, else identity
    def build_torch(torch, compile, device):
        return compile(lambda x: torch.nn.functional.softplus(x).sum())

A builder gets the framework's module (torch also `compile` and the inputs' `device`) and
returns the function ttfr calls on the inputs (moved to the backend's device); a JAX builder
may return a function it jitted itself (its jit options are kept). Building happens in the
timed setup phase; the first call is split by stage where the runtime allows (JAX's trace /
lower / compile, torch.compile's dynamo / AOTAutograd / inductor). The file itself is
imported in a timed phase of its own (`user_import_s`), after the runtime stack.

Standard library only: the worker imports this module inside that timed phase.
"""

from __future__ import annotations

import re

FRAMEWORKS = ("numpy", "jax", "torch")
DTYPES = ("float32", "float64")
DEFAULT_TOLERANCE = {"float32": 1e-4, "float64": 1e-10}  # max |out - ref| / max |ref|
NAME = re.compile(r"^[a-z][a-z0-9]*(?:_[a-z0-9]+)*$")
MAX_SIZE = 10**12
MAX_NAME = 64  # a case id is a file name


class CaseError(ValueError):
    """A case declared wrongly (name, sizes, dtypes, builders)."""


class Case:
    """One user case: a name, its sizes and dtypes, inputs, an optional reference and
    tolerance, and a builder per framework it runs on."""

    def __init__(self, name: str, *, sizes, dtypes=("float32",), tolerance=None, description: str = ""):
        self.name = name
        self.sizes = (sizes,) if isinstance(sizes, (int, str)) else tuple(sizes)  # 'ten' is one bad size
        self.dtypes = (dtypes,) if isinstance(dtypes, str) else tuple(dtypes)
        self.tolerance = dict(DEFAULT_TOLERANCE, **(tolerance or {}))
        self.description = str(description)
        self.builders: dict[str, object] = {}
        self.make_inputs = None
        self.make_reference = None
        self.validate()

    def validate(self) -> None:
        """Raise CaseError for a wrong declaration (ttfr checks again when it reads the file:
        a module may have changed a case after creating it)."""
        name = self.name
        if not isinstance(name, str) or not NAME.match(name) or len(name) > MAX_NAME:
            raise CaseError(f"case name {name!r}: lower-case letters, digits and single underscores, starting with a "
                            f"letter, at most {MAX_NAME} characters")  # fmt: skip
        if "custom" in name.split("_"):  # `<backend>_<name>_custom_<n>_...` names a HistFactory --workspace case
            raise CaseError(f"case name {name!r}: the word 'custom' is reserved in case ids")
        if not self.sizes or any(type(s) is not int or not 1 <= s <= MAX_SIZE for s in self.sizes):
            raise CaseError(f"case {name!r}: sizes must be whole numbers 1..{MAX_SIZE}, got {self.sizes!r}")
        if not self.dtypes or any(d not in DTYPES for d in self.dtypes):
            raise CaseError(f"case {name!r}: dtypes must be among {', '.join(DTYPES)}, got {self.dtypes!r}")
        tolerance = self.tolerance
        if set(tolerance) != set(DTYPES) or any(type(v) not in (int, float) or not v >= 0 for v in tolerance.values()):
            raise CaseError(f"case {name!r}: tolerance maps dtypes ({', '.join(DTYPES)}) to numbers >= 0, got {tolerance!r}")
        unknown = set(self.builders) - set(FRAMEWORKS)
        if unknown:
            raise CaseError(f"case {name!r}: builders for unknown frameworks {sorted(unknown)}; valid: {', '.join(FRAMEWORKS)}")

    def inputs(self, function):
        """Decorator: `inputs(size, dtype, seed) -> list of NumPy arrays`."""
        self.make_inputs = _callable(self, "inputs", function)
        return function

    def reference(self, function):
        """Decorator: `reference(*inputs) -> list of outputs` (float64), for the result check."""
        self.make_reference = _callable(self, "reference", function)
        return function

    def builder(self, framework: str):
        if framework not in FRAMEWORKS:
            raise CaseError(f"case {self.name!r}: no framework {framework!r}; valid: {', '.join(FRAMEWORKS)}")

        def register(function):
            self.builders[framework] = _callable(self, framework, function)
            return function

        return register

    @property
    def numpy(self):
        """Decorator: `build(np) -> function`."""
        return self.builder("numpy")

    @property
    def jax(self):
        """Decorator: `build(jax) -> function` (jitted by ttfr unless it already is)."""
        return self.builder("jax")

    @property
    def torch(self):
        """Decorator: `build(torch, compile, device) -> function`; `compile(fn, **options)` is
        torch.compile on torch_compile_* backends and returns `fn` otherwise; `device` is
        where the inputs are (put a model there)."""
        return self.builder("torch")

    def __repr__(self):
        return f"Case({self.name!r}, sizes={self.sizes}, dtypes={self.dtypes}, frameworks={tuple(self.builders)})"


def _callable(case: Case, what: str, function):
    if not callable(function):
        raise CaseError(f"case {case.name!r}: @{what} decorates a function, got {function!r}")
    return function
