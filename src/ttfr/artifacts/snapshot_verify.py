"""Verifying a published snapshot: its index against its files, its id against the run's artifacts,
the result inside it, and every file publishing derived, recomputed."""

from __future__ import annotations

import json
from pathlib import Path

from ttfr.analyse.gates import validation_pack
from ttfr.artifacts import reader
from ttfr.artifacts.reader import load_finished, validate_dir
from ttfr.artifacts.snapshot_layout import (
    BASELINE,
    INDEX,
    NS_BASELINE,
    NS_INDEX,
    VALIDATION,
    baseline,
    command_text,
    content_digest,
    file_entry,
    is_run_artifact,
    sha256_bytes,
    snapshot_name,
)
from ttfr.artifacts.snapshot_nextstat import (
    NS_REPLICATION,
    export_problems,
    nextstat_baseline,
    nextstat_index,
    nextstat_results,
    read_nextstat,
)
from ttfr.artifacts.store import ArtifactError, read_json
from ttfr.model.base import encode
from ttfr.model.snapshot import INDEX_SCHEMA, SnapshotIndex
from ttfr.model.validation import VALIDATION_SCHEMA, ValidationPack


def is_snapshot(path: Path) -> bool:
    """A published snapshot (or what is left of one): it has an index, a pack or a baseline."""
    return any((Path(path) / name).exists() for name in (INDEX, VALIDATION, BASELINE, NS_INDEX, NS_BASELINE))


def verify(snapshot: Path) -> list[str]:
    """Problems of a published snapshot. Its index against its files (every hash and size,
    nothing extra, only regular files and the directories they need); the id against the run's
    artifacts (the content digest is recomputed: it names the directory and the index); the
    result inside it (`ttfr validate`); and every derived file against what its artifacts give:
    the validation pack, the baseline manifest, the rerun bundle and the NextStat contracts."""
    snapshot = Path(snapshot)
    if not (snapshot / INDEX).exists() and _older_layout(snapshot):
        return [f"{snapshot}: a snapshot in the layout of ttfr before 0.1.2 (its own index as {NS_INDEX}): publish "
                "its result directory again with this ttfr (NextStat's tools read the new layout)"]  # fmt: skip
    index, problems = reader.inspect(snapshot, INDEX, INDEX_SCHEMA)
    if index is None or problems:
        return problems or [f"{snapshot / INDEX}: unreadable"]
    try:
        index = reader.typed(index, SnapshotIndex, INDEX)
    except ArtifactError as exc:
        return [str(exc)]
    listed = {e.path: e for e in index.artifacts}
    for entry in index.artifacts:
        try:
            payload = reader.read_bounded(reader.confined(snapshot, entry.path), entry.path)
        except ArtifactError as exc:
            problems.append(str(exc))
            continue
        if sha256_bytes(payload) != entry.sha256 or len(payload) != entry.bytes:
            problems.append(f"{entry.path}: does not match {INDEX} (changed after publishing)")
    needed = {parent.as_posix() for p in listed for parent in Path(p).parents}
    for path in sorted(snapshot.rglob("*")):
        rel = path.relative_to(snapshot).as_posix()
        if path.is_symlink() or not (path.is_file() or path.is_dir()):
            problems.append(f"{rel}: not a regular file or directory")
        elif path.is_dir() and rel not in needed:
            problems.append(f"{rel}/: not in {INDEX}")
        elif path.is_file() and rel not in listed and rel not in (INDEX, NS_INDEX):
            problems.append(f"{rel}: not in {INDEX}")
    if problems:
        return problems
    digest = content_digest([listed[rel] for rel in sorted(listed) if is_run_artifact(rel)])
    name = snapshot_name(digest)
    if index.content_sha256 != digest or index.snapshot_id != name or snapshot.resolve().name != name:
        problems.append(f"{INDEX}: the run's artifacts give the id {name}, not {index.snapshot_id} "
                        f"(directory {snapshot.resolve().name}): its content is not what was published")  # fmt: skip
    problems += validate_dir(snapshot)
    if problems:
        return problems
    return _derived_problems(snapshot, name, index)


def _older_layout(snapshot: Path) -> bool:
    try:
        return json.loads(reader.read_bounded(snapshot / NS_INDEX, NS_INDEX)).get("schema") == INDEX_SCHEMA
    except (ArtifactError, ValueError, AttributeError):
        return False


def _same(data, expected) -> bool:
    """A stored document against what it should be (a type of the model, or JSON builtins), as JSON."""
    return data == json.loads(json.dumps(encode(expected)))


def _derived_problems(snapshot: Path, name: str, index: dict) -> list[str]:
    """The files publishing derived from the run, recomputed from it."""
    problems = []
    verified = load_finished(snapshot)
    if not _same(read_json(snapshot / VALIDATION), validation_pack(name, verified.cases)):
        problems.append(f"{VALIDATION}: not what the case files give (every gate is recomputed)")
    lock = snapshot / "rerun" / "cpu-lock.txt"
    expected = baseline(verified, lock if lock.is_file() else None)  # the lock file the snapshot carries
    if not _same(read_json(snapshot / BASELINE), expected):
        problems.append(f"{BASELINE}: not what manifest.json and rerun/cpu-lock.txt give")
    command = snapshot / "rerun" / "command.txt"
    if not command.is_file() or command.read_text() != command_text(verified.manifest):
        problems.append("rerun/command.txt: not the manifest's command line")
    spec = snapshot / "rerun" / "spec.json"
    if not spec.is_file() or json.loads(spec.read_text()) != encode(reader.read_plan(snapshot).spec):
        problems.append("rerun/spec.json: not plan.json's spec")
    entries = {e.path: e for e in index.artifacts}
    problems += export_problems(snapshot, verified)
    ns_baseline, why = read_nextstat(snapshot, NS_BASELINE)
    if why or not _same(ns_baseline, nextstat_baseline(name, verified, *nextstat_results(snapshot))):
        problems.append(why or f"{NS_BASELINE}: not what the run's NextStat results give")
    # NextStat's index, rebuilt whole: every file but itself as this snapshot holds it (ttfr's index
    # covers the rest; its own entry is its bytes), the id, and the fields the registry copies
    ns_index, why = read_nextstat(snapshot, NS_INDEX)
    files = [file_entry(snapshot, rel) for rel in sorted({*entries, INDEX})]
    if why or not _same(ns_index, nextstat_index(name, index.generated_at, verified.manifest, files)):
        problems.append(why or f"{NS_INDEX}: not the snapshot's id, its files or its fields")
    if NS_REPLICATION in entries:  # a published replica: NextStat's report is in NextStat's contract
        report, why = read_nextstat(snapshot, NS_REPLICATION)
        if why or report.get("schema_version") != "nextstat.replication_report.v1":
            problems.append(why or f"{NS_REPLICATION}: not a nextstat.replication_report.v1 (written by ttfr before 0.1.2?)")
    return problems


def read_validation(snapshot: Path) -> str:
    """The validation pack's counts in words: `12 pass, 2 flagged, 0 fail, 3 not_applicable`."""
    summary = reader.read_typed(Path(snapshot), VALIDATION, VALIDATION_SCHEMA, ValidationPack).summary
    return ", ".join(f"{n} {name}" for name, n in summary.items())
