"""`ttfr run --command`: real programs through the command executor and the whole CLI.

The programs are small Python scripts (a few ms each) and one JAX script for the cache
policies; nothing here asserts a timing, only which moment the first result is and what
the runs record."""

from __future__ import annotations

import json
import os
import sys

import pytest
from conftest import ok_unless_busy
from support.events import BLOCK_FOREVER, SHRINK_STDOUT_PIPE, UNTIL_READ, wait_gone

from ttfr.model.record import FirstResult
from ttfr.commands import cli
from ttfr.measure import command_run, user_commands

PY = sys.executable


def _command(tmp_path, source: str, **options) -> user_commands.UserCommand:
    script = tmp_path / "prog.py"
    script.write_text(source)
    (command,) = user_commands.parse([f"{PY} {script}"], cwd=str(tmp_path), **options)
    return command


def _env(**extra) -> dict:
    return {**os.environ, "PYTHONUNBUFFERED": "1", **extra}


def test_the_first_matching_output_line_ends_the_timing_not_the_exit(tmp_path):
    """The program reads the clock before it prints the line, and again once ttfr has read the
    line and the one after it (a one-page pipe: full until read), then exits: the line's time
    lies between the two readings, before the exit."""
    printed, read = tmp_path / "printed_ns", tmp_path / "read_ns"
    source = (
        f"import fcntl, select, time\n{SHRINK_STDOUT_PIPE}\nprint('warming up')\n"
        f"open({str(printed)!r}, 'w').write(str(time.monotonic_ns()))\n"
        f"print('loss=0.5')\nprint('loss=0.4')\n{UNTIL_READ}\nprint('step 2')\n{UNTIL_READ}\n"
        f"open({str(read)!r}, 'w').write(str(time.monotonic_ns()))\n"
    )
    result = command_run.run_command(_command(tmp_path, source, first_result=r"^loss="), _env(), 30.0)
    assert result.outcome == "ok", result.reason
    first = result.record.marks_ns.first
    # read after the program printed it (never earlier), and before the program went on to its exit
    assert int(printed.read_text()) <= first <= int(read.read_text()) < result.reaped_ns
    assert result.record.first_result == FirstResult(by="output", line="loss=0.5", stopped=False)


def test_stderr_and_carriage_return_lines_are_matched_too(tmp_path):
    source = "import sys\nsys.stderr.write('step 1\\rstep 2\\rdone: 7\\n')\n"
    command = _command(tmp_path, source, first_result=r"^done: \d+$")
    result = command_run.run_command(command, _env(), 30.0)
    assert result.outcome == "ok", result.reason
    assert result.record.first_result.line == "done: 7"


def test_a_program_that_never_prints_the_line_fails_with_its_output_tail(tmp_path):
    command = _command(tmp_path, "print('nothing here')\n", first_result="^loss=")
    result = command_run.run_command(command, _env(), 30.0)
    assert result.outcome == "error"
    assert "without an output line matching /^loss=/" in result.reason
    assert "nothing here" in result.output_tail and result.record is None


def test_the_mark_is_the_programs_own_clock_reading(tmp_path):
    """The program's readings of the clock just before and after its call bracket the mark: it is
    the call's moment, not the spawn's, the exit's or when ttfr read it."""
    around = tmp_path / "around_ns"
    source = ("import time, ttfr_mark\nbefore = time.monotonic_ns()\nassert ttfr_mark.first_result()\n"
              f"after = time.monotonic_ns()\nopen({str(around)!r}, 'w').write(f'{{before}} {{after}}')\n"
              "assert not ttfr_mark.first_result()\n")  # fmt: skip
    command = _command(tmp_path, source, mark=True)
    result = command_run.run_command(command, _env(), 30.0)
    assert result.outcome == "ok", (result.reason, result.output_tail)
    first = result.record.marks_ns.first
    before, after = map(int, around.read_text().split())
    assert result.spawn_ns < before <= first <= after < result.reaped_ns
    assert result.record.first_result == FirstResult(by="mark", line=None, stopped=False)


