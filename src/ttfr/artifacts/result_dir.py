"""Result directories: layout, creation, and validation of a finished one.

<snapshot>/
  plan.json           the RunSpec (what --resume re-plans from)
  journal.jsonl       one fsynced line per finished run
  manifest.json       ttfr.manifest.v1
  cases/<case>.json   ttfr.case_result.v2, one per finished case (v1 files still read)
  workspaces/         HistFactory workspaces used (+ evaluation points), hashed in suite.json
  suite.json          ttfr.suite_result.v1, the index (paths + sha256 of every case file)
  report.md           rendered from the above
  .lock               held (flock) by the one process writing the directory
  .work/              scratch: cache directories, templates, artifacts (removed when complete)
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import shutil
import sys
from pathlib import Path

from ttfr.artifacts.store import ArtifactError, write_bytes_atomic
from ttfr.redaction import redact_argv
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

    def write_page(self, name: str, text: str) -> Path:
        """A rendering of the artifacts (report.md, report.html) beside them."""
        path = self.root / name
        try:
            write_bytes_atomic(path, text.encode("utf-8"))
        except OSError as exc:
            raise ArtifactError(f"{path}: cannot be written ({exc.strerror})") from None
        return path

    @classmethod
    def create(cls, parent: Path, snapshot_id: str) -> ResultDir:
        """A new, empty result directory, locked for this process (checked again under the
        lock: two identical runs started in the same second must not share one)."""
        root = Path(parent) / snapshot_id
        if root.is_dir() and any(p.name != LOCK_NAME for p in root.iterdir()):
            raise ArtifactError(f"{root} already exists and is not empty; use --resume {root} to finish it")
        created = not root.exists()
        try:
            root.mkdir(parents=True, exist_ok=True)
            result_dir = cls(root)
            result_dir.lock()
        except OSError as exc:
            if created and root.is_dir():
                shutil.rmtree(root, ignore_errors=True)
            raise UsageError(f"cannot create the result directory {root} ({exc.strerror}): choose another --out "
                             "(a writable folder)") from None  # fmt: skip
        if any(p.name != LOCK_NAME for p in root.iterdir()):
            result_dir.unlock()
            raise ArtifactError(f"{root} already exists and is not empty; use --resume {root} to finish it")
        return result_dir

    def lock(self) -> None:
        """Hold the directory's exclusive lock until this process ends (or `unlock`): one writer
        at a time. The loser is a usage error naming the holder."""
        import fcntl

        try:  # never through a symlink: the lock file gets this process's id written into it
            fd = os.open(self.root / LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o666)
        except OSError as exc:
            raise ArtifactError(f"{self.root / LOCK_NAME}: cannot be opened as a lock ({exc.strerror}); refused") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 4096).decode("utf-8", "replace").strip() or "another process"
            os.close(fd)
            raise UsageError(f"{self.root} is being written by {holder}; wait for it to finish (or stop it) first") from None
        os.ftruncate(fd, 0)
        holder = f"pid {os.getpid()} (`{' '.join(redact_argv(sys.argv[:4]))}`)"
        os.write(fd, holder.encode("utf-8", "backslashreplace"))  # argv may hold undecodable bytes
        self._lock_fd = fd

    def unlock(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    @classmethod
    def finished(cls, root: Path) -> ResultDir:
        """A result directory whose run wrote its suite index (what report, export and compare read)."""
        result_dir = cls(root)
        if not os.path.lexists(result_dir.suite):
            raise UsageError(f"{root} has no suite.json: not a finished ttfr result directory")
        return result_dir

    @classmethod
    def open(cls, root: Path) -> ResultDir:
        """A result directory that was started (it has its plan): what --resume continues."""
        result_dir = cls(root)
        if not os.path.lexists(result_dir.plan):  # what it is, the reader checks
            raise ArtifactError(f"{root} is not a ttfr result directory (no plan.json)")
        return result_dir

    def remove_page(self, name: str) -> None:
        """Remove a rendering (report.html) that no longer describes the artifacts, or a case file of a case that is
        pending again (`cases/<id>.json`: `ttfr explain DIR` interrupted before its diagnostic processes ran)."""
        try:
            (self.root / name).unlink()
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise ArtifactError(f"{self.root / name}: cannot be removed ({exc.strerror})") from None

    def discard(self) -> None:
        """Remove a directory this process created and holds (a start that failed)."""
        shutil.rmtree(self.root, ignore_errors=True)
        self.unlock()

    def remove_scratch(self) -> None:
        shutil.rmtree(self.scratch, ignore_errors=True)


def snapshot_id(now: dt.datetime, spec_json: dict, deterministic: bool) -> str:
    stamp = now.strftime("%Y%m%dT%H%M%SZ")
    if deterministic:
        suffix = hashlib.sha256(json.dumps(spec_json, sort_keys=True).encode()).hexdigest()[:6]
    else:
        suffix = os.urandom(3).hex()
    return f"{stamp}-{suffix}"
