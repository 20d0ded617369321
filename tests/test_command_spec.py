"""Users' commands (`ttfr run --command "python train.py"`): what is checked before anything
runs (parsing, naming, options), the spec and its plan.json (round trip, redaction, resume
refused), the plan's tasks, the scheduler's command path with fake executors (no process is
started), cache verification by directory entries, case results and the report's section."""

from __future__ import annotations

import json
import os
import shlex
import stat
import sys
import time
from pathlib import Path

import pytest
from conftest import make_case

from ttfr.measure.executors import Executors
from ttfr.analyse import case_result
from ttfr.artifacts import store as artifacts
from ttfr.artifacts.reader import validate_dir
from ttfr.artifacts.result_dir import ResultDir
from ttfr.commands import cli
from ttfr.pipeline import suite as suite_run
from ttfr.errors import UsageError
from ttfr.exit_codes import EXIT_USAGE
from ttfr.measure import cache, catalog, user_commands
from ttfr.measure.cache import CacheDirs
from ttfr.measure.journal import Journal
from ttfr.measure.plan import CHECK, COLD, PRIME, WARM, build_plan
from ttfr.model.policies import COLD_CACHE, COLD_POLICIES, WARM_CACHE, WARM_PROCESS
from ttfr.measure.scheduler import Scheduler
from ttfr.measure.spawn import RunResult
from ttfr.measure.resume import Named
from ttfr.measure.spec import RunSpec, RunRequest, build_spec
from ttfr.redaction import REDACTED
from ttfr.model.base import decode, encode
from ttfr.model.plan import PlanSpec
from ttfr.model.journal import JournalEntry, Rusage
from ttfr.model.record import RunRecord
from ttfr.report import commands_md

PY = shlex.quote(sys.executable)  # a program that is surely on this machine
SECRET = "abc123secret"
NOWHERE = "ttfr-no-such-program-4f1c"


def _always_available(_backend, _workload=None):
    return None


def command_plan(**kwargs):
    kwargs.setdefault("commands", f"{PY} train.py")
    kwargs.setdefault("cold_runs", 2)
    kwargs.setdefault("seed", 5)
    return build_plan(build_spec(RunRequest(**kwargs)), _always_available)


def _no_worker(*_args, **_kwargs):
    raise AssertionError("a command case must never reach the worker executor")


# --- user_commands: split / slug / check_name / check_pattern / parse -------------------------


@pytest.mark.parametrize("text", ["", "   ", "\t\n"])
def test_an_empty_command_is_refused_with_an_example(text):
    with pytest.raises(UsageError, match="empty value") as info:
        user_commands.split(text)
    assert "--command" in str(info.value)


def test_unbalanced_quotes_are_refused_saying_how_it_is_split():
    with pytest.raises(UsageError, match="split like a shell would"):
        user_commands.split(f'{PY} "train.py')


def test_a_program_not_on_path_is_refused_pointing_at_bash_c():
    with pytest.raises(UsageError) as info:
        user_commands.split(f"{NOWHERE} --flag")
    message = str(info.value)
    assert NOWHERE in message and "not on PATH" in message and "bash -c" in message


def test_a_shell_builtin_or_pipeline_is_not_a_program():
    # `cd` is a shell built-in and no shell runs the command: refused before anything runs
    with pytest.raises(UsageError, match="bash -c"):
        user_commands.split("cd /tmp")


def test_a_path_that_is_not_an_executable_file_is_refused(tmp_path):
    script = tmp_path / "train.sh"
    script.write_text("#!/bin/sh\necho hi\n")
    script.chmod(stat.S_IRUSR | stat.S_IWUSR)  # not executable
    with pytest.raises(UsageError, match="is not an executable file"):
        user_commands.split(str(script))
    with pytest.raises(UsageError, match="is not an executable file"):
        user_commands.split(str(tmp_path))  # a directory
    with pytest.raises(UsageError, match="is not an executable file"):
        user_commands.split(str(tmp_path / "missing.sh"))
    script.chmod(stat.S_IRWXU)
    assert user_commands.split(f"{script} --epochs 1") == (str(script), "--epochs", "1")


def test_split_keeps_quoted_arguments_whole():
    assert user_commands.split(f"{PY} train.py --name 'two words' -x=1") == (
        sys.executable,
        "train.py",
        "--name",
        "two words",
        "-x=1",
    )


def test_a_nul_byte_in_an_argument_is_refused():
    with pytest.raises(UsageError, match="NUL"):
        user_commands.split(f"{PY} train.py a\0b")


def test_a_program_validated_with_a_tilde_is_the_program_that_runs(tmp_path, monkeypatch):
    home = tmp_path / "home"
    (home / "bin").mkdir(parents=True)
    program = home / "bin" / "train"
    program.write_text("#!/bin/sh\nexit 0\n")
    program.chmod(stat.S_IRWXU)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(tmp_path)
    argv = user_commands.split("~/bin/train")
    # what Popen (no shell) is given must be an executable file as written
    assert os.path.isfile(argv[0]) and os.access(argv[0], os.X_OK)


@pytest.mark.parametrize(
    ("argv", "name"),
    [
        (["python", "fit_v2.py"], "fit_v2"),
        (["python", "-u", "experiments/Train-Me.PY", "--epochs", "1"], "train_me"),
        (["python", "-m", "pkg.mod"], "mod"),
        (["python", "-m", "trainer", "--lr", "0.1"], "trainer"),
        (["pytest"], "pytest"),
        (["/usr/bin/env"], "env"),
        (["/opt/bin/Python3.11"], "python3_11"),
        (["python", "2fit.py"], "cmd_2fit"),  # a case name starts with a letter
        (["python", "custom_train.py"], "train"),  # `custom` is reserved in case ids
        (["python", "my_custom_run.py"], "my_run"),
        (["python", "custom.py"], "cmd"),
        (["bash", "run.sh"], "run"),
        (["python", "--flag.py", "t.py"], "t"),  # an option is never the script
    ],
)
def test_slug_names_a_command_after_its_script_module_or_program(argv, name):
    slug = user_commands.slug(argv)
    assert slug == name
    assert user_commands.check_name(slug) == slug  # every slug is a valid case name


