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

import contextlib
import datetime as dt
import fcntl
import hashlib
import json
import os
import shlex
import shutil
import stat
import tempfile
from pathlib import Path

import msgspec

import ttfr
from ttfr.artifacts import reader
from ttfr.artifacts.reader import load_finished, validate_dir
from ttfr.artifacts.store import ArtifactError, read_json, write_bytes_atomic, write_json
from ttfr.errors import UsageError
from ttfr.model.base import UNSET
from ttfr.model.case import CaseResult
from ttfr.model.policies import WARM_PROCESS

INDEX_SCHEMA = "ttfr.snapshot_index.v1"
BASELINE_SCHEMA = "ttfr.baseline_manifest.v1"
VALIDATION_SCHEMA = "ttfr.validation.v1"
INDEX, BASELINE, VALIDATION = "ttfr_snapshot_index.json", "ttfr_baseline_manifest.json", "validation.json"
NS_INDEX, NS_BASELINE = "snapshot_index.json", "baseline_manifest.json"  # NextStat's names and contracts
# The run's own artifacts (what the id covers); a replica's report is one of its run's.
_ARTIFACT_FILES = ("plan.json", "manifest.json", "suite.json", "journal.jsonl", "report.md", "report.html", "scaling.csv",
                   "ttfr_replication_report.json", "replication_report.json")  # fmt: skip
_ARTIFACT_DIRS = ("cases", "workspaces")
LOCK_FILE = "requirements/cpu-lock.txt"
_RESULTS = ("pass", "fail", "flagged", "not_applicable")
NEXTSTAT_KEY = "nextstat"  # a field of NextStat's baseline contract (and the package's name in the manifest)


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _artifacts(root: Path) -> list[str]:
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


def content_digest(entries: list[dict]) -> str:
    """The snapshot's id source: the sha256 of the run's artifacts (each path and sha256)."""
    return sha256_bytes("".join(f"{e['path']}\0{e['sha256']}\n" for e in entries).encode())


def snapshot_name(digest: str) -> str:
    return f"ttfr-{digest[:20]}"


def _entry(root: Path, rel: str) -> dict:
    data = (root / rel).read_bytes()
    return {"path": rel, "bytes": len(data), "sha256": sha256_bytes(data)}


def lock_file() -> Path | None:
    """The pinned lock file of this ttfr's source checkout (None for an installed wheel)."""
    candidate = Path(ttfr.__file__).resolve().parents[2] / LOCK_FILE
    return candidate if candidate.is_file() else None


def _set_fields(struct) -> list[tuple[str, object]]:
    """(name as the artifact spells it, value) of a record's fields that are there, in order."""
    pairs = [(f.encode_name, getattr(struct, f.name)) for f in msgspec.structs.fields(struct)]
    return [(name, value) for name, value in pairs if value is not UNSET]