def test_ttfr_mark_outside_ttfr_does_nothing(monkeypatch):
    import ttfr_mark

    monkeypatch.delenv("TTFR_MARK_FD", raising=False)
    monkeypatch.setattr(ttfr_mark, "_sent", False)
    assert ttfr_mark.first_result() is False
    monkeypatch.setenv("TTFR_MARK_FD", "987")  # leaked into a program ttfr did not start: no such descriptor
    assert ttfr_mark.first_result() is False


def test_a_missing_or_foreign_mark_fails_the_run(tmp_path):
    missing = command_run.run_command(_command(tmp_path, "print('hi')\n", mark=True), _env(), 30.0)
    assert missing.outcome == "error" and "without calling ttfr_mark.first_result()" in missing.reason
    # a wall-clock time instead of CLOCK_MONOTONIC: outside the process's life, never a figure
    source = "import os, time\nos.write(int(os.environ['TTFR_MARK_FD']), b'first_result %d\\n' % time.time_ns())\n"
    foreign = command_run.run_command(_command(tmp_path, source, mark=True), _env(), 30.0)
    assert foreign.outcome == "invalid-measurement" and "outside the command's life" in foreign.reason
    garbage = "import os\nos.write(int(os.environ['TTFR_MARK_FD']), b'hello\\n')\n"
    malformed = command_run.run_command(_command(tmp_path, garbage, mark=True), _env(), 30.0)
    assert malformed.outcome == "error" and "'hello'" in malformed.reason


def test_without_a_marker_the_exit_is_the_first_result(tmp_path):
    result = command_run.run_command(_command(tmp_path, "print(1)\n"), _env(), 30.0)
    assert result.outcome == "ok"
    assert result.record.marks_ns.first == result.reaped_ns


def test_a_programs_peak_memory_is_its_own_never_the_forked_parents(tmp_path):
    """A child's ru_maxrss starts at the parent's peak (the memory it held between fork and
    exec): a small program's figure is unknown (None), never ttfr's size; a larger one's is its own."""
    from ttfr.measure import supervisor

    floor = supervisor.inherited_rss_floor()
    small = command_run.run_command(_command(tmp_path, "print(1)\n"), _env(), 30.0)
    assert small.outcome == "ok" and small.record.rusage_self.max_rss_bytes is None
    assert small.rusage.rss_floor_bytes >= floor  # this process's peak then (it only grows)
    grow = floor + (96 << 20)
    big = command_run.run_command(_command(tmp_path, f"b = bytearray({grow})\nfor i in range(0, {grow}, 4096): b[i] = 1\n"),
                                  _env(), 60.0)  # fmt: skip
    assert big.outcome == "ok" and big.record.rusage_self.max_rss_bytes >= grow


def test_a_failing_program_fails_its_run_with_its_exit_code_and_redacted_output(tmp_path):
    source = "import os, sys\nprint('token is', os.environ['HF_TOKEN'])\nsys.exit(3)\n"
    result = command_run.run_command(_command(tmp_path, source), _env(HF_TOKEN="hunter2-secret"), 30.0)
    assert (result.outcome, result.exit_code) == ("error", 3)
    # the reason says why (its last line of output), redacted like the tail
    assert result.reason == "the command exited with code 3; its output ends: token is <redacted>"
    assert "token is <redacted>" in result.output_tail and "hunter2-secret" not in result.output_tail


def test_a_secret_on_the_command_line_is_hidden_in_what_the_program_prints(tmp_path):
    source = "import sys\nprint('using', sys.argv[2])\nprint('result ok', sys.argv[2])\nsys.exit(2)\n"
    script = tmp_path / "echo.py"
    script.write_text(source)
    (command,) = user_commands.parse([f"{PY} {script} --api-token Arg5ecret77"], first_result="^result", cwd=str(tmp_path))
    result = command_run.run_command(command, _env(), 30.0)
    assert result.outcome == "error"
    for text in (result.reason, result.output_tail):
        assert "Arg5ecret77" not in text and "<redacted>" in text


