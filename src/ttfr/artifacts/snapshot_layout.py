"""What a published snapshot holds and the files publishing derives from a result directory: the
names, the run's own artifacts and the content-addressed id over them, the baseline manifest, the
validation pack and the rerun bundle's command (snapshot.py writes them, snapshot_verify.py
recomputes them)."""

from __future__ import annotations

import datetime as dt
import hashlib
import shlex
from pathlib import Path

import ttfr
from ttfr.errors import UsageError
from ttfr.model.manifest import Manifest
from ttfr.model.snapshot import (
    BASELINE_SCHEMA,
    BaselineHarness,
    BaselineManifest,
    FileEntry,
    Hardware,
    LockFile,
)

INDEX, BASELINE, VALIDATION = "ttfr_snapshot_index.json", "ttfr_baseline_manifest.json", "validation.json"


NS_INDEX, NS_BASELINE = "snapshot_index.json", "baseline_manifest.json"  # NextStat's names and contracts


# The run's own artifacts (what the id covers); a replica's report is one of its run's.
_ARTIFACT_FILES = ("plan.json", "manifest.json", "suite.json", "journal.jsonl", "report.md", "report.html", "scaling.csv",
                   "ttfr_replication_report.json", "replication_report.json")  # fmt: skip


_ARTIFACT_DIRS = ("cases", "workspaces")


LOCK_FILE = "requirements/cpu-lock.txt"


NEXTSTAT_KEY = "nextstat"  # a field of NextStat's baseline contract (and the package's name in the manifest)


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def run_artifacts(root: Path) -> list[str]:
    """The result directory's own files, relative (no lock, no scratch); a symlink is refused."""
    found = []
    for name in _ARTIFACT_FILES:
        if (root / name).is_file():
            found.append(name)
    for folder in _ARTIFACT_DIRS:
        base = root / folder
        if not base.is_dir():
            continue
        for path in sorted(base.rglob("*")):
            if path.is_symlink():
                raise UsageError(f"{path}: a symlink; a snapshot holds its own files")
            if path.is_file():
                found.append(path.relative_to(root).as_posix())
    return sorted(found)


def content_digest(entries: list[FileEntry]) -> str:
    """The snapshot's id source: the sha256 of the run's artifacts (each path and sha256)."""
    return sha256_bytes("".join(f"{e.path}\0{e.sha256}\n" for e in entries).encode())


def snapshot_name(digest: str) -> str:
    return f"ttfr-{digest[:20]}"


def file_entry(root: Path, rel: str) -> FileEntry:
    data = (root / rel).read_bytes()
    return FileEntry(path=rel, bytes=len(data), sha256=sha256_bytes(data))


def lock_file() -> Path | None:
    """The pinned lock file of this ttfr's source checkout (None for an installed wheel)."""
    candidate = Path(ttfr.__file__).resolve().parents[2] / LOCK_FILE
    return candidate if candidate.is_file() else None


def baseline(verified, lock: Path | None) -> BaselineManifest:
    """What the snapshot was measured with, from its manifest and the lock file (None: an installed ttfr)."""
    manifest = verified.manifest
    policies = manifest.policies
    return BaselineManifest(
        schema=BASELINE_SCHEMA,
        harness=BaselineHarness(name="ttfr", version=manifest.ttfr.version, git_commit=commit_of(manifest),
                                git_dirty=manifest.ttfr.git.dirty),
        lock_file=LockFile(path=LOCK_FILE, sha256=sha256_bytes(lock.read_bytes())) if lock else None,
        python=manifest.python,
        runtimes=manifest.runtimes,
        hardware=Hardware(cpu=manifest.cpu, memory=manifest.memory, gpu=manifest.gpu, os=manifest.os),
        cache_policies=policies.cache,
        cache_settings=policies.cache_settings or {},
        sync_policies=policies.sync or {},
        seed=verified.suite.seed,
        deterministic=verified.suite.deterministic,
    )  # fmt: skip


def commit_of(manifest: Manifest) -> str:
    return manifest.ttfr.git.commit or "unknown"


def utc_now() -> str:
    """UTC, as NextStat's scripts write it (`...Z`)."""
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")


def command_text(manifest: Manifest) -> str:
    """The command line as a shell reads it back (already redacted in the manifest)."""
    return shlex.join(manifest.command_line) + "\n"


def is_run_artifact(rel: str) -> bool:
    return rel in _ARTIFACT_FILES or rel.split("/", 1)[0] in _ARTIFACT_DIRS
