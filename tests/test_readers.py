"""Every reader of a result directory (report, export, compare, validate) verifies what it
reads: paths and symlinks confined to the directory, schema, sha256, bounded regular files.
Each probe is something a hostile or careless party can leave behind."""

import json
import os
import shutil
import threading

import pytest
from test_artifacts import run_fake

from ttfr.measure.executors import Executors
from ttfr.artifacts import reader
from ttfr.artifacts.reader import validate_dir
from ttfr.artifacts.store import ArtifactError, sha256_file
from ttfr.commands.cli import main
from ttfr.exit_codes import EXIT_USAGE


@pytest.fixture(scope="module")
def _pristine(tmp_path_factory):
    """One finished run for the module: each test gets its own copy to break."""
    return run_fake(tmp_path_factory.mktemp("runs")).result_dir.root


@pytest.fixture
def finished(_pristine, tmp_path):
    copy = tmp_path / "runs" / _pristine.name
    shutil.copytree(_pristine, copy, symlinks=True)
    return copy


def _suite(root):
    return json.loads((root / "suite.json").read_text())


def _write_suite(root, suite):
    (root / "suite.json").write_text(json.dumps(suite))


def _point_first_case_at(root, path, rehash_from=None):
    """suite.json's first case now points at `path` (hash updated to that file's, as a careful
    attacker would do)."""
    suite = _suite(root)
    suite["cases"][0]["path"] = path
    if rehash_from is not None:
        suite["cases"][0]["sha256"] = sha256_file(rehash_from)
    _write_suite(root, suite)


def _every_reader(root, tmp_path, capsys):
    """Exit code and stderr of report, export and compare on `root`."""
    outcomes = {}
    for name, argv in {
        "report": ["report", str(root)],
        "export": ["export", "--format", "nextstat-v1", str(root), str(tmp_path / "exported")],
        "compare": ["compare", "--cross-session", str(root), str(root), "--out", str(tmp_path / "cmp")],
    }.items():
        code = main(argv)
        outcomes[name] = (code, capsys.readouterr().err)
    return outcomes


def _assert_refused(outcomes, *needles):
    for name, (code, err) in outcomes.items():
        assert code == EXIT_USAGE, (name, code, err)
        assert err.startswith("ttfr: error: ") and err.count("\n") == 1, (name, err)  # one line, no traceback
        for needle in needles:
            assert needle in err, (name, err)


def test_a_case_path_leaving_the_directory_is_refused_by_every_reader(finished, tmp_path, capsys):
    outside = tmp_path / "outside.json"
    outside.write_bytes((finished / _suite(finished)["cases"][0]["path"]).read_bytes())
    _point_first_case_at(finished, "../../outside.json", rehash_from=outside)
    _assert_refused(_every_reader(finished, tmp_path, capsys), "../../outside.json")
    assert not (tmp_path / "exported").exists() and not (tmp_path / "cmp").exists()
    assert any("../../outside.json" in p for p in validate_dir(finished))


def test_an_absolute_case_path_is_refused(finished, tmp_path, capsys):
    _point_first_case_at(finished, "/etc/passwd")
    _assert_refused(_every_reader(finished, tmp_path, capsys), "/etc/passwd")
    assert any("/etc/passwd" in p for p in validate_dir(finished))


def test_a_symlink_out_of_the_directory_is_refused(finished, tmp_path, capsys):
    ref = _suite(finished)["cases"][0]
    victim = finished / ref["path"]
    outside = tmp_path / "elsewhere.json"
    outside.write_bytes(victim.read_bytes())  # same bytes, same hash: only the link gives it away
    victim.unlink()
    victim.symlink_to(outside)
    _assert_refused(_every_reader(finished, tmp_path, capsys), "outside the result directory", ref["path"])
    assert any("outside the result directory" in p for p in validate_dir(finished))


def test_a_symlinked_manifest_or_workspace_is_refused(finished, tmp_path):
    (finished / "manifest.json").rename(tmp_path / "manifest.json")
    (finished / "manifest.json").symlink_to(tmp_path / "manifest.json")
    with pytest.raises(ArtifactError, match="manifest.json: a symlink"):
        reader.load_finished(finished)


