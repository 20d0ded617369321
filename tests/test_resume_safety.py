"""A result directory never makes ttfr run a program (issue 25, item 17): a resume runs the
interpreter, case files, commands and --prepare steps its plan names only when the user names
them on the resume's command line; reading a plan (merge, export) imports nothing."""

import json
import os
import stat
import sys
from pathlib import Path

import pytest

from ttfr.errors import UsageError
from ttfr.measure.resume import Named
from ttfr.artifacts.reader import read_plan
from ttfr.measure.spec import RunRequest, RunSpec
from ttfr.pipeline import suite as suite_run

CASE = """
import pathlib
pathlib.Path({marker!r}).write_text("imported")
import numpy as np
from ttfr.cases import Case

case = Case("marked", sizes=(8,), dtypes=("float64",))

@case.inputs
def inputs(size, dtype, seed):
    return [np.ones(size, dtype)]

@case.numpy
def build(np):
    return lambda x: x * 2
"""


def _interrupted_run(tmp_path, **request):
    """A result directory whose runs have not started (its plan.json written, as a run killed then leaves it)."""
    from ttfr.measure.spec import build_spec

    request.setdefault("warm_procs", None if request.get("commands") else 1)
    result_dir = suite_run.start(build_spec(RunRequest(cold_runs=1, seed=1, **request)), tmp_path / "out", ["ttfr", "run"])
    result_dir.unlock()
    return result_dir.root


def _edit_plan(root: Path, change) -> None:
    plan = json.loads((root / "plan.json").read_text())
    change(plan["spec"])
    (root / "plan.json").write_text(json.dumps(plan))


def test_a_plan_naming_an_interpreter_is_refused_without_running_it(tmp_path):
    marker = tmp_path / "ran"
    evil = tmp_path / "python"
    evil.write_text(f"#!/bin/sh\ntouch {marker}\n")
    evil.chmod(evil.stat().st_mode | stat.S_IEXEC)
    root = _interrupted_run(tmp_path, backends="numpy", workloads="matmul", sizes="64")
    _edit_plan(root, lambda spec: spec.update(python=str(evil)))
    with pytest.raises(UsageError, match=rf"names programs you did not name.*interpreter {evil} \(add --python {evil}\)"):
        suite_run.reopen(root)
    assert not marker.exists()
    with pytest.raises(UsageError, match="drop --python"):  # the run's workers ran ttfr's own: not another one
        suite_run.reopen(_interrupted_run(tmp_path / "b", backends="numpy", workloads="matmul", sizes="64"),
                         Named(python=sys.executable))  # fmt: skip


def test_a_plan_naming_a_case_file_runs_it_only_when_the_user_names_it(tmp_path):
    marker = tmp_path / "imported"
    case_file = tmp_path / "marked.py"
    case_file.write_text(CASE.format(marker=str(marker)))
    root = _interrupted_run(tmp_path, case_files=[str(case_file)], backends="numpy")
    marker.unlink()  # planning imported it: the user named it on that command line
    with pytest.raises(UsageError, match=rf"the case file {case_file} \(add --case-file {case_file}\)"):
        suite_run.reopen(root)
    assert not marker.exists()
    result_dir, spec = suite_run.reopen(root, Named(case_files=(str(case_file),)))
    result_dir.unlock()
    assert marker.exists() and [c.id for c in spec.cases] == ["numpy_marked_8_f64"]


def test_reading_a_plan_imports_no_case_file(tmp_path):
    marker = tmp_path / "imported"
    case_file = tmp_path / "marked.py"
    case_file.write_text(CASE.format(marker=str(marker)))
    root = _interrupted_run(tmp_path, case_files=[str(case_file)], backends="numpy")
    marker.unlink()
    spec = RunSpec.from_recorded(read_plan(root).spec)  # merge and export read so
    assert not marker.exists()
    assert [c.id for c in spec.cases] == ["numpy_marked_8_f64"] and spec.cases[0].workload_info.sizes == (8,)


