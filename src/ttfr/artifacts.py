"""Result directories: layout, schema-validated atomic writes, hashes, validation.

<snapshot>/
  plan.json           the RunSpec (what --resume re-plans from)
  journal.jsonl       one fsynced line per finished run
  manifest.json       ttfr.manifest.v1
  cases/<case>.json   ttfr.case_result.v1, one per finished case
  workspaces/         HistFactory workspaces used (+ evaluation points), hashed in suite.json
  suite.json          ttfr.suite_result.v1, the index (paths + sha256 of every case file)
  report.md           rendered from the above
  .work/              scratch: cache directories and templates (removed when complete)

Every JSON write is validated against its schema first, then written to a temporary file,
fsynced and renamed, so a reader never sees a half-written or invalid artifact.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import shutil
import tempfile
from importlib import resources
from pathlib import Path

import jsonschema

SCHEMA_FILES = {
    "ttfr.case_result.v1": "case_result.v1.schema.json",
    "ttfr.suite_result.v1": "suite_result.v1.schema.json",
    "ttfr.manifest.v1": "manifest.v1.schema.json",
    "ttfr.comparison.v1": "comparison.v1.schema.json",
    "ttfr.selftest.v1": "selftest.v1.schema.json",
}
SUITE_SCHEMA = "ttfr.suite_result.v1"
_UMASK = os.umask(0)
os.umask(_UMASK)


class ArtifactError(Exception):
    """An artifact does not match its schema or its recorded hash."""


def load_schema(name: str) -> dict:
    if name not in SCHEMA_FILES:
        raise ArtifactError(f"unknown schema {name!r}; known: {', '.join(sorted(SCHEMA_FILES))}")
    text = resources.files("ttfr").joinpath("schemas", SCHEMA_FILES[name]).read_text(encoding="utf-8")
    return json.loads(text)


def schema_errors(data: dict, name: str) -> list[str]:
    validator = jsonschema.Draft202012Validator(load_schema(name))
    errors = sorted(validator.iter_errors(data), key=lambda e: list(e.absolute_path))
    return [f"{'/'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}" for e in errors]


def validate(data: dict, name: str) -> None:
    errors = schema_errors(data, name)
    if errors:
        shown = "; ".join(errors[:5]) + (f" (+{len(errors) - 5} more)" if len(errors) > 5 else "")
        raise ArtifactError(f"{name} validation failed: {shown}")


def dumps(data: dict) -> bytes:
    """Canonical JSON: sorted keys, fixed indentation, no NaN (byte-stable across runs)."""
    return (json.dumps(data, indent=2, sort_keys=True, allow_nan=False) + "\n").encode("utf-8")


def write_bytes_atomic(path: Path, payload: bytes) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, 0o666 & ~_UMASK)  # mkstemp makes 0600; artifacts are ordinary files
        with os.fdopen(fd, "wb") as fh:
            fh.write(payload)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def write_json(path: Path, data: dict, schema: str | None = None) -> str:
    """Validate (when a schema is named), write atomically, return the file's sha256."""
    if schema:
        validate(data, schema)
    payload = dumps(data)
    write_bytes_atomic(path, payload)
    return hashlib.sha256(payload).hexdigest()


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def read_json(path: Path) -> dict:
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


class ResultDir:
    def __init__(self, root: Path):
        self.root = Path(root)

    plan = property(lambda self: self.root / "plan.json")
    journal = property(lambda self: self.root / "journal.jsonl")
    manifest = property(lambda self: self.root / "manifest.json")
    suite = property(lambda self: self.root / "suite.json")
    report = property(lambda self: self.root / "report.md")
    cases = property(lambda self: self.root / "cases")
    workspaces = property(lambda self: self.root / "workspaces")
    scratch = property(lambda self: self.root / ".work")

    def case_path(self, case_id: str) -> Path:
        return self.cases / f"{case_id}.json"

    @classmethod
    def create(cls, parent: Path, snapshot_id: str) -> ResultDir:
        root = Path(parent) / snapshot_id
        if root.exists() and any(root.iterdir()):
            raise ArtifactError(f"{root} already exists and is not empty; use --resume {root} to finish it")
        root.mkdir(parents=True, exist_ok=True)
        return cls(root)

    @classmethod
    def open(cls, root: Path) -> ResultDir:
        result_dir = cls(root)
        if not result_dir.plan.is_file():
            raise ArtifactError(f"{root} is not a ttfr result directory (no plan.json)")
        return result_dir

    def remove_scratch(self) -> None:
        shutil.rmtree(self.scratch, ignore_errors=True)


def snapshot_id(now: dt.datetime, spec_json: dict, deterministic: bool) -> str:
    stamp = now.strftime("%Y%m%dT%H%M%SZ")
    if deterministic:
        suffix = hashlib.sha256(json.dumps(spec_json, sort_keys=True).encode()).hexdigest()[:6]
    else:
        suffix = os.urandom(3).hex()
    return f"{stamp}-{suffix}"


def validate_dir(root: Path) -> list[str]:
    """Every problem found: schema violations, hash mismatches, missing or stray case files."""
    root = Path(root)
    problems = []
    suite_path = root / "suite.json"
    if not suite_path.is_file():
        return [f"{suite_path}: missing (not a finished ttfr result directory)"]
    try:
        suite = read_json(suite_path)
    except ValueError as exc:
        return [f"{suite_path}: not JSON ({exc})"]
    problems += [f"suite.json: {e}" for e in schema_errors(suite, SUITE_SCHEMA)]
    refs = [(suite.get("manifest") or {}, "ttfr.manifest.v1")]
    for dataset in suite.get("datasets", []):
        path = root / dataset["path"]
        if not path.is_file():
            problems.append(f"{dataset['path']}: listed in suite.json but missing")
        elif sha256_file(path) != dataset["sha256"]:
            problems.append(f"{dataset['path']}: sha256 does not match suite.json (file changed after the run)")
    refs += [(case, "ttfr.case_result.v1") for case in suite.get("cases", [])]
    listed = set()
    for ref, schema in refs:
        rel = ref.get("path")
        if not rel:
            continue
        path = root / rel
        listed.add(path.resolve())
        if not path.is_file():
            problems.append(f"{rel}: listed in suite.json but missing")
            continue
        if sha256_file(path) != ref.get("sha256"):
            problems.append(f"{rel}: sha256 does not match suite.json (file changed after the run)")
        try:
            data = read_json(path)
        except ValueError as exc:
            problems.append(f"{rel}: not JSON ({exc})")
            continue
        problems += [f"{rel}: {e}" for e in schema_errors(data, schema)]
        if schema == "ttfr.case_result.v1" and data.get("case") != ref.get("case"):
            problems.append(f"{rel}: holds case {data.get('case')!r}, suite.json says {ref.get('case')!r}")
        if schema == "ttfr.case_result.v1" and data.get("status") != ref.get("status"):
            problems.append(f"{rel}: status {data.get('status')!r}, suite.json says {ref.get('status')!r}")
    cases_dir = root / "cases"
    if cases_dir.is_dir():
        for path in sorted(cases_dir.glob("*.json")):
            if path.resolve() not in listed:
                problems.append(f"cases/{path.name}: not listed in suite.json")
    return problems
