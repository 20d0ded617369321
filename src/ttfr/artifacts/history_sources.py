"""The results a history is made of, read and verified: result directories, ttfr snapshots (checked
against their index, as `ttfr verify` does), NextStat snapshots holding only NextStat's ML results
(their index's hashes checked), and the snapshots a NextStat registry lists.

Each result becomes a `ReadResult`: its source (id, date, machine, the manifest's comparable
values) and its figures per (case, policy, figure): the headline runs' values, or why there are
none. A path that does not verify is left out with why; a registry entry whose snapshot is
missing is a usage error (nothing is read then).
"""

from __future__ import annotations

import hashlib
import json
import shlex
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from ttfr.analyse.contention import withheld_reason
from ttfr.artifacts import reader
from ttfr.artifacts.snapshot_layout import INDEX, NEXTSTAT_KEY, NS_BASELINE, NS_INDEX, sha256_bytes
from ttfr.artifacts.snapshot_registry import REGISTRY_SCHEMA
from ttfr.artifacts.snapshot_verify import verify
from ttfr.artifacts.store import ArtifactError
from ttfr.errors import UsageError
from ttfr.model.base import UNSET
from ttfr.model.case import CaseResult
from ttfr.model.history import LeftOut, Machine
from ttfr.model.manifest import Manifest
from ttfr.model.policies import WARM_PROCESS, is_cold
from ttfr.model.policy_figures import PrecompiledPolicy

# The figures of a cold policy a history follows: TTFR and the components it is made of.
COMPONENTS = ("interpreter_s", "import_s", "device_init_s", "user_import_s", "setup_s", "artifact_load_s", "first_call_s")
COLD_FIGURES = ("ttfr_s", *COMPONENTS)
WARM_FIGURE = "call_s"
FIGURES = (*COLD_FIGURES, WARM_FIGURE)
NEXTSTAT_PREFIX = "nextstat."
# NextStat's cache policy names (its export's), back to ttfr's
_NEXTSTAT_POLICIES = {"process_cold": "cold-cache", "process_warm_cache": "warm-cache"}


@dataclass(frozen=True)
class Figure:
    """One figure of one result: its headline runs' values, or why it has none."""

    runs_s: list[float] = field(default_factory=list)
    gap: str | None = None


@dataclass(frozen=True)
class ReadResult:
    id: str
    kind: str
    path: str
    created_at: str
    machine: Machine
    ttfr_version: str | None
    versions: dict[str, str]  # package -> version (what --by orders by)
    manifest: dict[str, str]
    figures: dict[tuple[str, str, str], Figure]
    cases: dict[str, str | None]  # case -> why it has no figures at all (None: it has some)
    explained: dict[str, CaseResult] = field(default_factory=dict)  # the cases a --explain process explained

    @property
    def fingerprint(self) -> str:
        return fingerprint(self.machine)


def fingerprint(machine: Machine) -> str:
    """A short, stable id of a machine (what series are split by)."""
    key = json.dumps([machine.cpu, machine.logical_cores, machine.usable_cores, machine.gpu, machine.os])
    return hashlib.sha256(key.encode()).hexdigest()[:12]


def _machine(manifest: Manifest) -> Machine:
    os_info = manifest.os
    libc = f" {os_info.libc}" if os_info.libc else ""
    return Machine(cpu=manifest.cpu.model, logical_cores=manifest.cpu.logical_cores,
                   usable_cores=manifest.cpu.usable_cores, gpu=[d.name for d in manifest.gpu.devices],
                   os=f"{os_info.system} {os_info.machine}{libc}")  # fmt: skip


def _command(argv: list[str]) -> str:
    """The command line without where it wrote (--out differs every time and changes no figure)."""
    kept, skip = [], False
    for arg in argv:
        if skip:
            skip = False
            continue
        if arg == "--out":
            skip = True
            continue
        if not arg.startswith("--out="):
            kept.append(arg)
    return shlex.join(kept)