def test_an_edited_median_with_a_stale_hash_is_refused(finished, tmp_path, capsys):
    ref = _suite(finished)["cases"][0]
    path = finished / ref["path"]
    case = json.loads(path.read_text())
    case["reason"] = "edited"
    path.write_text(json.dumps(case))
    _assert_refused(_every_reader(finished, tmp_path, capsys), ref["path"], "sha256 does not match")
    assert main(["validate", str(finished)]) == 1


def test_an_edited_suite_headline_is_caught_through_the_status_cross_check(finished):
    suite = _suite(finished)
    suite["cases"][0]["status"] = "failed" if suite["cases"][0]["status"] != "failed" else "ok"
    _write_suite(finished, suite)
    with pytest.raises(ArtifactError, match="status"):
        reader.load_finished(finished)


def test_a_case_file_replaced_by_a_fifo_is_refused_without_hanging(finished):
    path = finished / _suite(finished)["cases"][0]["path"]
    path.unlink()
    os.mkfifo(path)
    outcome = {}
    worker = threading.Thread(target=lambda: outcome.update(problems=validate_dir(finished)), daemon=True)
    worker.start()
    worker.join(20)
    assert not worker.is_alive(), "validate blocked on a FIFO"
    assert any("not a regular file" in p for p in outcome["problems"])
    with pytest.raises(ArtifactError, match="not a regular file"):
        reader.load_finished(finished)


def test_an_oversized_artifact_is_refused_before_it_is_read(finished, monkeypatch):
    monkeypatch.setattr(reader, "MAX_ARTIFACT_BYTES", 64)
    with pytest.raises(ArtifactError, match="artifact limit"):
        reader.load_finished(finished)


def test_a_workspace_file_changed_after_the_run_is_refused(tmp_path):
    from ttfr.pipeline import suite as suite_run
    from ttfr.measure.spec import RunRequest, build_spec

    from support.fakes import FakeExecutor

    spec = build_spec(RunRequest(backends="pyhf_numpy", workloads="hf_nll_grad", sizes="3", cold_runs=1, warm_procs=1))
    result_dir = suite_run.start(spec, tmp_path, ["ttfr", "run"])
    root = suite_run.execute(result_dir, spec, Executors(worker=FakeExecutor())).result_dir.root
    dataset = _suite(root)["datasets"][0]
    (root / dataset["path"]).write_text("{}")
    with pytest.raises(ArtifactError, match=dataset["path"]):
        reader.load_finished(root)
    assert any(dataset["path"] in p for p in validate_dir(root))


GARBAGE = {
    "empty": b"",
    "truncated": b'{"schema": "ttfr.suite_result.v1", "cases": [',
    "a list": b"[]",
    "a number": b"5",
    "binary": bytes(range(256)),
    "NaN": b'{"x": NaN}',
    "deep": b"[" * 100000 + b"]" * 100000,
    "wrong types": json.dumps({"schema": "ttfr.suite_result.v1", "cases": 5, "manifest": "x", "datasets": {}}).encode(),
}


@pytest.mark.parametrize("name", ["suite.json", "manifest.json", "plan.json", "case"])
@pytest.mark.parametrize("garbage", sorted(GARBAGE))
def test_validate_never_crashes_and_readers_give_one_line(finished, tmp_path, capsys, name, garbage):
    target = finished / (_suite(finished)["cases"][0]["path"] if name == "case" else name)
    target.write_bytes(GARBAGE[garbage])
    problems = validate_dir(finished)
    assert problems and all(isinstance(p, str) for p in problems)
    if name != "plan.json":  # report/export/compare do not read the plan
        _assert_refused(_every_reader(finished, tmp_path, capsys))
    assert main(["validate", str(finished)]) == 1


