"""`ttfr publish DIR`: a finished result directory as an immutable, auditable snapshot.

SNAPSHOTS/<id>/ holds the directory's own artifacts (plan, manifest, journal, case files,
suite index, workspaces, reports) and:
- ttfr_baseline_manifest.json (ttfr.baseline_manifest.v1): harness version and commit, the lock
  file's hash, runtimes, hardware, cache and sync policies;
- validation.json (ttfr.validation.v1): every gate (result checks and HistFactory parity,
  finite differences, cache verification, sync checks, contention) and its result;
- rerun/: the exact command, the run's spec and seed, and the lock file, to run it again;
- nextstat/ml/: the ML results in NextStat's contracts (`ttfr export --format nextstat-v1`);
- ttfr_snapshot_index.json (ttfr.snapshot_index.v1): every file above with its size and sha256;
- baseline_manifest.json and snapshot_index.json in NextStat's contracts (nextstat.*.v1), where
  NextStat's own tools look for them (compare_snapshots.py, update_snapshot_registry.py,
  write_replication_report.py): its results' paths relative to the manifest's folder, its index
  listing every other file (this one's own index and baseline too).
The id is content-addressed (the sha256 of the artifacts' index), files and directories are
read-only, and the snapshot appears whole or not at all (written beside, then renamed).
Publishing refuses a directory that does not validate or is not complete.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import tempfile
from pathlib import Path

from ttfr.analyse.gates import validation_pack
from ttfr.artifacts.reader import load_finished, read_plan, validate_dir
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
    lock_file,
    run_artifacts,
    sha256_bytes,
    snapshot_name,
    utc_now,
)
from ttfr.artifacts.snapshot_nextstat import export_nextstat, nextstat_baseline, nextstat_index, nextstat_results
from ttfr.artifacts.snapshot_verify import verify
from ttfr.artifacts.store import ArtifactError, write_bytes_atomic, write_json
from ttfr.errors import UsageError
from ttfr.model.base import encode
from ttfr.model.snapshot import BASELINE_SCHEMA, INDEX_SCHEMA, SnapshotIndex
from ttfr.model.validation import VALIDATION_SCHEMA


def publish(source: Path, out_parent: Path, generated_at: str | None = None) -> tuple[Path, bool]:
    """Publish DIR under OUT; (the snapshot's path, whether it was new)."""
    source = Path(source)
    problems = validate_dir(source)
    if problems:
        raise UsageError(
            f"{source} does not validate, so it is not published: "
            + "; ".join(problems[:3])
            + (f" (and {len(problems) - 3} more; `ttfr validate {source}`)" if len(problems) > 3 else "")
        )
    verified = load_finished(source)
    if verified.suite.state != "complete":
        raise UsageError(f"{source} is incomplete ({len(verified.suite.pending)} case(s) pending): finish it with "
                         f"`ttfr run --resume {source}` before publishing")  # fmt: skip
    root = verified.result_dir.root
    entries = [file_entry(root, rel) for rel in run_artifacts(root)]
    digest = content_digest(entries)
    snapshot_id = snapshot_name(digest)
    out_parent = Path(out_parent)
    final = out_parent / snapshot_id
    if final.exists() or final.is_symlink():
        if not verify(final):
            return final, False  # the same content is the same snapshot, and it verifies
        raise UsageError(f"{final} exists but does not verify (`ttfr validate {final}`): remove it or publish elsewhere")
    try:
        out_parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{snapshot_id}.", dir=out_parent))
    except OSError as exc:
        raise UsageError(f"--out {out_parent}: cannot be written ({exc.strerror})") from None
    try:
        _write(staging, root, verified, entries, snapshot_id, digest, generated_at)
        _read_only(staging)
        os.rename(staging, final)
    except BaseException:
        _writable(staging)
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return final, True


def _write(staging: Path, root: Path, verified, entries, snapshot_id: str, digest: str, generated_at) -> None:
    for entry in entries:
        target = staging / entry.path
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(root / entry.path, target)
        if sha256_bytes(target.read_bytes()) != entry.sha256:  # changed while we copied it
            raise ArtifactError(f"{root / entry.path} changed while it was published; publish again")
    generated = generated_at or utc_now()
    lock = lock_file()
    write_json(staging / BASELINE, baseline(verified, lock), BASELINE_SCHEMA)
    write_json(staging / VALIDATION, validation_pack(snapshot_id, verified.cases), VALIDATION_SCHEMA)
    rerun = staging / "rerun"
    plan = read_plan(root)
    write_bytes_atomic(rerun / "command.txt", command_text(verified.manifest).encode())
    write_bytes_atomic(rerun / "spec.json", (json.dumps(encode(plan.spec), indent=2, sort_keys=True) + "\n").encode())
    if lock:
        shutil.copyfile(lock, rerun / "cpu-lock.txt")
    export_nextstat(verified, staging / "nextstat" / "ml")
    results, datasets = nextstat_results(staging)
    write_json(staging / NS_BASELINE, nextstat_baseline(snapshot_id, verified, results, datasets))
    files = sorted(p.relative_to(staging).as_posix() for p in staging.rglob("*") if p.is_file())
    index = SnapshotIndex(schema=INDEX_SCHEMA, snapshot_id=snapshot_id, generated_at=generated, source=str(root),
                          content_sha256=digest, artifacts=[file_entry(staging, rel) for rel in files])  # fmt: skip
    write_json(staging / INDEX, index, INDEX_SCHEMA)
    # last: NextStat's index lists every file, this one's own index and NextStat's baseline too
    files = sorted(p.relative_to(staging).as_posix() for p in staging.rglob("*") if p.is_file())
    write_json(staging / NS_INDEX, nextstat_index(snapshot_id, generated, verified.manifest,
                                                   [file_entry(staging, rel) for rel in files]))  # fmt: skip


def _read_only(top: Path) -> None:
    for dirpath, _dirnames, filenames in os.walk(top):
        for name in filenames:
            os.chmod(Path(dirpath) / name, 0o444)
    for dirpath, dirnames, _ in sorted(os.walk(top), key=lambda w: -len(w[0])):
        for name in dirnames:
            os.chmod(Path(dirpath) / name, 0o555)
    os.chmod(top, 0o555)


def _writable(top: Path) -> None:
    if not top.exists():
        return
    os.chmod(top, 0o755)
    for dirpath, dirnames, filenames in os.walk(top):
        for name in dirnames:
            os.chmod(Path(dirpath) / name, 0o755)
        for name in filenames:
            os.chmod(Path(dirpath) / name, stat.S_IRUSR | stat.S_IWUSR)
