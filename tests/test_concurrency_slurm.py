"""`--concurrency-executor slurm`: each group a Slurm job array whose tasks share a cache directory on
the filesystem the user names, released together by a barrier on that filesystem.

CI has no Slurm: these tests put a fake one on PATH (sbatch starts the array's tasks as real
background processes with SLURM_ARRAY_TASK_ID set, squeue lists the live ones, scancel kills them),
so the task script, the barrier, the result files and the analysis all run for real."""

from __future__ import annotations

import json
import os
import socket
import sys
import textwrap
from pathlib import Path

import pytest

from ttfr.commands import cli
from ttfr.measure import slurm_groups
from ttfr.measure.cache import CacheDirs
from ttfr.measure.plan import GROUP, Task
from ttfr.measure.slurm_client import SlurmOptions
from ttfr.measure.slurm_groups import SlurmGroups
from ttfr.measure.spec import RunRequest, build_spec
from ttfr.measure.workerenv import build_env, build_job
from ttfr.model.policies import COLD_PRIVATE, COLD_SHARED, WARM_SHARED

SBATCH = """
    import os, subprocess, sys, pathlib
    state = pathlib.Path(os.environ["FAKE_SLURM_STATE"])
    words = sys.argv[1:]
    if "--test-only" in words:  # would Slurm take it? (a partition named "nope" does not exist)
        if "--partition=nope" in words:
            sys.exit("sbatch: error: invalid partition specified: nope")
        sys.exit(print("sbatch: Job 1 to start at 2026-01-01T00:00:00", file=sys.stderr))
    lo, hi = map(int, next(w for w in words if w.startswith("--array="))[8:].split("-"))
    limit = int(os.environ.get("FAKE_SLURM_MAX_TASKS", "1000"))  # a cluster with room for this many at once
    job = str(100 + len(list(state.iterdir())))
    pids = []
    for k in list(range(lo, hi + 1))[:limit]:
        env = {**os.environ, "SLURM_ARRAY_TASK_ID": str(k)}
        if k == int(os.environ.get("FAKE_SLURM_BREAK_TASK", "-1")):  # a node whose python cannot start
            env["PYTHONHOME"] = "/nonexistent"
        task = subprocess.Popen(["bash", words[-1]], env=env,
                                start_new_session=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        pids.append(task.pid)
    (state / job).write_text(json.dumps({"pids": pids, "pending": max(0, hi + 1 - lo - limit)}))
    print(job)
"""
SQUEUE = """
    import os, sys, pathlib
    state = pathlib.Path(os.environ["FAKE_SLURM_STATE"]) / sys.argv[sys.argv.index("-j") + 1]
    job = json.loads(state.read_text())
    def alive(pid):
        try:
            return pathlib.Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
        except OSError:
            return False
    print("\\n".join(["RUNNING"] * sum(map(alive, job["pids"])) + ["PENDING"] * job["pending"]))
"""
SCANCEL = """
    import os, signal, sys, pathlib
    state = pathlib.Path(os.environ["FAKE_SLURM_STATE"]) / sys.argv[1]
    job = json.loads(state.read_text())
    for pid in job["pids"]:
        try:
            os.killpg(pid, signal.SIGKILL)
        except OSError:
            pass
    state.write_text(json.dumps({"pids": job["pids"], "pending": 0}))
"""


@pytest.fixture
def fake_slurm(tmp_path, monkeypatch):
    bin_dir, state = tmp_path / "fake-slurm-bin", tmp_path / "fake-slurm-state"
    bin_dir.mkdir()
    state.mkdir()
    for name, body in (("sbatch", SBATCH), ("squeue", SQUEUE), ("scancel", SCANCEL)):
        path = bin_dir / name
        path.write_text(f"#!{sys.executable}\nimport json\n" + textwrap.dedent(body))
        path.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_SLURM_STATE", str(state))
    # One node, a local filesystem: a release 0.3 s ahead still comes after every task's next look at its
    # file (each looks every 0.1 s: group_task.POLL_S), as the 2 s lead does over NFS; this side looks every
    # 50 ms. The order of events is the same, without ~2.5 s of waiting per group.
    monkeypatch.setattr(slurm_groups, "RELEASE_LEAD_S", 0.3)
    monkeypatch.setattr(slurm_groups, "POLL_S", 0.05)
    return state