def gates(cases: list[CaseResult]) -> list[dict]:
    """Every gate of a result and its outcome: pass, fail, flagged or not_applicable."""
    out = []
    for case in cases:
        # the case itself: a failed case (every run failed, a gate run failed, its check failed) fails
        status = {"ok": "pass", "warn": "flagged", "failed": "fail"}[case.status]
        out.append({"case": case.case, "gate": "status", "result": status, "detail": case.reason or case.status})
        check = case.correctness
        if case.status == "warn" and not case.policies.items():
            out.append({"case": case.case, "gate": "availability", "result": "not_applicable", "detail": case.reason})
            continue
        if check is None:
            out.append(
                {
                    "case": case.case,
                    "gate": "correctness",
                    "result": "not_applicable",
                    "detail": "no result check (a command's exit code is its check)" if case.command else "no check ran",
                }
            )
        elif check.state == "not_checked":  # no reference to compare with: not a pass
            out.append({"case": case.case, "gate": "correctness", "result": "not_applicable",
                        "detail": "no reference: the result was not checked"})  # fmt: skip
        else:
            out.append(
                {
                    "case": case.case,
                    "gate": "correctness",
                    "result": "pass" if check.passed else "fail",
                    "detail": check.detail or f"max normalised error {check.max_normalised_error}",
                }
            )
            for name, parity in _set_fields(check.parity) if check.parity else []:
                out.append(
                    {
                        "case": case.case,
                        "gate": f"parity_{name}",
                        "result": "pass" if parity.passed else "fail",
                        "detail": f"against {check.reference}",
                    }
                )
            if check.fd:
                fd = check.fd
                out.append(
                    {
                        "case": case.case,
                        "gate": "finite_differences",
                        "result": "pass" if fd.passed else "fail",
                        "detail": f"normalised error {fd.normalised_error} (tolerance {fd.tolerance})",
                    }
                )
        for policy, block in case.policies.items():
            if policy == WARM_PROCESS:
                procs = [p for p in block.procs if p.outcome == "ok"]
                unsynced = [p.index for p in procs if p.sync_check and p.sync_check.unsynchronised]
                out.append(
                    {
                        "case": case.case,
                        "gate": "sync_check",
                        "policy": policy,
                        "result": ("flagged" if unsynced else "pass") if procs else "not_applicable",
                        "detail": f"unsynchronised processes {unsynced}" if unsynced else f"{len(procs)} processes",
                    }
                )
            else:
                verification = block.cache_verification
                verdict = verification.verdict
                result = {"verified": "pass", "flagged": "flagged", "not_applicable": "not_applicable"}.get(verdict, "fail")
                out.append(
                    {
                        "case": case.case,
                        "gate": "cache_verification",
                        "policy": policy,
                        "result": result,
                        "detail": ", ".join(verification.flags) or verdict,
                    }
                )
            contended = [f.name for f in block.flags if f.name in ("contended", "could_not_measure_cleanly")]
            out.append(
                {
                    "case": case.case,
                    "gate": "contention",
                    "policy": policy,
                    "result": "flagged" if contended else "pass",
                    "detail": "; ".join(contended) or "no contended run",
                }
            )
    return out


def _baseline(verified, lock: Path | None) -> dict:
    manifest = verified.manifest
    policies = manifest["policies"]
    return {
        "schema": BASELINE_SCHEMA,
        "harness": {
            "name": "ttfr",
            "version": manifest["ttfr"]["version"],
            "git_commit": _commit(manifest),
            "git_dirty": (manifest["ttfr"].get("git") or {}).get("dirty"),
        },
        "lock_file": {"path": LOCK_FILE, "sha256": sha256_bytes(lock.read_bytes())} if lock else None,
        "python": manifest["python"],
        "runtimes": manifest["runtimes"],
        "hardware": {"cpu": manifest["cpu"], "memory": manifest["memory"], "gpu": manifest["gpu"], "os": manifest["os"]},
        "cache_policies": policies["cache"],
        "cache_settings": policies.get("cache_settings", {}),
        "sync_policies": policies.get("sync", {}),
        "seed": verified.suite.seed,
        "deterministic": verified.suite.deterministic,
    }


def _commit(manifest: dict) -> str:
    return (manifest["ttfr"].get("git") or {}).get("commit") or "unknown"


def _nextstat_index(snapshot_id: str, generated: str, manifest: dict, entries: list[dict]) -> dict:
    """NextStat's snapshot_index_v1 (write_snapshot_index.py's fields): every file but itself."""
    return {
        "schema_version": "nextstat.snapshot_index.v1",
        "generated_at": generated,
        "snapshot_id": snapshot_id,
        "suite": "ml",
        "git": {"sha": _commit(manifest), "ref": "unknown", "repository": "ttfr"},
        "workflow": {"harness": "ttfr", "harness_version": manifest["ttfr"]["version"], "entrypoint": "ttfr publish"},
        "artifacts": entries,
    }


