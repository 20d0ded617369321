"""`ttfr replicate`: a snapshot's plan run again; gates, datasets, timings and differences."""

from __future__ import annotations

import json

import pytest
from conftest import PASSED_CHECK, fake_record, fake_result
from support.fakes import FakeExecutor

from ttfr.artifacts import snapshot
from ttfr.commands import cli
from ttfr.measure.executors import Executors
from ttfr.measure.spec import RunRequest, build_spec
from ttfr.model.base import encode
from ttfr.pipeline import replication as replicate
from ttfr.pipeline import suite as suite_run


def _snapshot(tmp_path):
    spec = build_spec(RunRequest(backends="numpy,jax_jit_cpu", workloads="matmul", sizes="64", cold_runs=2, warm_procs=2, seed=6))
    result_dir = suite_run.start(spec, tmp_path / "out", ["ttfr", "run"])
    suite_run.execute(result_dir, spec, Executors(worker=FakeExecutor()))
    path, _ = snapshot.publish(result_dir.root, tmp_path / "snaps")
    return path


def test_the_same_plan_on_the_same_machine_replicates_every_gate(tmp_path):
    path = _snapshot(tmp_path)
    outcome, document = replicate.replicate(path, tmp_path / "again", executors=Executors(worker=FakeExecutor()))
    document = encode(document)  # as its file holds it
    summary = document["summary"]
    assert summary["replicated"] and summary["exit_code"] == 0 and document["schema_valid"]
    assert summary["required_gates"] == summary["required_replicated"] > 0
    assert all(d["equal"] for d in document["datasets"]) and len(document["datasets"]) == 2
    assert document["timing"]["paired"] is False
    assert all(c["verdict"].endswith(" (weak)") or c["verdict"] == "not_compared" for c in document["timing"]["comparisons"])
    written = json.loads((outcome.result_dir.root / replicate.REPORT).read_text())
    assert written["snapshot_id"] == path.name


def test_a_gate_that_does_not_replicate_is_exit_3_and_named(tmp_path):
    path = _snapshot(tmp_path)

    def wrong(call):
        if call["case"].startswith("numpy") and call["job"].check:
            check = {**PASSED_CHECK, "max_normalised_error": 9.0, "passed": False}
            return fake_result(fake_record(check=check))
        return None

    _outcome, document = replicate.replicate(path, tmp_path / "again", executors=Executors(worker=FakeExecutor(decide=wrong)))

    document = encode(document)  # as its file holds it
    assert document["summary"]["exit_code"] == 3 and not document["summary"]["replicated"]
    assert "numpy_matmul_64_f32 correctness: pass -> fail" in document["summary"]["not_replicated"]


def test_a_snapshot_that_does_not_verify_is_refused_before_anything_runs(tmp_path, capsys):
    path = _snapshot(tmp_path)
    path.chmod(0o755)
    (path / "suite.json").chmod(0o644)
    (path / "suite.json").write_text((path / "suite.json").read_text() + " ")
    assert cli.main(["replicate", str(path), "--out", str(tmp_path / "again")]) == 2
    assert "does not verify" in capsys.readouterr().err and not (tmp_path / "again").exists()
    assert cli.main(["replicate", str(tmp_path / "out"), "--out", str(tmp_path / "again")]) == 2
    assert "not a published snapshot" in capsys.readouterr().err


@pytest.mark.integration
def test_a_real_snapshot_replicates_on_the_machine_it_was_measured_on(tmp_path):
    """Real worker processes: run, publish, replicate: every gate replicates (exit 0)."""
    import subprocess
    import sys

    def ttfr(*args):
        return subprocess.run([sys.executable, "-m", "ttfr", *args], capture_output=True, text=True, timeout=600)

    done = ttfr("run", "--cases", "numpy_matmul_64_f32,jax_jit_cpu_matmul_64_f32", "--cold-runs", "2", "--warm-procs", "1",
                "--warm-samples", "3", "--seed", "3", "--out", str(tmp_path / "out"))  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    (root,) = (tmp_path / "out").iterdir()
    done = ttfr("publish", str(root), "--out", str(tmp_path / "snaps"))
    assert done.returncode == 0 and "published" in done.stdout, done.stderr
    (snap,) = (tmp_path / "snaps").iterdir()
    assert ttfr("validate", str(snap)).returncode == 0
    done = ttfr("replicate", str(snap), "--out", str(tmp_path / "again"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "replicated:" in done.stdout and "NOT" not in done.stdout
