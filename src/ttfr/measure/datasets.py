"""Inputs that live on disk: the HistFactory workspaces of a run.

A HistFactory case's size is its workspace's parameter count. Presets are generated from
the run's seed; a user's file (`--workspace`) is validated before anything runs. Each
workspace used is written to `<result>/workspaces/<name>.json` together with
`<name>.point.json`, the seeded parameter point (by name) at which every engine evaluates
the NLL and its gradients, so every engine reads the same bytes in its timed setup.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from ttfr.child.workloads.histfactory import dense
from ttfr.child.workloads.histfactory import workspace as hf_workspace
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
        return hf_workspace.sha256(self.spec)


def dataset_id(case: catalog.Case, seed: int, custom_size: int | None = None) -> str:
    """The id a case's inputs are published under: one format for every artifact."""
    if case.uses_workspace:
        name = "custom" if custom_size == case.size else catalog.HF_PRESET_BY_SIZE[case.size]
        return f"histfactory-{name}-{case.size}p-seed{seed}"
    return f"{case.workload}-{case.size}-{case.dtype}-seed{seed}"


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
        return str(exc).splitlines()[0]
    return None


def load_user_workspace(path: str, signal: str | None = None) -> Workspace:
    """Read and check a user's pyhf JSON workspace; UsageError says what is wrong."""
    file = Path(path)
    try:
        spec = json.loads(file.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UsageError(f"--workspace {path}: cannot read it ({exc.strerror})") from None
    except ValueError as exc:
        raise UsageError(f"--workspace {path}: not JSON ({exc})") from None
    try:
        hf_workspace.check(spec, str(path))
        problem = _pyhf_schema_errors(spec)
        if problem:
            raise hf_workspace.WorkspaceError(f"{path}: not a valid pyhf workspace: {problem}")
        chosen = _parse_signal(signal, spec, path) if signal else hf_workspace.find_signal(spec)
    except hf_workspace.WorkspaceError as exc:
        raise UsageError(str(exc)) from None
    return Workspace(f"custom-{hf_workspace.sha256(spec)[:8]}", hf_workspace.count_parameters(spec), chosen, spec)


def _parse_signal(text: str, spec: dict, path) -> tuple[str, str]:
    channel, sep, sample = text.partition("/")
    pairs = [f"{c['name']}/{s['name']}" for c in spec["channels"] for s in c["samples"]]
    if not sep or text not in pairs:
        raise UsageError(f"--signal {text!r} is not a CHANNEL/SAMPLE of {path}; it has: {', '.join(pairs)}")
    return channel, sample


def resolve(size: int, seed: int, user: Workspace | None) -> Workspace:
    if user is not None and size == user.size:
        return user
    name = catalog.HF_PRESET_BY_SIZE[size]
    spec = hf_workspace.preset(name, seed)
    return Workspace(name, size, hf_workspace.find_signal(spec), spec)


def files(workspace: Workspace, seed: int) -> dict[str, tuple[str, bytes]]:
    """The files a run writes for a workspace: role -> (file name, bytes); the roles are
    `workspace` (canonical JSON) and `point` (the evaluation point, by parameter name)."""
    model = dense.compile_workspace(workspace.spec, workspace.signal)
    point = dict(zip(model.names, (float(v) for v in dense.evaluation_point(model, seed))))
    return {
        "workspace": (f"{workspace.name}.json", hf_workspace.canonical_bytes(workspace.spec)),
        "point": (f"{workspace.name}.point.json", (json.dumps(point, indent=1, sort_keys=True) + "\n").encode()),
    }
