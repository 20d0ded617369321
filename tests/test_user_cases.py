"""Users' own cases (`ttfr.cases.Case` in a `--case-file`): declaration checks, discovery
errors (exit 2 before anything runs, with the user's traceback tail), and real runs of a
case file in fresh processes under the same protocol as the built-ins."""

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import machine_has_gpu, have, ok_unless_busy

from ttfr.artifacts.reader import validate_dir
from ttfr.cases import Case, CaseError
from ttfr.errors import UsageError
from ttfr.child.workloads import user_case
from ttfr.measure import catalog, resume, spec, user_cases, worker_probe
from ttfr.model.base import decode, encode
from ttfr.model.plan import PlanSpec

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"

GOOD = """
import numpy as np
from ttfr.cases import Case

case = Case("{name}", sizes=(64, 256), dtypes=("float64",))

@case.inputs
def inputs(size, dtype, seed):
    return [np.random.default_rng(seed).standard_normal(size).astype(dtype)]

@case.reference
def reference(x):
    return [{reference}]

@case.numpy
def build(np):
    return lambda x: np.cumsum(x)

@case.jax
def build_jax(jax):
    {jax_body}
"""


def case_file(tmp_path, name="my_cumsum", reference="np.cumsum(x)", jax_body="return lambda x: jax.numpy.cumsum(x)",
              file="cases_mine.py"):  # fmt: skip
    path = tmp_path / file
    path.write_text(textwrap.dedent(GOOD.format(name=name, reference=reference, jax_body=jax_body)))
    return path


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"name": "Bad-Name", "sizes": (1,)}, "lower-case"),
        ({"name": "x", "sizes": ()}, "sizes"),
        ({"name": "x", "sizes": (0,)}, "sizes"),
        ({"name": "x", "sizes": (1.5,)}, "sizes"),
        ({"name": "x", "sizes": (8,), "dtypes": ("int8",)}, "dtypes"),
        ({"name": "x", "sizes": (8,), "tolerance": {"float16": 1e-3}}, "tolerance"),
        ({"name": "x", "sizes": (8,), "tolerance": {"float32": -1}}, "tolerance"),
    ],
)
def test_a_case_declared_wrongly_says_what_is_wrong(kwargs, match):
    name = kwargs.pop("name")
    with pytest.raises(CaseError, match=match):
        Case(name, **kwargs)


def test_decorators_register_builders_and_refuse_what_is_not_callable():
    case = Case("c", sizes=(4,))
    case.jax(lambda jax: None)
    assert set(case.builders) == {"jax"}
    with pytest.raises(CaseError, match="decorates a function"):
        case.torch(42)
    with pytest.raises(CaseError, match="no framework 'tensorflow'"):
        case.builder("tensorflow")


def catalogue_of(paths):
    """The built-in catalogue with the cases of these files (where a name clash is refused)."""
    return catalog.BUILTIN.with_workloads(c.workload() for c in user_cases.read(paths, installed=False))


def test_a_case_file_becomes_workloads_with_its_frameworks_sizes_and_source(tmp_path):
    path = case_file(tmp_path)
    (found,) = user_cases.read([path], installed=False)
    assert (found.name, found.frameworks, found.sizes, found.dtypes) == ("my_cumsum", ("numpy", "jax"), (64, 256), ("float64",))
    known = catalogue_of([path])
    workload = known.workloads["my_cumsum"]
    assert workload.source == str(path.resolve()) and workload.child_module == catalog.USER_CASE_MODULE
    case = known.make_case("jax_jit_cpu", "my_cumsum", 64, "f64")
    assert case.id == "jax_jit_cpu_my_cumsum_64_f64" and case.workload_info is workload
    with pytest.raises(UsageError, match="does not run workload"):
        known.make_case("torch_eager_cpu", "my_cumsum", 64, "f64")  # no torch builder
    # The user's case is the run's, not the process's: the built-in catalogue never learns it.
    assert "my_cumsum" not in catalog.WORKLOADS and "my_cumsum" not in catalog.BUILTIN.workloads
    with pytest.raises(TypeError):
        catalog.WORKLOADS["my_cumsum"] = workload  # type: ignore[index]


