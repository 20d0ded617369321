"""Inputs that live on disk: the HistFactory workspaces of a run.

A HistFactory case's size is its workspace's parameter count. Presets are generated from
the run's seed; a user's file (`--workspace`, at most MAX_WORKSPACE_BYTES, a regular file)
is validated before anything runs, and its cases are `custom` ones
(`<backend>_<workload>_custom_<size>_<dtype>`), so a preset of the same parameter count
is never mistaken for it. Each
workspace used is written to `<result>/workspaces/<name>.json` together with
`<name>.point.json`, the seeded parameter point (by name) at which every engine evaluates
the NLL and its gradients, so every engine reads the same bytes in its timed setup.

The HistFactory modules (and NumPy, ~0.12 s) are imported where a workspace is used: every
ttfr command imports this module through the spec.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass

from ttfr import bounded_file
from ttfr.bounded_file import FileRefused
from ttfr.errors import UsageError, unknown_choice
from ttfr.measure import catalog


@dataclass(frozen=True)
class Workspace:
    name: str  # preset name, or `custom-<sha8>` for a user's file
    size: int  # parameter count
    signal: tuple[str, str]  # (channel, sample) the signal gradients refer to
    spec: dict

    @property
    def sha256(self) -> str:
        from ttfr.child.workloads.histfactory import workspace as hf_workspace

        return hf_workspace.sha256(self.spec)


def is_users_workspace(dataset_id: str | None) -> bool:
    """Whether a dataset id names a user's --workspace file (dataset_id's `custom` name)."""
    return bool(dataset_id) and dataset_id.startswith("histfactory-custom-")


def dataset_id(case: catalog.Case, seed: int) -> str:
    """The id a case's inputs are published under: one format for every artifact."""
    if case.uses_workspace:
        name = "custom" if case.custom else catalog.HF_PRESET_BY_SIZE[case.size]
        return f"histfactory-{name}-{case.size}p-seed{seed}"
    info = case.workload_info
    module = info.name if info.source else info.child_module  # a loop's strategies share it; user cases do not
    return f"{module}-{case.size}-{case.dtype}-seed{seed}"


def preset_sizes(names) -> list[int]:
    sizes = []
    for name in names:
        if name not in catalog.HF_PRESET_SIZES:
            raise unknown_choice("workspace preset", name, catalog.HF_PRESET_SIZES)
        sizes.append(catalog.HF_PRESET_SIZES[name])
    return sizes


def _pyhf_schema_errors(spec: dict) -> str | None:
    try:
        import pyhf
    except ImportError:
        return None
    try:
        pyhf.schema.validate(spec, "workspace.json")
    except pyhf.exceptions.InvalidSpecification as exc:
        where = getattr(exc, "path", "") or "<top level>"
        message = getattr(getattr(exc, "parent", None), "message", None) or str(exc).splitlines()[0]
        message = " ".join(str(message).split())
        return f"{where}: {message if len(message) <= 200 else message[:197] + '...'}"
    return None


# The largest --workspace file ttfr reads: twice the canonical JSON ttfr itself writes for its
# largest preset (ladder2000, 34 MiB), so a run's own workspaces/ladder2000.json can be given back.
MAX_WORKSPACE_BYTES = 64 * 1024 * 1024  # 64 MiB


def _limit() -> str:
    return f"{MAX_WORKSPACE_BYTES / 2**20:g} MiB limit ({MAX_WORKSPACE_BYTES} bytes)"


def _refusal(path, option: str, refused: FileRefused) -> UsageError:
    if refused.reason == "not_regular":
        return UsageError(f"{option} {path}: {refused.detail}, not a regular file: give a pyhf JSON workspace file")
    if refused.reason == "too_large":
        return UsageError(f"{option} {path}: {refused.detail} bytes is above the {_limit()} for a workspace file")
    if refused.reason == "grew":
        return UsageError(f"{option} {path}: more than the {_limit()} for a workspace file")
    return UsageError(f"{option} {path}: cannot read it ({refused.detail})")


def _bounded(read, path: str, option: str):
    """`read` (bounded_file.stat_regular or read_regular) of `path` at MAX_WORKSPACE_BYTES,
    its refusal worded for the option that named the file."""
    try:
        return read(path, MAX_WORKSPACE_BYTES)
    except FileRefused as refused:
        raise _refusal(path, option, refused) from None
    except ValueError as exc:  # an embedded NUL byte
        raise UsageError(f"{option} {path!r}: not a usable path ({exc})") from None


def _stat_regular(path: str, option: str) -> os.stat_result:
    """os.stat of a regular file no larger than MAX_WORKSPACE_BYTES, else UsageError (never opens
    anything: a FIFO with no writer would block the open)."""
    return _bounded(bounded_file.stat_regular, path, option)


