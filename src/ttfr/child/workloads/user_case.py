"""A user's case (a `ttfr.cases.Case` in a case file or an installed package) as a workload.

The worker calls `load(source, name)` in a timed phase of its own, after the runtime stack
(`user_import_s`: what the user's own imports cost); the functions below then hand the
case's pieces to the runtime adapters like any built-in workload's. Outputs are made tuples,
whatever the user's function returns.
"""

from __future__ import annotations

import sys

MODULE_PREFIX = "module:"  # a source naming an installed module (entry point), not a file
USERS_FRAMES = "Traceback (your frames only):\n"  # heads a failure's traceback cut to the user's code

_case = None  # the loaded Case
_built = None  # its function for this runtime, built in setup
TOLERANCE: dict = {}


def file_sha256(path: str) -> str | None:
    """What a case file holds (None: gone): its plan records it, and the parent and the worker
    (after its timed phases) compare."""
    import hashlib

    try:
        with open(path, "rb") as source:
            return hashlib.sha256(source.read()).hexdigest()
    except OSError:
        return None


def import_source(source: str, module_name: str):
    """The module a case source names: a file path (its directory first on sys.path, so it
    can import its neighbours, in the parent and in the worker alike), or `module:<name>`."""
    import importlib
    import importlib.util
    import os

    if source.startswith(MODULE_PREFIX):
        return importlib.import_module(source[len(MODULE_PREFIX) :])
    folder = os.path.dirname(os.path.abspath(source))
    if folder not in sys.path:
        sys.path.insert(0, folder)
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
    """The Case objects a module holds at its top level, in definition order, each once (an
    alias is the same case)."""
    from ttfr.cases import Case

    found = {}
    for value in vars(module).values():
        if isinstance(value, Case):
            found.setdefault(id(value), value)
    return list(found.values())


def users_frames(tb, source: str) -> list:
    """The frames of a traceback that are the user's: in the case file, or in a file beside it
    or below its folder (its own helper modules), never Python's own library, an installed
    package's or ttfr's (pyenv, conda and uv may keep those below a user's home folder too)."""
    import os
    import sysconfig
    import traceback

    if source.startswith(MODULE_PREFIX):
        return []
    folder = os.path.dirname(os.path.realpath(source)) + os.sep
    ours = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))  # ttfr/
    paths = sysconfig.get_paths()
    theirs = {ours, sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
              *(paths.get(k) for k in ("stdlib", "platstdlib", "purelib", "platlib") if paths.get(k))}  # fmt: skip
    theirs = tuple(os.path.realpath(p) + os.sep for p in theirs if p)
    # a case file inside one of those trees (a script in a venv): only its own file is the user's
    own = os.path.realpath(source)

    def mine(filename: str) -> bool:
        path = os.path.realpath(filename) if filename and not filename.startswith("<") else ""
        parts = path.split(os.sep)
        if path == own:
            return True
        return (path.startswith(folder) and not path.startswith(theirs)
                and "site-packages" not in parts and "dist-packages" not in parts)  # fmt: skip

    return [frame for frame in traceback.extract_tb(tb) if mine(frame.filename)]


def where(frame) -> str:
    """`file.py:line:column` of a frame (the column where Python 3.11+ records it)."""
    import os

    column = getattr(frame, "colno", None)
    return f"{os.path.basename(frame.filename)}:{frame.lineno}" + (f":{column + 1}" if column is not None else "")


def _part(tb) -> str:
    """Which of the case's functions the failure came through (the outermost one of them)."""
    if _case is None:
        return "your case file"
    parts = {}
    if _case.make_inputs is not None:
        parts[_case.make_inputs.__code__] = "@case.inputs"
    if _case.make_reference is not None:
        parts[_case.make_reference.__code__] = "@case.reference"
    for framework, builder in _case.builders.items():
        parts[getattr(builder, "__code__", None)] = f"your @case.{framework} builder"
    while tb is not None:
        found = parts.get(tb.tb_frame.f_code)
        if found:
            return found
        tb = tb.tb_next
    return "your function"


def describe_failure(exc: BaseException, source: str) -> tuple[str, str] | None:
    """(what failed and where, the user's frames as a traceback) for an exception that came
    through the user's code, e.g. ("ValueError in @case.inputs at bench.py:8:5: boom", ...); None
    when none of its frames is the user's (a failure of ttfr or of a library on its own)."""
    import traceback

    frames = users_frames(exc.__traceback__, source)
    if not frames:
        return None
    message = (str(exc).strip().splitlines() or [""])[0]
    reason = f"{type(exc).__name__} in {_part(exc.__traceback__)} at {where(frames[-1])}: {message}"
    shown = "".join(traceback.format_list(frames)) + "".join(traceback.format_exception_only(type(exc), exc))
    return reason, USERS_FRAMES + shown


def load(source: str, name: str) -> None:
    global _case, TOLERANCE
    module = import_source(source, "ttfr_user_cases")
    found = [c for c in cases_of(module) if c.name == name]
    if not found:
        raise LookupError(f"{source} defines no case {name!r} (any more)")
    _case = found[0]
    TOLERANCE = dict(_case.tolerance)


def check_output(output) -> None:
    """A user's function must return something to time and check: None is their mistake, said
    plainly (not as non-finite values or a shape () against the reference's)."""
    if output is None or (type(output) is tuple and any(o is None for o in output)):
        raise TypeError(
            f"your function for case {_case.name!r} returned None: it must return an array, "
            "or a tuple or list of arrays (JAX: any pytree of arrays)"
        )


def _as_tuple(function):
    def call(*args):
        out = function(*args)
        return tuple(out) if isinstance(out, (tuple, list)) else (out,)

    return call


def make_inputs(size, dtype, seed):
    if _case.make_inputs is None:
        return []
    import numpy as np

    made = _case.make_inputs(size, dtype, seed)
    if not isinstance(made, (list, tuple)):
        raise TypeError(f"@case.inputs of {_case.name!r} must return a list of arrays, got {type(made).__name__}")
    return [np.asarray(x) for x in made]


def inputs_for(runtime, host_inputs):
    """Build the case's function in the timed setup phase (a model's construction is setup,
    not the first call); the runtime then calls it through the hooks below."""
    global _built
    framework = runtime.framework
    builder = _case.builders[framework]
    if framework == "torch":
        torch = runtime.torch

        def compile_fn(fn, **options):  # the runtime's: a precompiled policy's artifact may stand for it
            return runtime.compile(fn, **options) if runtime.compiles else fn

        _built = builder(torch, compile_fn, runtime.device)
    elif framework == "jax":
        _built = builder(runtime.jax)
    else:
        _built = builder(runtime.np)
    return host_inputs


def reference(inputs):
    if _case.make_reference is None:
        return []
    import numpy as np

    out = _case.make_reference(*inputs)
    return [np.asarray(o, dtype=np.float64) for o in (out if isinstance(out, (list, tuple)) else (out,))]


def numpy_fn(_np_module):
    return _as_tuple(_built)


def jax_fn(_jax):
    return _built  # any pytree out; an already jitted function keeps its own options


def torch_build(_torch, _compile_fn, inputs):
    return _as_tuple(_built), inputs
