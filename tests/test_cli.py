import json
import os
import subprocess
import sys

import pytest
from conftest import machine_has_gpu

from ttfr.measure.executors import Executors
from ttfr.artifacts import manifest
from ttfr.commands import cli
from ttfr.measure import catalog


def ttfr(*args, cwd=None, env=None):
    return subprocess.run([sys.executable, "-m", "ttfr", *args], capture_output=True, text=True, cwd=cwd, env=env)


@pytest.mark.parametrize(
    "args, message",
    [
        (["run", "--backends", "jax_jit_cpuu"], "Did you mean 'jax_jit_cpu'"),
        (["run", "--cold-rnus", "3"], "Did you mean --cold-runs"),
        (["rnu"], "Did you mean 'run'"),
        (["run", "--profile", "fastest"], "invalid choice"),
        (["run", "--cache-policy", "lukewarm"], "Valid cache policies"),
        (["run", "--cases", "numpy_matmul_1_f32"], "valid sizes are 2..16384"),
        (["run", "--cold-runs", "many"], "invalid int value"),
    ],
)
def test_bad_input_exits_2_before_anything_is_written(tmp_path, args, message):
    done = ttfr(*args, "--out", str(tmp_path / "out")) if args[0] == "run" else ttfr(*args)
    assert done.returncode == 2
    assert message in done.stderr
    assert not (tmp_path / "out").exists()


def test_resume_refuses_a_new_selection(tmp_path):
    done = ttfr("run", "--resume", str(tmp_path), "--backends", "numpy")
    assert done.returncode == 2 and "--resume continues the stored plan" in done.stderr


def test_resume_of_a_non_result_directory_is_a_clear_error(tmp_path):
    done = ttfr("run", "--resume", str(tmp_path))
    assert done.returncode == 2 and "not a ttfr result directory" in done.stderr


def test_list_shows_every_catalogued_case_and_why_gpu_cases_are_unavailable():
    done = ttfr("list", env=dict(os.environ, COLUMNS="200"))
    assert done.returncode == 0
    for case in catalog.BUILTIN.catalogued_cases():
        assert case.id in done.stdout
    if not machine_has_gpu():
        assert "warn: gpu_unavailable" in done.stdout


def test_list_takes_runs_selection_and_shows_only_what_it_selects(capsys):
    assert cli.main(["list", "--backends", "numpy", "--workloads", "matmul", "--dtypes", "f64"]) == 0
    shown = capsys.readouterr().out
    expected = [c.id for c in catalog.BUILTIN.catalogued_cases()
                if c.backend == "numpy" and c.workload == "matmul" and c.dtype == "float64"]  # fmt: skip
    assert expected and all(case in shown for case in expected)
    assert "jax_jit_cpu" not in shown and "_f32" not in shown and "fused_chain" not in shown
    assert cli.main(["list", "--workloads", "convert", "--sizes", "1024"]) == 0  # a family, at one size
    shown = capsys.readouterr().out
    assert "interop_numpy_copy_1024_f32" in shown and "_65536_" not in shown


@pytest.mark.parametrize(
    "args, message",
    [
        (["list", "--backends", "nmupy"], "Did you mean 'numpy'"),
        (["list", "--backends", "numpy", "--workloads", "convert"], "no catalogued case has that selection (those "
                                                                    "workloads run on interop, interop_gpu)"),
        (["list", "--sizes", "big"], "--sizes must be a whole number"),
    ],
)  # fmt: skip
def test_list_refuses_a_selection_as_run_does(capsys, args, message):
    assert cli.main(args) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize(
    "args, message",
    [
        (["list", "--workload", "convert"], "Did you mean --workloads?"),  # the subcommand's own options
        (["run", "--case-fil", "x"], "Did you mean --case-file?"),
        (["list", "--rounds", "3"], "--rounds is an option of `ttfr ab`, `ttfr selftest`."),
        # was "Did you mean --backends?": every command's options were one pool, the typed one included
        (["compare", "--backends", "numpy", "a", "b"], "--backends is an option of `ttfr ab`, `ttfr list`, `ttfr run`."),
    ],
)
def test_an_unknown_option_gets_its_commands_nearest_and_never_itself(capsys, args, message):
    with pytest.raises(SystemExit) as exited:
        cli.main(args)
    error = capsys.readouterr().err
    assert exited.value.code == 2 and message in error
    typed = args[1]
    assert f"Did you mean {typed}?" not in error


def test_env_prints_a_valid_manifest_without_secrets(monkeypatch, capsys):
    monkeypatch.setenv("TORCH_HUB_TOKEN", "hunter2")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "hunter2")
    monkeypatch.setenv("JAX_LOG_COMPILES", "1")
    assert cli.main(["env"]) == 0
    printed = capsys.readouterr().out
    data = json.loads(printed)
    assert "hunter2" not in printed
    assert data["environment"]["JAX_LOG_COMPILES"] == "1"
    from ttfr.artifacts import store as artifacts

    assert artifacts.schema_errors(data, "ttfr.manifest.v1") == []


