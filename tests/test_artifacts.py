import json

import pytest
from support.fakes import FAKE_POOLS, FakeExecutor, run_suite

from ttfr.measure.executors import Executors
from ttfr.artifacts import store as artifacts
from ttfr.artifacts.reader import validate_dir
from ttfr.artifacts.result_dir import ResultDir, snapshot_id
from ttfr.artifacts.store import ArtifactError
from ttfr.pipeline import suite as suite_run
from ttfr.measure.spec import RunRequest, build_spec
from ttfr.model.base import encode


SELECTION = dict(backends="numpy,jax_jit_cpu,jax_jit_gpu", workloads="matmul", sizes="64", cold_runs=2, warm_procs=2)


def spec(**kwargs):
    return build_spec(RunRequest(**{**SELECTION, **kwargs}))


def run_fake(tmp_path, executor=None, **kwargs):
    for name, value in SELECTION.items():
        kwargs.setdefault(name, value)
    return run_suite(tmp_path / "out", RunRequest(**kwargs), executor)


@pytest.mark.parametrize("policies", ["cold-process/cold-cache,warm-process", "cold-process/cold-cache"])
def test_the_blas_pools_come_once_per_case_from_its_checking_process(tmp_path, policies):
    """Only the process that checks a case's result loads threadpoolctl (a cold process never
    pays for it); its pools are the case's, in the case file, and the manifest keeps ttfr's own."""
    executor = FakeExecutor()
    outcome = run_fake(tmp_path, executor, backends="numpy", policies=policies)
    checking = [c for c in executor.calls if c["job"].check]
    assert len(checking) == 1 and len(executor.calls) >= 3
    case = json.loads((outcome.result_dir.root / "cases" / "numpy_matmul_64_f32.json").read_text())
    assert case["threadpools"] == FAKE_POOLS
    runs = [r for p in case["policies"].values() for r in p.get("runs", []) + p.get("procs", [])]
    assert runs and not any("threadpools" in r for r in runs)
    assert "threadpools" in json.loads((outcome.result_dir.root / "manifest.json").read_text())


def test_a_case_whose_check_failed_keeps_the_pools_of_its_checking_process(tmp_path):
    class FailingCheck(FakeExecutor):
        def answer(self, job, call, entries, jax_dir):
            record, life = super().answer(job, call, entries, jax_dir)
            if job.check:
                record["check"] = {"reference": "numpy float64", "max_normalised_error": 0.5, "tolerance": 2e-4,
                                   "passed": False}  # fmt: skip
            return record, life

    outcome = run_fake(tmp_path, FailingCheck(), backends="numpy")
    case = json.loads((outcome.result_dir.root / "cases" / "numpy_matmul_64_f32.json").read_text())
    assert case["status"] == "failed" and case["reason"].startswith("result_mismatch")
    assert case["threadpools"] == FAKE_POOLS


def test_a_complete_run_writes_valid_artifacts(tmp_path):
    outcome = run_fake(tmp_path)
    root = outcome.result_dir.root
    assert validate_dir(root) == []
    index = json.loads((root / "suite.json").read_text())
    assert index["state"] == "complete" and index["pending"] == []
    statuses = {c["case"]: c["status"] for c in index["cases"]}
    assert statuses == {"jax_jit_cpu_matmul_64_f32": "ok", "jax_jit_gpu_matmul_64_f32": "warn", "numpy_matmul_64_f32": "ok"}
    assert index["summary"]["worst_case"]["case"] in statuses
    assert not (root / ".work").exists()  # scratch removed once complete
    assert outcome.exit_code == 0
    assert "## Break-even" in (root / "report.md").read_text()


def test_interrupted_run_leaves_valid_artifacts_for_finished_cases(tmp_path):
    outcome = run_fake(tmp_path, FakeExecutor(interrupt_at=9))
    root = outcome.result_dir.root
    assert outcome.interrupted and outcome.exit_code == 130
    assert validate_dir(root) == []
    index = json.loads((root / "suite.json").read_text())
    assert index["state"] == "incomplete" and index["pending"]
    written = {c["case"] for c in index["cases"]}
    assert not written & set(index["pending"])
    result_dir, the_spec = suite_run.reopen(root)
    finished = suite_run.execute(result_dir, the_spec, Executors(worker=FakeExecutor()))
    assert finished.suite.state == "complete" and validate_dir(root) == []
    journal_keys = [json.loads(line)["task"] for line in (root / "journal.jsonl").read_text().splitlines()]
    assert len(journal_keys) == len(set(journal_keys))