def manifest_values(manifest: Manifest, profile: str | None = None) -> dict[str, str]:
    """The manifest's values a step report compares, as flat keys."""
    values = {"ttfr": manifest.ttfr.version, "python": f"{manifest.python.implementation} {manifest.python.version}",
              "os.release": manifest.os.release, "command_line": _command(manifest.command_line)}  # fmt: skip
    if manifest.ttfr.git.commit:
        values["ttfr.commit"] = manifest.ttfr.git.commit + (" (dirty)" if manifest.ttfr.git.dirty else "")
    if profile:
        values["profile"] = profile
    values.update({f"runtime.{k}": v for k, v in manifest.runtimes.items() if v})
    values.update({f"env.{k}": v for k, v in manifest.environment.items()})
    gpu = manifest.gpu
    for key, value in (("gpu.driver", gpu.driver_version), ("gpu.cuda", gpu.cuda_version),
                       ("gpu.ptxas", gpu.ptxas.version if gpu.ptxas else None)):  # fmt: skip
        if value:
            values[key] = value
    policies = manifest.policies
    for prefix, settings in (("cache", policies.cache_settings), ("sync", policies.sync)):
        if isinstance(settings, dict):
            values.update({f"{prefix}.{k}": v for k, v in settings.items()})
    if isinstance(policies.worker_env_defaults, dict):
        for backend, env in policies.worker_env_defaults.items():
            values.update({f"worker_env.{backend}.{k}": v for k, v in env.items()})
    return values


def _cold_figures(block, reason: str | None) -> dict[str, Figure]:
    figures = {}
    for name in COLD_FIGURES:
        runs = [getattr(r.metrics, name, None) for r in block.figure_runs()]
        values = [v for v in runs if isinstance(v, float | int) and v > 0]
        if reason:
            figures[name] = Figure(gap=reason)
        elif values:
            figures[name] = Figure(runs_s=values)
    if not reason and not figures.get("ttfr_s"):
        figures["ttfr_s"] = Figure(gap="no run of this policy reached a first result")
    return figures


def _policy_gap(case: CaseResult, block) -> str | None:
    """Why a policy's block gives no figure: the case failed, its figures are withheld, its artifact was not made."""
    if case.status == "failed":
        return f"failed: {case.reason}"
    withheld = block.withheld()
    if withheld:
        return f"withheld: {withheld_reason(withheld)}"
    if isinstance(block, PrecompiledPolicy) and block.artifact.state != "made":
        return f"{block.artifact.state}: {block.artifact.reason or 'no artifact'}"
    return None


def case_figures(case: CaseResult) -> dict[tuple[str, str, str], Figure]:
    """Every figure a case gives, by (case, policy, figure)."""
    figures = {}
    for policy, block in case.policies.items():
        gap = _policy_gap(case, block)
        if is_cold(policy):
            for name, figure in _cold_figures(block, gap).items():
                figures[(case.case, policy, name)] = figure
        elif policy == WARM_PROCESS:
            values = [p.median_s for p in block.figure_runs() if p.median_s]
            figure = Figure(gap=gap) if gap else Figure(runs_s=values) if values else Figure(gap="no warm process finished")
            figures[(case.case, policy, WARM_FIGURE)] = figure
    return figures


def _from_verified(verified, kind: str, path: str, snapshot_id: str | None = None) -> ReadResult:
    manifest = verified.manifest
    figures, cases, explained = {}, {}, {}
    for case in verified.cases:
        figures.update(case_figures(case))
        if any(block.explanation is not UNSET for _policy, block in case.policies.cold()):
            explained[case.case] = case
        cases[case.case] = f"{case.status}: {case.reason}" if case.status == "failed" or not case.policies.items() else None
    # What the workers imported (each case's `versions`) over what the harness's own interpreter has: with
    # --python, an arm or a release's environment, only the former is what was measured.
    measured = {}
    for case in verified.cases:
        for package, version in case.versions.items():
            measured.setdefault(package, set()).add(version)
    worker = {package: str(found.pop()) for package, found in measured.items() if len(found) == 1 and None not in found}
    versions = {**{k: v for k, v in manifest.runtimes.items() if v}, **worker}
    values = manifest_values(manifest, verified.suite.profile) | {f"runtime.{k}": v for k, v in worker.items()}
    return ReadResult(id=snapshot_id or verified.suite.snapshot_id, kind=kind, path=path,
                      created_at=verified.suite.created_at, machine=_machine(manifest),
                      ttfr_version=verified.suite.ttfr_version, versions=versions,
                      manifest=values, figures=figures, cases=cases, explained=explained)  # fmt: skip