def test_a_long_slug_is_cut_to_a_valid_name():
    slug = user_commands.slug(["python", "x" * 100 + ".py"])
    assert len(slug) <= 40 and user_commands.check_name(slug) == slug
    digits = user_commands.slug(["python", "9" * 100 + ".py"])
    assert digits.startswith("cmd_") and user_commands.check_name(digits) == digits


def test_a_scripts_own_dash_m_option_does_not_name_the_case():
    assert user_commands.slug(["python", "train.py", "-m", "fast"]) == "train"


@pytest.mark.parametrize("name", ["Train", "1train", "train__x", "_train", "train_", "tr-ain", "", "a" * 65, None, 3])
def test_check_name_refuses_what_cannot_be_a_case_name(name):
    with pytest.raises(UsageError, match="--command-name"):
        user_commands.check_name(name)


@pytest.mark.parametrize("name", ["custom", "my_custom", "custom_run"])
def test_check_name_refuses_the_reserved_word_custom(name):
    with pytest.raises(UsageError, match="reserved"):
        user_commands.check_name(name)


def test_check_name_accepts_a_plain_name():
    assert user_commands.check_name("fit_v2") == "fit_v2"
    assert user_commands.check_name("a" * 64) == "a" * 64


def test_check_pattern():
    assert user_commands.check_pattern(r"loss=\d") == r"loss=\d"
    with pytest.raises(UsageError, match="empty pattern"):
        user_commands.check_pattern("")
    with pytest.raises(UsageError, match="not a regular expression"):
        user_commands.check_pattern("loss=(")
    for empty_matching in ("x*", "^", "$", "(?:)", "a?|b"):
        with pytest.raises(UsageError, match="matches an empty line"):
            user_commands.check_pattern(empty_matching)


def test_parse_names_each_command_and_keeps_its_options(tmp_path):
    commands = user_commands.parse([f"{PY} fit_v2.py --epochs 1", f"{PY} -m pkg.mod"], first_result="loss=", cwd=tmp_path)
    assert [c.name for c in commands] == ["fit_v2", "mod"]
    assert commands[0].argv == (sys.executable, "fit_v2.py", "--epochs", "1")
    assert all(c.first_result == "loss=" and not c.mark and c.prepare is None for c in commands)
    assert all(c.cwd == str(tmp_path.resolve()) for c in commands)
    assert commands[0].first_result_by == "output"
    assert user_commands.parse("true")[0].first_result_by == "exit"
    assert user_commands.parse("true", mark=True)[0].first_result_by == "mark"
    assert user_commands.parse(()) == ()


def test_duplicate_auto_names_get_their_folder_then_a_number():
    commands = user_commands.parse([f"{PY} a/run.py", f"{PY} b/run.py", f"{PY} c/run.py"])
    assert [c.name for c in commands] == ["a_run", "b_run", "c_run"]
    same = user_commands.parse([f"{PY} a/run.py", f"{PY} a/run.py --fast"])
    assert [c.name for c in same] == ["a_run", "a_run_2"]


def test_python_dash_c_commands_are_named_by_their_code_not_by_number():
    """Two `python -c` commands were command_python_1_f64 and command_python_2_1_f64."""
    commands = user_commands.parse([f"{PY} -c 'import numpy'", f"{PY} -c 'import json, os'",
                                    f"{PY} -c 'import sys; sys.exit(0)'"])  # fmt: skip
    assert [c.name for c in commands] == ["import_numpy", "import_json_os", "import_sys_exit"]


def test_an_auto_name_never_takes_an_explicit_one():
    commands = user_commands.parse([f"{PY} x.py", f"{PY} train.py"], names=["train"])
    assert [c.name for c in commands] == ["train", "train_2"]


def test_explicit_names_apply_in_order_and_the_rest_are_slugs():
    commands = user_commands.parse([f"{PY} x.py", f"{PY} y.py"], names=["first"])
    assert [c.name for c in commands] == ["first", "y"]


def test_duplicate_explicit_names_are_refused():
    with pytest.raises(UsageError, match="given to two commands"):
        user_commands.parse([f"{PY} a.py", f"{PY} b.py"], names=["same", "same"])


def test_more_names_than_commands_are_refused():
    with pytest.raises(UsageError, match="2 --command-name for 1 --command"):
        user_commands.parse([f"{PY} a.py"], names=["a", "b"])


def test_an_invalid_explicit_name_is_refused():
    with pytest.raises(UsageError, match="--command-name"):
        user_commands.parse([f"{PY} a.py"], names=["Bad Name"])


def test_prepare_counts():
    two = [f"{PY} a.py", f"{PY} b.py"]
    assert [c.prepare for c in user_commands.parse(two)] == [None, None]
    shared = user_commands.parse(two, prepare="true")  # a bare string is one --prepare
    assert [c.prepare for c in shared] == [("true",), ("true",)]
    own = user_commands.parse(two, prepare=["true", "sh -c 'exit 0'"])
    assert [c.prepare for c in own] == [("true",), ("sh", "-c", "exit 0")]
    three = [*two, f"{PY} c.py"]
    with pytest.raises(UsageError, match="2 --prepare for 3 --command"):
        user_commands.parse(three, prepare=["true", "true"])
    with pytest.raises(UsageError, match="3 --prepare for 2 --command"):
        user_commands.parse(two, prepare=["true", "true", "true"])


