"""A ttfr snapshot is a NextStat snapshot (issue 26): its files in NextStat's contracts validate
against NextStat's schemas (read from ../shared, skipped where absent), the registry entry is what
NextStat's update_snapshot_registry.py writes, and a replication writes NextStat's report too.
benchmarks/nextstat_tools.py runs NextStat's own scripts, unchanged, on these files."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
from conftest import SHARED_SCHEMAS
from support.fakes import FakeExecutor
from support.forgery import reindex, writable

from ttfr.artifacts import snapshot, snapshot_nextstat, snapshot_registry, snapshot_verify
from ttfr.commands import cli
from ttfr.measure.executors import Executors
from ttfr.measure.spec import RunRequest, build_spec
from ttfr.model.base import encode
from ttfr.pipeline import replication
from ttfr.pipeline import suite as suite_run

needs_schemas = pytest.mark.skipif(not SHARED_SCHEMAS.is_dir(), reason="NextStat's schemas are read from ../shared")


def _snapshot(tmp_path, size="64", name="out"):
    spec = build_spec(RunRequest(backends="numpy,jax_jit_cpu", workloads="matmul", sizes=size, cold_runs=2, warm_procs=2,
                                 seed=6))  # fmt: skip
    result_dir = suite_run.start(spec, tmp_path / name, ["ttfr", "run"])
    suite_run.execute(result_dir, spec, Executors(worker=FakeExecutor()))
    path, _ = snapshot.publish(result_dir.root, tmp_path / "snaps")
    return path


def _valid(data, schema_name):
    schema = json.loads((SHARED_SCHEMAS / f"{schema_name}.schema.json").read_text())
    return [e.message for e in jsonschema.Draft202012Validator(schema).iter_errors(data)]


def test_publish_registers_the_snapshot_as_nextstats_registry_script_does(tmp_path, capsys):
    first = _snapshot(tmp_path)
    registry = tmp_path / "registry" / "snapshot_registry.json"
    assert cli.main(["publish", str(tmp_path / "out" / next((tmp_path / "out").iterdir()).name), "--out",
                     str(tmp_path / "snaps"), "--registry", str(registry)]) == 0  # fmt: skip
    data = json.loads(registry.read_text())
    (entry,) = data["snapshots"]
    index_bytes = (first / "snapshot_index.json").read_bytes()
    assert entry["snapshot_id"] == first.name and entry["suite"] == "ml"
    assert entry["artifacts"]["snapshot_index_sha256"] == hashlib.sha256(index_bytes).hexdigest()
    baseline = next(a for a in json.loads(index_bytes)["artifacts"] if a["path"] == "baseline_manifest.json")
    assert entry["artifacts"]["baseline_manifest_sha256"] == baseline["sha256"]
    second = _snapshot(tmp_path, size="32", name="other")
    snapshot_registry.register(second, registry)
    snapshot_registry.register(first, registry)  # again: replaced, not added
    ids = [e["snapshot_id"] for e in json.loads(registry.read_text())["snapshots"]]
    assert sorted(ids) == sorted({first.name, second.name}) and len(ids) == 2
    (tmp_path / "bad.json").write_text('{"schema_version": "something.else"}')
    with pytest.raises(Exception, match="not a nextstat.snapshot_registry.v1 file"):
        snapshot_registry.register(first, tmp_path / "bad.json")


@needs_schemas
def test_every_file_ttfr_writes_in_nextstats_contracts_validates(tmp_path):
    path = _snapshot(tmp_path)
    assert _valid(json.loads((path / "baseline_manifest.json").read_text()), "baseline_manifest_v1") == []
    assert _valid(json.loads((path / "snapshot_index.json").read_text()), "snapshot_index_v1") == []
    suite = json.loads((path / "nextstat" / "ml" / "suite_result.json").read_text())
    assert _valid(suite, "ml_benchmark_suite_result_v1") == []
    for case in (path / "nextstat" / "ml").glob("*.json"):
        if case.name != "suite_result.json":
            assert _valid(json.loads(case.read_text()), "ml_benchmark_result_v1") == [], case.name
    registry = tmp_path / "registry.json"
    snapshot_registry.register(path, registry)
    assert _valid(json.loads(registry.read_text()), "snapshot_registry_v1") == []
    outcome, _document = replication.replicate(path, tmp_path / "again", executors=Executors(worker=FakeExecutor()))
    report = json.loads((outcome.result_dir.root / snapshot_nextstat.NS_REPLICATION).read_text())
    assert _valid(report, "replication_report_v1") == []


def test_a_replication_writes_nextstats_report_with_ttfrs_verdict_in_its_notes(tmp_path):
    path = _snapshot(tmp_path)
    outcome, document = replication.replicate(path, tmp_path / "again", executors=Executors(worker=FakeExecutor()))
    document = encode(document)  # as its file holds it
    report = json.loads((outcome.result_dir.root / snapshot_nextstat.NS_REPLICATION).read_text())
    original = json.loads((path / "snapshot_index.json").read_text())
    assert report["original"]["snapshot_id"] == path.name
    # NextStat's own hash of an index (write_replication_report.py): its JSON with sorted keys
    assert report["original"]["snapshot_index_sha256"] == hashlib.sha256(
        json.dumps(original, sort_keys=True).encode()).hexdigest()  # fmt: skip
    comparison = report["comparison"]
    assert comparison["overlap_paths"] > 0 and comparison["ok"] is False  # a re-run's measurements differ
    assert "manifest.json" in {m["path"] for m in comparison["mismatches"]}  # its session id, at least
    summary = document["summary"]
    gates = f"{summary['required_replicated']} of {summary['required_gates']} required gates replicated;"
    assert summary["replicated"] and gates in report["notes"]
    assert "cannot judge it" in report["notes"] and "timings (cross-session, weak)" in report["notes"]
    # the replica is named as what it is: its result directory, not a snapshot id it will never have
    assert report["replica"]["snapshot_id"] == f"result-{outcome.result_dir.root.name}"


_CHECKOUT = os.environ.get("NEXTSTAT_PUBLIC_BENCHMARKS")


@pytest.mark.integration
@pytest.mark.skipif(not _CHECKOUT, reason="set NEXTSTAT_PUBLIC_BENCHMARKS to a nextstat-public-benchmarks checkout")
def test_nextstats_own_tools_accept_ttfr_snapshots(tmp_path):
    script = Path(__file__).resolve().parents[1] / "benchmarks" / "nextstat_tools.py"
    done = subprocess.run([sys.executable, str(script), _CHECKOUT, "--keep", str(tmp_path / "work")], capture_output=True,
                          text=True, timeout=900)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_forged_nextstat_export_or_index_does_not_verify(tmp_path):
    """The NextStat files are derived from the run: an edited figure or status there, or an edited
    index field the registry copies, is a forgery even with every hash rewritten (issue 26 review)."""
    path = _snapshot(tmp_path)
    writable(path)
    record_path = path / "nextstat" / "ml" / "numpy_matmul_64_f32.json"
    record = json.loads(record_path.read_text())
    record["status"], record["timing"]["warm"]["call_s"] = "ok", {"min": 1e-7, "median": 1e-7, "p95": 1e-7}
    record_path.write_text(json.dumps(record))
    reindex(path)
    assert any("nextstat/ml/numpy_matmul_64_f32.json: not what the run gives" in p for p in snapshot_verify.verify(path))
    clean = _snapshot(tmp_path / "b")
    writable(clean)
    index = json.loads((clean / "snapshot_index.json").read_text())
    index["git"]["sha"], index["suite"] = "f" * 40, "hep"
    (clean / "snapshot_index.json").write_text(json.dumps(index))
    assert any("snapshot_index.json: not the snapshot's id, its files or its fields" in p for p in snapshot_verify.verify(clean))
    (clean / "snapshot_index.json").write_text("[1, 2]")  # malformed: a problem, not a traceback
    assert any("snapshot_index.json: not a JSON object" in p for p in snapshot_verify.verify(clean))


def test_a_hostile_registry_is_refused_before_publishing_and_never_silently_trimmed(tmp_path, capsys):
    path = _snapshot(tmp_path)
    bad = tmp_path / "reg.json"
    bad.write_text(json.dumps({"schema_version": snapshot_registry.REGISTRY_SCHEMA, "updated_at": "", "snapshots": [1]}))
    with pytest.raises(Exception, match=r"snapshots\[0\] is not an entry"):
        snapshot_registry.register(path, bad)
    assert json.loads(bad.read_text())["snapshots"] == [1]  # untouched
    link = tmp_path / "link.json"
    link.symlink_to(tmp_path / "target.json")
    with pytest.raises(Exception, match="is a symlink"):
        snapshot_registry.register(path, link)
    with pytest.raises(Exception, match="inside the snapshot"):
        snapshot_registry.register(path, path / "reg.json")
    result = next((tmp_path / "out").iterdir())
    assert cli.main(["publish", str(result), "--out", str(tmp_path / "fresh"), "--registry", str(bad)]) == 2
    assert not (tmp_path / "fresh").exists()  # refused before anything was published


def test_concurrent_registrations_keep_every_entry(tmp_path):
    import threading

    snaps = [_snapshot(tmp_path / str(i), size=str(16 * (i + 1))) for i in range(3)]
    registry = tmp_path / "registry.json"
    threads = [threading.Thread(target=snapshot_registry.register, args=(s, registry)) for s in snaps]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(json.loads(registry.read_text())["snapshots"]) == 3


def test_nextstats_dataset_hash_does_not_follow_the_machines_load(tmp_path):
    """It hashes the requested run counts (NextStat's config), not how many runs a busy machine left."""
    from ttfr.artifacts.export import nextstat
    from ttfr.artifacts.reader import load_finished

    path = _snapshot(tmp_path)
    case = next(c for c in load_finished(path).cases if c.case == "numpy_matmul_64_f32")
    record = nextstat.case_record(case, load_finished(path).manifest, False, "cold-process/cold-cache")
    assert record["config"]["cold_runs"] == 2 and record["config"]["warm_iters"] == 2 * case.config.warm_samples
    assert record["dataset"]["sha256"] == nextstat.nextstat_config_sha256(record["config"])
