"""`ttfr publish`: an immutable, content-addressed snapshot with its index, baseline
manifest, validation pack, rerun bundle and NextStat contracts."""

from __future__ import annotations

import json
import os
import stat

import jsonschema
import pytest
from support.forgery import reindex, writable
from support.fakes import FakeExecutor, run_suite

from conftest import SHARED_SCHEMAS, fake_result
from ttfr.artifacts import snapshot
from ttfr.artifacts import snapshot_verify
from ttfr.artifacts import snapshot_layout
from ttfr.commands import cli
from ttfr.measure.spec import RunRequest


def _run(tmp_path, executor=None, name="out"):
    request = RunRequest(backends="numpy,jax_jit_cpu,jax_jit_gpu", workloads="matmul", sizes="64", cold_runs=2,
                         warm_procs=2, seed=4)  # fmt: skip
    return run_suite(tmp_path / name, request, executor).result_dir.root


def test_a_snapshot_is_complete_read_only_and_named_for_its_content(tmp_path):
    root = _run(tmp_path)
    path, new = snapshot.publish(root, tmp_path / "snaps")
    assert new and path.name.startswith("ttfr-") and snapshot_verify.verify(path) == []
    index = json.loads((path / snapshot_layout.INDEX).read_text())
    listed = {e["path"] for e in index["artifacts"]}
    for name in ("plan.json", "manifest.json", "suite.json", "journal.jsonl", "report.md", "report.html",
                 "ttfr_baseline_manifest.json", "baseline_manifest.json", "validation.json", "rerun/command.txt",
                 "rerun/spec.json", "nextstat/ml/suite_result.json"):  # fmt: skip
        assert name in listed, name
    # NextStat's index, where its tools look: every file but itself, ttfr's index and its baseline too
    ns_index = json.loads((path / "snapshot_index.json").read_text())
    files = {p.relative_to(path).as_posix() for p in path.rglob("*") if p.is_file()}
    assert {a["path"] for a in ns_index["artifacts"]} == files - {"snapshot_index.json"}
    assert any(p.startswith("cases/") for p in listed) and ".lock" not in listed
    for file in path.rglob("*"):
        assert not file.stat().st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH), file
    assert json.loads((path / "rerun" / "spec.json").read_text())["seed"] == 4
    # the same content is the same snapshot; another content another one
    again, new = snapshot.publish(root, tmp_path / "snaps")
    assert again == path and not new
    other, _ = snapshot.publish(_run(tmp_path, name="other"), tmp_path / "snaps")
    assert other != path
    assert [p.name for p in (tmp_path / "snaps").iterdir() if p.name.startswith(".")] == []  # no staging left


def test_the_validation_pack_lists_every_gate(tmp_path):
    def wrong(call):
        if call["case"].startswith("numpy") and call["job"].check:
            from conftest import fake_record

            record = fake_record(check={"reference": "numpy float64", "max_normalised_error": 3.0, "tolerance": 1e-4,
                                        "passed": False})  # fmt: skip
            return fake_result(record)
        return None

    path, _ = snapshot.publish(_run(tmp_path, FakeExecutor(decide=wrong)), tmp_path / "snaps")
    pack = json.loads((path / snapshot_layout.VALIDATION).read_text())
    by = {(g["case"], g["gate"], g.get("policy")): g["result"] for g in pack["gates"]}
    assert by[("numpy_matmul_64_f32", "correctness", None)] == "fail" and pack["passed"] is False
    assert by[("jax_jit_cpu_matmul_64_f32", "correctness", None)] == "pass"
    assert by[("jax_jit_cpu_matmul_64_f32", "cache_verification", "cold-process/cold-cache")] == "pass"
    assert by[("jax_jit_cpu_matmul_64_f32", "sync_check", "warm-process")] == "pass"
    assert by[("jax_jit_gpu_matmul_64_f32", "availability", None)] == "not_applicable"
    assert pack["summary"]["fail"] == sum(1 for g in pack["gates"] if g["result"] == "fail")


def test_a_tampered_or_grown_snapshot_does_not_verify(tmp_path):
    path, _ = snapshot.publish(_run(tmp_path), tmp_path / "snaps")
    os.chmod(path, 0o755)
    target = path / "report.md"
    os.chmod(target, 0o644)
    target.write_text(target.read_text() + "edited\n")
    (path / "extra.json").write_text("{}")
    problems = snapshot_verify.verify(path)
    assert "report.md: does not match ttfr_snapshot_index.json (changed after publishing)" in problems
    assert "extra.json: not in ttfr_snapshot_index.json" in problems
    assert cli.main(["validate", str(path)]) == 1