def test_a_half_written_line_is_not_a_match(tmp_path):
    """Unbuffered, `print("done", "loading")` arrives in pieces: "done" alone must not match ^done$.
    The program goes on only once ttfr has read each piece (a one-page pipe: full until read), so
    "done" arrives alone; once ttfr has read the rest of that line, the program reads the clock
    and prints the complete "done" line: the match is timed after that reading, never at the piece."""
    printing = tmp_path / "printing_ns"
    source = (f"import fcntl, select, sys, time\n{SHRINK_STDOUT_PIPE}\n"
              f"sys.stdout.write('done'); sys.stdout.flush(); {UNTIL_READ}\n"
              f"print(' loading data'); {UNTIL_READ}\n"
              f"open({str(printing)!r}, 'w').write(str(time.monotonic_ns()))\nprint('done')\n")  # fmt: skip
    result = command_run.run_command(_command(tmp_path, source, first_result="^done$"), _env(), 30.0)
    assert result.outcome == "ok" and result.record.first_result.line == "done"
    assert result.record.marks_ns.first >= int(printing.read_text())  # the second, complete line
    last = command_run.run_command(_command(tmp_path, "import sys\nsys.stdout.write('final 3')\n", first_result="^final"),
                                   _env(), 30.0)  # fmt: skip
    assert last.outcome == "ok" and last.record.first_result.line == "final 3"  # an unended last line counts at the end


def test_a_program_changed_during_its_run_is_an_invalid_measurement(tmp_path):
    script = tmp_path / "prog.py"
    script.write_text("import pathlib, sys\npathlib.Path(sys.argv[0]).write_text('print(2)\\n')\n")
    (command,) = user_commands.parse([f"{PY} {script}"], cwd=str(tmp_path))
    assert str(script.resolve()) in dict(command.files)
    result = command_run.run_command(command, _env(), 30.0)
    assert result.outcome == "invalid-measurement" and "prog.py changed or disappeared" in result.reason


def test_a_program_killed_by_a_signal_is_a_signal_outcome(tmp_path):
    result = command_run.run_command(_command(tmp_path, "import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n"),
                                     _env(), 30.0)  # fmt: skip
    assert result.outcome == "signal" and "SIGSEGV" in result.reason


@pytest.mark.timeout(120)  # the safety net: a group left running blocks wait_gone
def test_a_timeout_kills_the_program_and_what_it_started(tmp_path):
    """The program and its child never end by themselves (each blocks on a pipe only it could
    write): a "timeout" outcome, and the child gone, are the timeout's kill of the whole group."""
    marker = tmp_path / "child.pid"
    source = (
        "import os, subprocess, sys\n"
        f"child = subprocess.Popen([sys.executable, '-c', 'import os; {BLOCK_FOREVER}'])\n"
        f"open({str(marker)!r}, 'w').write(str(child.pid))\n"
        f"{BLOCK_FOREVER}\n"
    )
    result = command_run.run_command(_command(tmp_path, source, first_result="never"), _env(), 2.0)
    assert result.outcome == "timeout" and result.reason == "timeout after 2 s (process group killed)"
    wait_gone(int(marker.read_text()))  # the grandchild was in the killed group (gone, or a zombie of init)


def test_prepare_runs_before_and_its_failure_says_why(tmp_path):
    stamp = tmp_path / "prepared"
    ok_prepare = f"{PY} -c \"open({str(stamp)!r}, 'w').write('x')\""
    (command,) = user_commands.parse([f"{PY} -c pass"], prepare=[ok_prepare], cwd=str(tmp_path))
    assert command_run.run_prepare(command, _env(), 30.0) is None and stamp.exists()
    (failing,) = user_commands.parse([f"{PY} -c pass"], prepare=[f"{PY} -c \"print('disk full'); raise SystemExit(4)\""])
    why = command_run.run_prepare(failing, _env(), 30.0)
    assert why.startswith("--prepare exited with code 4") and "disk full" in why


def _run_cli(*args) -> int:
    return cli.main(["run", *args])


def _case(out) -> dict:
    (root,) = [p for p in out.iterdir() if p.is_dir()]
    (case_file,) = (root / "cases").iterdir()
    return json.loads(case_file.read_text())