def _nextstat_json(root: Path, rel: str) -> dict:
    data = json.loads(reader.read_bounded(reader.confined(root, rel), rel))
    if not isinstance(data, dict):
        raise ArtifactError(f"{rel}: not a JSON object")
    return data


def _nextstat_index_problems(root: Path, index: dict) -> list[str]:
    """A NextStat snapshot's files against its index's sha256s (every listed file present and whole)."""
    problems = []
    for entry in index.get("artifacts") or []:
        rel = entry.get("path") if isinstance(entry, dict) else None
        try:
            payload = reader.read_bounded(reader.confined(root, rel), str(rel))
        except ArtifactError as exc:
            problems.append(str(exc))
            continue
        if sha256_bytes(payload) != entry.get("sha256"):
            problems.append(f"{rel}: does not match {NS_INDEX} (changed after publishing)")
    return problems


def _nextstat_case(record: dict) -> dict[tuple[str, str, str], Figure]:
    case = str(record.get("case") or "")
    config = record.get("config") if isinstance(record.get("config"), dict) else {}
    name = str(config.get("cache_policy") or "process_cold")
    base, _, mechanism = name.partition("+precompiled:")
    policy = _NEXTSTAT_POLICIES.get(base, base)
    if mechanism:
        policy = f"precompiled/{mechanism}/{policy}"
    timing = record.get("timing") if isinstance(record.get("timing"), dict) else {}
    cold, warm = timing.get("cold") or {}, timing.get("warm") or {}
    reason = None if record.get("status") == "ok" else f"{record.get('status')}: {record.get('reason')}"
    figures = {}
    runs = [r for r in cold.get("runs") or [] if isinstance(r, dict)]
    for figure in ("import_s", "first_call_s", "total_s"):
        values = [float(r[figure]) for r in runs if isinstance(r.get(figure), int | float) and r[figure] > 0]
        if values or reason:
            figures[(case, policy, NEXTSTAT_PREFIX + figure)] = Figure(runs_s=values, gap=None if values else reason)
    ttfr = [float(r["import_s"] + r["first_call_s"]) for r in runs
            if all(isinstance(r.get(k), int | float) for k in ("import_s", "first_call_s"))]  # fmt: skip
    if ttfr or reason:
        figures[(case, policy, NEXTSTAT_PREFIX + "ttfr_s")] = Figure(runs_s=ttfr, gap=None if ttfr else reason)
    calls = [float(c) for c in warm.get("calls_s") or [] if isinstance(c, int | float) and c > 0]
    warm_gap = None if calls else (warm.get("reason") or reason or "no warm calls")
    figures[(case, WARM_PROCESS, NEXTSTAT_PREFIX + WARM_FIGURE)] = Figure(runs_s=calls, gap=warm_gap)
    return figures


def read_nextstat_snapshot(root: Path, path: str) -> ReadResult:
    """A NextStat snapshot of ML results only: its index's hashes checked, its baseline's ML suite read."""
    index = _nextstat_json(root, NS_INDEX)
    problems = _nextstat_index_problems(root, index)
    if problems:
        raise ArtifactError(problems[0])
    baseline = _nextstat_json(root, NS_BASELINE)
    figures, cases = {}, {}
    for result in baseline.get("results") or []:
        if not isinstance(result, dict) or result.get("suite") != "ml":
            continue
        suite = _nextstat_json(root, str(result.get("path")))
        folder = PurePosixPath(str(result.get("path"))).parent
        for ref in suite.get("cases") or []:
            record = _nextstat_json(root, (folder / PurePosixPath(str(ref.get("path"))).name).as_posix())
            figures.update(_nextstat_case(record))
            cases[str(record.get("case"))] = None
    environment = baseline.get("environment") if isinstance(baseline.get("environment"), dict) else {}
    platform = str(environment.get("platform") or "unknown platform")
    machine = Machine(cpu=None, logical_cores=None, usable_cores=None, gpu=[], os=platform)
    engine = baseline.get(NEXTSTAT_KEY) if isinstance(baseline.get(NEXTSTAT_KEY), dict) else {}
    versions = {NEXTSTAT_KEY: str(engine["version"])} if engine.get("version") else {}
    values = {"python": str(environment.get("python")), **{f"runtime.{k}": v for k, v in versions.items()}}
    harness = baseline.get("harness") if isinstance(baseline.get("harness"), dict) else {}
    if harness.get("git_commit"):
        values["harness.commit"] = str(harness["git_commit"])
    return ReadResult(id=str(index.get("snapshot_id") or root.name), kind="nextstat", path=path,
                      created_at=str(index.get("generated_at") or ""), machine=machine, ttfr_version=None,
                      versions=versions, manifest=values, figures=figures, cases=cases)  # fmt: skip