def _jobs(state: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(state.iterdir())]


@pytest.mark.integration
def test_groups_run_as_job_arrays_on_the_named_directory_released_together(tmp_path, fake_slurm):
    shared, out = tmp_path / "shared-fs", tmp_path / "out"
    shared.mkdir()
    code = cli.main(["run", "--cases", "jax_jit_cpu_matmul_64_f32", "--concurrency", "2", "--cold-runs", "1",
                     "--warm-procs", "1", "--cache-policy", "cold-cache", "--seed", "1", "--no-html", "--out", str(out),
                     "--concurrency-executor", "slurm", "--concurrency-cache-dir", str(shared)])  # fmt: skip
    assert code == 0
    (root,) = out.iterdir()
    case = json.loads(next((root / "cases").glob("*.json")).read_text())
    groups = {g["mode"]: g for g in case["concurrency"]["groups"]}
    assert set(groups) == {COLD_SHARED, WARM_SHARED, COLD_PRIVATE}
    for group in groups.values():
        members = group["members"]
        assert [m["outcome"] for m in members] == ["ok", "ok"], [m["reason"] for m in members]
        # each ran as an array task on a node (here: this machine), its spawn on the nodes' common clock
        assert {m["node"] for m in members} == {socket.gethostname()}
        assert all(m["start_skew_s"] is not None and m["result_after_release_s"] is not None for m in members)
        assert all(m["compiles"] is not None for m in members)  # JAX's counters came back from the node
    assert groups[COLD_SHARED]["check"]["basis"] == "process" and groups[COLD_SHARED]["check"]["whole"] is True
    assert groups[WARM_SHARED]["check"]["basis"] == "members" and groups[WARM_SHARED]["check"]["whole"] is True
    # JAX's keys depend on the cache directory's absolute path: the warm-shared group's template was made by
    # one process on the named directory, on a node, and both members loaded from it
    assert [m["cache_use"] for m in groups[WARM_SHARED]["members"]] == ["loaded", "loaded"]
    # one array per group (2 tasks), one single task for the check that needed a process, one for that primer
    assert sorted(len(job["pids"]) for job in _jobs(fake_slurm)) == [1, 1, 2, 2, 2]
    entries = [json.loads(line) for line in (root / "journal.jsonl").read_text().splitlines()]
    grouped = [e for e in entries if e["kind"] == "group"]
    assert grouped and all("clock_offset_ns" in e and e["node"] == socket.gethostname() for e in grouped)
    # the warm-shared group started from the case's template, restored into the named directory
    warm = [e for e in grouped if e["policy"] == WARM_SHARED]
    assert all(e["cache_dir"]["restored_template"] and e["cache_dir"]["entries_before"] > 0 for e in warm)
    assert list(shared.iterdir()) == []  # the run's directory there is removed at the end
    assert case["concurrency"]["nodes"] == [socket.gethostname()]  # decided once, in the case result
    md = (root / "report.md").read_text()
    assert f"groups as Slurm job arrays on {socket.gethostname()}" in md


def _group_members(tmp_path: Path, n: int):
    spec = build_spec(RunRequest(cases="numpy_matmul_64_f32", cold_runs=1, warm_procs=1, seed=1))
    (case,) = spec.cases
    task = Task(GROUP, case, COLD_SHARED, 0, 0, concurrency=n)
    cache = CacheDirs(tmp_path / "scratch", case.id)
    cache.make_empty()
    return [(build_job(task, spec, None), build_env(case, spec, cache.env(), None)) for _ in range(n)]


@pytest.mark.integration
def test_a_cluster_that_cannot_start_all_n_tasks_fails_the_group_and_cancels_it(tmp_path, fake_slurm, monkeypatch):
    """A job array's tasks start when Slurm finds room: with room for 1 of 2, the first would wait for the
    other forever. After the patience, the array is cancelled (no task left waiting) and every process of
    the group fails, saying why; nothing was released."""
    monkeypatch.setenv("FAKE_SLURM_MAX_TASKS", "1")
    (tmp_path / "shared").mkdir()
    groups = SlurmGroups(tmp_path / "shared", SlurmOptions(), start_patience_s=1.0)
    runs = groups.run(_group_members(tmp_path, 2), timeout_s=60, python=None)
    assert [r.result.outcome for r in runs] == ["error", "error"]
    assert all("Slurm had started only 1 of the group's 2 tasks after 1 s" in r.result.reason for r in runs)
    assert all("cancelled" in r.result.reason and r.result.record is None for r in runs)
    (job,) = _jobs(fake_slurm)
    assert job["pending"] == 0  # scancel ran
    (release,) = (tmp_path / "shared" / "tasks").glob("*/go")
    assert release.read_text() == ""  # never released