def read_bounded(path: str, option: str = "--workspace") -> bytes:
    """A regular file's bytes, read once and at most MAX_WORKSPACE_BYTES of them."""
    return _bounded(bounded_file.read_regular, path, option)


def _parse(data: bytes, path: str):
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"--workspace {path}: not UTF-8 text (byte {exc.start})") from None
    try:
        return json.loads(text)
    except RecursionError:
        raise UsageError(f"--workspace {path}: not a usable workspace: JSON nested too deeply") from None
    except ValueError as exc:
        raise UsageError(f"--workspace {path}: not JSON ({' '.join(str(exc).split())})") from None


def _model_problem(spec: dict, signal: tuple[str, str]) -> str | None:
    """Compile the dense model every native engine uses and evaluate its NLL at the initial
    values: what is left unusable after the checks above fails here, before anything runs."""
    import numpy as np

    from ttfr.child.workloads.histfactory import array_ops, dense, likelihood

    try:
        model = dense.compile_workspace(spec, signal)
        with np.errstate(all="ignore"):
            value = float(likelihood.nll(array_ops.Ops("numpy", np), model.inits(), model.signal_nominal(), model.arrays))
    except (ArithmeticError, LookupError, TypeError, ValueError) as exc:
        return f"it cannot be compiled into a HistFactory model ({type(exc).__name__}: {exc})"
    if not math.isfinite(value):
        return f"its NLL at the initial parameter values is {value} (a bin with nothing expected there?)"
    return None


_LOADED: dict[tuple, Workspace] = {}


def load_user_workspace(path: str, signal: str | None = None) -> Workspace:
    """Read and check a user's pyhf JSON workspace; UsageError says what is wrong (with the
    JSON path of a bad value). The file is read once per process while it is unchanged: the
    run writes the very bytes that were checked."""
    from ttfr.child.workloads.histfactory import workspace as hf_workspace

    info = _stat_regular(path, "--workspace")
    key = (os.path.abspath(path), signal, info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns)
    if key in _LOADED:
        return _LOADED[key]
    spec = _parse(read_bounded(path), path)
    try:
        hf_workspace.check(spec, str(path))
        problem = _pyhf_schema_errors(spec)
        if problem:
            raise hf_workspace.WorkspaceError(f"{path}: not a valid pyhf workspace: {problem}")
        chosen = _parse_signal(signal, spec, path) if signal else hf_workspace.find_signal(spec)
        problem = _model_problem(spec, chosen)
        if problem:
            raise hf_workspace.WorkspaceError(f"{path}: not a usable HistFactory workspace: {problem}")
    except hf_workspace.WorkspaceError as exc:
        raise UsageError(str(exc)) from None
    workspace = Workspace(f"custom-{hf_workspace.sha256(spec)[:8]}", hf_workspace.count_parameters(spec), chosen, spec)
    if len(_LOADED) >= 8:
        _LOADED.clear()
    _LOADED[key] = workspace
    return workspace


def _parse_signal(text: str, spec: dict, path) -> tuple[str, str]:
    channel, sep, sample = text.partition("/")
    pairs = [f"{c['name']}/{s['name']}" for c in spec["channels"] for s in c["samples"]]
    if not sep or text not in pairs:
        raise UsageError(f"--signal {text!r} is not a CHANNEL/SAMPLE of {path}; it has: {', '.join(pairs)}")
    return channel, sample


def resolve(size: int, seed: int, user: Workspace | None = None, custom: bool = False) -> Workspace:
    """The workspace of a HistFactory case: the user's file for a `custom` case, else the
    preset with `size` parameters (never the user's file because its size happens to match)."""
    from ttfr.child.workloads.histfactory import workspace as hf_workspace

    if custom:
        if user is None or user.size != size:
            raise UsageError(f"no --workspace file with {size} parameters for a custom_{size} case")
        return user
    name = catalog.HF_PRESET_BY_SIZE[size]
    spec = hf_workspace.preset(name, seed)
    return Workspace(name, size, hf_workspace.find_signal(spec), spec)


def files(workspace: Workspace, seed: int) -> dict[str, tuple[str, bytes]]:
    """The files a run writes for a workspace: role -> (file name, bytes); the roles are
    `workspace` (canonical JSON) and `point` (the evaluation point, by parameter name)."""
    from ttfr.child.workloads.histfactory import dense
    from ttfr.child.workloads.histfactory import workspace as hf_workspace

    model = dense.compile_workspace(workspace.spec, workspace.signal)
    point = dict(zip(model.names, (float(v) for v in dense.evaluation_point(model, seed))))
    return {
        "workspace": (f"{workspace.name}.json", hf_workspace.canonical_bytes(workspace.spec)),
        "point": (f"{workspace.name}.point.json", (json.dumps(point, indent=1, sort_keys=True) + "\n").encode()),
    }
