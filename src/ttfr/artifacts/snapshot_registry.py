"""A NextStat snapshot registry (nextstat.snapshot_registry.v1): a verified snapshot's entry added
as NextStat's scripts/update_snapshot_registry.py adds it, under a lock."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from pathlib import Path

from ttfr.artifacts import reader
from ttfr.artifacts.snapshot_layout import NS_BASELINE, NS_INDEX, sha256_bytes, utc_now
from ttfr.artifacts.snapshot_verify import verify
from ttfr.artifacts.store import ArtifactError, write_bytes_atomic
from ttfr.errors import UsageError

REGISTRY_SCHEMA = "nextstat.snapshot_registry.v1"


def register(snapshot: Path, registry: Path, now: str | None = None) -> dict:
    """Add (or update) a verified snapshot's entry in a NextStat snapshot registry, as NextStat's
    scripts/update_snapshot_registry.py does: the entry from its snapshot_index.json, the index's
    sha256 of its bytes, the baseline's as the index lists it; newest first. The entry."""
    snapshot, registry = Path(snapshot), Path(registry)
    problems = verify(snapshot)
    if problems:
        raise UsageError(f"{snapshot} does not verify, so it is not registered: {problems[0]}")
    index_bytes = (snapshot / NS_INDEX).read_bytes()
    index = json.loads(index_bytes)
    baseline = next(e["sha256"] for e in index["artifacts"] if e["path"] == NS_BASELINE)
    entry = {
        "snapshot_id": index["snapshot_id"],
        "suite": index["suite"],
        "generated_at": index["generated_at"],
        "git": index["git"],
        "workflow": index["workflow"],
        "links": {"github_run_url": ""},
        "artifacts": {"baseline_manifest_sha256": baseline, "snapshot_index_sha256": sha256_bytes(index_bytes)},
    }
    if snapshot.resolve() in registry.resolve().parents:
        raise UsageError(f"--registry {registry} is inside the snapshot {snapshot}: a snapshot is immutable")
    with _locked(registry):  # two publishers adding to one registry: each sees the other's entry
        current = read_registry(registry)
        kept = [e for e in current["snapshots"] if e["snapshot_id"] != entry["snapshot_id"]]
        current["snapshots"] = sorted([*kept, entry], key=lambda e: str(e.get("generated_at") or ""), reverse=True)
        current["updated_at"] = now or utc_now()
        write_bytes_atomic(registry, (json.dumps(current, indent=2, sort_keys=True) + "\n").encode())
    return entry


def read_registry(registry: Path) -> dict:
    """A NextStat snapshot registry to add to (a new one when the file does not exist); UsageError
    for anything else, before a snapshot is published."""
    registry = Path(registry)
    if registry.is_symlink():
        raise UsageError(f"--registry {registry} is a symlink: name the file itself (it is replaced when written)")
    if not registry.exists():
        return {"schema_version": REGISTRY_SCHEMA, "updated_at": "", "snapshots": []}
    try:
        current = json.loads(reader.read_bounded(registry, registry.name))
    except (ArtifactError, ValueError) as exc:
        raise UsageError(f"--registry {registry}: not a registry ({exc})") from None
    if not isinstance(current, dict) or current.get("schema_version") != REGISTRY_SCHEMA:
        raise UsageError(f"--registry {registry}: not a {REGISTRY_SCHEMA} file")
    entries = current.get("snapshots")
    if not isinstance(entries, list):
        raise UsageError(f"--registry {registry}: its `snapshots` is not a list")
    bad = [i for i, e in enumerate(entries) if not (isinstance(e, dict) and isinstance(e.get("snapshot_id"), str)
                                                    and e["snapshot_id"])]  # fmt: skip
    if bad:  # never dropped unsaid
        raise UsageError(f"--registry {registry}: snapshots[{bad[0]}] is not an entry with a snapshot_id")
    return current


@contextlib.contextmanager
def _locked(registry: Path):
    """An exclusive lock on a sidecar file beside the registry (the registry itself is replaced)."""
    registry.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(registry.with_name(f".{registry.name}.lock"), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)
