"""Artifact files: schemas, schema-validated atomic writes, hashes, reading.

Every JSON write is validated against its schema first, then written to a temporary file,
fsynced and renamed, so a reader never sees a half-written or invalid artifact. Whatever
ttfr writes outside a worker (results, exports, comparisons, a Slurm job's directory) is
written by artifacts/, through these functions (tests/test_layers.py holds every other
module to it; the journal and the measured compilation caches have their own owners).
"""

from __future__ import annotations

import datetime as dt
import functools
import hashlib
import json
import os
import shutil
import tempfile
from importlib import resources
from pathlib import Path

import jsonschema_rs
import msgspec

from ttfr.model.base import encode

SCHEMA_FILES = {
    "ttfr.case_result.v2": "case_result.v2.schema.json",
    "ttfr.case_result.v1": "case_result.v1.schema.json",  # as published: files of the first format still read
    "ttfr.suite_result.v1": "suite_result.v1.schema.json",
    "ttfr.manifest.v1": "manifest.v1.schema.json",
    "ttfr.comparison.v1": "comparison.v1.schema.json",
    "ttfr.selftest.v1": "selftest.v1.schema.json",
    "ttfr.plan.v1": "plan.v1.schema.json",
    "ttfr.snapshot_index.v1": "snapshot_index.v1.schema.json",
    "ttfr.baseline_manifest.v1": "baseline_manifest.v1.schema.json",
    "ttfr.validation.v1": "validation.v1.schema.json",
    "ttfr.replication_report.v1": "replication_report.v1.schema.json",
    "ttfr.gpu_check_summary.v1": "gpu_check_summary.v1.schema.json",
    "ttfr.history.v1": "history.v1.schema.json",
}
PLAN_SCHEMA = "ttfr.plan.v1"
MANIFEST_SCHEMA = "ttfr.manifest.v1"
CASE_SCHEMA = "ttfr.case_result.v2"  # analyse/case_result.py writes it (and names it too)
SUITE_SCHEMA = "ttfr.suite_result.v1"
_UMASK = os.umask(0)
os.umask(_UMASK)


class ArtifactError(Exception):
    """An artifact does not match its schema or its recorded hash."""


class StorageError(Exception):
    """A result could not be written (disk full, read-only): the message names the file,
    says what was kept and how to finish (exit code 1)."""


def load_schema(name: str) -> dict:
    if name not in SCHEMA_FILES:
        raise ArtifactError(f"unknown schema {name!r}; known: {', '.join(sorted(SCHEMA_FILES))}")
    text = resources.files("ttfr.artifacts").joinpath("schemas", SCHEMA_FILES[name]).read_text(encoding="utf-8")
    return json.loads(text)


@functools.cache
def _validator(name: str) -> jsonschema_rs.Draft202012Validator:
    """One validator per schema for the process: building one parses and compiles the schema.

    jsonschema-rs (draft 2020-12, the JSON-Schema-Test-Suite's cases pass) and not the pure-Python
    jsonschema: every write and every read is validated, and on ttfr's schemas (anyOf and $ref at every
    optional field) the pure-Python validator took 100 times as long, a third of the fast tests' time."""
    return jsonschema_rs.Draft202012Validator(load_schema(name))


def _path_order(error) -> list[tuple[int, int | str]]:
    """An error's place in the document: array indices in number order, keys by name."""
    return [(0, p) if isinstance(p, int) else (1, p) for p in error.instance_path]


def schema_errors(data: dict, name: str) -> list[str]:
    try:
        errors = sorted(_validator(name).iter_errors(data), key=_path_order)
    except ValueError as exc:  # a document the validator cannot take in (nested deeper than it converts): invalid
        return [f"<root>: cannot be validated: {exc}"]
    return [f"{'/'.join(map(str, e.instance_path)) or '<root>'}: {e.message}" for e in errors]


def validate(data: dict, name: str) -> None:
    errors = schema_errors(data, name)
    if errors:
        shown = "; ".join(errors[:5]) + (f" (+{len(errors) - 5} more)" if len(errors) > 5 else "")
        raise ArtifactError(f"{name} validation failed: {shown}")


def dumps(data: dict) -> bytes:
    """Canonical JSON: sorted keys, fixed indentation, no NaN (byte-stable across runs)."""
    return (json.dumps(data, indent=2, sort_keys=True, allow_nan=False) + "\n").encode("utf-8")


def write_bytes_atomic(path: Path, payload: bytes, mode: int | None = None) -> None:
    """`mode`: the file's permissions (default: an ordinary file's under the umask)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, 0o666 & ~_UMASK if mode is None else mode)  # mkstemp makes 0600
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


def write_json(path: Path, data, schema: str | None = None) -> str:
    """Validate (when a schema is named), write atomically, return the file's sha256. `data`: JSON
    builtins, or a type of the model (encoded here)."""
    if isinstance(data, msgspec.Struct):
        data = encode(data)
    if schema:
        validate(data, schema)
    payload = dumps(data)
    write_bytes_atomic(path, payload)
    return hashlib.sha256(payload).hexdigest()


def make_directories(*paths: Path) -> None:
    for path in paths:
        Path(path).mkdir(parents=True, exist_ok=True)


def new_directory(path: Path) -> Path:
    """A directory that must not exist yet (FileExistsError when it does)."""
    Path(path).mkdir(parents=True, exist_ok=False)
    return Path(path)


def new_stamped_directory(parent: Path, prefix: str) -> Path:
    """`<prefix>-<UTC stamp>-<random>` under `parent`: two made in one second are two."""
    stamp = dt.datetime.now(dt.timezone.utc).strftime(f"{prefix}-%Y%m%dT%H%M%SZ")
    Path(parent).mkdir(parents=True, exist_ok=True)
    while True:
        try:
            return new_directory(Path(parent) / f"{stamp}-{os.urandom(3).hex()}")
        except FileExistsError:
            continue


def copy_file(source: Path, target: Path) -> None:
    """A copy written like every artifact: whole or not at all."""
    write_bytes_atomic(target, Path(source).read_bytes())


def remove_tree(path: Path) -> None:
    """A directory ttfr made and will not keep (nothing in it was a result)."""
    shutil.rmtree(path, ignore_errors=True)


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def read_json(path: Path) -> dict:
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)