@pytest.mark.integration
def test_a_task_that_dies_before_it_is_ready_fails_alone_and_the_others_run(tmp_path, fake_slurm, monkeypatch):
    """As a local group's broken barrier: the task that ended without saying it was ready fails with its exit
    code and its log; the group is released for the others, which run."""
    monkeypatch.setenv("FAKE_SLURM_BREAK_TASK", "1")
    (tmp_path / "shared").mkdir()
    groups = SlurmGroups(tmp_path / "shared", SlurmOptions(), start_patience_s=60)
    runs = groups.run(_group_members(tmp_path, 2), timeout_s=60, python=None)
    assert runs[0].result.outcome == "ok" and runs[0].node == socket.gethostname()
    assert runs[0].result.record is not None and runs[0].host is not None
    broken = runs[1].result
    assert broken.outcome == "error" and broken.record is None
    assert "Slurm task 100_1 left no result (exit code " in broken.reason and "task-1.log" in broken.reason
    assert broken.output_tail  # the task's own log: why its python did not start


ON_SLURM = ["--concurrency", "2", "--concurrency-executor", "slurm", "--concurrency-cache-dir", "."]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--concurrency", "2", "--concurrency-executor", "slurm"], "needs --concurrency-cache-dir DIR"),
        (["--concurrency", "2", "--concurrency-cache-dir", "/nonexistent/dir"], "not an existing directory"),
        (["--concurrency-executor", "slurm", "--concurrency-cache-dir", "."], "add --concurrency N"),
        (["--concurrency", "2", "--slurm-cpus-per-task", "2"], "goes with --concurrency-executor slurm"),
        # a typo in what Slurm is asked for: refused before the first run, not at the first group
        (
            [*ON_SLURM, "--slurm-partition", "nope"],
            "Slurm would refuse its jobs: sbatch: error: invalid partition specified: nope",
        ),
        ([*ON_SLURM, "--slurm-start-patience", "0"], "--slurm-start-patience S (seconds, more than 0) goes with"),
        (["--concurrency", "2", "--slurm-start-patience", "60"], "goes with --concurrency-executor slurm"),
        # with shards too: checked before the shards are submitted
        (
            ["--concurrency", "2", "--concurrency-cache-dir", "/nonexistent/dir", "--executor", "slurm", "--shards", "2"],
            "not an existing directory",
        ),
    ],
)
def test_group_placement_options_are_refused_before_anything_is_written(tmp_path, fake_slurm, capsys, extra, message):
    out = tmp_path / "out"
    code = cli.main(["run", "--cases", "jax_jit_cpu_matmul_64_f32", "--cold-runs", "1", "--out", str(out), *extra])
    assert code == 2
    assert message in capsys.readouterr().err
    assert not out.exists()


def test_a_result_file_that_is_not_one_is_that_members_error_never_a_crash(tmp_path):
    """A task's result lies on a shared filesystem: a file that does not decode, or whose values do not hold
    together (an ok run without a record), is the member's error with why, not a traceback of the run."""
    from ttfr.measure import group_task, slurm_groups
    from ttfr.measure.scheduler import _entry
    from ttfr.model.journal import CacheDir

    for sub in ("result", "status", "logs"):
        (tmp_path / sub).mkdir()
    (tmp_path / "result" / "0").write_text('{"outcome": "fine", "node": "n1"}\n')
    (tmp_path / "status" / "0").write_text("0\n")
    (tmp_path / "logs" / "task-0.log").write_text("the task's own words, quoting s3cr3t-t0ken-value\n")
    run = slurm_groups._outcome(tmp_path, "7", 0, None, {"API_TOKEN": "s3cr3t-t0ken-value"})
    assert run.result.outcome == "error" and run.node == ""
    assert "Slurm task 7_0 left no result (exit code 0; ValidationError)" in run.result.reason
    # the task's log, as a local worker's output tail: through the one redaction, with the member's environment
    assert run.result.output_tail.startswith("the task's own words") and "s3cr3t" not in run.result.output_tail
    with pytest.raises(ValueError):
        group_task.from_json("[]")
    entry = _entry(task="t", case="c", kind=GROUP, policy=COLD_SHARED, index=0, round=0, measured=True,
                   makes_template=False, cache_dir=CacheDir(entries_before=0, entries_after=0), host=None,
                   outcome="ok", reason=None, record=None, spawn_ns=5, reaped_ns=9, exit_code=0, rusage=None,
                   output_tail=None, concurrency=2, member=0)  # fmt: skip
    assert entry.outcome == "error" and "its result did not hold together" in entry.reason and entry.record is None


