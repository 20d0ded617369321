"""`ttfr run --executor slurm --shards N`: a Slurm job array of shards, merged.

The submission's pieces are tested here without Slurm; the whole path runs against a real
single-node Slurm (`make test-slurm` starts one with scripts/slurm-local.sh) and is skipped,
saying so, where there is none."""

from __future__ import annotations

import functools
import json
import shutil
import subprocess
import sys

import pytest

from ttfr.commands import cli
from ttfr.measure import slurm_client
from ttfr.pipeline import slurm
from ttfr.errors import UsageError
from ttfr.measure.plan import build_plan
from ttfr.measure.spec import RunRequest, build_spec


def test_a_shard_runs_the_same_options_with_its_slice_seed_and_directory(tmp_path):
    argv = ["--cases", "numpy_matmul_64_f32", "--executor", "slurm", "--shards=3", "--slurm-time", "1:00:00",
            "--out", "results", "--seed=1", "--cold-runs", "2"]  # fmt: skip
    expected = ["--cases", "numpy_matmul_64_f32", "--cold-runs", "2", "--seed", "7", "--shard", "2/3", "--out",
                str(tmp_path / "s2")]  # fmt: skip
    assert slurm.shard_argv(argv, 2, 3, 7, tmp_path / "s2") == expected


def test_without_slurm_or_with_a_bad_shard_count_nothing_is_submitted(monkeypatch, capsys):
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(UsageError, match="sbatch is not on PATH"):
        slurm.check(slurm.SlurmOptions(2))
    assert cli.main(["run", "--cases", "numpy_matmul_64_f32", "--shards", "2"]) == 2
    assert "--shards N goes with --executor slurm" in capsys.readouterr().err
    assert cli.main(["run", "--cases", "numpy_matmul_64_f32", "--executor", "slurm", "--shards", "2", "--shard", "1/2",
                     "--seed", "1"]) == 2  # fmt: skip


def test_shards_that_did_not_finish_are_named_with_their_logs(tmp_path):
    for sub in ("shards/1/r", "shards/2", "status", "logs"):
        (tmp_path / sub).mkdir(parents=True)
    (tmp_path / "status" / "1").write_text("0\n")
    with pytest.raises(slurm.ShardsFailed, match=r"shard 2/2: never finished .*shard-2.log") as failed:
        slurm._merge(tmp_path, 2, tmp_path / "out", None)
    assert failed.value.exit_code == 1
    (tmp_path / "status" / "2").write_text("137\n")
    with pytest.raises(slurm.ShardsFailed, match="shard 2/2: exit code 137"):
        slurm._merge(tmp_path, 2, tmp_path / "out", None)


@functools.cache
def _slurm_up() -> bool:
    if shutil.which("sbatch") is None or shutil.which("sinfo") is None:
        return False
    try:  # a client whose controller is down retries for seconds before it says so
        done = subprocess.run(["sinfo", "-h", "-o", "%t"], capture_output=True, text=True, timeout=30)
    except subprocess.TimeoutExpired:
        return False
    return done.returncode == 0 and any(s.startswith(("idle", "mix", "alloc")) for s in done.stdout.split())


@pytest.fixture
def slurm_cluster():
    """A Slurm cluster to submit to, asked when a test that needs one runs, never while collecting (where a
    Slurm client without its controller would hold up every test run)."""
    if not _slurm_up():
        pytest.skip("no Slurm cluster here (`make test-slurm` starts a single-node one)")


