"""The Python API: `ttfr.run`, `ttfr.load`, `ttfr.compare` over the typed model, loaded lazily (every
worker imports `ttfr`), the command line's checks and messages raised before anything runs, the
tidy frame equal to the CSV export, the notebook view."""

import json
import subprocess
import sys

import pandas
import pytest
from support.fakes import FakeExecutor

import ttfr
from ttfr.artifacts.store import ArtifactError
from ttfr.commands import cli
from ttfr.errors import UsageError
from ttfr.measure.executors import Executors
from ttfr.model.base import encode
from ttfr.model.comparison import Comparison

CASES = ["numpy_matmul_64_f32", "numpy_fused_chain_4096_f32"]


def _run(tmp_path, name="out", **kwargs):
    kwargs.setdefault("cold_runs", 3)
    kwargs.setdefault("warm_procs", 2)
    return ttfr.run(CASES, out=tmp_path / name, html=False, progress=False, _executors=Executors(worker=FakeExecutor()),
                    **kwargs)  # fmt: skip


def test_import_ttfr_loads_no_api_and_the_api_is_there_on_first_use():
    code = ("import sys, ttfr; before = sorted(m for m in sys.modules if m.startswith('ttfr')); ttfr.run; "
            "print(before, 'ttfr.api' in sys.modules, 'run' in dir(ttfr))")  # fmt: skip
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "['ttfr'] True True"  # what a worker pays stays the package's one module
    with pytest.raises(AttributeError, match="has no attribute 'runn'"):
        ttfr.runn  # noqa: B018


def test_run_returns_the_verified_result_and_its_frame_is_the_csv_export(tmp_path):
    result = _run(tmp_path)
    assert sorted(result.cases) == sorted(CASES) and result.suite.summary.n_ok == 2
    assert repr(result).startswith(f"<ttfr.Result {result.path.name}: 2 cases, 2 ok")
    assert result["numpy_matmul_64_f32"].result.case == "numpy_matmul_64_f32"
    with pytest.raises(KeyError, match="not a case of"):
        result["nope"]
    csv = tmp_path / "runs.csv"
    assert cli.main(["export", str(result.path), str(csv), "--format", "csv"]) == 0
    frame = result.to_pandas()
    expected = pandas.read_csv(csv, keep_default_na=False, na_values=[""])
    pandas.testing.assert_frame_equal(frame, expected)
    assert set(frame.metric) >= {"ttfr_s", "call_s"}
    loaded = ttfr.load(result.path)
    pandas.testing.assert_frame_equal(loaded.to_pandas(), frame)


def test_bad_input_raises_the_command_lines_message_before_anything_is_written(tmp_path, capsys):
    with pytest.raises(UsageError) as raised:
        ttfr.run(["numpy_matmul_64_f3"], out=tmp_path / "api", progress=False)
    assert raised.value.exit_code == 2 and not (tmp_path / "api").exists()
    assert cli.main(["run", "--cases", "numpy_matmul_64_f3", "--out", str(tmp_path / "cli")]) == 2
    assert str(raised.value) in capsys.readouterr().err  # the same words
    with pytest.raises(UsageError, match="unknown cache policy"):
        ttfr.run(CASES, cache_policies="tepid", out=tmp_path / "api", progress=False)


def _same_spec(words, **options):
    """The spec `ttfr run WORDS` makes and the one ttfr.run(**options) makes, which must be one (it is returned)."""
    from ttfr.commands import run as run_command
    from ttfr.commands.cli import build_parser
    from ttfr.measure.spec import build_spec

    from_cli = build_spec(run_command.request(build_parser().parse_args(["run", *words])))
    from ttfr import api

    from_api = build_spec(api.run_request(**options))
    assert encode(from_api.recorded()) == encode(from_cli.recorded())
    return from_api


def test_every_option_makes_the_spec_the_command_line_makes(tmp_path):
    # the options ttfr.run takes beyond the first ones: each lands where `ttfr run`'s flag of that name puts it
    cases = _same_spec(["--backends", "torch_eager_cpu,jax_jit_cpu", "--workloads", "hf_nll_grad", "--sizes", "8",
                        "--workspace-preset", "complex8p", "--timeout", "42", "--threads", "1", "--python",
                        sys.executable, "--concurrency", "1,2", "--cold-runs", "4", "--seed", "7"],
                       backends=["torch_eager_cpu", "jax_jit_cpu"], workloads="hf_nll_grad", sizes=[8],
                       workspace_presets=["complex8p"], timeout=42, threads=1, python=sys.executable,
                       concurrency=[1, 2], cold_runs=4, seed=7)  # fmt: skip
    assert cases.concurrency and cases.threads == 1 and cases.python == sys.executable
    program = tmp_path / "prog.py"
    program.write_text("print('ttfr: first result')\n")
    command = f"{sys.executable} {program}"
    _same_spec(["--command", command, "--command-name", "prog", "--first-result", "ttfr: first result", "--prepare",
                "true", "--stop-at-first-result", "--seed", "1"],
               commands=[command], command_names="prog", first_result="ttfr: first result", prepare="true",
               stop_at_first_result=True, seed=1)  # fmt: skip
    _same_spec(["--command", command, "--first-result-mark", "--seed", "1"], commands=command, first_result_mark=True,
               seed=1)  # fmt: skip


@pytest.mark.slow  # pyhf validates the workspace file
def test_a_workspace_file_and_its_signal_make_the_spec_the_command_line_makes(tmp_path):
    from ttfr.measure import datasets

    workspace = tmp_path / "workspace.json"
    ((_name, payload), *_rest) = datasets.files(datasets.resolve(8, 0, None), 0).values()
    workspace.write_bytes(payload)
    _same_spec(["--backends", "jax_jit_cpu", "--workloads", "hf_nll_grad", "--workspace", str(workspace), "--signal",
                "SR0/signal", "--seed", "3"],
               backends="jax_jit_cpu", workloads="hf_nll_grad", workspace=workspace, signal="SR0/signal", seed=3)  # fmt: skip


def test_load_verifies_and_compare_judges(tmp_path):
    a, b = _run(tmp_path, "a", seed=1), _run(tmp_path, "b", seed=2)
    document = ttfr.compare(a, b.path, cross_session=True, out=tmp_path / "cmp")
    assert isinstance(document, Comparison) and {r.case for r in document.comparisons} == set(CASES)
    case_file = b.path / "cases" / "numpy_matmul_64_f32.json"
    data = json.loads(case_file.read_text())
    data["status"] = "failed"
    case_file.write_text(json.dumps(data))
    with pytest.raises(ArtifactError, match="numpy_matmul_64_f32.json"):
        ttfr.load(b.path)


@pytest.mark.figures
def test_a_result_and_a_case_show_their_table_and_components_chart_in_a_notebook(tmp_path):
    result = _run(tmp_path)
    page = result._repr_html_()
    assert page.startswith("<div class=ttfr-result>") and "<table>" in page and "<svg" in page
    assert "TTFR, cold cache" in page and all(case in page for case in CASES)
    one = result["numpy_fused_chain_4096_f32"]._repr_html_()
    assert "numpy_fused_chain_4096_f32" in one and "numpy_matmul_64_f32" not in one
    assert "body {" not in page  # the page's own style is scoped to the fragment, never the notebook's body
