"""Reading a result directory as if a hostile party had left it.

Every reader (report, export, compare, validate, --resume) goes through here: a path must
stay inside the result directory after symlinks are resolved, the file must be a regular
file below a size bound (a FIFO or /dev/zero would hang or exhaust memory), valid JSON
without NaN, an object matching its schema, and — when suite.json records one — carry the
sha256 recorded there. A problem names the file and its cause.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TypeVar

from msgspec import ValidationError

from ttfr import bounded_file
from ttfr.artifacts.result_dir import ResultDir
from ttfr.artifacts import case_v1
from ttfr.artifacts.store import CASE_SCHEMA, MANIFEST_SCHEMA, PLAN_SCHEMA, SUITE_SCHEMA, ArtifactError, schema_errors
from ttfr.bounded_file import FileRefused
from ttfr.measure import catalog
from ttfr.model.base import UNSET, decode, present
from ttfr.model.case import CaseResult
from ttfr.model.manifest import Manifest
from ttfr.model.plan import PlanDocument
from ttfr.model.policies import WARM_PROCESS
from ttfr.model.suite import CaseRef, DatasetFile, SuiteResult

T = TypeVar("T")

# Far above any artifact ttfr writes (a publish-profile case file is well under 1 MiB;
# the largest preset workspace ~5 MiB), far below what would hurt a reader.
MAX_ARTIFACT_BYTES = 64 << 20


def confined(root: Path, rel) -> Path:
    """`root/rel`, resolved, or ArtifactError when `rel` is not a relative path that stays
    inside `root` (no absolute path, no `..`, no symlink pointing out)."""
    if not isinstance(rel, str) or not rel:
        raise ArtifactError(f"path {rel!r} is not a file name inside the result directory")
    parts = PurePosixPath(rel)
    if parts.is_absolute() or ".." in parts.parts or "\\" in rel or "\0" in rel:
        raise ArtifactError(f"path {rel!r} leaves the result directory (absolute or `..`); refused")
    real_root = Path(root).resolve()
    target = (real_root / rel).resolve()
    if not target.is_relative_to(real_root):
        raise ArtifactError(f"{rel}: a symlink to {target}, outside the result directory; refused")
    return target


def read_bounded(path: Path, name: str) -> bytes:
    """The bytes of a regular file no larger than MAX_ARTIFACT_BYTES (never blocks on a FIFO)."""
    try:
        return bounded_file.read_regular(path, MAX_ARTIFACT_BYTES)
    except FileRefused as refused:
        cause = {
            "missing": "missing",
            "unreadable": f"cannot be read ({refused.detail})",
            "not_regular": f"not a regular file ({refused.detail}); refused",
            "too_large": f"{refused.detail} bytes, above the {MAX_ARTIFACT_BYTES >> 20} MiB artifact limit",
            "grew": f"grew above the {MAX_ARTIFACT_BYTES >> 20} MiB artifact limit while read",
        }[refused.reason]
        raise ArtifactError(f"{name}: {cause}") from None


def sha256_of(root: Path, rel: str) -> str:
    """The sha256 of a file of the result directory, read confined and bounded."""
    return hashlib.sha256(read_bounded(confined(root, rel), rel)).hexdigest()


# What a writer of the result directory must never follow out of it (a `--resume` of a
# directory someone else prepared): each must be the directory's own file or folder.
OWN_ENTRIES = (".lock", "journal.jsonl", "plan.json", "manifest.json", "suite.json", "report.md", "report.html",
               "scaling.csv", "cases", "workspaces", ".work")  # fmt: skip


def symlinked_entries(root: Path) -> list[str]:
    """Entries of a result directory that are symlinks (a writer would follow them out)."""
    return [name for name in OWN_ENTRIES if os.path.islink(Path(root) / name)]


def _as_written_by(suite: SuiteResult, rows: list) -> list:
    """The break-even rows a suite.json of its ttfr holds: one written before a shipped artifact had rows of its
    own (none says which policy a side started under) holds only the standard policies' rows."""
    if any(present(r.fast_start_policy) for r in suite.break_even):
        return rows
    return [r for r in rows if not present(r.fast_start_policy)]