def _nextstat_baseline(snapshot_id: str, verified, results: list[dict], datasets: list[dict]) -> dict:
    """NextStat's baseline_manifest_v1 (write_baseline_manifest.py's fields): its results' paths
    relative to its own folder (the snapshot's root), its datasets those of the exported results
    (NextStat's ids: compare_snapshots.py compares them across snapshots)."""
    manifest = verified.manifest
    # NextStat's contract names its own engine's version (the runtime's, as the manifest has it)
    engine = {"version": next((v for k, v in manifest["runtimes"].items() if k == NEXTSTAT_KEY), None) or "not installed"}
    return {
        "schema_version": "nextstat.baseline_manifest.v1",
        "snapshot_id": snapshot_id,
        "deterministic": verified.suite.deterministic,
        "harness": {"repo": "ttfr", "git_commit": _commit(manifest)},
        NEXTSTAT_KEY: engine,
        "environment": {"python": manifest["python"]["version"], "platform": manifest["os"]["platform"]},
        "datasets": datasets,
        "results": results,
    }


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
    entries = [_entry(root, rel) for rel in _artifacts(root)]
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
        target = staging / entry["path"]
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(root / entry["path"], target)
        if sha256_bytes(target.read_bytes()) != entry["sha256"]:  # changed while we copied it
            raise ArtifactError(f"{root / entry['path']} changed while it was published; publish again")
    generated = generated_at or _utc_now()
    lock = lock_file()
    write_json(staging / BASELINE, _baseline(verified, lock), BASELINE_SCHEMA)
    write_json(staging / VALIDATION, _validation(snapshot_id, verified.cases), VALIDATION_SCHEMA)
    rerun = staging / "rerun"
    plan = read_json(root / "plan.json")
    write_bytes_atomic(rerun / "command.txt", _command_text(verified.manifest).encode())
    write_bytes_atomic(rerun / "spec.json", (json.dumps(plan["spec"], indent=2, sort_keys=True) + "\n").encode())
    if lock:
        shutil.copyfile(lock, rerun / "cpu-lock.txt")
    _export_nextstat(verified, staging / "nextstat" / "ml")
    results, datasets = _nextstat_results(staging)
    write_json(staging / NS_BASELINE, _nextstat_baseline(snapshot_id, verified, results, datasets))
    files = sorted(p.relative_to(staging).as_posix() for p in staging.rglob("*") if p.is_file())
    write_json(
        staging / INDEX,
        {
            "schema": INDEX_SCHEMA,
            "snapshot_id": snapshot_id,
            "generated_at": generated,
            "source": str(root),
            "content_sha256": digest,
            "artifacts": [_entry(staging, rel) for rel in files],
        },
        INDEX_SCHEMA,
    )
    # last: NextStat's index lists every file, this one's own index and NextStat's baseline too
    files = sorted(p.relative_to(staging).as_posix() for p in staging.rglob("*") if p.is_file())
    write_json(staging / NS_INDEX, _nextstat_index(snapshot_id, generated, verified.manifest,
                                                   [_entry(staging, rel) for rel in files]))  # fmt: skip


def _nextstat_results(snapshot: Path) -> tuple[list[dict], list[dict]]:
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


def _utc_now() -> str:
    """UTC, as NextStat's scripts write it (`...Z`)."""
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")


def _command_text(manifest: dict) -> str:
    """The command line as a shell reads it back (already redacted in the manifest)."""
    return shlex.join(manifest["command_line"]) + "\n"


