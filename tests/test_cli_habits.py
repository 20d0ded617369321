"""The command line behaves as other tools do (issue 25, items 14 and 15): quiet on a closed
pipe, every option explained in --help with its default, errors short and in plain English,
and `ttfr list` showing the user's own cases first."""

import argparse
import fcntl
import os
import re
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ttfr.commands import cli
from ttfr.commands.entry import EXIT_BROKEN_PIPE
from ttfr.errors import UsageError, unknown_choice
from ttfr.measure import catalog
from ttfr.measure.profiles import PROFILES
from ttfr.measure.spec import RunRequest, build_spec

TTFR = [sys.executable, "-m", "ttfr"]
SRC = Path(__file__).resolve().parents[1] / "src" / "ttfr"
NOISE = ("Broken pipe", "Traceback", "Exception ignored", "BrokenPipeError")


# -- 14: a closed pipe -------------------------------------------------------------------------


def test_ttfr_list_into_head_ends_quietly_with_141(tmp_path):
    """`ttfr list | head -1`: the real `head`, on a pipe shrunk to one page so that ttfr's ~70 KB
    cannot all fit in it (and head's read) before head has closed its end."""
    read, write = os.pipe()
    fcntl.fcntl(write, fcntl.F_SETPIPE_SZ, 4096)
    ttfr = subprocess.Popen([*TTFR, "list"], stdout=write, stderr=subprocess.PIPE, text=True)
    os.close(write)
    head = subprocess.Popen(["head", "-1"], stdin=read, stdout=subprocess.PIPE, text=True)
    os.close(read)  # head holds the only read end: when it exits, the pipe is closed
    first_line, _ = head.communicate(timeout=120)
    _, err = ttfr.communicate(timeout=120)
    assert "backends" in first_line  # head got ttfr's first line: the pipe really carried output
    assert ttfr.returncode == EXIT_BROKEN_PIPE == 128 + signal.SIGPIPE, err  # as a shell shows git or cat ended so
    assert not any(word in err for word in NOISE), err


@pytest.mark.parametrize("command", [["env"], ["list"]])
def test_output_into_an_already_closed_pipe_ends_quietly_with_141(command):
    """Every write fails: `env` prints with print(), `list` with rich; both end the same way."""
    read, write = os.pipe()
    os.close(read)
    ttfr = subprocess.Popen([*TTFR, *command], stdout=write, stderr=subprocess.PIPE, text=True)
    os.close(write)
    _, err = ttfr.communicate(timeout=120)
    assert ttfr.returncode == EXIT_BROKEN_PIPE, err
    assert not any(word in err for word in NOISE), err


@pytest.mark.integration
def test_a_run_into_a_closed_pipe_finishes_its_measurements_then_exits_141(tmp_path):
    """`ttfr run | head -1` used to end the run at its second line: runs lost, no suite.json."""
    read, write = os.pipe()
    os.close(read)
    out = tmp_path / "out"
    argv = [*TTFR, "run", "--backends", "numpy", "--workloads", "matmul", "--sizes", "64", "--cold-runs", "1",
            "--warm-procs", "1", "--warm-samples", "3", "--no-html", "--seed", "1", "--out", str(out)]  # fmt: skip
    ttfr = subprocess.Popen(argv, stdout=write, stderr=subprocess.PIPE, text=True)
    os.close(write)
    _, err = ttfr.communicate(timeout=300)
    assert ttfr.returncode == EXIT_BROKEN_PIPE, err
    assert not any(word in err for word in NOISE), err
    (root,) = out.iterdir()
    assert (root / "suite.json").is_file() and (root / "report.md").is_file()  # the run went on to its end


# -- 15: --help --------------------------------------------------------------------------------


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    parser = cli.build_parser()  # as `ttfr` builds it
    (commands,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(commands.choices)


def test_every_option_of_every_command_has_help():
    subparsers = _subparsers()
    assert {"run", "ab", "compare", "selftest", "list", "env"} <= set(subparsers)  # the walk reaches them all
    missing = [
        f"ttfr {name} {'/'.join(action.option_strings) or action.dest}"
        for name, parser in subparsers.items()
        for action in parser._actions
        if not isinstance(action, argparse._HelpAction) and not (action.help or "").strip()
    ]
    assert not missing, f"options without help text: {', '.join(missing)}"


def test_help_shows_defaults_but_never_an_empty_one(monkeypatch):
    monkeypatch.setenv("COLUMNS", "300")  # one line an option
    for name, parser in _subparsers().items():
        text = parser.format_help()
        for empty in ("default: None", "default: False", "default: []"):
            assert empty not in text, f"ttfr {name} --help: {empty}"
    ab = _subparsers()["ab"].format_help()
    assert re.search(r"--rounds N .*\(default: 20\)", ab), ab
    assert re.search(r"--min-rounds N .*\(default: 10\)", ab), ab
    assert re.search(r"--out DIR .*\(default: ttfr-results\)", ab), ab


def test_ttfr_run_help_shows_the_300_s_timeout():
    assert PROFILES["quick"].timeout_s == 300  # the default profile's timeout, which plan.json records
    done = subprocess.run([*TTFR, "run", "--help"], capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, COLUMNS="300"))  # fmt: skip
    assert done.returncode == 0, done.stderr
    (line,) = [line for line in done.stdout.splitlines() if line.strip().startswith("--timeout")]
    assert "quick 300 s" in line, line