def test_a_prepare_is_checked_like_a_command():
    with pytest.raises(UsageError, match="--prepare") as info:
        user_commands.parse([f"{PY} a.py"], prepare=[f"{NOWHERE} x"])
    assert "bash -c" in str(info.value)
    with pytest.raises(UsageError, match="--prepare was given an empty value"):
        user_commands.parse([f"{PY} a.py"], prepare=[""])


def test_first_result_and_mark_together_are_refused():
    with pytest.raises(UsageError, match="choose one"):
        user_commands.parse([f"{PY} a.py"], first_result="loss=", mark=True)


def test_a_bad_first_result_regex_is_refused_through_parse():
    with pytest.raises(UsageError, match="not a regular expression"):
        user_commands.parse([f"{PY} a.py"], first_result="[")
    with pytest.raises(UsageError, match="matches an empty line"):
        user_commands.parse([f"{PY} a.py"], first_result=".*")


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"names": ["x"]}, "--command-name"),
        ({"first_result": "loss="}, "--first-result"),
        ({"first_result": ""}, "--first-result"),
        ({"mark": True}, "--first-result-mark"),
        ({"prepare": ["true"]}, "--prepare"),
    ],
)
def test_command_options_without_a_command_are_refused(options, named):
    with pytest.raises(UsageError, match="--command") as info:
        user_commands.parse((), **options)
    assert named in str(info.value)


def test_command_options_without_a_command_are_refused_by_build_spec():
    with pytest.raises(UsageError, match="--first-result"):
        build_spec(RunRequest(workloads="matmul", backends="numpy", first_result="loss="))


# --- build_spec ------------------------------------------------------------------------------


def test_build_spec_makes_one_command_case_per_command_under_the_cold_policies():
    spec = build_spec(RunRequest(commands=[f"{PY} train.py", f"{PY} eval.py"], first_result="loss="))
    assert sorted(c.id for c in spec.cases) == ["command_eval_1_f64", "command_train_1_f64"]
    assert all(c.backend == catalog.COMMAND and c.workload_info.command for c in spec.cases)
    assert spec.policies == COLD_POLICIES
    assert WARM_PROCESS not in spec.policies
    assert spec.command("train").argv == (sys.executable, "train.py")
    assert spec.command("eval").first_result == "loss="
    assert {c.name for c in spec.commands} == {"train", "eval"}


def test_build_spec_keeps_one_cold_policy_when_asked():
    spec = build_spec(RunRequest(commands=f"{PY} train.py", policies="cold-cache"))
    assert spec.policies == (COLD_CACHE,)
    spec = build_spec(RunRequest(commands=f"{PY} train.py", policies=["warm-cache"]))
    assert spec.policies == (WARM_CACHE,)


@pytest.mark.parametrize("policies", ["warm-process", "all", "warm", "cold-cache,warm-process"])
def test_a_command_has_no_warm_process_policy(policies):
    with pytest.raises(UsageError) as info:
        build_spec(RunRequest(commands=f"{PY} train.py", policies=policies))
    assert info.value.exit_code == EXIT_USAGE == 2
    message = str(info.value)
    assert WARM_PROCESS in message
    assert all(p in message for p in COLD_POLICIES)  # it names the valid choices


def test_the_cli_refuses_warm_process_for_a_command_with_exit_2(tmp_path, capsys):
    out = tmp_path / "out"
    code = cli.main(["run", "--command", f"{PY} train.py", "--cache-policy", "all", "--out", str(out)])
    assert code == EXIT_USAGE
    err = capsys.readouterr().err
    assert "warm-process" in err and COLD_CACHE in err and WARM_CACHE in err
    assert not out.exists()  # refused before anything was written


@pytest.mark.parametrize(
    ("option", "value", "named"),
    [
        ("workloads", "matmul", "--workloads"),
        ("cases", "numpy_matmul_512_f32", "--cases"),
        ("case_files", "cases.py", "--case-file"),
        ("python", sys.executable, "--python"),
        ("backends", "numpy", "--backends"),
        ("sizes", "64", "--sizes"),
        ("dtypes", "f32", "--dtypes"),
        ("workspace", "ws.json", "--workspace"),
    ],
)
def test_a_command_run_does_not_mix_with_ttfrs_cases(option, value, named):
    with pytest.raises(UsageError, match="--command measures programs") as info:
        build_spec(RunRequest(commands=f"{PY} train.py", **{option: value}))
    assert named in str(info.value)


@pytest.mark.parametrize(("option", "value"), [("case_files", "cases.py"), ("workspace_presets", "simple")])
def test_the_mixing_error_names_options_the_cli_has(option, value):
    with pytest.raises(UsageError) as info:
        build_spec(RunRequest(commands=f"{PY} train.py", **{option: value}))
    assert f"--{option.replace('_', '-')}" not in str(info.value)


def test_a_command_named_like_a_builtin_workload_is_refused_with_a_hint():
    with pytest.raises(UsageError, match="built-in workload") as info:
        build_spec(RunRequest(commands=f"{PY} train.py", command_names=["matmul"]))
    assert "--command-name" in str(info.value)
    with pytest.raises(UsageError, match="--command-name"):  # its script's name, by default
        build_spec(RunRequest(commands=f"{PY} matmul.py"))
    with pytest.raises(UsageError, match="--command-name"):  # a loop family's name too
        build_spec(RunRequest(commands=f"{PY} train.py", command_names=["sweep_mlp"]))
    assert catalog.WORKLOADS["matmul"].command is False  # the built-in is untouched


def test_a_command_spec_honours_the_run_counts_and_shards():
    spec = build_spec(RunRequest(commands=[f"{PY} a.py", f"{PY} b.py"], cold_runs=3, timeout=12, shard="1/2", seed=4))
    assert spec.cold_runs == 3 and spec.timeout_s == 12.0
    assert [c.id for c in spec.cases] == ["command_a_1_f64"]
    assert [c.name for c in spec.commands] == ["a"]  # the other shard's command is not recorded