@pytest.mark.parametrize("path", ["../../../etc/passwd", "/etc/passwd", "workspaces/link.json"])
def test_resume_refuses_workspace_paths_of_plan_json_outside_the_directory(tmp_path, path):
    from support.fakes import FakeExecutor

    from ttfr.pipeline import suite as suite_run
    from ttfr.measure.spec import RunRequest, build_spec

    spec = build_spec(RunRequest(backends="pyhf_numpy", workloads="hf_nll_grad", sizes="3", cold_runs=2, warm_procs=1))
    result_dir = suite_run.start(spec, tmp_path, ["ttfr", "run"])
    root = suite_run.execute(result_dir, spec, Executors(worker=FakeExecutor(interrupt_at=1))).result_dir.root
    (root / "workspaces" / "link.json").symlink_to("/etc/passwd")
    plan = json.loads((root / "plan.json").read_text())
    next(iter(plan["datasets"].values()))["files"]["workspace"] = path
    (root / "plan.json").write_text(json.dumps(plan))
    # the schema refuses a path outside workspaces/, the reader a symlink out of the directory
    with pytest.raises(ArtifactError, match="does not match|outside the result directory"):
        suite_run.reopen(root)


def _rehash_suite_case(root, index=0):
    suite = _suite(root)
    ref = suite["cases"][index]
    ref["sha256"] = sha256_file(root / ref["path"])
    _write_suite(root, suite)


def test_an_edited_suite_summary_is_refused_even_with_every_hash_right(finished, tmp_path, capsys):
    suite = _suite(finished)
    suite["summary"]["n_cases"] = 99
    _write_suite(finished, suite)
    _assert_refused(_every_reader(finished, tmp_path, capsys), "`summary` is not what its case files give")
    assert any("`summary`" in p for p in validate_dir(finished))


def test_an_edited_case_median_is_refused_even_with_its_hash_updated(finished, tmp_path, capsys):
    ref = _suite(finished)["cases"][0]
    path = finished / ref["path"]
    case = json.loads(path.read_text())
    policy = next(p for p in case["policies"].values() if p.get("runs"))
    policy["summary"]["ttfr_s"]["median"] = 1e-9
    path.write_text(json.dumps(case))
    _rehash_suite_case(finished)
    _assert_refused(_every_reader(finished, tmp_path, capsys), "summary is not what its runs give")
    assert any("summary is not what its runs give" in p for p in validate_dir(finished))


@pytest.mark.parametrize("entry", [".lock", "journal.jsonl", ".work", "cases"])
def test_resume_refuses_a_directory_whose_own_files_are_symlinks(tmp_path, entry):
    from support.fakes import FakeExecutor

    from ttfr.pipeline import suite as suite_run

    root = run_fake(tmp_path / "runs", FakeExecutor(interrupt_at=3)).result_dir.root
    victim = tmp_path / "victim"
    victim.mkdir() if entry in (".work", "cases") else victim.write_text("precious")
    target = root / entry
    if target.is_dir():
        import shutil

        shutil.rmtree(target)
    elif target.exists():
        target.unlink()
    target.symlink_to(victim)
    with pytest.raises(ArtifactError, match="symlink"):
        suite_run.reopen(root)
    assert (victim.read_text() == "precious") if victim.is_file() else list(victim.iterdir()) == []


def test_resume_refuses_a_symlinked_manifest_and_never_blocks_on_a_fifo_one(tmp_path):
    from support.fakes import FakeExecutor

    from ttfr.pipeline import suite as suite_run

    root = run_fake(tmp_path / "runs", FakeExecutor(interrupt_at=3)).result_dir.root
    (root / "manifest.json").unlink()
    (root / "manifest.json").symlink_to("/dev/zero")
    with pytest.raises(ArtifactError, match="manifest.json is a symlink"):
        suite_run.reopen(root)
    (root / "manifest.json").unlink()
    os.mkfifo(root / "manifest.json")
    result_dir, spec = suite_run.reopen(root)
    import signal

    def blocked(*_):
        raise TimeoutError("resume blocked on a FIFO")

    previous = signal.signal(signal.SIGALRM, blocked)
    signal.alarm(30)
    try:
        with pytest.raises(ArtifactError, match="manifest.json: not a regular file"):
            suite_run.execute(result_dir, spec, Executors(worker=FakeExecutor()))
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