def test_run_spec_takes_only_the_files_cases_and_a_resume_reads_the_file_again(tmp_path):
    path = case_file(tmp_path)
    chosen = spec.build_spec(spec.RunRequest(case_files=[str(path)], backends="numpy,jax_jit_cpu", seed=1))
    assert sorted(c.id for c in chosen.cases) == ["jax_jit_cpu_my_cumsum_64_f64", "numpy_my_cumsum_64_f64"]
    assert chosen.case_files == ((str(path.resolve()), user_case.file_sha256(path)),)
    stored = decode(json.loads(json.dumps(encode(chosen.recorded()))), PlanSpec)  # as plan.json is read
    named = resume.Named(case_files=(str(path),))
    assert spec.RunSpec.from_recorded(stored, named) == chosen  # a resume imports the file the user named
    assert spec.RunSpec.from_recorded(stored) == chosen  # a reader knows the cases from the plan's record
    # A file edited (or gone) since the run started would mix two versions: --resume refuses it.
    path.write_text(path.read_text() + "\n# edited\n")
    with pytest.raises(UsageError, match="changed since this run started"):
        spec.RunSpec.from_recorded(stored, named)
    path.unlink()
    with pytest.raises(UsageError, match="is gone"):
        spec.RunSpec.from_recorded(stored, named)


def test_names_that_would_make_unreadable_case_ids_and_edits_after_creation_are_refused(tmp_path):
    with pytest.raises(CaseError, match="'custom' is reserved"):
        Case("loss_custom", sizes=(8,))
    with pytest.raises(CaseError, match="at most 64"):
        Case("x" * 65, sizes=(8,))
    path = tmp_path / "edited.py"
    path.write_text("from ttfr.cases import Case\nc = Case('ok', sizes=(8,))\nc.numpy(lambda np: np.sum)\nc.sizes = (-1,)\n")
    with pytest.raises(UsageError, match="sizes must be whole numbers"):
        catalogue_of([path])


def test_an_alias_is_the_same_case_and_a_case_file_imports_its_neighbours(tmp_path):
    (tmp_path / "helpers.py").write_text("def build(np):\n    return np.cumsum\n")
    path = tmp_path / "aliased.py"
    path.write_text("import helpers\nfrom ttfr.cases import Case\nc = Case('aliased', sizes=(8,))\n"
                    "c.numpy(helpers.build)\nc.inputs(lambda size, dtype, seed: [])\nsame = c\n")  # fmt: skip
    (found,) = user_cases.read([path], installed=False)
    assert found.name == "aliased"


def test_the_user_case_shim_makes_tuples_of_lists_and_arrays_of_inputs():
    from ttfr.child.workloads import user_case

    case = Case("shim", sizes=(3,))
    case.inputs(lambda size, dtype, seed: [list(range(size))])
    case.numpy(lambda np: lambda x: [x, x * 2])
    case.make_reference = None
    user_case._case = case

    class NumpyRuntime:
        framework = "numpy"
        np = __import__("numpy")

    inputs = user_case.make_inputs(3, "float32", 0)
    assert inputs[0].tolist() == [0, 1, 2] and hasattr(inputs[0], "dtype")
    user_case.inputs_for(NumpyRuntime(), inputs)
    out = user_case.numpy_fn(None)(*inputs)
    assert isinstance(out, tuple) and len(out) == 2  # a list of outputs is outputs, not one ragged array
    case.inputs(lambda size, dtype, seed: NumpyRuntime.np.zeros(size))
    with pytest.raises(TypeError, match="must return a list of arrays"):
        user_case.make_inputs(3, "float32", 0)


_INPUTS = "c.inputs(lambda size, dtype, seed: [])\n"