# --- RunSpec recorded / from_recorded, plan.json, redaction, resume -------------------------------


def _read_back(spec):
    """A RunSpec's plan.json `spec` as another process reads it: written as JSON, decoded as its type."""
    return decode(json.loads(json.dumps(encode(spec.recorded()))), PlanSpec)


def test_run_spec_round_trips_its_commands():
    spec = build_spec(RunRequest(commands=[f"{PY} train.py --epochs 1", f"{PY} eval.py"], command_names=["fit"],
                      first_result=r"loss=\d", prepare=["true"], seed=7))  # fmt: skip
    stored = _read_back(spec)
    data = encode(stored)
    assert data["commands"][0] == {
        "name": "fit",
        "argv": [sys.executable, "train.py", "--epochs", "1"],
        "cwd": str(Path.cwd().resolve()),
        "first_result": r"loss=\d",
        "mark": False,
        "prepare": ["true"],
        "redacted": False,
        "stop_at_first_result": False,
        # the interpreter is hashed (train.py does not exist here, so it is not)
        "files": [{"path": str(Path(sys.executable).resolve()), "sha256": data["commands"][0]["files"][0]["sha256"]}],
    }
    assert data["cases"] == ["command_eval_1_f64", "command_fit_1_f64"]
    back = RunSpec.from_recorded(stored)  # as another process reads plan.json: from the commands it records
    assert back == spec
    assert back.command("fit").prepare == ("true",)
    assert {c.workload: c.workload_info.command for c in back.cases} == {"fit": True, "eval": True}
    assert "fit" not in catalog.WORKLOADS  # nothing leaks into the built-in catalogue


def test_a_mark_command_round_trips():
    spec = build_spec(RunRequest(commands=f"{PY} train.py", first_result_mark=True, seed=1))
    back = RunSpec.from_recorded(_read_back(spec))
    assert back.command("train").mark and back.command("train").first_result_by == "mark"


def test_plan_json_of_a_command_run_validates_and_resumes(tmp_path):
    spec = build_spec(RunRequest(commands=f"{PY} train.py", first_result="loss=", prepare="true", seed=3))
    result_dir = suite_run.start(spec, tmp_path / "out", ["ttfr", "run"])
    result_dir.unlock()
    plan = json.loads(result_dir.plan.read_text())
    assert artifacts.schema_errors(plan, artifacts.PLAN_SCHEMA) == []
    assert plan["spec"]["commands"][0]["argv"] == [sys.executable, "train.py"]
    assert plan["spec"]["commands"][0]["redacted"] is False
    named = Named(commands=(f"{PY} train.py",), prepare=("true",))  # a resume names the programs it runs
    resumed = suite_run._resumable_spec(ResultDir.open(result_dir.root), named)
    assert resumed.commands == spec.commands
    assert resumed.cases == spec.cases and resumed.policies == spec.policies


@pytest.mark.parametrize(
    ("command", "prepare"),
    [
        (f"{PY} t.py --api-token {SECRET}", ()),
        (f"{PY} t.py API_KEY={SECRET}", ()),
        (f"{PY} t.py --password={SECRET}", ()),
        (f"{PY} t.py", [f"env HF_TOKEN={SECRET} true"]),
    ],
)
def test_a_command_with_a_secret_is_recorded_redacted(command, prepare):
    spec = build_spec(RunRequest(commands=command, prepare=prepare, seed=1))
    recorded = spec.recorded().commands[0]
    assert recorded.redacted is True
    assert REDACTED in json.dumps(encode(recorded))
    assert SECRET not in json.dumps(encode(spec.recorded()))
    assert SECRET not in spec.commands[0].text and SECRET not in spec.commands[0].describe()
    # what runs is still the command as given
    assert SECRET in " ".join(spec.commands[0].argv + (spec.commands[0].prepare or ()))


def test_a_command_without_a_secret_is_not_marked_redacted():
    spec = build_spec(RunRequest(commands=f"{PY} t.py --epochs 5 --lr=0.1 --out run1", prepare="true", seed=1))
    recorded = spec.recorded().commands[0]
    assert recorded.redacted is False
    assert recorded.argv == [sys.executable, "t.py", "--epochs", "5", "--lr=0.1", "--out", "run1"]
    assert recorded.prepare == ["true"]


def test_a_redacted_command_cannot_be_resumed(tmp_path, capsys):
    spec = build_spec(RunRequest(commands=f"{PY} t.py --api-token {SECRET}", seed=2))
    result_dir = suite_run.start(spec, tmp_path / "out", ["ttfr", "run"])
    result_dir.unlock()
    raw = result_dir.plan.read_bytes()
    assert SECRET.encode() not in raw
    plan = json.loads(raw)
    assert artifacts.schema_errors(plan, artifacts.PLAN_SCHEMA) == []
    assert plan["spec"]["commands"][0]["redacted"] is True
    stored = RunSpec.from_recorded(decode(plan["spec"], PlanSpec))
    assert stored.commands[0].redacted and REDACTED in stored.commands[0].argv

    with pytest.raises(UsageError, match="held a secret"):
        suite_run._resumable_spec(ResultDir.open(result_dir.root), Named())
    capsys.readouterr()
    code = cli.main(["run", "--resume", str(result_dir.root)])
    assert code == EXIT_USAGE
    err = capsys.readouterr().err
    assert "held a secret" in err and SECRET not in err
    assert not result_dir.journal.exists()  # nothing ran
    # the refusal released the directory's lock: a second try is refused the same way, not as "being written"
    assert cli.main(["run", "--resume", str(result_dir.root)]) == EXIT_USAGE
    assert "held a secret" in capsys.readouterr().err