def test_allowed_environment_keeps_prefixes_only_and_redacts_secrets():
    env = {"JAX_X": "1", "XLA_FLAGS": "--a --x_token=s3cr3t", "TORCHINDUCTOR_CACHE_DIR": "/c", "HOME": "/root",
           "PYTHONPATH": "p", "CUDA_KEY": "s", "OMP_NUM_THREADS": "2", "MKL_PASSWORD": "s", "LD_PRELOAD": "x"}  # fmt: skip
    assert manifest.allowed_environment(env) == {
        "JAX_X": "1", "XLA_FLAGS": "--a --x_token=<redacted>", "TORCHINDUCTOR_CACHE_DIR": "/c", "PYTHONPATH": "p",
        "CUDA_KEY": "<redacted>", "OMP_NUM_THREADS": "2", "MKL_PASSWORD": "<redacted>",
    }  # fmt: skip


def test_report_validate_and_export_on_a_missing_directory_fail_cleanly(tmp_path):
    for args in (["report", str(tmp_path)], ["export", "--format", "nextstat-v1", str(tmp_path), str(tmp_path / "x")]):
        done = ttfr(*args)
        assert done.returncode == 2 and "not a finished ttfr result directory" in done.stderr
    done = ttfr("validate", str(tmp_path))
    assert done.returncode == 1 and "missing" in done.stdout


def test_resume_says_which_interpreter_its_workers_run(tmp_path):
    from support.fakes import FakeExecutor

    from ttfr.pipeline import suite as suite_run
    from ttfr.measure.spec import RunRequest, build_spec

    spec = build_spec(RunRequest(backends="numpy", workloads="matmul", sizes="64", cold_runs=1, warm_procs=1, seed=1))
    result_dir = suite_run.start(spec, tmp_path)
    suite_run.execute(result_dir, spec, Executors(worker=FakeExecutor()))  # complete: a resume runs nothing
    done = ttfr("run", "--resume", str(result_dir.root))
    assert done.returncode == 0, done.stderr
    assert f"resuming {result_dir.root}: workers run {sys.executable}" in done.stdout


def test_run_shows_its_summary_then_writes_the_page_and_says_its_own_time(tmp_path, capsys):
    """The summary comes before report.html (its figures are the slowest part of ttfr's own
    time); --no-html leaves the page to `ttfr report --html`; --verbose lists ttfr's phases."""
    from support.fakes import FakeExecutor

    from ttfr.commands import cli

    def run(*extra):
        out = tmp_path / "_".join(extra or ("default",))
        code = cli.main(["run", "--backends", "numpy", "--workloads", "matmul", "--sizes", "64", "--cold-runs", "2",
                         "--warm-procs", "1", "--out", str(out), *extra], executors=Executors(worker=FakeExecutor()))  # fmt: skip
        (root,) = out.iterdir()
        return code, root, capsys.readouterr().out

    code, root, printed = run("--verbose")
    assert code == 0 and (root / "report.html").is_file() and (root / "report.md").is_file()
    own = printed[printed.index("ttfr's own time:") :]
    for phase in ("result directory, plan.json, manifest", "runs", "of which its 5 processes' lives",
                  "analysis, JSON, report.md", "report.html", "total"):  # fmt: skip
        assert phase in own, own
    assert "start-up" not in own  # cli.main called in this process: its age is not ttfr's start-up
    assert printed.index("1 ok, 0 warn, 0 failed") < printed.index("ttfr's own time:")
    code, root, printed = run("--no-html")
    assert code == 0 and not (root / "report.html").exists() and (root / "report.md").is_file()
    assert "ttfr's own time" not in printed
    assert cli.main(["report", str(root), "--html"]) == 0 and (root / "report.html").is_file()
    # a page from an earlier part of the run would describe another suite: --no-html removes it
    assert cli.main(["run", "--resume", str(root), "--no-html"], executors=Executors(worker=FakeExecutor())) == 0
    assert not (root / "report.html").exists() and (root / "report.md").is_file()


def test_a_run_started_by_another_ttfr_version_is_not_resumed_here(tmp_path, capsys):
    """A case's runs must come from one worker: resuming mixes them (e.g. inline and
    asynchronous CPU dispatch in one case)."""
    import json

    from ttfr.commands import cli
    from ttfr.measure.spec import RunRequest, build_spec
    from ttfr.pipeline import suite as suite_run

    spec = build_spec(RunRequest(backends="numpy", workloads="matmul", sizes="64", cold_runs=1, warm_procs=1, seed=1))
    result_dir = suite_run.start(spec, tmp_path)
    result_dir.unlock()
    plan = json.loads(result_dir.plan.read_text())
    plan["ttfr_version"] = "0.0.9"
    result_dir.plan.write_text(json.dumps(plan))
    assert cli.main(["run", "--resume", str(result_dir.root)]) == 2
    err = capsys.readouterr().err
    assert "started by ttfr 0.0.9" in err and "cannot be resumed here" in err
    assert not (result_dir.root / "journal.jsonl").exists() or not (result_dir.root / "journal.jsonl").read_text()


def test_the_command_line_loads_neither_numpy_nor_the_analysis_stack():
    """Every ttfr command imports the CLI: NumPy (~0.1 s) and scipy wait for the command that uses them."""
    import subprocess
    import sys

    code = "import sys, ttfr.commands.cli, ttfr.pipeline.suite; print(sorted({'numpy', 'scipy'} & set(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert done.stdout.strip() == "[]"