@pytest.mark.parametrize(
    "content, match",
    [
        # one line, file:line:column and the message (no ttfr frames, no importlib)
        ("def broken(:\n    pass\n", r"could not be imported: bad\.py:1:12: SyntaxError: invalid syntax$"),
        ("import numpy\nraise RuntimeError('no licence server')\n",
         r"could not be imported: bad\.py:2:1: RuntimeError: no licence server$"),
        ("from ttfr.cases import Case\nCase('x', sizes=(0,))\n",
         r"could not be imported: bad\.py:2:1: CaseError: case 'x': sizes must be whole numbers .*got \(0,\)$"),
        ("from ttfr.cases import Case\nc = Case('y', sizes='ten')\n", r"bad\.py:2:5: CaseError: .*got \('ten',\)$"),
        ("X = 1\n", "defines no case"),
        ("from ttfr.cases import Case\nc = Case('lonely', sizes=(8,))\n", "'lonely' has no builder"),
        ("from ttfr.cases import Case\nc = Case('noinput', sizes=(8,))\nc.numpy(lambda np: np.sum)\n",
         "'noinput' has no inputs: decorate a function .* with @case.inputs"),
        ("from ttfr.cases import Case\nc = Case('matmul', sizes=(8,))\nc.numpy(lambda np: np.sum)\n" + _INPUTS,
         "has the name of a built-in workload"),
        ("from ttfr.cases import Case\nc = Case('sweep_mlp', sizes=(8,))\nc.numpy(lambda np: np.sum)\n" + _INPUTS,
         "has the name of a built-in workload"),
    ],
)  # fmt: skip
def test_a_bad_case_file_is_a_usage_error_pointing_at_the_users_line(tmp_path, content, match):
    path = tmp_path / "bad.py"
    path.write_text(content)
    with pytest.raises(UsageError, match=match) as raised:
        catalogue_of([path])
    assert "ttfr/" not in str(raised.value) and "frozen importlib" not in str(raised.value)


def test_an_error_in_a_helper_module_names_its_line_and_the_case_files(tmp_path):
    (tmp_path / "helper_mod.py").write_text("def f():\n    return 1 / 0\n")
    path = tmp_path / "uses_helper.py"
    path.write_text("from ttfr.cases import Case\nimport helper_mod\nhelper_mod.f()\n")
    with pytest.raises(UsageError, match=r"helper_mod\.py:2:12: ZeroDivisionError: division by zero "
                                         r"\(from uses_helper\.py:3:1\)$"):  # fmt: skip
        catalogue_of([path])


def test_a_case_file_that_hangs_on_import_is_stopped_at_the_timeout(tmp_path, capsys):
    path = tmp_path / "hangs.py"
    path.write_text("import time\nfrom ttfr.cases import Case\ntime.sleep(60)\n")
    with pytest.raises(UsageError, match=r"importing it took longer than --timeout 2.5 s \(it was at hangs\.py:3:1\)"):
        spec.build_spec(spec.RunRequest(case_files=[str(path)], timeout=2.5))
    assert "importing case file" in capsys.readouterr().err  # announced while it hung, not silence


def test_missing_files_other_suffixes_and_duplicate_names_are_refused(tmp_path):
    with pytest.raises(UsageError, match="no such file"):
        catalogue_of([tmp_path / "absent.py"])
    (tmp_path / "cases.txt").write_text("")
    with pytest.raises(UsageError, match="not a .py file"):
        catalogue_of([tmp_path / "cases.txt"])
    one = case_file(tmp_path, file="one.py")
    two = case_file(tmp_path, file="two.py")
    with pytest.raises(UsageError, match="is defined in .*one.py and in .*two.py"):
        catalogue_of([one, two])
    with pytest.raises(UsageError, match="empty value"):
        spec.build_spec(spec.RunRequest(case_files=[""]))


def test_the_cli_refuses_a_bad_case_file_with_exit_2_before_any_run(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("raise ValueError('broken on purpose')\n")
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, "-m", "ttfr", "run", "--case-file", str(bad), "--out", str(out)],
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 2
    assert "broken on purpose" in done.stderr and "bad.py" in done.stderr
    assert not out.exists()  # nothing half-written