def derived_problems(suite: SuiteResult, cases: list[CaseResult]) -> list[str]:
    """Figures suite.json and the case files derive from runs, recomputed: an edited summary
    (with its hash updated to match) shows up here."""
    from ttfr.analyse import case_result, loops, precision, suite_figures  # the analysis stack (SciPy), only when verifying

    problems = []
    for case in cases:
        problems += [f"cases/{case.case}.json: {p}" for p in case_result.summaries_disagree(case)]
    expected = {
        "summary": suite_figures.suite_summary(cases, suite.pending),
        "break_even": _as_written_by(suite, suite_figures.break_even(cases)),
        "scaling": suite_figures.scaling_rows(cases),
    }
    written = suite.precision or None
    targets = {None if case.config.precision is UNSET else case.config.precision for case in cases}
    if len(targets) > 1 or (cases and targets != {written.target if written else None}):
        problems.append("suite.json: its `precision` does not match the --precision its case files were run with")
    elif written:
        outcome = precision.PhaseEnd(written.target, written.budget_s, written.stopped_by, written.elapsed_s)
        expected["precision"] = precision.record(cases, outcome)
    if (suite.loops or []) != loops.strategy_rows(cases):
        problems.append("suite.json: `loops` is not what its case files give (edited, or written by another ttfr)")
    for key, value in expected.items():
        if getattr(suite, key) != value:
            problems.append(f"suite.json: `{key}` is not what its case files give (edited, or written by another ttfr)")
    return problems


def _no_constant(token: str):
    raise ValueError(f"{token} is not JSON")