@pytest.mark.integration
def test_a_jax_script_gets_cold_and_warm_cache_ttfr_with_verified_cache_entries(tmp_path, capsys):
    pytest.importorskip("jax")
    script = tmp_path / "fit.py"
    script.write_text(
        "import jax, jax.numpy as jnp\n"
        "f = jax.jit(lambda x: jnp.tanh(x @ x.T).sum())\n"
        "print('result', float(f(jnp.ones((32, 32)))))\n"
    )
    code = _run_cli("--command", f"{PY} {script}", "--first-result", "^result", "--cold-runs", "2", "--seed", "1",
                    "--out", str(tmp_path / "out"))  # fmt: skip
    assert code == 0, capsys.readouterr()
    case = _case(tmp_path / "out")
    assert case["case"] == "command_fit_1_f64" and ok_unless_busy(case)
    assert case["command"]["first_result"] == "^result"
    cold = case["policies"]["cold-process/cold-cache"]
    warm = case["policies"]["cold-process/warm-cache"]
    for run in cold["runs"]:  # an empty JAX cache directory that the script filled
        assert run["cache"]["verdict"] == "verified"
        before, after = run["cache"]["by_directory"]["jax"]
        assert before == 0 and after > 0
    for run in warm["runs"]:  # started from the template, nothing new written: every compile was a hit
        assert run["cache"]["verdict"] == "verified"
        before, after = run["cache"]["by_directory"]["jax"]
        assert before == after > 0
    assert cold["cache_verification"]["verdict"] == warm["cache_verification"]["verdict"] == "verified"
    for run in cold["runs"] + warm["runs"]:
        assert run["metrics"]["ttfr_s"] <= run["metrics"]["process_s"]
    report = next((tmp_path / "out").iterdir()) / "report.md"
    assert "## Commands" in report.read_text() and "jax 0→" in report.read_text()


@pytest.mark.integration
def test_a_program_that_keeps_its_cache_elsewhere_is_not_under_the_policies_and_says_so(tmp_path, capsys):
    """It writes nothing where ttfr looks, in any run: not applicable, with the note that says what
    that means for a program that compiles (not a flag in every run, as for `python -c "import json"`)."""
    pytest.importorskip("jax")
    script = tmp_path / "own_cache.py"
    script.write_text(
        "import jax, jax.numpy as jnp\n"
        f"jax.config.update('jax_compilation_cache_dir', {str(tmp_path / 'mine')!r})\n"
        "print(float(jax.jit(lambda x: x.sum() * 2)(jnp.ones(3))))\n"
    )
    assert _run_cli("--command", f"{PY} {script}", "--cold-runs", "1", "--out", str(tmp_path / "out")) == 0
    case = _case(tmp_path / "out")
    for policy in ("cold-process/cold-cache", "cold-process/warm-cache"):
        block = case["policies"][policy]
        assert block["cache_verification"]["verdict"] == "not_applicable" and block["cache_verification"]["flags"] == []
        assert all("keeps its cache elsewhere" in run["cache"]["note"] for run in block["runs"])
    assert ok_unless_busy(case)


@pytest.mark.integration
def test_the_command_example_runs_as_the_readme_shows(tmp_path):
    """examples/line_fit_script.py marks its first result; the rest of the script comes after."""
    import subprocess
    from pathlib import Path

    example = Path(__file__).resolve().parents[1] / "examples" / "line_fit_script.py"
    argv = [PY, "-m", "ttfr", "run", "--command", f"{PY} {example} --points 32 --steps 50", "--first-result-mark",
            "--cold-runs", "1", "--seed", "1", "--out", str(tmp_path / "out")]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    case = _case(tmp_path / "out")
    assert case["case"] == "command_line_fit_script_1_f64" and ok_unless_busy(case), case["reason"]
    assert case["command"]["mark"] is True
    for policy in ("cold-process/cold-cache", "cold-process/warm-cache"):
        (run,) = case["policies"][policy]["runs"]
        assert run["cache"]["verdict"] == "verified", run["cache"]
        assert run["metrics"]["ttfr_s"] < run["metrics"]["process_s"]  # marked before its last 50 steps and print