def test_the_manifest_does_not_record_a_commands_secret(tmp_path):
    text = f"{PY} t.py --api-token {SECRET}"
    spec = build_spec(RunRequest(commands=text, seed=2))
    result_dir = suite_run.start(spec, tmp_path / "out", ["ttfr", "run", "--command", text])
    result_dir.unlock()
    assert SECRET.encode() not in result_dir.plan.read_bytes()
    assert SECRET.encode() not in result_dir.manifest.read_bytes()


# --- plan ------------------------------------------------------------------------------------


def test_a_command_plan_has_no_check_or_warm_tasks():
    plan = command_plan(commands=[f"{PY} a.py", f"{PY} b.py"], cold_runs=3)
    kinds = {t.kind for t in plan.tasks}
    assert kinds == {COLD}
    assert CHECK not in kinds and WARM not in kinds
    for case in plan.spec.cases:
        tasks = plan.tasks_for(case.id)
        assert len(tasks) == 2 * 3  # cold runs per cold policy, nothing else
        producers = [t for t in tasks if t.makes_template]
        assert len(producers) == 1
        assert producers[0].policy == COLD_CACHE and producers[0].index == 0 and producers[0].round == 0
        assert all(t.measured for t in tasks)
        assert not any(t.runs_check for t in tasks)
    assert plan.unavailable == {}


def test_a_warm_cache_only_command_plan_primes_its_template():
    plan = command_plan(policies="warm-cache")
    primes = [t for t in plan.tasks if t.kind == PRIME]
    assert len(primes) == 1 and primes[0].makes_template and primes[0].round == 0
    assert not primes[0].measured
    measured = [t for t in plan.tasks if t.measured]
    assert len(measured) == 2 and all(t.policy == WARM_CACHE and t.uses_template for t in measured)
    assert {t.kind for t in plan.tasks} == {PRIME, COLD}


def test_a_cold_cache_only_command_plan_needs_no_template():
    plan = command_plan(policies="cold-cache")
    assert not any(t.makes_template for t in plan.tasks)
    assert {(t.kind, t.policy) for t in plan.tasks} == {(COLD, COLD_CACHE)}
    assert len(plan.tasks) == 2


def test_the_real_availability_probe_accepts_a_command():
    plan = build_plan(build_spec(RunRequest(commands=f"{PY} train.py", seed=1)))
    assert plan.unavailable == {} and plan.tasks


# --- scheduler with fake executors -----------------------------------------------------------


def command_record(spawn_ns: int, first_ns: int, line: str | None = None, by: str = "exit") -> dict:
    """A record like measure/command_run.py builds."""
    return {
        "outcome": "ok",
        "reason": None,
        "marks_ns": {"first": first_ns},
        "rusage_self": {"max_rss_bytes": 50 << 20},
        "first_result": {"by": by, "line": line},
    }


class FakeCommand:
    """A command executor that starts nothing: like a program that compiles, it writes one file into
    its JAX cache directory when that is empty; `decide(call)` may answer instead."""

    def __init__(self, log=None, decide=None):
        self.calls: list[dict] = []
        self.log = log if log is not None else []
        self.decide = decide

    def __call__(self, command, env, timeout_s):
        jax_dir = env["JAX_COMPILATION_CACHE_DIR"]
        seen = sorted(os.listdir(jax_dir))
        call = {"command": command, "env": dict(env), "timeout_s": timeout_s, "seen": seen}
        self.calls.append(call)
        self.log.append(("command", command.name))
        if self.decide:
            decided = self.decide(call)
            if decided is not None:
                return decided
        if not seen:
            with open(os.path.join(jax_dir, "executable-1"), "wb") as f:
                f.write(b"x")
        spawn = time.monotonic_ns()
        return RunResult("ok", None, decode(command_record(spawn, spawn + 1_000), RunRecord), spawn, spawn + 2_000, 0,
                         Rusage(user_s=0.1, sys_s=0.0, max_rss_bytes=60 << 20, involuntary_switches=0))  # fmt: skip


class FakePrepare:
    def __init__(self, log, fail_at=()):
        self.calls: list[dict] = []
        self.log = log
        self.fail_at = set(fail_at)

    def __call__(self, command, env, timeout_s):
        number = len(self.calls)
        self.calls.append({"command": command, "env": dict(env), "timeout_s": timeout_s})
        self.log.append(("prepare", command.name))
        if number in self.fail_at:
            return f"--prepare exited with code 3; its output ends: no disk {number}"
        return None


def schedule(plan, tmp_path, command=None, prepare=None, base_env=None):
    log = []
    command = command or FakeCommand(log)
    prepare = prepare or FakePrepare(command.log)
    journal = Journal(tmp_path / "journal.jsonl")
    executors = Executors(worker=_no_worker, command=command, prepare=prepare)
    scheduler = Scheduler(plan, journal, tmp_path / "scratch", executors,
                          base_env={"PATH": os.environ.get("PATH", "")} if base_env is None else base_env)  # fmt: skip
    scheduler.run()
    return [encode(e) for e in journal.entries()], scheduler, command, prepare  # the journal's JSON