def test_a_failed_case_makes_the_run_exit_1(tmp_path):
    from conftest import fake_result

    outcome = run_fake(tmp_path, FakeExecutor(lambda call: fake_result(None, outcome="signal", reason="killed by SIGSEGV")
                                              if call["case"].startswith("numpy") else None))  # fmt: skip
    assert encode(outcome.suite.summary)["failed"] == [
        {"case": "numpy_matmul_64_f32", "reason": "every cold-process/cold-cache run failed; first: signal: killed by SIGSEGV"}
    ]
    assert outcome.exit_code == 1


def test_tampered_or_stray_files_are_reported(tmp_path):
    root = run_fake(tmp_path).result_dir.root
    case_file = root / "cases" / "numpy_matmul_64_f32.json"
    data = json.loads(case_file.read_text())
    data["status"] = "ok!"
    case_file.write_text(json.dumps(data))
    (root / "cases" / "extra.json").write_text("{}")
    problems = validate_dir(root)
    assert any("sha256 does not match" in p for p in problems)
    assert any('"ok!" is not one of' in p for p in problems)
    assert any("extra.json: not listed" in p for p in problems)


def test_a_case_file_nested_deeper_than_the_validator_takes_is_a_problem_not_a_crash(tmp_path):
    root = run_fake(tmp_path).result_dir.root
    case_file = root / "cases" / "numpy_matmul_64_f32.json"
    data = json.loads(case_file.read_text())
    deep = data["extra"] = {}
    for _ in range(400):  # JSON's decoder takes it; the schema validator stops converting at its recursion limit
        deep = deep.setdefault("a", {})
    case_file.write_text(json.dumps(data))
    problems = validate_dir(root)
    assert any("numpy_matmul_64_f32.json" in p and "cannot be validated" in p for p in problems), problems


def test_invalid_data_is_refused_and_nothing_is_written(tmp_path):
    target = tmp_path / "case.json"
    with pytest.raises(ArtifactError, match="validation failed"):
        artifacts.write_json(target, {"schema": "ttfr.case_result.v2"}, "ttfr.case_result.v2")
    assert not target.exists() and list(tmp_path.iterdir()) == []


def test_nan_is_never_written(tmp_path):
    with pytest.raises(ValueError):
        artifacts.write_json(tmp_path / "x.json", {"value": float("nan")})


def test_json_is_canonical():
    assert artifacts.dumps({"b": 1, "a": [1.5, None]}) == b'{\n  "a": [\n    1.5,\n    null\n  ],\n  "b": 1\n}\n'


def test_result_dir_refuses_to_overwrite(tmp_path):
    ResultDir.create(tmp_path, "snap")
    (tmp_path / "snap" / "plan.json").write_text("{}")
    with pytest.raises(ArtifactError, match="--resume"):
        ResultDir.create(tmp_path, "snap")


def test_deterministic_snapshot_ids_depend_on_the_spec_only():
    import datetime as dt

    now = dt.datetime(2026, 1, 2, 3, 4, 5)
    a = snapshot_id(now, {"x": 1}, True)
    assert a == snapshot_id(now, {"x": 1}, True) != snapshot_id(now, {"x": 2}, True)
    assert a.startswith("20260102T030405Z-")


def test_export_refuses_a_case_id_that_would_write_outside_its_destination(tmp_path):
    from ttfr.artifacts.export import nextstat

    root = run_fake(tmp_path / "runs").result_dir.root
    victim = sorted((root / "cases").glob("*.json"))[0]
    case = json.loads(victim.read_text())
    case["case"] = "../../../../elsewhere/PWNED"
    victim.write_text(json.dumps(case))
    # A careful attacker re-hashes the file and renames the suite entry too.
    suite = json.loads((root / "suite.json").read_text())
    ref = next(r for r in suite["cases"] if r["path"] == f"cases/{victim.name}")
    ref.update(case=case["case"], sha256=artifacts.sha256_file(victim))
    (root / "suite.json").write_text(json.dumps(suite))
    dest = tmp_path / "a" / "b" / "dest"
    with pytest.raises(ArtifactError, match="is not a ttfr case id"):
        nextstat.export(root, dest)
    assert list(tmp_path.rglob("PWNED*")) == [] and not dest.exists()  # nothing written, anywhere