def read_one(path: Path) -> ReadResult:
    """One result, verified; ArtifactError (or UsageError) names what is wrong."""
    shown = str(path)
    if not path.is_dir():
        raise ArtifactError(f"{shown}: not a directory")
    if (path / INDEX).exists():
        problems = verify(path)
        if problems:
            raise ArtifactError(f"does not verify: {problems[0]}")
        return _from_verified(reader.load_finished(path), "snapshot", shown, path.resolve().name)
    if (path / NS_INDEX).exists() and not (path / "suite.json").exists():
        return read_nextstat_snapshot(path, shown)
    return _from_verified(reader.load_finished(path), "result", shown)


def read_all(paths: list[Path]) -> tuple[list[ReadResult], list[LeftOut]]:
    """Every path read; what did not verify is left out with why (never silently)."""
    results, left_out = [], []
    for path in paths:
        try:
            results.append(read_one(Path(path)))
        except (ArtifactError, UsageError, ValueError, KeyError, TypeError, OSError) as exc:
            left_out.append(LeftOut(path=str(path), reason=str(exc) or type(exc).__name__))
    return results, left_out


def registry_snapshots(registry: Path, root: Path | None) -> list[Path]:
    """The snapshot directories a NextStat registry lists (its `snapshots`, or `entries` as NextStat's newer writer
    names them), each under --root (default: the registry's folder) as `<id>/`, `snapshots/<id>/` or the entry's
    `snapshot_index_path`'s folder. UsageError, before anything is read, for a registry that is not one or an entry
    whose snapshot is not there."""
    registry = Path(registry)
    if not registry.is_file():
        raise UsageError(f"--registry {registry}: no such file")
    try:
        data = json.loads(reader.read_bounded(registry, registry.name))
    except (ArtifactError, ValueError) as exc:
        raise UsageError(f"--registry {registry}: not a registry ({exc})") from None
    if not isinstance(data, dict) or data.get("schema_version") != REGISTRY_SCHEMA:
        raise UsageError(f"--registry {registry}: not a {REGISTRY_SCHEMA} file")
    entries = data.get("snapshots", data.get("entries"))
    if not isinstance(entries, list):
        raise UsageError(f"--registry {registry}: it lists no `snapshots` (or `entries`)")
    base = Path(root) if root else registry.parent
    found = []
    for i, entry in enumerate(entries):
        sid = entry.get("snapshot_id") if isinstance(entry, dict) else None
        if not isinstance(sid, str) or not sid:
            raise UsageError(f"--registry {registry}: entry {i} has no snapshot_id")
        candidates = [sid, f"snapshots/{sid}"]
        if isinstance(entry.get("snapshot_index_path"), str):
            candidates.insert(0, PurePosixPath(entry["snapshot_index_path"]).parent.as_posix())
        located = None
        for rel in candidates:
            try:
                target = reader.confined(base, rel)
            except ArtifactError:
                continue
            if target.is_dir():
                located = target
                break
        if located is None:
            raise UsageError(f"--registry {registry}: the snapshot of entry {sid!r} is not under {base} (looked for "
                             f"{', '.join(candidates)}); name where they are with --root DIR")  # fmt: skip
        found.append(located)
    return found