def test_publishing_refuses_an_invalid_or_incomplete_directory_and_writes_nothing(tmp_path, capsys):
    root = _run(tmp_path)
    case = root / "cases" / "numpy_matmul_64_f32.json"
    case.write_text(case.read_text().replace('"status": "ok"', '"status": "failed"', 1))  # its hash no longer matches
    assert cli.main(["publish", str(root), "--out", str(tmp_path / "snaps")]) == 2
    assert "does not validate" in capsys.readouterr().err
    interrupted = _run(tmp_path, FakeExecutor(interrupt_at=3), name="partial")
    assert cli.main(["publish", str(interrupted), "--out", str(tmp_path / "snaps")]) == 2
    err = capsys.readouterr().err
    assert "is incomplete" in err and "--resume" in err
    assert not (tmp_path / "snaps").exists() or list((tmp_path / "snaps").iterdir()) == []


@pytest.mark.skipif(not SHARED_SCHEMAS.is_dir(), reason="NextStat's schemas are read from ../shared (not copied in)")
def test_the_nextstat_contracts_validate_against_the_published_schemas(tmp_path):
    path, _ = snapshot.publish(_run(tmp_path), tmp_path / "snaps")
    for name in ("snapshot_index", "baseline_manifest"):
        schema = json.loads((SHARED_SCHEMAS / f"{name}_v1.schema.json").read_text())
        data = json.loads((path / f"{name}.json").read_text())
        assert list(jsonschema.Draft202012Validator(schema).iter_errors(data)) == [], name
    index = json.loads((path / "snapshot_index.json").read_text())
    assert {a["path"] for a in index["artifacts"]} >= {"suite.json", "nextstat/ml/suite_result.json", "baseline_manifest.json"}
    baseline = json.loads((path / "baseline_manifest.json").read_text())
    (result,) = baseline["results"]  # relative to the manifest's folder, as NextStat's tools read it
    assert (path / result["path"]).is_file() and result["suite"] == "ml"
    assert baseline["datasets"] and all(d["id"].startswith("generated:ml:") for d in baseline["datasets"])


def test_a_forged_snapshot_does_not_verify_even_with_its_index_rewritten(tmp_path):
    path, _ = snapshot.publish(_run(tmp_path), tmp_path / "snaps")
    writable(path)
    pack = json.loads((path / snapshot_layout.VALIDATION).read_text())
    pack["gates"] = [dict(g, result="pass") for g in pack["gates"]]  # "everything passed"
    (path / snapshot_layout.VALIDATION).write_text(json.dumps(pack))
    reindex(path)
    assert any("validation.json: not what the case files give" in p for p in snapshot_verify.verify(path))
    # a run artifact changed (the plan another machine would replicate): the id no longer names it
    plan = json.loads((path / "plan.json").read_text())
    plan["spec"]["cold_runs"] = 3
    (path / "plan.json").write_text(json.dumps(plan))
    reindex(path)
    assert any("its content is not what was published" in p for p in snapshot_verify.verify(path))
    (path / snapshot_layout.INDEX).unlink()  # without its index it is still a snapshot, and does not verify
    assert cli.main(["validate", str(path)]) == 1


def test_publishing_again_over_a_damaged_snapshot_is_refused(tmp_path, capsys):
    root = _run(tmp_path)
    path, _ = snapshot.publish(root, tmp_path / "snaps")
    writable(path)
    (path / "junk").mkdir()
    assert "junk/: not in ttfr_snapshot_index.json" in snapshot_verify.verify(path)
    assert cli.main(["publish", str(root), "--out", str(tmp_path / "snaps")]) == 2
    assert "exists but does not verify" in capsys.readouterr().err


def test_a_failed_case_fails_the_pack(tmp_path):
    def fail(call):
        return fake_result(None, outcome="timeout", reason="timeout after 0.1 s") if call["case"].startswith("numpy") else None

    path, _ = snapshot.publish(_run(tmp_path, FakeExecutor(decide=fail)), tmp_path / "snaps")
    pack = json.loads((path / snapshot_layout.VALIDATION).read_text())
    status = {g["case"]: g["result"] for g in pack["gates"] if g["gate"] == "status"}
    assert status["numpy_matmul_64_f32"] == "fail" and status["jax_jit_gpu_matmul_64_f32"] == "flagged"
    assert pack["passed"] is False