def test_export_refuses_a_destination_inside_the_result_directory(tmp_path):
    from ttfr.artifacts.export import nextstat
    from ttfr.errors import UsageError

    root = run_fake(tmp_path).result_dir.root
    before = {p: p.read_bytes() for p in (root / "cases").glob("*.json")}
    for dest in (root / "cases", root, root / "new" / "deeper"):
        with pytest.raises(UsageError, match="inside the result directory"):
            nextstat.export(root, dest)
    assert {p: p.read_bytes() for p in (root / "cases").glob("*.json")} == before
    assert validate_dir(root) == []


def _tamper_plan(root, **spec_changes):
    plan = json.loads((root / "plan.json").read_text())
    plan["spec"].update(spec_changes)
    (root / "plan.json").write_text(json.dumps(plan))


def test_resume_checks_the_interpreter_plan_json_names_before_running_anything(tmp_path):
    from ttfr.errors import UsageError

    outcome = run_fake(tmp_path, FakeExecutor(interrupt_at=3))
    root = outcome.result_dir.root
    journal = (root / "journal.jsonl").read_bytes()
    _tamper_plan(root, python=str(tmp_path / "someone-elses-program"))
    with pytest.raises(UsageError, match=r"names programs you did not name.*someone-elses-program \(add --python"):
        suite_run.reopen(root)
    assert (root / "journal.jsonl").read_bytes() == journal


@pytest.mark.parametrize("change", [{"cold_runs": "many"}, {"cases": ["../../etc/passwd_1_f32"]}, {"seed": -1},
                                    {"surprise": 1}])  # fmt: skip
def test_resume_refuses_a_plan_that_is_not_a_ttfr_plan(tmp_path, change):
    root = run_fake(tmp_path, FakeExecutor(interrupt_at=3)).result_dir.root
    original = (root / "plan.json").read_bytes()
    _tamper_plan(root, **change)
    with pytest.raises(ArtifactError, match="plan.json: not a ttfr plan"):
        suite_run.reopen(root)
    (root / "plan.json").write_bytes(original)
    suite_run.reopen(root)[0].unlock()  # the refused resume gave the lock back


def test_validate_reads_plan_json_as_a_plan(tmp_path):
    root = run_fake(tmp_path).result_dir.root
    assert validate_dir(root) == []
    _tamper_plan(root, cold_runs="many")
    assert any(p.startswith("plan.json: spec/cold_runs") for p in validate_dir(root))
    (root / "plan.json").write_text("{")
    assert any(p.startswith("plan.json: not valid JSON") for p in validate_dir(root))


def test_every_written_plan_is_a_valid_plan(tmp_path):
    root = run_fake(tmp_path).result_dir.root
    assert artifacts.schema_errors(json.loads((root / "plan.json").read_text()), artifacts.PLAN_SCHEMA) == []
    _, spec = suite_run.reopen(root)
    assert spec.python is None


def test_one_writer_per_result_directory(tmp_path):
    import subprocess
    import sys

    from ttfr.errors import UsageError

    root = run_fake(tmp_path, FakeExecutor(interrupt_at=3)).result_dir.root
    holder = subprocess.Popen(
        [sys.executable, "-c", "import fcntl, os, sys, time\nfd = os.open(sys.argv[1], os.O_RDWR)\n"
         "fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)\nos.ftruncate(fd, 0); os.write(fd, b'pid 4242 (`ttfr run`)')\n"
         "print('locked', flush=True)\ntime.sleep(30)", str(root / ".lock")],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(UsageError, match=r"is being written by pid 4242 \(`ttfr run`\)"):
            suite_run.reopen(root)  # a --resume while the run still writes
    finally:
        holder.kill()
        holder.wait()
    suite_run.reopen(root)  # the holder is gone: the lock is free again


def test_two_identical_runs_in_the_same_second_do_not_share_a_directory(tmp_path):
    from ttfr.errors import UsageError

    first = ResultDir.create(tmp_path, "20260101T000000Z-abcdef")  # holds the lock
    with pytest.raises(UsageError, match="is being written by pid"):
        ResultDir.create(tmp_path, "20260101T000000Z-abcdef")
    first.unlock()


def test_validate_flags_more_runs_than_the_plan_allows(tmp_path):
    root = run_fake(tmp_path).result_dir.root
    path = sorted((root / "cases").glob("*.json"))[0]
    case = json.loads(path.read_text())
    runs = case["policies"]["cold-process/cold-cache"]["runs"]
    runs.append(dict(runs[0]))  # a second writer's duplicate of run 0
    path.write_text(json.dumps(case))
    problems = validate_dir(root)
    assert any("cold-process/cold-cache has 3 measured runs, the plan allows 2" in p for p in problems)
    assert any("has a run index more than once" in p for p in problems)
