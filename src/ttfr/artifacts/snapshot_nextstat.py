"""A snapshot in NextStat's contracts (nextstat.*.v1), where NextStat's own tools look for them:
its snapshot index, its baseline manifest, the ML results exported into nextstat/ml/, and the
replication report of a `ttfr replicate`."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from ttfr.artifacts import reader
from ttfr.artifacts.snapshot_layout import NEXTSTAT_KEY, NS_INDEX, commit_of, file_entry, run_artifacts, sha256_bytes, utc_now
from ttfr.artifacts.store import ArtifactError
from ttfr.model.base import encode
from ttfr.model.manifest import MANIFEST_SCHEMA, Manifest
from ttfr.model.replication import ReplicationReport
from ttfr.model.snapshot import FileEntry


def nextstat_index(snapshot_id: str, generated: str, manifest: Manifest, entries: list[FileEntry]) -> dict:
    """NextStat's snapshot_index_v1 (write_snapshot_index.py's fields): every file but itself."""
    return {
        "schema_version": "nextstat.snapshot_index.v1",
        "generated_at": generated,
        "snapshot_id": snapshot_id,
        "suite": "ml",
        "git": {"sha": commit_of(manifest), "ref": "unknown", "repository": "ttfr"},
        "workflow": {"harness": "ttfr", "harness_version": manifest.ttfr.version, "entrypoint": "ttfr publish"},
        "artifacts": [encode(e) for e in entries],
    }


def nextstat_baseline(snapshot_id: str, verified, results: list[dict], datasets: list[dict]) -> dict:
    """NextStat's baseline_manifest_v1 (write_baseline_manifest.py's fields): its results' paths
    relative to its own folder (the snapshot's root), its datasets those of the exported results
    (NextStat's ids: compare_snapshots.py compares them across snapshots)."""
    manifest = verified.manifest
    # NextStat's contract names its own engine's version (the runtime's, as the manifest has it)
    engine = {"version": manifest.runtimes.get(NEXTSTAT_KEY) or "not installed"}
    return {
        "schema_version": "nextstat.baseline_manifest.v1",
        "snapshot_id": snapshot_id,
        "deterministic": verified.suite.deterministic,
        "harness": {"repo": "ttfr", "git_commit": commit_of(manifest)},
        NEXTSTAT_KEY: engine,
        "environment": {"python": manifest.python.version, "platform": manifest.os.platform},
        "datasets": datasets,
        "results": results,
    }


def nextstat_results(snapshot: Path) -> tuple[list[dict], list[dict]]:
    """NextStat's baseline's `results` (the ML suite file, by its path from the snapshot's root)
    and `datasets` (each exported case's, once), from the exported files."""
    from ttfr.artifacts.export import nextstat

    suite_file = snapshot / "nextstat" / "ml" / nextstat.SUITE_FILE
    if not suite_file.is_file():
        return [], []
    results = [{"suite": "ml", "path": suite_file.relative_to(snapshot).as_posix(),
                "sha256": sha256_bytes(suite_file.read_bytes())}]  # fmt: skip
    datasets = {}
    # the cases the suite file lists (as NextStat's write_baseline_manifest.py derives them)
    for ref in json.loads(suite_file.read_bytes()).get("cases", []):
        record = json.loads((suite_file.parent / Path(ref["path"]).name).read_bytes())
        if isinstance(record.get("dataset"), dict):
            datasets[record["dataset"]["id"]] = {"id": record["dataset"]["id"], "sha256": record["dataset"]["sha256"]}
    return results, [datasets[key] for key in sorted(datasets)]


def read_nextstat(snapshot: Path, name: str) -> tuple[dict | None, str | None]:
    """One of the snapshot's NextStat files, bounded and parsed; (None, why) when it is not one."""
    try:
        data = json.loads(reader.read_bounded(reader.confined(snapshot, name), name))
    except (ArtifactError, ValueError) as exc:
        return None, f"{name}: unreadable ({exc})"
    return (data, None) if isinstance(data, dict) else (None, f"{name}: not a JSON object")


def export_nextstat(verified, dest: Path) -> None:
    """The ML results in NextStat's contract, where there are any (a snapshot of commands only has none)."""
    from ttfr.artifacts.export import nextstat

    if len(nextstat.left_out(verified.cases)) != len(verified.cases):
        nextstat.write_export(verified, dest)


def export_problems(snapshot: Path, verified) -> list[str]:
    """nextstat/ml/ against a fresh export of the run inside the snapshot (byte for byte): the NextStat
    results are derived, so an edited figure or status there is a forgery like any other."""
    published = snapshot / "nextstat" / "ml"
    with tempfile.TemporaryDirectory(prefix="ttfr-verify-") as scratch:
        fresh = Path(scratch) / "ml"
        export_nextstat(verified, fresh)
        want = {p.name: p.read_bytes() for p in fresh.glob("*")} if fresh.is_dir() else {}
    have = {p.name: p.read_bytes() for p in published.glob("*")} if published.is_dir() else {}
    wrong = sorted(n for n in set(want) | set(have) if want.get(n) != have.get(n))
    return [f"nextstat/ml/{n}: not what the run gives (re-exported)" for n in wrong[:5]]


# NextStat's name (its Makefile validates a snapshot's replication_report.json against its contract);
# ttfr's own report beside it is ttfr_replication_report.json
NS_REPLICATION = "replication_report.json"


def _index_doc_sha256(doc: dict) -> str:
    """An index's hash as NextStat's write_replication_report.py computes it (its JSON, keys sorted)."""
    return sha256_bytes(json.dumps(doc, sort_keys=True).encode("utf-8"))


def nextstat_replication_report(
    snapshot: Path, replica_root: Path, verdict: ReplicationReport, generated_at: str | None = None
) -> dict:
    """NextStat's replication_report_v1 of a `ttfr replicate`: the snapshot's NextStat index against
    one of the replica's artifacts (the files a snapshot of it would hold). NextStat's comparison is
    by hash, and every re-run of a timing benchmark differs byte for byte: its `ok` is false by
    construction; the notes say so and give ttfr's statistical verdict (replication_report.json)."""
    original = json.loads((Path(snapshot) / NS_INDEX).read_bytes())
    generated = generated_at or utc_now()
    entries = [file_entry(replica_root, rel) for rel in run_artifacts(replica_root)]
    # the replica as it is now: its result directory (a snapshot of it, published later, holds this
    # report too and so has another id; NextStat's write_replication_report.py compares those files)
    replica_id = f"result-{Path(replica_root).name}"
    replica_manifest = reader.read_typed(replica_root, "manifest.json", MANIFEST_SCHEMA, Manifest)
    replica = nextstat_index(replica_id, generated, replica_manifest, entries)
    theirs = {e["path"]: e for e in original["artifacts"]}
    overlap = sorted(set(theirs) & {e.path for e in entries})
    mine = {e.path: e for e in entries}
    mismatches = [{"path": p, "original_sha256": theirs[p]["sha256"], "replica_sha256": mine[p].sha256,
                   "original_bytes": theirs[p]["bytes"], "replica_bytes": mine[p].bytes}
                  for p in overlap if theirs[p]["sha256"] != mine[p].sha256]  # fmt: skip
    summary = verdict.summary
    timing = verdict.timing.comparisons
    inconclusive = sum(c.verdict.startswith("inconclusive") or c.verdict == "not_compared" for c in timing)
    by_hash = (f"{len(mismatches)} of {len(overlap)} shared files differ (a re-run of a timing benchmark differs byte "
               "for byte, so NextStat's hash comparison cannot judge it)" if mismatches
               else f"all {len(overlap)} shared files are identical")  # fmt: skip
    notes = (f"Compared by hash: {by_hash}. ttfr's gates (ttfr_replication_report.json): "
             f"{summary.required_replicated} of {summary.required_gates} required gates replicated"
             f"{'' if summary.replicated else ' (NOT replicated)'}; datasets unequal: "
             f"{', '.join(summary.datasets_unequal) or 'none'}; timings (cross-session, weak): {len(timing)} "
             f"compared, {inconclusive} inconclusive. The replica is the result directory {Path(replica_root).name} "
             "before publishing.")  # fmt: skip
    return {
        "schema_version": "nextstat.replication_report.v1",
        "generated_at": generated,
        "original": {
            "snapshot_id": original["snapshot_id"],
            "suite": original["suite"],
            "snapshot_index_sha256": _index_doc_sha256(original),
        },  # fmt: skip
        "replica": {"snapshot_id": replica_id, "suite": replica["suite"], "snapshot_index_sha256": _index_doc_sha256(replica)},
        "comparison": {"overlap_paths": len(overlap), "mismatches": mismatches, "ok": not mismatches},
        "notes": notes,
        "replica_snapshot_index": replica,
    }