def test_a_warm_shared_template_that_cannot_be_made_there_fails_the_group_saying_why(tmp_path, monkeypatch):
    """On a named directory the warm-shared template is made by one process there; where that fails, the
    group's processes fail with its reason (and its check did not run), never a cold group under a warm name."""
    from support.fakes import FakeExecutor

    from ttfr.measure.executors import Executors
    from ttfr.measure.scheduler import Scheduler
    from ttfr.pipeline import suite as suite_run

    named = tmp_path / "named"
    named.mkdir()
    real = Scheduler._prime

    def failing_there(self, task, cache, where_groups_run=False):
        return "error: the primer crashed" if where_groups_run else real(self, task, cache)

    monkeypatch.setattr(Scheduler, "_prime", failing_there)
    spec = build_spec(RunRequest(backends="jax_jit_cpu", workloads="matmul", sizes="64", cold_runs=1, warm_procs=1,
                                 policies="cold-cache", concurrency="2", seed=1))  # fmt: skip
    result_dir = suite_run.start(spec, tmp_path / "out", ["ttfr", "run"])
    (case,) = suite_run.execute(result_dir, spec, Executors(worker=FakeExecutor(), group_root=named)).cases
    groups = {g.mode: g for g in case.concurrency.groups}
    warm = groups[WARM_SHARED]
    assert [m.outcome for m in warm.members] == ["error", "error"]
    assert all("the warm-shared template could not be made in" in m.reason and "the primer crashed" in m.reason
               for m in warm.members)  # fmt: skip
    assert warm.check.outcome == "error" and warm.check.whole is None
    assert all(m.outcome == "ok" for m in groups[COLD_SHARED].members)  # the other modes ran, on the named directory


@pytest.mark.integration
def test_a_member_whose_task_never_ran_stretches_no_skew_and_names_no_node(tmp_path, fake_slurm, monkeypatch):
    monkeypatch.setenv("FAKE_SLURM_BREAK_TASK", "1")
    shared, out = tmp_path / "shared", tmp_path / "out"
    shared.mkdir()
    cli.main(["run", "--cases", "jax_jit_cpu_matmul_64_f32", "--concurrency", "2", "--cold-runs", "1", "--warm-procs",
              "1", "--cache-policy", "cold-cache", "--seed", "1", "--no-html", "--out", str(out),
              "--concurrency-executor", "slurm", "--concurrency-cache-dir", str(shared)])  # fmt: skip
    (root,) = out.iterdir()
    case = json.loads(next((root / "cases").glob("*.json")).read_text())
    for group in case["concurrency"]["groups"]:
        ran, broken = group["members"]
        assert ran["outcome"] == "ok" and ran["node"] == socket.gethostname() and ran["start_skew_s"] == 0.0
        assert broken["outcome"] == "error" and broken["node"] is None and broken["start_skew_s"] is None
        assert group["start_skew_s"] == 0.0  # the one that spawned: not the time its partner's failure was known
    assert f"groups as Slurm job arrays on {socket.gethostname()};" in (root / "report.md").read_text()


def test_the_start_patience_the_user_gives_is_the_groups(tmp_path, fake_slurm):
    from ttfr.measure.executors import placing_groups, release_groups

    executors = placing_groups(None, "slurm", tmp_path, SlurmOptions(), print, start_patience_s=5.0)
    try:
        assert executors.groups.start_patience_s == 5.0 and executors.group_root.parent == tmp_path
    finally:
        release_groups(executors)
    assert list(tmp_path.glob("ttfr-*")) == []