def _validation(snapshot_id: str, cases: list[CaseResult]) -> dict:
    checks = gates(cases)
    return {
        "schema": VALIDATION_SCHEMA,
        "snapshot_id": snapshot_id,
        "summary": {result: sum(g["result"] == result for g in checks) for result in _RESULTS},
        "passed": not any(g["result"] == "fail" for g in checks),
        "gates": checks,
    }


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
    listed = {e["path"]: e for e in index["artifacts"]}
    for entry in index["artifacts"]:
        try:
            payload = reader.read_bounded(reader.confined(snapshot, entry["path"]), entry["path"])
        except ArtifactError as exc:
            problems.append(str(exc))
            continue
        if sha256_bytes(payload) != entry["sha256"] or len(payload) != entry["bytes"]:
            problems.append(f"{entry['path']}: does not match {INDEX} (changed after publishing)")
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
    digest = content_digest([listed[rel] for rel in sorted(listed) if _is_run_artifact(rel)])
    name = snapshot_name(digest)
    if index["content_sha256"] != digest or index["snapshot_id"] != name or snapshot.resolve().name != name:
        problems.append(f"{INDEX}: the run's artifacts give the id {name}, not {index['snapshot_id']} "
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


def _read_nextstat(snapshot: Path, name: str) -> tuple[dict | None, str | None]:
    """One of the snapshot's NextStat files, bounded and parsed; (None, why) when it is not one."""
    try:
        data = json.loads(reader.read_bounded(reader.confined(snapshot, name), name))
    except (ArtifactError, ValueError) as exc:
        return None, f"{name}: unreadable ({exc})"
    return (data, None) if isinstance(data, dict) else (None, f"{name}: not a JSON object")


def _export_nextstat(verified, dest: Path) -> None:
    """The ML results in NextStat's contract, where there are any (a snapshot of commands only has none)."""
    from ttfr.artifacts.export import nextstat

    if len(nextstat.left_out(verified.cases)) != len(verified.cases):
        nextstat.write_export(verified, dest)


def _export_problems(snapshot: Path, verified) -> list[str]:
    """nextstat/ml/ against a fresh export of the run inside the snapshot (byte for byte): the NextStat
    results are derived, so an edited figure or status there is a forgery like any other."""
    published = snapshot / "nextstat" / "ml"
    with tempfile.TemporaryDirectory(prefix="ttfr-verify-") as scratch:
        fresh = Path(scratch) / "ml"
        _export_nextstat(verified, fresh)
        want = {p.name: p.read_bytes() for p in fresh.glob("*")} if fresh.is_dir() else {}
    have = {p.name: p.read_bytes() for p in published.glob("*")} if published.is_dir() else {}
    wrong = sorted(n for n in set(want) | set(have) if want.get(n) != have.get(n))
    return [f"nextstat/ml/{n}: not what the run gives (re-exported)" for n in wrong[:5]]


def _is_run_artifact(rel: str) -> bool:
    return rel in _ARTIFACT_FILES or rel.split("/", 1)[0] in _ARTIFACT_DIRS


def _same(data, expected) -> bool:
    return data == json.loads(json.dumps(expected))


def _derived_problems(snapshot: Path, name: str, index: dict) -> list[str]:
    """The files publishing derived from the run, recomputed from it."""
    problems = []
    verified = load_finished(snapshot)
    if not _same(read_json(snapshot / VALIDATION), _validation(name, verified.cases)):
        problems.append(f"{VALIDATION}: not what the case files give (every gate is recomputed)")
    lock = snapshot / "rerun" / "cpu-lock.txt"
    expected = _baseline(verified, None)
    expected["lock_file"] = {"path": LOCK_FILE, "sha256": sha256_bytes(lock.read_bytes())} if lock.is_file() else None
    if not _same(read_json(snapshot / BASELINE), expected):
        problems.append(f"{BASELINE}: not what manifest.json and rerun/cpu-lock.txt give")
    command = snapshot / "rerun" / "command.txt"
    if not command.is_file() or command.read_text() != _command_text(verified.manifest):
        problems.append("rerun/command.txt: not the manifest's command line")
    spec = snapshot / "rerun" / "spec.json"
    if not spec.is_file() or json.loads(spec.read_text()) != read_json(snapshot / "plan.json")["spec"]:
        problems.append("rerun/spec.json: not plan.json's spec")
    entries = {e["path"]: e for e in index["artifacts"]}
    problems += _export_problems(snapshot, verified)
    ns_baseline, why = _read_nextstat(snapshot, NS_BASELINE)
    if why or not _same(ns_baseline, _nextstat_baseline(name, verified, *_nextstat_results(snapshot))):
        problems.append(why or f"{NS_BASELINE}: not what the run's NextStat results give")
    # NextStat's index, rebuilt whole: every file but itself as this snapshot holds it (ttfr's index
    # covers the rest; its own entry is its bytes), the id, and the fields the registry copies
    ns_index, why = _read_nextstat(snapshot, NS_INDEX)
    files = [_entry(snapshot, rel) for rel in sorted({*entries, INDEX})]
    if why or not _same(ns_index, _nextstat_index(name, index["generated_at"], verified.manifest, files)):
        problems.append(why or f"{NS_INDEX}: not the snapshot's id, its files or its fields")
    if NS_REPLICATION in entries:  # a published replica: NextStat's report is in NextStat's contract
        report, why = _read_nextstat(snapshot, NS_REPLICATION)
        if why or report.get("schema_version") != "nextstat.replication_report.v1":
            problems.append(why or f"{NS_REPLICATION}: not a nextstat.replication_report.v1 (written by ttfr before 0.1.2?)")
    return problems


REGISTRY_SCHEMA = "nextstat.snapshot_registry.v1"
# NextStat's name (its Makefile validates a snapshot's replication_report.json against its contract);
# ttfr's own report beside it is ttfr_replication_report.json
NS_REPLICATION = "replication_report.json"


def _index_doc_sha256(doc: dict) -> str:
    """An index's hash as NextStat's write_replication_report.py computes it (its JSON, keys sorted)."""
    return sha256_bytes(json.dumps(doc, sort_keys=True).encode("utf-8"))


def nextstat_replication_report(snapshot: Path, replica_root: Path, verdict: dict, generated_at: str | None = None) -> dict:
    """NextStat's replication_report_v1 of a `ttfr replicate`: the snapshot's NextStat index against
    one of the replica's artifacts (the files a snapshot of it would hold). NextStat's comparison is
    by hash, and every re-run of a timing benchmark differs byte for byte: its `ok` is false by
    construction; the notes say so and give ttfr's statistical verdict (replication_report.json)."""
    original = json.loads((Path(snapshot) / NS_INDEX).read_bytes())
    generated = generated_at or _utc_now()
    entries = [_entry(replica_root, rel) for rel in _artifacts(replica_root)]
    # the replica as it is now: its result directory (a snapshot of it, published later, holds this
    # report too and so has another id; NextStat's write_replication_report.py compares those files)
    replica_id = f"result-{Path(replica_root).name}"
    replica = _nextstat_index(replica_id, generated, read_json(replica_root / "manifest.json"), entries)
    theirs = {e["path"]: e for e in original["artifacts"]}
    overlap = sorted(set(theirs) & {e["path"] for e in entries})
    mine = {e["path"]: e for e in entries}
    mismatches = [{"path": p, "original_sha256": theirs[p]["sha256"], "replica_sha256": mine[p]["sha256"],
                   "original_bytes": theirs[p]["bytes"], "replica_bytes": mine[p]["bytes"]}
                  for p in overlap if theirs[p]["sha256"] != mine[p]["sha256"]]  # fmt: skip
    summary = verdict["summary"]
    timing = verdict["timing"]["comparisons"]
    inconclusive = sum(c["verdict"].startswith("inconclusive") or c["verdict"] == "not_compared" for c in timing)
    by_hash = (f"{len(mismatches)} of {len(overlap)} shared files differ (a re-run of a timing benchmark differs byte "
               "for byte, so NextStat's hash comparison cannot judge it)" if mismatches
               else f"all {len(overlap)} shared files are identical")  # fmt: skip
    notes = (f"Compared by hash: {by_hash}. ttfr's gates (ttfr_replication_report.json): "
             f"{summary['required_replicated']} of {summary['required_gates']} required gates replicated"
             f"{'' if summary['replicated'] else ' (NOT replicated)'}; datasets unequal: "
             f"{', '.join(summary['datasets_unequal']) or 'none'}; timings (cross-session, weak): {len(timing)} "
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
        current["updated_at"] = now or _utc_now()
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


def read_validation(snapshot: Path) -> str:
    """The validation pack's counts in words: `12 pass, 2 flagged, 0 fail, 3 not_applicable`."""
    summary = read_json(Path(snapshot) / VALIDATION)["summary"]
    return ", ".join(f"{n} {name}" for name, n in summary.items())