def test_a_plan_naming_a_command_or_prepare_runs_them_only_when_named(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    command, prepare = f"{sys.executable} -c pass", "true"
    root = _interrupted_run(tmp_path, commands=[command], prepare=[prepare])
    with pytest.raises(UsageError) as refused:
        suite_run.reopen(root)
    assert "add --command" in str(refused.value) and "add --prepare true" in str(refused.value)
    with pytest.raises(UsageError, match="add --prepare"):
        suite_run.reopen(root, Named(commands=(command,)))
    result_dir, spec = suite_run.reopen(root, Named(commands=(command,), prepare=(prepare,)))
    result_dir.unlock()
    assert [c.argv for c in spec.commands] == [(sys.executable, "-c", "pass")]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # the plan's command runs in its own directory: the user must be there
    with pytest.raises(UsageError, match=rf"runs in {tmp_path}"):
        suite_run.reopen(root, Named(commands=(command,), prepare=(prepare,)))


def test_the_resume_hint_names_the_programs_a_resume_must_name(tmp_path, monkeypatch):
    import shlex

    monkeypatch.chdir(tmp_path)
    case_file = tmp_path / "marked.py"
    case_file.write_text(CASE.format(marker=str(tmp_path / "imported")))
    from ttfr.measure.spec import build_spec

    spec = build_spec(RunRequest(case_files=[str(case_file)], backends="numpy", seed=1))
    words = shlex.split(spec.resume_command("/r"))
    assert words[:4] == ["ttfr", "run", "--resume", "/r"] and words[4:] == ["--case-file", str(case_file)]
    commands = build_spec(RunRequest(commands=[f"{sys.executable} -c pass"], prepare=["true"], seed=1))
    assert shlex.split(commands.resume_command("/r"))[4:] == ["--command", f"{sys.executable} -c pass", "--prepare", "true"]


def test_two_virtual_environments_of_one_python_are_two_interpreters(tmp_path):
    """Every venv's bin/python links to one base interpreter: comparing resolved paths let a
    resume run the plan's venv (and its .pth files) when the user named another."""
    from ttfr.measure.resume import interpreter_path, unnamed_programs

    base = Path(sys.executable).resolve()
    a, b = tmp_path / "a" / "bin", tmp_path / "b" / "bin"
    for folder in (a, b):
        folder.mkdir(parents=True)
        (folder / "python").symlink_to(base)
    python = str(a / "python")
    assert unnamed_programs(python, (), (), Named(python=str(b / "python")))  # refused
    assert unnamed_programs(python, (), (), Named(python=str(a / "python"))) == []
    assert interpreter_path(str(a / "python")) == str(a / "python")  # the link, not what it points at


def test_a_bare_interpreter_name_is_recorded_as_found_so_naming_it_again_resumes(tmp_path, monkeypatch):
    from ttfr.measure import resume
    from ttfr.measure import spec as spec_mod

    monkeypatch.setattr(spec_mod, "check_worker_python", lambda *a, **k: None)  # nothing runs in this test
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    planned = spec_mod.build_spec(RunRequest(backends="numpy", workloads="matmul", sizes="64", python="python", seed=1))
    assert planned.python == str(Path(sys.executable).parent / "python")  # absolute, links kept
    assert resume.unnamed_programs(planned.python, (), (), Named(python="python")) == []


def test_a_command_whose_name_finds_another_program_now_is_refused(tmp_path, monkeypatch):
    from ttfr.measure.user_commands import UserCommand, program_moved

    first, second = tmp_path / "one" / "tool", tmp_path / "two" / "tool"
    for path in (first, second):
        path.parent.mkdir()
        path.write_text("#!/bin/sh\n")
        path.chmod(0o755)
    ran = UserCommand("tool", ("tool",), str(tmp_path), files=((str(first.resolve()), "0" * 64),))
    assert program_moved(ran, path_env=str(first.parent)) is None
    moved = program_moved(ran, path_env=f"{second.parent}:{first.parent}")
    assert moved and str(first.resolve()) in moved and str(second.resolve()) in moved


def test_the_resume_hint_shows_no_secret_a_command_held():
    """The hint is printed on the terminal: through the one redaction, as plan.json records it."""
    from ttfr.measure.spec import build_spec

    spec = build_spec(RunRequest(commands=[f"{sys.executable} -c pass --api-token s3cr3t-value"],
                                 prepare=["true --password hunter2-secret"], seed=1))  # fmt: skip
    hint = spec.resume_command("/r")
    assert "s3cr3t-value" not in hint and "hunter2-secret" not in hint and "<redacted>" in hint


def test_a_plan_asking_for_unbounded_groups_is_refused_before_any_runs(tmp_path):
    """--concurrency's groups per point come from plan.json on a resume: an edited one cannot ask for more
    than any ttfr run or ab could (the schema's bound), and nothing runs."""
    from ttfr.artifacts.store import ArtifactError

    root = _interrupted_run(tmp_path, backends="jax_jit_cpu", workloads="matmul", sizes="64", concurrency="2")
    _edit_plan(root, lambda spec: spec.update(concurrency_rounds=10**6))
    with pytest.raises((UsageError, ArtifactError), match="concurrency_rounds"):
        suite_run.reopen(root)
    assert not (root / "journal.jsonl").exists() or (root / "journal.jsonl").read_text() == ""