def test_a_failing_command_fails_its_case_and_the_run(tmp_path, capsys):
    code = _run_cli("--command", f"{PY} -c \"raise SystemExit(5)\"", "--command-name", "broken",
                    "--cache-policy", "cold-cache", "--cold-runs", "1", "--out", str(tmp_path / "out"))  # fmt: skip
    assert code == 1
    case = _case(tmp_path / "out")
    assert case["status"] == "failed" and "exited with code 5" in case["reason"]
    run = case["policies"]["cold-process/cold-cache"]["runs"][0]
    assert run["metrics"]["ttfr_s"] is None and run["exit_code"] == 5
    # NextStat's ml contract has no place for a program: refused, nothing written
    (root,) = (tmp_path / "out").iterdir()
    assert cli.main(["export", "--format", "nextstat-v1", str(root), str(tmp_path / "export")]) == 2
    err = capsys.readouterr().err
    assert "holds no case NextStat's ml contract can hold" in err and "a command: NextStat's ml contract" in err
    assert not (tmp_path / "export").exists()


def test_bad_command_options_exit_2_before_anything_is_written(tmp_path, capsys):
    out = tmp_path / "out"
    for args in (
        ["--command", "no-such-program-xyz --flag"],
        ["--command", "python3 'unbalanced"],
        ["--command", "true", "--first-result", "("],
        ["--command", "true", "--cache-policy", "warm-process"],
        ["--command", "true", "--workloads", "matmul"],
        ["--first-result", "x"],
    ):
        assert _run_cli(*args, "--out", str(out)) == 2, args
        assert not out.exists()
    err = capsys.readouterr().err
    assert "'no-such-program-xyz' is not on PATH" in err and "warm regime" in err


def test_ab_of_two_programs_runs_each_arms_own_command(tmp_path, capsys):
    fast, slow = tmp_path / "v1.py", tmp_path / "v2.py"
    fast.write_text("print('result 1')\n")
    slow.write_text("print('result 2')\n")
    code = cli.main(["ab", "--a-command", f"{PY} {fast}", "--b-command", f"{PY} {slow}", "--first-result", "^result",
                     "--cache-policy", "cold-cache", "--rounds", "2", "--min-rounds", "2",
                     "--out", str(tmp_path / "out")])  # fmt: skip
    assert code in (0, 3), capsys.readouterr()
    (root,) = (tmp_path / "out").iterdir()
    for arm, script, line in (("A", fast, "result 1"), ("B", slow, "result 2")):
        plan = json.loads((root / arm / "plan.json").read_text())
        assert plan["spec"]["commands"][0]["argv"] == [PY, str(script)]
        assert plan["spec"]["cases"] == ["command_v1_vs_v2_1_f64"]
        journal = [json.loads(x) for x in (root / arm / "journal.jsonl").read_text().splitlines()]
        assert {e["record"]["first_result"]["line"] for e in journal} == {line}
    comparison = json.loads((root / "comparison.json").read_text())
    assert {c["case"] for c in comparison["comparisons"]} == {"command_v1_vs_v2_1_f64"}


def test_a_daemon_that_escapes_the_group_kill_cannot_hang_ttfr(tmp_path, monkeypatch):
    """A program that starts a process in a session of its own (setsid) which keeps its output
    open: ttfr stops waiting for the pipe and says what happened, instead of hanging."""
    from ttfr.measure import supervisor

    monkeypatch.setattr(supervisor, "READER_GRACE_S", 0.5)  # the supervisor's wait for a held pipe
    monkeypatch.setattr(command_run, "READER_GRACE_S", 0.5)  # the reason that quotes it
    pid_file = tmp_path / "daemon.pid"
    source = (
        "import os, subprocess, sys\n"
        f"d = subprocess.Popen([sys.executable, '-c', 'import os; {BLOCK_FOREVER}'], start_new_session=True)\n"
        f"open({str(pid_file)!r}, 'w').write(str(d.pid))\n"
        "print('result')\n"
    )
    try:
        result = command_run.run_command(_command(tmp_path, source, first_result="^result"), _env(), 30.0)
        assert result.outcome == "invalid-measurement" and "escaped ttfr's kill" in result.reason
    finally:
        if pid_file.exists():
            os.kill(int(pid_file.read_text()), 9)


