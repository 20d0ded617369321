"""A user's case (a `ttfr.cases.Case` in a case file or an installed package) as a workload.

The worker calls `load(source, name)` in a timed phase of its own, after the runtime stack
(`user_import_s`: what the user's own imports cost); the functions below then hand the
case's pieces to the runtime adapters like any built-in workload's. Outputs are made tuples,
whatever the user's function returns.
"""

from __future__ import annotations

import sys

MODULE_PREFIX = "module:"  # a source naming an installed module (entry point), not a file

_case = None
TOLERANCE: dict = {}


def import_source(source: str, module_name: str):
    """The module a case source names: a file path, or `module:<dotted name>`."""
    import importlib
    import importlib.util

    if source.startswith(MODULE_PREFIX):
        return importlib.import_module(source[len(MODULE_PREFIX) :])
    spec = importlib.util.spec_from_file_location(module_name, source)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {source!r} as Python")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module  # pickling and dataclasses look the module up by name
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(module_name, None)
        raise
    return module


def cases_of(module) -> list:
    """The Case objects a module defines at its top level, in definition order."""
    from ttfr.cases import Case

    return [value for value in vars(module).values() if isinstance(value, Case)]


def load(source: str, name: str) -> None:
    global _case, TOLERANCE
    module = import_source(source, "ttfr_user_cases")
    found = [c for c in cases_of(module) if c.name == name]
    if not found:
        raise LookupError(f"{source} defines no case {name!r} (any more)")
    _case = found[0]
    TOLERANCE = dict(_case.tolerance)


def _as_tuple(function):
    def call(*args):
        out = function(*args)
        return out if isinstance(out, tuple) else (out,)

    return call


def make_inputs(size, dtype, seed):
    return list(_case.make_inputs(size, dtype, seed)) if _case.make_inputs else []


def reference(inputs):
    if _case.make_reference is None:
        return []
    import numpy as np

    out = _case.make_reference(*inputs)
    return [np.asarray(o, dtype=np.float64) for o in (out if isinstance(out, (list, tuple)) else (out,))]


def numpy_fn(np_module):
    return _as_tuple(_case.builders["numpy"](np_module))


def jax_fn(jax):
    return _as_tuple(_case.builders["jax"](jax))


def torch_build(torch, compile_fn, inputs):
    return _as_tuple(_case.builders["torch"](torch, compile_fn)), inputs
