"""Result directories: layout, creation, and validation of a finished one.

<snapshot>/
  plan.json           the RunSpec (what --resume re-plans from)
  journal.jsonl       one fsynced line per finished run
  manifest.json       ttfr.manifest.v1
  cases/<case>.json   ttfr.case_result.v1, one per finished case
  workspaces/         HistFactory workspaces used (+ evaluation points), hashed in suite.json
  suite.json          ttfr.suite_result.v1, the index (paths + sha256 of every case file)
  report.md           rendered from the above
  .work/              scratch: cache directories and templates (removed when complete)
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import shutil
import sys
from pathlib import Path

from ttfr.artifacts.store import PLAN_SCHEMA, SUITE_SCHEMA, ArtifactError, read_json, schema_errors, sha256_file
from ttfr.artifacts.redaction import redact_argv
from ttfr.errors import UsageError


LOCK_NAME = ".lock"


class ResultDir:
    def __init__(self, root: Path):
        self.root = Path(root)
        self._lock_fd: int | None = None

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
        """A new, empty result directory, locked for this process (checked again under the
        lock: two identical runs started in the same second must not share one)."""
        root = Path(parent) / snapshot_id
        if root.exists() and any(p.name != LOCK_NAME for p in root.iterdir()):
            raise ArtifactError(f"{root} already exists and is not empty; use --resume {root} to finish it")
        root.mkdir(parents=True, exist_ok=True)
        result_dir = cls(root)
        result_dir.lock()
        if any(p.name != LOCK_NAME for p in root.iterdir()):
            result_dir.unlock()
            raise ArtifactError(f"{root} already exists and is not empty; use --resume {root} to finish it")
        return result_dir

    def lock(self) -> None:
        """Hold the directory's exclusive lock until this process ends (or `unlock`): one writer
        at a time. The loser is a usage error naming the holder."""
        import fcntl

        fd = os.open(self.root / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 4096).decode("utf-8", "replace").strip() or "another process"
            os.close(fd)
            raise UsageError(f"{self.root} is being written by {holder}; wait for it to finish (or stop it) first") from None
        os.ftruncate(fd, 0)
        os.write(fd, f"pid {os.getpid()} (`{' '.join(redact_argv(sys.argv[:4]))}`)".encode())
        self._lock_fd = fd

    def unlock(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    @classmethod
    def finished(cls, root: Path) -> ResultDir:
        """A result directory whose run wrote its suite index (what report, export and compare read)."""
        result_dir = cls(root)
        if not result_dir.suite.is_file():
            raise UsageError(f"{root} has no suite.json: not a finished ttfr result directory")
        return result_dir

    @classmethod
    def open(cls, root: Path) -> ResultDir:
        """A result directory that was started (it has its plan): what --resume continues."""
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


def _planned_runs(root: Path, problems: list[str]) -> dict:
    """How many measured runs per policy the plan allows; a plan.json that is not a valid
    plan is a problem (and allows no check: {})."""
    try:
        plan = read_json(root / "plan.json")
    except (OSError, ValueError) as exc:
        problems.append(f"plan.json: unreadable ({exc})")
        return {}
    errors = schema_errors(plan, PLAN_SCHEMA) if isinstance(plan, dict) else ["<root>: not an object"]
    if errors:
        problems += [f"plan.json: {e}" for e in errors]
        return {}
    return {"runs": plan["spec"]["cold_runs"], "procs": plan["spec"]["warm_procs"]}


def _runs_beyond_the_plan(case: dict, planned: dict) -> list[str]:
    """Two writers in one directory duplicate runs: more than planned, or an index twice."""
    problems = []
    for name, policy in (case.get("policies") or {}).items():
        for kind, limit in planned.items():
            indexes = [r.get("index") for r in policy.get(kind) or []]
            if len(indexes) > limit:
                problems.append(f"{name} has {len(indexes)} measured runs, the plan allows {limit}")
            if len(set(indexes)) != len(indexes):
                problems.append(f"{name} has a run index more than once")
    return problems


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
    planned = _planned_runs(root, problems)
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
        if schema == "ttfr.case_result.v1":
            problems += [f"{rel}: {p}" for p in _runs_beyond_the_plan(data, planned)]
    cases_dir = root / "cases"
    if cases_dir.is_dir():
        for path in sorted(cases_dir.glob("*.json")):
            if path.resolve() not in listed:
                problems.append(f"cases/{path.name}: not listed in suite.json")
    return problems