@pytest.mark.slurm
@pytest.mark.integration
def test_a_two_shard_slurm_run_merges_into_the_single_runs_cases_and_run_counts(tmp_path, slurm_cluster):
    selection = ["--cases", "numpy_matmul_64_f32,numpy_fused_chain_64_f32,numpy_mlp_train_step_64_f32", "--cold-runs", "2",
                 "--warm-procs", "1", "--warm-samples", "3", "--seed", "5"]  # fmt: skip
    done = subprocess.run([sys.executable, "-m", "ttfr", "run", *selection, "--executor", "slurm", "--shards", "2",
                           "--out", str(tmp_path)], capture_output=True, text=True, timeout=900)  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "slurm: 2/2 shard(s) done" in done.stdout
    (merged,) = [p for p in tmp_path.iterdir() if p.name.startswith("merged-")]
    assert subprocess.run([sys.executable, "-m", "ttfr", "validate", str(merged)], capture_output=True).returncode == 0
    plan = build_plan(build_spec(RunRequest(cases=selection[1].split(","), cold_runs=2, warm_procs=1, warm_samples=3, seed=5)))
    journal = [json.loads(line) for line in (merged / "journal.jsonl").read_text().splitlines()]
    assert sorted(e["task"] for e in journal) == sorted(t.key for t in plan.tasks)  # every run of the plan, once
    manifest = json.loads((merged / "manifest.json").read_text())
    assert [s["shard"] for s in manifest["shards"]] == ["1/2", "2/2"]


@pytest.mark.slurm
@pytest.mark.integration
def test_concurrency_groups_run_as_real_slurm_job_arrays_on_a_named_directory(tmp_path, slurm_cluster):
    """Issue 29 on a real Slurm: each group an array of N tasks (one CPU each, so that a single node holds
    both) released together on one cache in the directory named; every process ok, from a node."""
    shared = tmp_path / "shared"
    shared.mkdir()
    done = subprocess.run([sys.executable, "-m", "ttfr", "run", "--cases", "jax_jit_cpu_matmul_64_f32", "--concurrency",
                           "2", "--cold-runs", "1", "--warm-procs", "1", "--cache-policy", "cold-cache", "--seed", "1",
                           "--no-html", "--out", str(tmp_path / "out"), "--concurrency-executor", "slurm",
                           "--concurrency-cache-dir", str(shared), "--slurm-cpus-per-task", "1"],
                          capture_output=True, text=True, timeout=900)  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (root,) = (tmp_path / "out").iterdir()
    case = json.loads(next((root / "cases").glob("*.json")).read_text())
    for group in case["concurrency"]["groups"]:
        assert [m["outcome"] for m in group["members"]] == ["ok", "ok"], [m["reason"] for m in group["members"]]
        assert all(m["node"] for m in group["members"])
    assert list(shared.iterdir()) == []


def test_the_array_task_script_quotes_every_path_and_word(tmp_path, monkeypatch):
    """A work directory with a space and a `$`, and an argument that looks like the task's own
    options: the task runs exactly its shard with its own output directory."""
    work = tmp_path / "my $HOME results"
    for sub in ("shards", "logs", "status"):
        (work / sub).mkdir(parents=True)
    monkeypatch.setattr(slurm.sys, "executable", "/bin/echo")  # the task prints what it would run
    script = slurm._script(work, ["--command", "echo --shard 0/9 $x", "--out", "elsewhere"], 3, 7)
    done = subprocess.run(["bash", str(script)], env={"SLURM_ARRAY_TASK_ID": "2", "PATH": "/usr/bin:/bin"},
                          capture_output=True, text=True, timeout=30)  # fmt: skip
    assert done.returncode == 0, done.stderr
    log = (work / "logs" / "shard-2.log").read_text()
    assert log.strip() == f"-m ttfr run --command echo --shard 0/9 $x --seed 7 --shard 2/3 --out {work}/shards/2"
    assert (work / "status" / "2").read_text().strip() == "0"


def test_a_shard_count_the_cases_cannot_fill_is_refused_before_submitting(capsys, monkeypatch):
    monkeypatch.setattr(slurm_client.shutil, "which", lambda name: f"/usr/bin/{name}")
    with pytest.raises(UsageError, match=r"--shards must be 2\.\.1 \(this run has 1 case"):
        slurm.check(slurm.SlurmOptions(2), n_cases=1)
    with pytest.raises(UsageError, match="one shard is a plain `ttfr run`"):
        slurm.check(slurm.SlurmOptions(1), n_cases=4)
    # no abbreviations: `--exec` is not `--executor` (a shard would not know it)
    with pytest.raises(SystemExit):
        cli.main(["run", "--cases", "numpy_matmul_64_f32", "--exec", "slurm", "--shards", "2"])