def test_a_resume_refuses_a_program_that_changed_since_the_run_started(tmp_path, capsys):
    from ttfr.pipeline import suite as suite_run
    from ttfr.measure.spec import RunRequest, build_spec

    script = tmp_path / "fit.py"
    script.write_text("print('v1')\n")
    here = os.getcwd()
    os.chdir(tmp_path)
    try:
        spec = build_spec(RunRequest(commands=[f"{PY} fit.py"], cold_runs=1))
    finally:
        os.chdir(here)
    result_dir = suite_run.start(spec, tmp_path / "out", ["ttfr", "run"])
    result_dir.unlock()
    plan = json.loads(result_dir.plan.read_text())
    assert {f["path"] for f in plan["spec"]["commands"][0]["files"]} >= {str(script.resolve())}
    script.write_text("print('v2')\n")
    resume = ["run", "--resume", str(result_dir.root), "--command", f"{PY} fit.py"]  # named again, from its directory
    os.chdir(tmp_path)
    try:
        assert cli.main(resume) == 2
        assert "fit.py changed or is gone since the run started" in capsys.readouterr().err
        script.write_text("print('v1')\n")  # restored: the resume goes on
        assert cli.main(resume) == 0
    finally:
        os.chdir(here)


def test_a_programs_words_cannot_break_the_report(tmp_path, capsys):
    """A failing program's last line (in the case's reason) with a table pipe, a heading and a
    terminal escape: report.md keeps its tables and headings, the escape is gone."""
    source = "import sys\nprint('x | y')\nprint('\\x1b]0;pwned\\x07## Injected | heading')\nsys.exit(4)\n"
    script = tmp_path / "loud.py"
    script.write_text(source)
    code = _run_cli("--command", f"{PY} {script}", "--cache-policy", "cold-cache", "--cold-runs", "1",
                    "--out", str(tmp_path / "out"))  # fmt: skip
    assert code == 1
    (root,) = (tmp_path / "out").iterdir()
    report = (root / "report.md").read_text()
    assert "\x1b" not in report and not any(line.startswith("## Injected") for line in report.splitlines())
    summary = report.split("## Summary")[1].split("\n## ")[0]
    rows = [line for line in summary.splitlines() if line.startswith("|")]
    assert len({line.replace("\\|", "").count("|") for line in rows}) == 1  # every row has the header's columns
    assert "Injected \\| heading" in summary


def test_stop_at_first_result_ends_a_server_at_its_first_line(tmp_path):
    """A program that never exits by itself (a server, blocked on a pipe only it could write):
    ttfr ends it at its first result. Not waiting for it would be its 30 s timeout (outcome
    "timeout"); the outcome, the stop and the SIGKILL say ttfr ended it."""
    source = f"import os\nprint('Listening on :8080')\n{BLOCK_FOREVER}\n"
    for options in ({"first_result": "^Listening on"}, {"mark": True}):
        script = tmp_path / "server.py"
        marking = f"import os, ttfr_mark\nttfr_mark.first_result()\n{BLOCK_FOREVER}\n"
        script.write_text(source if "first_result" in options else marking)
        (command,) = user_commands.parse([f"{PY} {script}"], cwd=str(tmp_path), stop_at_first_result=True, **options)
        result = command_run.run_command(command, _env(), 30.0)
        assert result.outcome == "ok", (result.reason, result.output_tail)
        assert result.record.first_result.stopped is True and result.exit_code == -9
        assert result.spawn_ns < result.record.marks_ns.first <= result.reaped_ns
    with pytest.raises(Exception, match="--first-result REGEX or --first-result-mark"):
        user_commands.parse([f"{PY} -c pass"], stop_at_first_result=True)


def test_the_command_line_options_reach_the_plan(tmp_path):
    script = tmp_path / "srv.py"
    script.write_text(f"import os\nprint('ready', flush=True)\n{BLOCK_FOREVER}\n")  # a server: never ends by itself
    code = _run_cli("--command", f"{PY} {script}", "--first-result", "^ready", "--stop-at-first-result", "--command-name",
                    "srv", "--cache-policy", "cold-cache", "--cold-runs", "1", "--timeout", "30",
                    "--out", str(tmp_path / "out"))  # fmt: skip
    assert code == 0
    (root,) = (tmp_path / "out").iterdir()
    (command,) = json.loads((root / "plan.json").read_text())["spec"]["commands"]
    assert command["stop_at_first_result"] is True and command["first_result"] == "^ready" and command["name"] == "srv"
    assert _case(tmp_path / "out")["command"]["stop_at_first_result"] is True