def test_the_command_executor_gets_the_specs_command_and_the_cache_environment(tmp_path):
    plan = command_plan(first_result="loss=", timeout=30)
    entries, _scheduler, command, _prepare = schedule(plan, tmp_path)
    assert [e["task"] for e in entries] == [t.key for t in plan.tasks]
    assert len(command.calls) == len(plan.tasks)
    case_id = plan.spec.cases[0].id
    root = tmp_path / "scratch" / "cache" / case_id
    for call in command.calls:
        assert call["command"] is plan.spec.command("train")
        env = call["env"]
        for variable, sub in cache.CACHE_SUBDIRS.items():
            assert env[variable] == str(root / sub)
        assert env["JAX_COMPILATION_CACHE_DIR"] == str(root / "jax")
        assert "TORCHINDUCTOR_CACHE_DIR" in env and "TRITON_CACHE_DIR" in env
        assert env["PYTHONUNBUFFERED"] == "1"
        assert env["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] == "0"
        assert call["timeout_s"] == 30.0


def test_a_users_pythonunbuffered_is_kept(tmp_path):
    plan = command_plan(policies="cold-cache", cold_runs=1)
    _entries, _s, command, _p = schedule(plan, tmp_path, base_env={"PYTHONUNBUFFERED": "0", "PATH": "/bin"})
    assert command.calls[0]["env"]["PYTHONUNBUFFERED"] == "0"
    assert command.calls[0]["env"]["PATH"] == "/bin"


def test_cache_state_and_by_directory_counts_per_policy(tmp_path):
    plan = command_plan(cold_runs=2)
    entries, _scheduler, command, _prepare = schedule(plan, tmp_path)
    assert all(e["outcome"] == "ok" for e in entries)
    for task, call, entry in zip(plan.tasks, command.calls, entries):
        assert entry["task"] == task.key
        if task.policy == COLD_CACHE:
            assert call["seen"] == [], task.key  # emptied before every cold-cache run
            assert entry["cache_dir"]["entries_before"] == 0 and entry["cache_dir"]["entries_after"] == 1
            assert entry["cache_dir"]["restored_template"] is False
            assert entry["cache_dir"]["by_directory"] == {"jax": [0, 1]}
        else:
            assert call["seen"] == ["executable-1"], task.key  # restored from the template
            assert entry["cache_dir"]["entries_before"] == 1 and entry["cache_dir"]["entries_after"] == 1
            assert entry["cache_dir"]["restored_template"] is True
            assert entry["cache_dir"]["by_directory"] == {"jax": [1, 1]}
    template = CacheDirs(tmp_path / "scratch", plan.spec.cases[0].id).template
    assert (template / "jax" / "executable-1").is_file()


def test_files_in_several_cache_directories_are_counted_per_directory(tmp_path):
    def decide(call):
        if call["seen"]:
            return None
        env = call["env"]
        for variable, count in (("TORCHINDUCTOR_CACHE_DIR", 2), ("TRITON_CACHE_DIR", 3)):
            nested = os.path.join(env[variable], "sub", "dir")
            os.makedirs(nested)
            for i in range(count):
                with open(os.path.join(nested, f"f{i}"), "wb") as f:
                    f.write(b"x")
        return None  # and the default: one file in jax

    plan = command_plan(policies="cold-cache", cold_runs=1)
    command = FakeCommand(decide=decide)
    entries, *_ = schedule(plan, tmp_path, command=command)
    (entry,) = entries
    assert entry["cache_dir"]["by_directory"] == {"jax": [0, 1], "inductor": [0, 2], "triton": [0, 3]}
    assert entry["cache_dir"]["entries_after"] == 6


def test_prepare_runs_before_each_command_run_with_the_same_environment(tmp_path):
    plan = command_plan(prepare="true")
    log = []
    command = FakeCommand(log)
    prepare = FakePrepare(log)
    entries, *_ = schedule(plan, tmp_path, command=command, prepare=prepare)
    assert log == [("prepare", "train"), ("command", "train")] * len(plan.tasks)
    for before, run in zip(prepare.calls, command.calls):
        assert before["command"] is run["command"] is plan.spec.command("train")
        assert before["env"] == run["env"] and before["timeout_s"] == run["timeout_s"]
    assert all(e["outcome"] == "ok" for e in entries)


def test_a_failed_prepare_fails_its_run_without_spawning_the_command(tmp_path):
    plan = command_plan(prepare="true", cold_runs=2)
    failing = next(i for i, t in enumerate(plan.tasks) if t.policy == COLD_CACHE and t.index == 1)
    log = []
    command = FakeCommand(log)
    prepare = FakePrepare(log, fail_at=[failing])
    entries, scheduler, *_ = schedule(plan, tmp_path, command=command, prepare=prepare)
    assert len(entries) == len(plan.tasks)
    failed = entries[failing]
    assert failed["task"] == plan.tasks[failing].key
    assert failed["outcome"] == "error"
    assert failed["reason"] == f"--prepare exited with code 3; its output ends: no disk {failing}"
    assert failed["record"] is None and failed["exit_code"] is None and failed["reaped_ns"] is None
    assert len(command.calls) == len(plan.tasks) - 1  # that run's program never started
    assert log[2 * failing : 2 * failing + 2] == [("prepare", "train"), ("prepare", "train")]
    assert scheduler.stopped == {}  # not a gate: the case's other runs went on
    assert [e["outcome"] for i, e in enumerate(entries) if i != failing] == ["ok"] * (len(plan.tasks) - 1)


def test_a_failed_prepare_of_the_template_producer_stops_the_case(tmp_path):
    plan = command_plan(prepare="true")
    assert plan.tasks[0].makes_template
    command = FakeCommand()
    prepare = FakePrepare(command.log, fail_at=[0])
    entries, scheduler, *_ = schedule(plan, tmp_path, command=command, prepare=prepare)
    assert command.calls == []
    assert len(entries) == 1 and entries[0]["outcome"] == "error"
    reason = "--prepare exited with code 3; its output ends: no disk 0"
    assert scheduler.stopped == {plan.spec.cases[0].id: reason}
    (result,) = case_result.case_results(plan, typed(entries))
    assert result.status == "failed" and reason in result.reason


def test_every_run_failing_its_prepare_fails_the_case_with_the_prepares_reason(tmp_path):
    plan = command_plan(prepare="true", policies="cold-cache", cold_runs=2)
    command = FakeCommand()
    prepare = FakePrepare(command.log, fail_at=[0, 1])
    entries, *_ = schedule(plan, tmp_path, command=command, prepare=prepare)
    assert command.calls == [] and [e["outcome"] for e in entries] == ["error", "error"]
    (result,) = case_result.case_results(plan, typed(entries))
    assert artifacts.schema_errors(encode(result), case_result.CASE_SCHEMA) == []
    result = encode(result)
    assert result["status"] == "failed"
    assert "--prepare exited with code 3" in result["reason"]
    assert result["policies"][COLD_CACHE]["summary"]["ttfr_s"] is None


def test_a_warm_cache_only_plan_primes_through_the_command_executor(tmp_path):
    plan = command_plan(policies="warm-cache", prepare="true")
    entries, _scheduler, command, prepare = schedule(plan, tmp_path)
    assert [e["kind"] for e in entries] == [PRIME, COLD, COLD]
    assert entries[0]["cache_dir"]["by_directory"] == {"jax": [0, 1]}
    assert all(e["cache_dir"]["restored_template"] for e in entries[1:])
    assert len(command.calls) == len(prepare.calls) == 3


# --- cache verification by directory entries -------------------------------------------------


def verify(policy, before, after):
    return cache.verify(policy, True, None, before, after, catalog.DIRECTORY_ENTRIES)


def test_cold_cache_by_directory_entries():
    ok = verify(COLD_CACHE, 0, 4)
    assert ok.verdict == "verified" and ok.flags == [] and ok.written == 4
    nothing = verify(COLD_CACHE, 0, 0)
    assert nothing.verdict == "flagged" and nothing.flags == ["cache_not_written"]
    assert "elsewhere" in nothing.note
    dirty = verify(COLD_CACHE, 2, 5)
    assert dirty.verdict == "flagged" and dirty.flags == ["cold_cache_not_empty"]


def test_warm_cache_by_directory_entries():
    ok = verify(WARM_CACHE, 3, 3)
    assert ok.verdict == "verified" and ok.flags == [] and ok.written == 0
    grew = verify(WARM_CACHE, 3, 5)
    assert grew.verdict == "flagged" and grew.flags == ["warm_cache_grew"] and grew.written == 2
    assert "2 new cache file" in grew.note
    empty = verify(WARM_CACHE, 0, 2)
    assert empty.verdict == "flagged" and "warm_cache_empty" in empty.flags


def test_an_unmeasured_run_is_not_applicable_by_directory_entries():
    result = verify(None, 0, 3)
    assert result.verdict == "not_applicable" and result.flags == []


def test_directory_entries_ignore_counters_and_need_none():
    # no counters (a program has none ttfr reads): not `unverified`
    assert verify(COLD_CACHE, 0, 1).verdict == "verified"
    assert "hits" not in encode(verify(COLD_CACHE, 0, 1))


# --- case results and the report's Commands section ------------------------------------------

RUSAGE = {"user_s": 0.3, "sys_s": 0.1, "max_rss_bytes": 90 << 20, "involuntary_switches": 1}
HOST = {
    "load_average": [0.1, 0.1, 0.1],
    "cpu_pressure_avg10": None,
    "steal_fraction": None,
    "started_at": "2025-01-01T00:00:00+00:00",
    "runnable_start": [1, 100],
    "runnable_end": [1, 100],
    "cpu_pressure_stall_s": None,
    "usable_cores": 4,
    "machine_busy_s": 0.4,  # what the run itself used: nothing else ran
}


def typed(entries) -> list[JournalEntry]:
    """Entries as analysis gets them (fake_entries gives their JSON; a journal, typed ones)."""
    return [decode(entry, JournalEntry) if isinstance(entry, dict) else entry for entry in entries]


def fake_entries(plan, *, first_ms=lambda i: 200 + 10 * i, process_ms=lambda i: 500 + 10 * i, line="loss=0.5"):
    """Journal entries of a whole command plan, as the scheduler would write them (their JSON)."""
    entries = []
    for number, task in enumerate(plan.tasks):
        spawn = 10_000_000_000 * (number + 1)
        warm = task.policy == WARM_CACHE
        before, after = (1, 1) if warm else (0, 1)
        entries.append({
            "task": task.key, "case": task.case.id, "kind": task.kind, "policy": task.policy, "index": task.index,
            "round": task.round, "measured": task.measured, "makes_template": task.makes_template, "timeout_s": 300.0,
            "cache_dir": {"entries_before": before, "entries_after": after, "restored_template": warm,
                          "by_directory": {"jax": [before, after]}},
            "host": HOST, "outcome": "ok", "reason": None,
            "record": command_record(spawn, spawn + first_ms(number) * 1_000_000, line, "output"),
            "spawn_ns": spawn, "reaped_ns": spawn + process_ms(number) * 1_000_000, "exit_code": 0,
            "rusage": RUSAGE, "output_tail": None,
        })  # fmt: skip
    return entries


def test_a_command_case_result_has_its_command_and_validates():
    plan = command_plan(first_result="loss=", cold_runs=3)
    entries = fake_entries(plan)
    (result,) = case_result.case_results(plan, typed(entries))
    assert artifacts.schema_errors(encode(result), case_result.CASE_SCHEMA) == []
    result = encode(result)
    assert result["case"] == "command_train_1_f64"
    assert result["backend"] == "command" and result["workload"] == "train"
    assert result["command"] == {"argv": [sys.executable, "train.py"], "cwd": str(Path.cwd().resolve()), "first_result": "loss=",
                                 "mark": False, "prepare": None, "stop_at_first_result": False}  # fmt: skip
    assert result["status"] == "ok" and result["reason"] is None
    assert set(result["policies"]) == {COLD_CACHE, WARM_CACHE}
    assert any("black box" in text for text in result["limitations"])


def test_a_command_runs_ttfr_and_process_time_come_from_spawn_first_and_reap():
    plan = command_plan(first_result="loss=", cold_runs=3)
    entries = fake_entries(plan)
    by_task = {e["task"]: number for number, e in enumerate(entries)}
    (result,) = [encode(r) for r in case_result.case_results(plan, typed(entries))]
    for policy in (COLD_CACHE, WARM_CACHE):
        runs = result["policies"][policy]["runs"]
        assert len(runs) == 3
        for run in runs:
            number = by_task[f"command_train_1_f64|{policy}|{run['index']}"]
            assert run["metrics"]["ttfr_s"] == pytest.approx((200 + 10 * number) / 1e3)
            assert run["metrics"]["process_s"] == pytest.approx((500 + 10 * number) / 1e3)
            # a black box: no stage of a worker's protocol is made up
            for name in ("interpreter_s", "import_s", "setup_s", "first_call_s", "second_call_s"):
                assert run["metrics"][name] is None
            assert run["resources"]["peak_rss_bytes"] == 50 << 20
            assert run["resources"]["tree_peak_rss_bytes"] == 90 << 20
            assert run["cache"]["verdict"] == "verified"
            assert run["cache"]["by_directory"] == {"jax": [0, 1] if policy == COLD_CACHE else [1, 1]}
        summary = result["policies"][policy]["summary"]
        assert summary["ttfr_s"]["n"] == 3 and summary["process_s"]["n"] == 3
        assert summary["interpreter_s"] is None
        assert result["policies"][policy]["cache_verification"]["verdict"] == "verified"


def test_a_warm_cache_run_that_compiled_again_is_flagged_in_the_case():
    plan = command_plan(cold_runs=2)
    entries = fake_entries(plan)
    for entry in entries:
        if entry["policy"] == WARM_CACHE:
            entry["cache_dir"]["entries_after"] = 3
            entry["cache_dir"]["by_directory"] = {"jax": [1, 3]}
    (result,) = [encode(r) for r in case_result.case_results(plan, typed(entries))]
    warm = result["policies"][WARM_CACHE]
    assert warm["cache_verification"]["verdict"] == "flagged"
    assert warm["cache_verification"]["flags"] == ["warm_cache_grew"]
    assert {"policy": WARM_CACHE, "flag": "warm_cache_grew"} in result["flags"]
    assert result["policies"][COLD_CACHE]["cache_verification"]["verdict"] == "verified"


def test_a_redacted_commands_case_result_holds_no_secret():
    plan = command_plan(commands=f"{PY} t.py --api-token {SECRET}", cold_runs=2)
    (result,) = case_result.case_results(plan, typed(fake_entries(plan)))
    assert artifacts.schema_errors(encode(result), case_result.CASE_SCHEMA) == []
    assert REDACTED in result.command.argv
    assert SECRET not in json.dumps(encode(result))
    assert SECRET not in "\n".join(commands_md.section([result]))


def test_the_commands_section_renders_a_row_per_command():
    plan = command_plan(commands=[f"{PY} train.py --epochs 1", f"{PY} eval.py"], first_result="loss=", cold_runs=2)
    results = case_result.case_results(plan, typed(fake_entries(plan)))
    text = "\n".join(commands_md.section(results))
    assert text.startswith("## Commands")
    rows = {line.split(" | ")[0]: line for line in text.splitlines() if line.startswith("| `command_")}
    assert set(rows) == {"| `command_train_1_f64`", "| `command_eval_1_f64`"}
    train = [line for line in text.splitlines() if line.startswith("| `command_train_1_f64` | `")]
    assert len(train) == 1
    assert f"`{shlex.join([sys.executable, 'train.py', '--epochs', '1'])}`" in train[0]
    assert "output line matching `loss=`" in train[0]
    caches = [line for line in text.splitlines() if line.startswith("| `command_train_1_f64` | verified")]
    assert len(caches) == 1
    assert "jax 0→1" in caches[0] and "jax 1→1" in caches[0]
    assert "JAX_COMPILATION_CACHE_DIR" in text


def test_the_commands_section_names_how_the_first_result_is_taken():
    mark = case_result.case_results(*_plan_and_entries(first_result_mark=True))
    assert "`ttfr_mark.first_result()`" in "\n".join(commands_md.section(mark))
    exits = case_result.case_results(*_plan_and_entries())
    assert "process exit" in "\n".join(commands_md.section(exits))


def _plan_and_entries(**kwargs):
    plan = command_plan(cold_runs=2, **kwargs)
    return plan, typed(fake_entries(plan))


def test_no_commands_section_without_a_command_case():
    assert commands_md.section([]) == []
    assert commands_md.section([make_case("numpy_matmul_64_f32")]) == []


# --- the whole run with fake executors -------------------------------------------------------


def test_a_whole_command_run_writes_valid_artifacts_and_a_commands_report(tmp_path):
    spec = build_spec(RunRequest(commands=f"{PY} train.py", first_result="loss=", prepare="true", cold_runs=2, seed=9))
    log = []
    command, prepare = FakeCommand(log), FakePrepare(log)
    result_dir = suite_run.start(spec, tmp_path / "out", ["ttfr", "run"])
    outcome = suite_run.execute(result_dir, spec, Executors(worker=_no_worker, command=command, prepare=prepare))
    assert not outcome.interrupted and outcome.suite.pending == []
    assert len(command.calls) == len(prepare.calls) == 4
    assert validate_dir(result_dir.root) == []
    (case,) = outcome.cases
    assert case.command.argv == [sys.executable, "train.py"] and case.command.prepare == ["true"]
    report = (result_dir.root / "report.md").read_text()
    assert "## Commands" in report and "`command_train_1_f64`" in report
    assert "output line matching `loss=`" in report