def test_ttfr_ab_reads_case_files_too(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("raise ValueError('ab saw it')\n")
    done = subprocess.run([sys.executable, "-m", "ttfr", "ab", "--case-file", str(bad), "--out", str(tmp_path / "o")],
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 2 and "ab saw it" in done.stderr


def test_ttfr_list_shows_a_case_files_cases_with_their_availability(tmp_path):
    path = case_file(tmp_path)
    done = subprocess.run([sys.executable, "-m", "ttfr", "list", "--case-file", str(path)], capture_output=True,
                          text=True, timeout=120, env={"COLUMNS": "250", "PATH": "/usr/bin:/bin"})  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "my_cumsum (yours)" in done.stdout
    assert "numpy_my_cumsum_64_f64" in done.stdout and "jax_jit_cpu_my_cumsum_256_f64" in done.stdout


@pytest.mark.integration
@pytest.mark.skipif(not have("jax"), reason="needs jax")
def test_a_case_file_runs_in_fresh_processes_with_its_own_import_timed_and_its_check(tmp_path):
    """The README's promise: a case file gets the built-ins' treatment. A builder that
    raises fails its case with the phase and the user's message; a wrong reference fails
    the check; a good case is ok with `user_import_s` in every run."""
    good = case_file(tmp_path, file="good.py")
    wrong = case_file(tmp_path, name="wrong_ref", reference="np.cumsum(x) + 1.0", file="wrong.py")
    raising = case_file(tmp_path, name="raising", jax_body="raise RuntimeError('builder exploded')", file="raising.py")
    out = tmp_path / "out"
    argv = [sys.executable, "-m", "ttfr", "run", "--out", str(out), "--case-file", str(good), "--case-file", str(wrong),
            "--case-file", str(raising), "--backends", "numpy,jax_jit_cpu,jax_jit_gpu", "--sizes", "64", "--cold-runs", "1",
            "--warm-procs", "1", "--warm-samples", "3", "--cache-policy", "cold-cache,warm", "--seed", "3"]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    assert done.returncode == 1, done.stdout + done.stderr  # a failed case: exit 1
    (root,) = [p for p in out.iterdir() if p.is_dir()]
    assert validate_dir(root) == []
    stored = json.loads((root / "plan.json").read_text())["spec"]["case_files"]
    assert [f["path"] for f in stored] == [str(p.resolve()) for p in (good, wrong, raising)]
    assert stored[0]["sha256"] == user_case.file_sha256(good)

    def case(case_id):
        return json.loads((root / "cases" / f"{case_id}.json").read_text())

    for backend in ("numpy", "jax_jit_cpu"):
        result = case(f"{backend}_my_cumsum_64_f64")
        assert ok_unless_busy(result), result["reason"]
        assert result["correctness"]["passed"] and result["correctness"]["max_normalised_error"] < 1e-12
        (run,) = result["policies"]["cold-process/cold-cache"]["runs"]
        assert run["metrics"]["user_import_s"] > 0 and run["metrics"]["setup_s"] > 0
        wrong_result = case(f"{backend}_wrong_ref_64_f64")
        assert wrong_result["status"] == "failed" and not wrong_result["correctness"]["passed"]
    jax_run = case("jax_jit_cpu_my_cumsum_64_f64")["policies"]["cold-process/cold-cache"]["runs"][0]
    assert {"trace_s", "lower_s", "compile_s"} <= set(jax_run["stages"])  # the AOT stage split
    exploded = case("jax_jit_cpu_raising_64_f64")
    assert exploded["status"] == "failed" and "builder exploded" in exploded["reason"]
    assert ok_unless_busy(case("numpy_raising_64_f64"))  # only its jax builder raises
    if machine_has_gpu():
        return
    # A case that never ran (no GPU) still exports, with NextStat's dataset of a generated case (its
    # config's hash): the exporter, a fresh process, runs none of the case file's code for it.
    assert case("jax_jit_gpu_my_cumsum_64_f64")["status"] == "warn"
    dest = tmp_path / "nextstat"
    exported = subprocess.run([sys.executable, "-m", "ttfr", "export", "--format", "nextstat-v1", str(root), str(dest)],
                              capture_output=True, text=True, timeout=300)  # fmt: skip
    assert exported.returncode == 0, exported.stdout + exported.stderr
    never_ran = json.loads((dest / "jax_jit_gpu_my_cumsum_64_f64.json").read_text())["dataset"]
    assert never_ran["id"] == "generated:ml:jax_jit_gpu_my_cumsum_64_f64" and len(never_ran["sha256"]) == 64


def test_the_report_gives_a_users_import_its_own_column_only_where_a_case_has_one(fixture_case):
    from ttfr.analyse import stats
    from ttfr.model.base import decode, encode
    from ttfr.model.case import CaseResult
    from ttfr.report import markdown

    policy = "cold-process/cold-cache"
    summary = {m: encode(stats.summarize([0.1, 0.2])) for m in ("interpreter_s", "import_s", "setup_s", "first_call_s", "ttfr_s")}

    def case(name, **extra):
        data = encode(fixture_case(name, cold_runs=[fixture_case.run()]))
        data["policies"][policy]["summary"].update(summary, **extra)
        return decode(data, CaseResult)

    builtin = case("numpy_matmul_64_f32")
    mine = case("numpy_mine_64_f32", user_import_s=encode(stats.summarize([0.25, 0.25])))
    assert "your import" not in "\n".join(markdown._components_section([builtin], policy))
    lines = markdown._components_section([builtin, mine], policy)
    header = next(line for line in lines if line.startswith("| case"))
    assert header.split(" | ")[:4] == ["| case", "interpreter", "import", "your import"]
    row = next(line for line in lines if "numpy_mine_64_f32" in line)
    assert "250 ms" in row


@pytest.mark.integration
@pytest.mark.torch_compile
@pytest.mark.contention_safe  # statuses (a busy machine's withheld figure allowed), checks, a stage's presence
@pytest.mark.skipif(not (have("torch") and have("pyhf")), reason="needs torch and pyhf")
def test_the_examples_run(tmp_path):
    """examples/: a JAX (and NumPy) function, a torch model under torch.compile, a pyhf fit,
    run small as the README shows them, so they never rot. The softplus function goes through
    torch.compile in no case: the model does, and each cold compile costs this run ~10 s."""
    files = [str(EXAMPLES / name) for name in ("jax_softplus.py", "torch_mlp.py", "pyhf_fit.py")]
    expected = ["jax_jit_cpu_softplus_sum_1000_f32", "numpy_softplus_sum_1000_f32", "torch_eager_cpu_softplus_sum_1000_f32",
                "torch_eager_cpu_torch_mlp_forward_256_f32", "torch_compile_cpu_torch_mlp_forward_256_f32",
                "numpy_pyhf_mle_fit_4_f64"]  # fmt: skip
    argv = [sys.executable, "-m", "ttfr", "run", *[a for f in files for a in ("--case-file", f)], "--cases",
            ",".join(expected), "--cold-runs", "1", "--warm-procs", "1", "--warm-samples", "3", "--cache-policy",
            "cold-cache,warm", "--seed", "1", "--out", str(tmp_path)]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    (root,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    assert sorted(p.stem for p in (root / "cases").glob("*.json")) == sorted(expected)
    for case_id in expected:
        result = json.loads((root / "cases" / f"{case_id}.json").read_text())
        assert ok_unless_busy(result) and result["correctness"]["passed"], (case_id, result["reason"])
    compiled = json.loads((root / "cases" / "torch_compile_cpu_torch_mlp_forward_256_f32.json").read_text())
    (run,) = compiled["policies"]["cold-process/cold-cache"]["runs"]
    assert run["stages"]["inductor_s"] > 0  # the model really went through torch.compile


def test_installed_packages_publish_cases_through_the_entry_point_group(tmp_path, monkeypatch):
    """A package's `ttfr.cases` entry point names a module; its cases join the catalogue
    with a `module:` source the worker imports by name."""
    package = tmp_path / "site"
    (package / "mycases").mkdir(parents=True)
    (package / "mycases" / "__init__.py").write_text(textwrap.dedent(GOOD.format(
        name="pkg_cumsum", reference="np.cumsum(x)", jax_body="return lambda x: jax.numpy.cumsum(x)")))  # fmt: skip
    info = package / "mycases-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: mycases\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[ttfr.cases]\nmine = mycases\n")
    monkeypatch.syspath_prepend(str(package))
    (found,) = [c for c in user_cases.installed_cases() if c.name == "pkg_cumsum"]
    assert found.source == "module:mycases" and not found.from_file
    assert catalog.BUILTIN.with_workloads(c.workload() for c in user_cases.read([], installed=True)).workloads[
        "pkg_cumsum"].source == "module:mycases"  # fmt: skip
    # A broken installed module is the same exit-2 error as a broken file, naming the entry point.
    (package / "mycases" / "__init__.py").write_text("raise ImportError('half installed')\n")
    sys.modules.pop("mycases", None)
    with pytest.raises(UsageError, match=r"entry point 'mine' \(mycases\) could not be imported(.|\n)*half installed"):
        user_cases.installed_cases()
    # ...but only for a run that asks for something only an installed package could provide.
    assert spec.build_spec(spec.RunRequest(workloads="matmul", backends="numpy", seed=1)).cases
    with pytest.raises(UsageError, match="half installed"):
        spec.build_spec(spec.RunRequest(workloads="pkg_cumsum", backends="numpy", seed=1))


def test_an_interpreter_whose_ttfr_worker_is_older_is_refused_up_front(tmp_path):
    """`--python`/`ttfr ab` arms: a worker whose jobs lack fields this ttfr sends (a user's
    case's, say) would fail every run; the interpreter check says so before anything runs."""
    fake = tmp_path / "old"
    (fake / "ttfr" / "child").mkdir(parents=True)
    (fake / "ttfr" / "__init__.py").write_text("")
    (fake / "ttfr" / "child" / "__init__.py").write_text("")
    (fake / "ttfr" / "child" / "worker.py").write_text("")
    (fake / "ttfr" / "child" / "job.py").write_text("FIELDS = (('mode', str, 'cold'), ('adapter', str, None))\n")
    with pytest.raises(UsageError, match=r"older ttfr worker(.|\n)*case_source"):
        worker_probe.check_worker_python(sys.executable, {"PYTHONPATH": str(fake)}, option="--b")
    worker_probe.check_worker_python(sys.executable)  # this ttfr's own worker passes


def test_the_interpreter_checks_message_is_redacted(tmp_path, monkeypatch):
    """What a refused interpreter printed reaches the terminal through the one redaction."""
    secret = "hf_" + "q" * 30
    shim = tmp_path / "leaky"
    shim.write_text('#!/bin/sh\necho "token HF_TOKEN=$HF_TOKEN" >&2\nexit 1\n')
    shim.chmod(0o755)
    monkeypatch.setenv("HF_TOKEN", secret)
    with pytest.raises(UsageError) as refused:
        worker_probe.check_worker_python(str(shim))
    assert secret not in str(refused.value) and "cannot import ttfr's worker" in str(refused.value)


_MISTAKES = {
    "inputs_raise": ("@case.inputs\ndef inputs(size, dtype, seed):\n    raise ValueError('boom')\n\n"
                     "@case.numpy\ndef build(np):\n    return lambda x: x.sum()\n"),
    "builder_raises": ("@case.inputs\ndef inputs(size, dtype, seed):\n    return [np.ones(size, dtype)]\n\n"
                       "@case.numpy\ndef build(np):\n    raise RuntimeError('bad builder')\n"),
    "returns_none": ("@case.inputs\ndef inputs(size, dtype, seed):\n    return [np.ones(size, dtype)]\n\n"
                     "@case.reference\ndef reference(x):\n    return [x * 2]\n\n"
                     "@case.numpy\ndef build(np):\n    return lambda x: None\n"),
    "shapes_differ": ("@case.inputs\ndef inputs(size, dtype, seed):\n    return [np.ones(size, dtype)]\n\n"
                      "@case.numpy\ndef build(np):\n    return lambda x: x * 2\n\n"
                      "@case.jax\ndef build_jax(jax):\n    return lambda x: (x * 2).sum()\n"),
    "values_differ": ("@case.inputs\ndef inputs(size, dtype, seed):\n    return [np.ones(size, dtype)]\n\n"
                      "@case.numpy\ndef build(np):\n    return lambda x: x * 2\n\n"
                      "@case.jax\ndef build_jax(jax):\n    return lambda x: x * 3\n"),
    "unchecked": ("@case.inputs\ndef inputs(size, dtype, seed):\n    return [np.ones(size, dtype)]\n\n"
                  "@case.numpy\ndef build(np):\n    return lambda x: x * 2\n"),
}  # fmt: skip


@pytest.mark.integration
@pytest.mark.skipif(not have("jax"), reason="needs jax")
def test_a_users_mistakes_are_said_plainly_and_point_at_their_lines(tmp_path):
    """An exception in @case.inputs or a builder names the part and the user's file:line (in the
    reason, and the case file holds only the user's frames); a function returning None says so;
    backends that disagree with no reference to judge them fail, and no reference is `not checked`
    (passed: null), never a pass."""
    files = []
    for name, body in _MISTAKES.items():
        path = tmp_path / f"{name}.py"
        path.write_text(f"import numpy as np\nfrom ttfr.cases import Case\n\ncase = Case({name!r}, sizes=(10,), "
                        f"dtypes=('float64',))\n\n{body}")  # fmt: skip
        files += ["--case-file", str(path)]
    out = tmp_path / "out"
    argv = [sys.executable, "-m", "ttfr", "run", "--out", str(out), *files, "--backends", "numpy,jax_jit_cpu",
            "--cold-runs", "1", "--cache-policy", "cold-cache", "--seed", "1", "--no-html"]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    assert done.returncode == 1, done.stdout + done.stderr
    (root,) = [p for p in out.iterdir() if p.is_dir()]
    assert validate_dir(root) == []

    def case(case_id):
        return json.loads((root / "cases" / f"{case_id}.json").read_text())

    inputs = case("numpy_inputs_raise_10_f64")
    assert inputs["status"] == "failed"
    assert "ValueError in @case.inputs at inputs_raise.py:8:5: boom" in inputs["reason"]
    (run,) = inputs["policies"]["cold-process/cold-cache"]["runs"]
    assert 'inputs_raise.py", line 8, in inputs' in run["traceback"] and "ttfr/" not in run["traceback"]
    builder = case("numpy_builder_raises_10_f64")
    assert "RuntimeError in your @case.numpy builder at builder_raises.py:12:5: bad builder" in builder["reason"]
    assert "in setup" not in builder["reason"]
    none = case("numpy_returns_none_10_f64")
    assert "returned None" in none["reason"] and "non-finite" not in none["reason"] and "shape" not in none["reason"]
    for backend in ("numpy", "jax_jit_cpu"):
        differ = case(f"{backend}_shapes_differ_10_f64")  # different sizes: the case's failed check, nothing else
        assert differ["status"] == "failed", differ["reason"]
        assert differ["reason"].startswith("result_mismatch: the backends' results differ in size (values: "
                                           "jax_jit_cpu 1, numpy 10)")  # fmt: skip
        assert differ["correctness"]["passed"] is False and differ["correctness"]["reference"] == "the case's other backends"
        values = case(f"{backend}_values_differ_10_f64")  # different norms: said, not failed (they may differ by design)
        assert values["status"] == "warn" and "the backends' results differ (L2 norms:" in values["reason"]
        assert values["correctness"]["passed"] is None
    unchecked = case("numpy_unchecked_10_f64")  # no reference and no other backend: not checked, never a pass
    assert unchecked["correctness"]["passed"] is None and unchecked["correctness"]["reference"] == "none"
    assert ok_unless_busy(unchecked)
    report = (root / "report.md").read_text()  # the user's frames, for each case that failed in their code
    section = report[report.index("## Your code's failures") :]
    assert "numpy_inputs_raise_10_f64" in section and 'inputs_raise.py", line 8, in inputs' in section
    assert "ttfr/child" not in section
    flat = "".join(ch for ch in done.stdout if not ch.isspace() and ch != "│")  # the table wraps its cells
    assert "@case.inputsatinputs_raise.py:8:5" in flat  # the terminal says it too


def test_a_case_files_import_timeout_gives_an_outer_alarm_back(tmp_path):
    """A test runner's (or the user's) own SIGALRM timer survives reading a case file."""
    import signal

    path = case_file(tmp_path)
    previous = signal.signal(signal.SIGALRM, lambda *_: None)
    signal.setitimer(signal.ITIMER_REAL, 100.0)
    try:
        user_cases.read([path], installed=False, timeout_s=30.0)
        left = signal.getitimer(signal.ITIMER_REAL)[0]
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert 90.0 < left <= 100.0


def test_pythons_own_library_below_the_case_files_folder_is_not_the_users_code(tmp_path, monkeypatch):
    """pyenv, conda or uv may keep the standard library under the user's home, beside a case file."""
    import sysconfig

    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "libmod.py").write_text("def explode():\n    raise ValueError('deep in the library')\n")
    case = tmp_path / "mine.py"
    case.write_text(f"import sys\nsys.path.insert(0, {str(lib)!r})\nimport libmod\n\ndef call():\n    libmod.explode()\n")
    monkeypatch.setattr(sysconfig, "get_paths", lambda *a, **k: {"stdlib": str(lib)})
    namespace = {}
    exec(compile(case.read_text(), str(case), "exec"), namespace)  # noqa: S102 - the test's own file
    try:
        namespace["call"]()
    except ValueError as exc:
        frames = user_case.users_frames(exc.__traceback__, str(case))
    assert [Path(f.filename).name for f in frames] == ["mine.py"]