# -- 15: plurals in "Valid ...s" -----------------------------------------------------------------

PLURALS = {
    "cache policy": "cache policies",
    "case id": "case ids",
    "backend": "backends",
    "workload": "workloads",
    "dtype": "dtypes",
    "profile": "profiles",
    "workspace preset": "workspace presets",
}


@pytest.mark.parametrize("kind, plural", PLURALS.items())
def test_unknown_choice_names_the_choices_in_plural(kind, plural):
    assert f"Valid {plural}: a, b" in str(unknown_choice(kind, "zzz", ["a", "b"]))


def test_every_kind_an_error_names_is_checked_above():
    """A new `unknown_choice("kind", ...)` gets its plural looked at here, not by a user."""
    used = {m for path in SRC.rglob("*.py") for m in re.findall(r'unknown_choice\(\s*"([^"]+)"', path.read_text())}
    assert used and used <= set(PLURALS), sorted(used - set(PLURALS))


def test_ttfr_run_with_an_unknown_policy_says_policies(capsys):
    assert cli.main(["run", "--cache-policy", "lukewarm"]) == 2
    err = capsys.readouterr().err
    assert "Valid cache policies:" in err and "policys" not in err, err


# -- 15: ttfr list --case-file, --user-only ------------------------------------------------------

CASE_FILE = """
import numpy as np
from ttfr.cases import Case

case = Case("my_habit_sum", sizes=(64, 256), dtypes=("float64",))

@case.inputs
def inputs(size, dtype, seed):
    return [np.random.default_rng(seed).standard_normal(size).astype(dtype)]

@case.numpy
def build(np):
    return lambda x: np.cumsum(x)
"""
MINE = ("numpy_my_habit_sum_64_f64", "numpy_my_habit_sum_256_f64")
BUILTIN_ID = "numpy_matmul_512_f32"


@pytest.fixture
def case_file(tmp_path):
    path = tmp_path / "cases_habits.py"
    path.write_text(textwrap.dedent(CASE_FILE))
    return path


def test_list_shows_your_cases_first_under_their_own_heading(case_file, capsys):
    assert cli.main(["list", "--case-file", str(case_file)]) == 0
    out = capsys.readouterr().out
    assert out.lstrip().startswith("your cases"), out[:500]
    yours, _, rest = out.partition("backends")  # ttfr's catalogue starts with its backends table
    assert rest, out[:2000]
    assert all(case_id in yours for case_id in MINE), yours
    assert BUILTIN_ID not in yours and BUILTIN_ID in rest  # ttfr's own come after, still complete
    assert str(case_file) in yours  # which file each case is from


def test_list_user_only_lists_only_your_cases(case_file, capsys):
    assert cli.main(["list", "--case-file", str(case_file), "--user-only"]) == 0
    out = capsys.readouterr().out
    assert all(case_id in out for case_id in MINE), out
    assert BUILTIN_ID not in out and "backends" not in out, out
    assert len(out.splitlines()) < 20  # a handful of lines, not the ~400 of the catalogue


def test_list_user_only_without_a_case_file_is_a_usage_error(capsys):
    assert cli.main(["list", "--user-only"]) == 2
    captured = capsys.readouterr()
    assert "--case-file" in captured.err and not captured.out


# -- 15: an unknown case id ----------------------------------------------------------------------


def test_an_unknown_case_id_is_short_and_says_your_cases_need_their_file(case_file):
    with pytest.raises(UsageError) as err:
        build_spec(RunRequest(cases=MINE[0]))
    message = str(err.value)
    assert len(message) < 700, message  # it was 1,661 characters: the first 40 of ~300 ids
    assert f"unknown case id {MINE[0]!r}" in message and "--case-file FILE" in message, message
    assert f"{len(catalog.BUILTIN.catalogued_cases())} in all: see `ttfr list`" in message, message
    spec = build_spec(RunRequest(cases=MINE[0], case_files=[str(case_file)]))  # what the hint says works
    assert [c.id for c in spec.cases] == [MINE[0]]


def test_a_mistyped_builtin_case_id_gets_a_did_you_mean_and_no_case_file_hint():
    with pytest.raises(UsageError) as err:
        build_spec(RunRequest(cases="numpy_matmul_512_f33"))
    message = str(err.value)
    assert "Did you mean 'numpy_matmul_512_f32'" in message and "--case-file" not in message, message
    assert len(message) < 700, message