def parse_object(payload: bytes, name: str) -> dict:
    try:
        data = json.loads(payload.decode("utf-8"), parse_constant=_no_constant)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise ArtifactError(f"{name}: not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise ArtifactError(f"{name}: not a JSON object (holds a {type(data).__name__})")
    return data


def inspect(root: Path, rel, schema: str | None, sha256: str | None = None) -> tuple[dict | None, list[str]]:
    """(the file's JSON or None, every problem found): what `validate` lists."""
    name = rel if isinstance(rel, str) else repr(rel)
    try:
        path = confined(root, rel)
        payload = read_bounded(path, name)
    except ArtifactError as exc:
        return None, [str(exc)]
    problems = []
    if sha256 is not None and hashlib.sha256(payload).hexdigest() != sha256:
        problems.append(f"{name}: sha256 does not match suite.json (file changed after the run)")
    try:
        data = parse_object(payload, name)
    except ArtifactError as exc:
        return None, [*problems, str(exc)]
    if schema == CASE_SCHEMA and data.get("schema") == case_v1.V1_SCHEMA:
        return _upgraded_case(data, name, problems)
    if schema:
        problems += [f"{name}: {e}" for e in schema_errors(data, schema)]
    return data, problems


def _upgraded_case(data: dict, name: str, problems: list[str]) -> tuple[dict, list[str]]:
    """A case file of the first format: valid against its own schema, then read as the current one."""
    problems += [f"{name}: {e}" for e in schema_errors(data, case_v1.V1_SCHEMA)]
    if problems:
        return data, problems
    try:
        return case_v1.upgrade(data), problems
    except (KeyError, TypeError, ValueError) as exc:  # schema-valid, yet its flags name runs it lacks
        return data, [
            *problems,
            f"{name}: a {case_v1.V1_SCHEMA} file that cannot be read as the current format ({type(exc).__name__}: {exc})",
        ]


def read_artifact(root: Path, rel, schema: str | None, sha256: str | None = None) -> dict:
    """The file's JSON, or ArtifactError naming the file and every problem with it."""
    data, problems = inspect(root, rel, schema, sha256)
    if problems:
        raise ArtifactError(_located(root, problems))
    return data


def typed(data: dict, kind: type[T], name: str) -> T:
    """Schema-valid JSON as its type of the model; ArtifactError for what the schema cannot say
    (how fields agree) or a schema older than the type."""
    try:
        return decode(data, kind)
    except ValidationError as exc:
        raise ArtifactError(f"{name}: {exc}") from None


def read_typed(root: Path, rel, schema: str, kind: type[T], sha256: str | None = None) -> T:
    """The file as its type, verified like read_artifact."""
    return typed(read_artifact(root, rel, schema, sha256), kind, rel)


def _located(root: Path, problems: list[str]) -> str:
    shown = "; ".join(problems[:3]) + (f" (+{len(problems) - 3} more)" if len(problems) > 3 else "")
    return f"in {root}: {shown} (`ttfr validate {root}` lists every problem)"


def dataset_problems(root: Path, dataset: DatasetFile) -> list[str]:
    """A workspace file suite.json lists: inside the directory, bounded, its recorded sha256."""
    rel = dataset.path
    try:
        payload = read_bounded(confined(root, rel), rel)
    except ArtifactError as exc:
        return [str(exc)]
    if hashlib.sha256(payload).hexdigest() != dataset.sha256:
        return [f"{rel}: sha256 does not match suite.json (file changed after the run)"]
    return []


def case_ref_problems(ref: CaseRef, data: CaseResult | None) -> list[str]:
    """A suite.json case entry against the case file it points to."""
    case_id, rel = ref.case, ref.path
    if not catalog.is_case_id(case_id):
        return [f"suite.json: {case_id!r} is not a ttfr case id"]
    problems = []
    if rel != f"cases/{case_id}.json":
        problems.append(f"suite.json: case {case_id} points to {rel!r}, not cases/{case_id}.json")
    if data is not None:
        if data.case != case_id:
            problems.append(f"{rel}: holds case {data.case!r}, suite.json says {case_id!r}")
        if data.status != ref.status:
            problems.append(f"{rel}: status {data.status!r}, suite.json says {ref.status!r}")
    return problems


@dataclass(frozen=True)
class VerifiedResult:
    """A finished result directory whose every artifact checked out, as the model's types."""

    result_dir: ResultDir
    suite: SuiteResult
    manifest: Manifest
    cases: list[CaseResult]


def load_finished(root: Path) -> VerifiedResult:
    """Read a finished result directory, verifying everything it is built from; the first
    problem is an ArtifactError that names the file (`ttfr validate DIR` lists them all)."""
    result_dir = ResultDir.finished(root)
    root = result_dir.root
    suite = read_typed(root, "suite.json", SUITE_SCHEMA, SuiteResult)
    manifest = read_typed(root, suite.manifest.path, MANIFEST_SCHEMA, Manifest, suite.manifest.sha256)
    cases = []
    for ref in suite.cases:
        problems = case_ref_problems(ref, None)
        if problems:
            raise ArtifactError(_located(root, problems))
        data = read_typed(root, ref.path, CASE_SCHEMA, CaseResult, ref.sha256)
        problems = case_ref_problems(ref, data)
        if problems:
            raise ArtifactError(_located(root, problems))
        cases.append(data)
    for dataset in suite.datasets:
        problems = dataset_problems(root, dataset)
        if problems:
            raise ArtifactError(_located(root, problems))
    try:
        problems = derived_problems(suite, cases)
    except (KeyError, TypeError, ValueError, ArithmeticError) as exc:  # schema-valid, yet not computable
        problems = [f"case files: their figures cannot be recomputed ({type(exc).__name__}: {exc})"]
    if problems:
        raise ArtifactError(_located(root, problems))
    return VerifiedResult(result_dir, suite, manifest, cases)


def _typed_or_problem(data: dict | None, kind: type[T], name: str, problems: list[str]) -> T | None:
    """`data` as its type, or None with why added to `problems` (nothing when data is None)."""
    if data is None:
        return None
    try:
        return typed(data, kind, name)
    except ArtifactError as exc:
        problems.append(str(exc))
        return None


def _planned_runs(root: Path, problems: list[str]) -> dict:
    """How many measured runs per policy the plan allows; a plan.json that is not a valid
    plan is a problem (and allows no check: {})."""
    plan, found = inspect(root, "plan.json", PLAN_SCHEMA)
    problems += found
    if plan is None or found:
        return {}
    try:
        spec = typed(plan, PlanDocument, "plan.json").spec
    except ArtifactError as exc:
        problems.append(str(exc))
        return {}
    if spec.precision not in (None, UNSET):  # runs were added up to the command line's limits
        from ttfr.measure.limits import MAX_COLD_RUNS, MAX_WARM_PROCS

        return {"runs": MAX_COLD_RUNS, "procs": MAX_WARM_PROCS}
    return {"runs": spec.cold_runs, "procs": spec.warm_procs}


def read_plan(root: Path) -> PlanDocument:
    """A result directory's plan.json, verified (schema) and typed."""
    return read_typed(root, "plan.json", PLAN_SCHEMA, PlanDocument)


def _runs_beyond_the_plan(case: CaseResult, planned: dict) -> list[str]:
    """Two writers in one directory duplicate runs: more than planned, or an index twice."""
    problems = []
    for name, policy in case.policies.items():
        limit = planned.get("procs" if name == WARM_PROCESS else "runs")
        if limit is None:
            continue
        indexes = [r.index for r in policy.measured]
        if len(indexes) > limit:
            problems.append(f"{name} has {len(indexes)} measured runs, the plan allows {limit}")
        if len(set(indexes)) != len(indexes):
            problems.append(f"{name} has a run index more than once")
    return problems


def validate_dir(root: Path) -> list[str]:
    """Every problem found (never raises on malformed input): schema violations, hash
    mismatches, paths leaving the directory, missing or stray case files, runs beyond the plan."""
    root = Path(root)
    data, problems = inspect(root, "suite.json", SUITE_SCHEMA)
    suite = _typed_or_problem(data, SuiteResult, "suite.json", problems)
    if suite is None or problems:
        # An index that is not a valid suite cannot be followed safely.
        return problems or ["suite.json: unreadable"]
    planned = _planned_runs(root, problems)
    _, found = inspect(root, suite.manifest.path, MANIFEST_SCHEMA, suite.manifest.sha256)
    problems += found
    for dataset in suite.datasets:
        problems += dataset_problems(root, dataset)
    listed, valid_cases = set(), []
    for ref in suite.cases:
        found = case_ref_problems(ref, None)
        if found:
            problems += found
            continue
        listed.add(ref.path)
        data, found = inspect(root, ref.path, CASE_SCHEMA, ref.sha256)
        schema_valid = data is not None and not schema_errors(data, CASE_SCHEMA)
        case = _typed_or_problem(data, CaseResult, ref.path, found) if schema_valid else None
        problems += found + case_ref_problems(ref, case)
        if case is not None:
            problems += [f"{ref.path}: {p}" for p in _runs_beyond_the_plan(case, planned)]
            valid_cases.append(case)
    if len(valid_cases) == len(suite.cases):
        try:
            problems += derived_problems(suite, valid_cases)
        except (KeyError, TypeError, ValueError, ArithmeticError) as exc:  # schema-valid, yet not computable
            problems.append(f"case files: their figures cannot be recomputed ({type(exc).__name__}: {exc})")
    problems += [f"{name}: a symlink; a result directory holds its own files" for name in symlinked_entries(root)]
    cases_dir = root / "cases"
    if cases_dir.is_dir():
        for path in sorted(cases_dir.iterdir()):
            if f"cases/{path.name}" not in listed and path.suffix == ".json":
                problems.append(f"cases/{path.name}: not listed in suite.json")
    return problems
