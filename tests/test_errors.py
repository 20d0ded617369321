"""File-system faults and awkward destinations: one line naming the file and the cause, the
documented exit code, the --resume hint where it can finish the job, and nothing half-made."""

import errno
import json

import pytest
from support.fakes import FakeExecutor
from test_artifacts import run_fake, spec

from ttfr.measure.executors import Executors
from ttfr.artifacts import manifest
from ttfr.artifacts.store import StorageError
from ttfr.pipeline import suite as suite_run
from ttfr.commands.cli import main
from ttfr.exit_codes import EXIT_CASE_FAILED, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE
from ttfr.measure.journal import Journal


def _one_line_error(capsys) -> str:
    err = capsys.readouterr().err
    assert err.startswith("ttfr: error: ") and err.count("\n") == 1 and "Traceback" not in err, err
    return err


def test_out_naming_a_file_is_exit_2_and_writes_nothing(tmp_path, capsys):
    target = tmp_path / "a-file"
    target.write_text("mine")
    assert main(["run", "--cases", "numpy_matmul_64_f32", "--out", str(target)]) == EXIT_USAGE
    err = _one_line_error(capsys)
    assert str(target) in err and "--out" in err
    assert target.read_text() == "mine" and sorted(p.name for p in tmp_path.iterdir()) == ["a-file"]


@pytest.mark.parametrize("fault", [KeyboardInterrupt(), OSError(errno.ENOSPC, "No space left on device", "x")])
def test_a_failed_or_interrupted_start_leaves_no_result_directory(tmp_path, monkeypatch, fault):
    def broken(*_args, **_kwargs):
        raise fault

    monkeypatch.setattr(manifest, "collect", broken)
    with pytest.raises((KeyboardInterrupt, StorageError)):
        suite_run.start(spec(), tmp_path / "out", ["ttfr", "run"])
    assert list((tmp_path / "out").iterdir()) == []


def test_ctrl_c_at_start_up_is_exit_130_without_a_traceback(tmp_path, monkeypatch, capsys):
    def interrupted(*_args, **_kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(manifest, "collect", interrupted)
    assert main(["run", "--cases", "numpy_matmul_64_f32", "--out", str(tmp_path)]) == EXIT_INTERRUPTED
    assert "Traceback" not in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_a_full_disk_mid_run_names_the_file_and_resume_finishes_the_job(tmp_path, monkeypatch):
    real_append = Journal.append
    appended = []

    def append_until_full(self, entry):
        if len(appended) == 4:
            raise OSError(errno.ENOSPC, "No space left on device", str(self.path))
        appended.append(entry)
        real_append(self, entry)

    monkeypatch.setattr(Journal, "append", append_until_full)
    the_spec = spec()
    result_dir = suite_run.start(the_spec, tmp_path / "out", ["ttfr", "run"])
    with pytest.raises(StorageError) as caught:
        suite_run.execute(result_dir, the_spec, Executors(worker=FakeExecutor()))
    message = str(caught.value)
    assert "journal.jsonl" in message and "No space left" in message and f"--resume {result_dir.root}" in message
    monkeypatch.setattr(Journal, "append", real_append)
    resumed, resumed_spec = suite_run.reopen(result_dir.root)  # the lock was given back
    outcome = suite_run.execute(resumed, resumed_spec, Executors(worker=FakeExecutor()))
    assert outcome.suite.state == "complete" and outcome.exit_code == EXIT_OK


def test_storage_errors_are_exit_1_with_one_line(tmp_path, monkeypatch, capsys):
    def full(*_args, **_kwargs):
        raise StorageError("x/journal.jsonl: cannot be written (No space left on device); ... --resume x")

    monkeypatch.setattr(suite_run, "execute", full)
    assert main(["run", "--cases", "numpy_matmul_64_f32", "--out", str(tmp_path)]) == EXIT_CASE_FAILED
    assert "No space left" in _one_line_error(capsys)


def test_report_on_a_read_only_directory_prints_the_report_and_warns(tmp_path, monkeypatch, capsys):
    from ttfr.artifacts import result_dir

    root = run_fake(tmp_path).result_dir.root
    before = (root / "report.md").read_bytes()

    def read_only(path, _payload):
        raise OSError(errno.EROFS, "Read-only file system", str(path))

    monkeypatch.setattr(result_dir, "write_bytes_atomic", read_only)
    assert main(["report", str(root)]) == EXIT_OK
    captured = capsys.readouterr()
    assert "## Break-even" in captured.out
    assert "report.md: cannot be written (Read-only file system)" in captured.err and "Traceback" not in captured.err
    assert (root / "report.md").read_bytes() == before


def test_export_to_an_existing_file_is_exit_2(tmp_path, capsys):
    root = run_fake(tmp_path).result_dir.root
    target = tmp_path / "existing.json"
    target.write_text("keep")
    assert main(["export", "--format", "nextstat-v1", str(root), str(target)]) == EXIT_USAGE
    assert "not a directory" in _one_line_error(capsys) and target.read_text() == "keep"


def test_a_full_disk_during_export_is_one_line(tmp_path, monkeypatch, capsys):
    from ttfr.artifacts.export import nextstat

    root = run_fake(tmp_path).result_dir.root

    def full(path, _data, _schema=None):
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr(nextstat, "write_json", full)
    assert main(["export", "--format", "nextstat-v1", str(root), str(tmp_path / "dest")]) == EXIT_CASE_FAILED
    assert "No space left on device" in _one_line_error(capsys)


def test_two_compares_in_one_second_get_two_directories(tmp_path):
    from ttfr.pipeline import comparison as compare

    roots = [run_fake(tmp_path / name).result_dir.root for name in ("a", "b")]
    outs = [
        compare.compare_dirs(*roots, tmp_path / "cmp", cross_session=True, correction="holm", fail_on="regression")[0]
        for _ in range(3)
    ]
    assert len(set(outs)) == 3 and all((o / "comparison.json").is_file() for o in outs)


def test_compare_out_naming_a_file_is_exit_2(tmp_path, capsys):
    roots = [run_fake(tmp_path / name).result_dir.root for name in ("a", "b")]
    target = tmp_path / "file"
    target.write_text("")
    assert main(["compare", "--cross-session", *map(str, roots), "--out", str(target)]) == EXIT_USAGE
    assert "--out" in _one_line_error(capsys)


def test_resume_of_a_plan_that_is_a_fifo_or_garbage_is_one_line(tmp_path, capsys):
    import os

    root = run_fake(tmp_path, FakeExecutor(interrupt_at=3)).result_dir.root
    for garbage in (b"", b"[]", b"\xff" * 10, b"[" * 100000):
        (root / "plan.json").write_bytes(garbage)
        assert main(["run", "--resume", str(root)]) == EXIT_USAGE
        assert "plan.json" in _one_line_error(capsys)
    (root / "plan.json").unlink()
    os.mkfifo(root / "plan.json")
    assert main(["run", "--resume", str(root)]) == EXIT_USAGE
    assert "not a regular file" in _one_line_error(capsys)
    json.loads((root / "manifest.json").read_text())  # untouched
