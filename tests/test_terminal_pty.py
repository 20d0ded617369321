"""`ttfr` on a real pseudo-terminal: the live progress display, one small case per backend family,
and every command's terminal output.

Under pytest (and in CI) stdout is a pipe, so every other test sees the line-per-run output;
only a terminal makes rich draw the live bar (with its ETA from per-family cost priors).
One `ttfr run` per family: a family that breaks the display fails its own test id, and
the others still run. The runs are answered by fake executors (tests/support/pty_driver.py): every
display path without a worker; the tests marked `integration` keep the real path honest.
"""

import fcntl
import json
import os
import re
import select
import signal
import struct
import subprocess
import sys
import termios
import textwrap
import time
from pathlib import Path

import pytest

from conftest import ok_unless_busy

from ttfr.artifacts.reader import load_finished, validate_dir
from ttfr.measure import catalog
from ttfr.measure.plan import EXPLAIN, build_plan
from ttfr.measure.spec import RunRequest, build_spec
from ttfr.model.base import present
from ttfr.model.policies import COLD_CACHE
from ttfr.report import terminal

pytestmark = [pytest.mark.terminal, pytest.mark.skipif(sys.platform == "win32", reason="needs a POSIX pty")]

TTFR = [sys.executable, "-m", "ttfr"]  # the real command: real workers
FAKED = [sys.executable, str(Path(__file__).parent / "support" / "pty_driver.py")]  # the same command line, fake executors

ROWS, COLUMNS = 40, 160
RUN_TIMEOUT_S = 240

# One tiny case of each backend family (no torch.compile: a cold compile costs 10-30 s).
FAMILY_CASES = {
    "python": "python_noop_1_f64",
    "numpy": "numpy_matmul_64_f32",
    "jax": "jax_jit_cpu_matmul_64_f32",
    "torch": "torch_eager_cpu_matmul_64_f32",
    "pyhf_numpy": "pyhf_numpy_hf_nll_grad_3_f64",
    "pyhf_jax": "pyhf_jax_hf_nll_grad_3_f64",
    "pyhf_pytorch": "pyhf_pytorch_hf_nll_grad_3_f64",
    "nextstat": "nextstat_hf_nll_grad_3_f64",
    "interop": "interop_numpy_to_torch_from_numpy_65536_f32",  # a conversion route (issue 28)
}

# The display reads these before the terminal itself; a developer's shell must not decide the test.
_RICH_OVERRIDES = ("COLUMNS", "LINES", "FORCE_COLOR", "NO_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE",
                   "JUPYTER_COLUMNS", "JUPYTER_LINES")  # fmt: skip
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b[()][0-9A-B]|\x1b[=>78]")


def run_on_a_pty(argv, timeout_s, env=None):
    """Run argv with a pty as stdin/stdout/stderr (`env`: variables added); return (exit
    status, everything it wrote)."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLUMNS, 0, 0))
    env = {**{k: v for k, v in os.environ.items() if k not in _RICH_OVERRIDES}, **(env or {})}
    env["TERM"] = "xterm-256color"
    try:
        proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=env, start_new_session=True)
    finally:
        os.close(slave)
    chunks = []
    deadline = time.monotonic() + timeout_s
    try:
        while True:  # drain continuously: a full pty buffer would block the child's writes
            if time.monotonic() > deadline:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                tail = b"".join(chunks)[-4000:].decode(errors="replace")
                pytest.fail(f"{argv} did not finish in {timeout_s} s on the pty; its output ended:\n{tail}")
            ready, _, _ = select.select([master], [], [], 0.2)
            if ready:
                try:
                    data = os.read(master, 65536)
                except OSError:  # EIO: every holder of the slave end has closed it
                    break
                if not data:
                    break
                chunks.append(data)
            elif proc.poll() is not None:
                break  # exited, and nothing left to read (a straggler holding the slave must not hang us)
        status = proc.wait(timeout=30)
    finally:
        os.close(master)
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return status, b"".join(chunks).decode("utf-8", errors="replace")


@pytest.mark.parametrize("family", list(FAMILY_CASES))
def test_live_progress_display_runs_each_backend_family_on_a_terminal(family, tmp_path):
    _live_display_of_one_case(FAKED, FAMILY_CASES[family], tmp_path)


@pytest.mark.integration
def test_live_progress_display_of_real_workers_on_a_terminal(tmp_path):
    _live_display_of_one_case(TTFR, FAMILY_CASES["numpy"], tmp_path)


def _live_display_of_one_case(ttfr, case_id, tmp_path):
    case = catalog.BUILTIN.parse_case_id(case_id)
    missing = catalog.availability(case.backend_info, case.workload)
    if missing:
        pytest.skip(f"{case_id}: {missing}")
    argv = [*ttfr, "run", "--out", str(tmp_path), "--cases", case_id,
            "--cold-runs", "1", "--warm-procs", "1", "--warm-samples", "3", "--verbose"]  # fmt: skip
    status, raw = run_on_a_pty(argv, RUN_TIMEOUT_S)
    text = re.sub(r"\r*\n\r*", "\n", _ANSI.sub("", raw)).replace("\r", "\n")  # the tty's CRLF, and rich's redraws
    if "Traceback" in text:
        pytest.fail(f"{case_id} crashed on a terminal (exit status {status}):\n{text[text.index('Traceback') :][:4000]}")
    tail = text[-4000:]
    assert status == 0, f"exit status {status}; output ended:\n{tail}"
    # The live bar ran (not the one-line-per-run fallback of a pipe): its ETA column, rich.live's cursor
    # hiding, and its count reaching the end; the fallback's "[1/3] case policy #1: ok" lines never appear.
    assert "ETA" in text, tail
    assert "\x1b[?25l" in raw and "\x1b[?25h" in raw, tail  # rich.live hid the cursor while it redrew, then showed it
    (root,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    runs = len((root / "journal.jsonl").read_text().splitlines())  # every task of the plan, each run once
    assert f"{runs}/{runs}" in text, tail
    assert f"[1/{runs}] {case_id}" not in text, tail
    # Rich laid the output out for the pty's size, not a default 80 or the pipe's 200.
    assert max(len(line) for line in text.splitlines()) <= COLUMNS, tail
    assert validate_dir(root) == []
    suite = json.loads((root / "suite.json").read_text())
    assert suite["state"] == "complete" and suite["pending"] == []
    (ref,) = suite["cases"]
    assert ref["case"] == case_id and ok_unless_busy(ref), ref
    assert f"results: {root}" in text.replace("\n", "")  # the summary printed after the bar
    # then report.html, then ttfr's own time by phase (--verbose)
    assert (root / "report.html").is_file() and text.index("results:") < text.index("ttfr's own time:"), tail
    assert "report.html" in text[text.index("ttfr's own time:") :], tail


def test_groups_of_concurrent_cold_starts_run_on_a_terminal(tmp_path):
    """--concurrency (issue 29): a group is one task of the live bar however many processes it starts."""
    argv = [*FAKED, "run", "--out", str(tmp_path), "--cases", FAMILY_CASES["jax"], "--concurrency", "1,2",
            "--cold-runs", "1", "--warm-procs", "1", "--warm-samples", "3"]  # fmt: skip
    status, raw = run_on_a_pty(argv, RUN_TIMEOUT_S)
    text = re.sub(r"\r*\n\r*", "\n", _ANSI.sub("", raw)).replace("\r", "\n")
    assert "Traceback" not in text, text[-4000:]
    assert status == 0 and "ETA" in text, text[-4000:]
    (root,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    # cold-cache, warm-cache and warm-process runs, then 3 modes x 2 sizes of groups but cold-private x1
    # (cold-shared x1's experiment, run once)
    tasks = 3 + 3 * 2 - 1
    assert f"{tasks}/{tasks}" in text, text[-4000:]
    assert validate_dir(root) == []
    (case,) = load_finished(root).cases
    assert len(case.concurrency.groups) == 5 and len(case.concurrency.points) == 6


@pytest.mark.integration
def test_groups_on_slurm_run_on_a_terminal_beside_the_live_bar(tmp_path):
    """--concurrency-executor slurm: the job lines Slurm's submissions print go above the live bar
    (a fake sbatch on PATH starts the array's tasks; the workers are real: JAX)."""
    from test_concurrency_slurm import SBATCH, SCANCEL, SQUEUE

    bin_dir, state, shared = tmp_path / "bin", tmp_path / "state", tmp_path / "shared"
    for path in (bin_dir, state, shared):
        path.mkdir()
    for name, body in (("sbatch", SBATCH), ("squeue", SQUEUE), ("scancel", SCANCEL)):
        (bin_dir / name).write_text(f"#!{sys.executable}\nimport json\n" + textwrap.dedent(body))
        (bin_dir / name).chmod(0o755)
    out = tmp_path / "out"
    # the real command and workers, with the Slurm tests' short release lead (tests/support/pty_slurm_driver.py)
    driver = [sys.executable, str(Path(__file__).parent / "support" / "pty_slurm_driver.py")]
    argv = [*driver, "run", "--out", str(out), "--cases", FAMILY_CASES["jax"], "--concurrency", "2", "--cold-runs", "1",
            "--warm-procs", "1", "--cache-policy", "cold-cache", "--concurrency-executor", "slurm",
            "--concurrency-cache-dir", str(shared)]  # fmt: skip
    env = {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "FAKE_SLURM_STATE": str(state)}
    status, raw = run_on_a_pty(argv, RUN_TIMEOUT_S, env=env)
    text = re.sub(r"\r*\n\r*", "\n", _ANSI.sub("", raw)).replace("\r", "\n")
    assert "Traceback" not in text, text[-4000:]
    assert status == 0 and "slurm: group job" in text and "ETA" in text, text[-4000:]
    (root,) = [p for p in out.iterdir() if p.is_dir()]
    assert validate_dir(root) == []
    (case,) = load_finished(root).cases
    assert all(m.node for g in case.concurrency.groups for m in g.members)


def test_explain_runs_on_a_terminal_with_its_diagnostic_processes_in_the_live_bar(tmp_path):
    """--explain (fake executors): the live bar counts the diagnostic processes among the tasks and reaches the
    end, the summary fits the width, and every case file holds its explanation."""
    argv = [*FAKED, "run", "--out", str(tmp_path), "--cases", "numpy_matmul_64_f32,jax_jit_cpu_matmul_64_f32",
            "--cache-policy", "cold-cache", "--cold-runs", "2", "--explain"]  # fmt: skip
    status, raw = run_on_a_pty(argv, RUN_TIMEOUT_S)
    text = re.sub(r"\r*\n\r*", "\n", _ANSI.sub("", raw)).replace("\r", "\n")
    assert "Traceback" not in text, text[-4000:]
    assert status == 0 and "ETA" in text and "\x1b[?25l" in raw, text[-4000:]
    (root,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    request = RunRequest(cases="numpy_matmul_64_f32,jax_jit_cpu_matmul_64_f32", policies="cold-cache", cold_runs=2,
                         explain=True)  # fmt: skip
    tasks = build_plan(build_spec(request)).tasks
    assert sum(t.kind == EXPLAIN for t in tasks) == 2
    assert f"{len(tasks)}/{len(tasks)}" in text, text[-4000:]  # the diagnostic processes counted, and the count ends
    assert max(len(line) for line in text.splitlines()) <= COLUMNS, text[-4000:]
    assert validate_dir(root) == []
    assert all(present(c.policies.get(COLD_CACHE).explanation) for c in load_finished(root).cases)


def test_explain_of_a_finished_directory_runs_on_a_terminal(tmp_path):
    """`ttfr explain DIR` (fake executors): the live bar starts from what the directory ran and ends at the whole
    plan with the diagnostic processes, then the summary; the refusal of a second one is one line, no traceback."""
    cases = "numpy_matmul_64_f32,jax_jit_cpu_matmul_64_f32"
    status, raw = run_on_a_pty([*FAKED, "run", "--out", str(tmp_path), "--cases", cases, "--cache-policy", "cold-cache",
                                "--cold-runs", "2", "--no-html"], RUN_TIMEOUT_S)  # fmt: skip
    assert status == 0, raw[-4000:]
    (root,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    status, raw = run_on_a_pty([*FAKED, "explain", str(root), "--no-html"], RUN_TIMEOUT_S)
    text = re.sub(r"\r*\n\r*", "\n", _ANSI.sub("", raw)).replace("\r", "\n")
    assert "Traceback" not in text and status == 0, text[-4000:]
    tasks = build_plan(build_spec(RunRequest(cases=cases, policies="cold-cache", cold_runs=2, explain=True))).tasks
    assert f"{len(tasks)}/{len(tasks)}" in text and "\x1b[?25l" in raw, text[-4000:]  # the live bar, to its end
    assert "2 ok, 0 warn, 0 failed" in text and max(len(line) for line in text.splitlines()) <= COLUMNS
    assert validate_dir(root) == []
    explained = [c.policies.get(COLD_CACHE).explanation for c in load_finished(root).cases]
    versions = {(d.distribution, d.version) for e in explained for phase in e.phases for d in phase.distributions}
    assert ("numpy", "2.0.0") in versions  # the fakes' trace: the command's own executors ran them, no real worker
    status, raw = run_on_a_pty([*FAKED, "explain", str(root)], RUN_TIMEOUT_S)
    assert status == 2 and "already explained" in raw and "Traceback" not in raw, raw[-4000:]


def test_a_loop_family_runs_on_a_terminal_and_ends_with_its_strategies_line(tmp_path):
    """Loop workloads (every strategy of sweep_mlp on JAX, K = 2): the live bar, and the
    summary's line per loop (the strategy with the lowest total against naive's)."""
    argv = [*FAKED, "run", "--out", str(tmp_path), "--workloads", "sweep_mlp",
            "--backends", "jax_jit_cpu", "--sizes", "2", "--cache-policy", "cold-cache", "--cold-runs", "1"]  # fmt: skip
    status, raw = run_on_a_pty(argv, RUN_TIMEOUT_S, env={"TTFR_FAKE": "loops"})
    text = re.sub(r"\r*\n\r*", "\n", _ANSI.sub("", raw)).replace("\r", "\n")
    assert "Traceback" not in text, text[-4000:]
    assert status == 0, text[-4000:]
    assert "ETA" in text and "\x1b[?25l" in raw, text[-4000:]
    flat = " ".join(text.split())
    assert "compile count off" not in flat, text[-4000:]
    assert max(len(line) for line in text.splitlines()) <= COLUMNS, text[-4000:]
    (root,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    assert validate_dir(root) == []
    # Exactly the lines the suite's loop rows give ("best ..." or, where a busy machine set the
    # runs aside, "no totals to compare"), whichever way contention fell: never absent.
    lines = terminal.loop_lines(load_finished(root).suite.loops)
    assert [line for line, _style in lines if line.startswith("loop sweep_mlp 2 on jax_jit_cpu float32")], lines
    for line, _style in lines:
        assert " ".join(line.split()) in flat, (line, text[-4000:])


def test_a_case_file_lists_and_runs_on_a_terminal(tmp_path):
    """A user's case file: `ttfr list --case-file` lays its table out for the terminal, and
    `ttfr run --case-file` drives the live bar to the end; a broken file is one clear error."""
    case_file = tmp_path / "mine.py"
    case_file.write_text(
        "import numpy as np\nfrom ttfr.cases import Case\n"
        "case = Case('pty_cumsum', sizes=(64,), dtypes=('float64',), description='a [bold]cumsum[/bold]')\n"
        "case.inputs(lambda size, dtype, seed: [np.random.default_rng(seed).standard_normal(size).astype(dtype)])\n"
        "case.numpy(lambda np: np.cumsum)\n"
    )  # fmt: skip
    status, raw = run_on_a_pty([*TTFR, "list", "--case-file", str(case_file)], RUN_TIMEOUT_S)
    text = re.sub(r"\r*\n\r*", "\n", _ANSI.sub("", raw)).replace("\r", "\n")
    assert status == 0 and "Traceback" not in text, text[-4000:]
    flat = " ".join(text.split())
    assert "pty_cumsum (yours)" in flat and "numpy_pty_cumsum_64_f64" in flat, text[-4000:]
    assert "[bold]cumsum[/bold]" in flat  # the user's text shown as written, not as markup
    assert max(len(line) for line in text.splitlines()) <= COLUMNS, text[-4000:]
    out = tmp_path / "out"
    argv = [*FAKED, "run", "--out", str(out), "--case-file", str(case_file), "--backends", "numpy",
            "--cold-runs", "1", "--warm-procs", "1", "--warm-samples", "3"]  # fmt: skip
    status, raw = run_on_a_pty(argv, RUN_TIMEOUT_S)
    text = re.sub(r"\r*\n\r*", "\n", _ANSI.sub("", raw)).replace("\r", "\n")
    assert status == 0 and "Traceback" not in text, text[-4000:]
    assert "ETA" in text and "\x1b[?25l" in raw and "\x1b[?25h" in raw, text[-4000:]
    (root,) = [p for p in out.iterdir() if p.is_dir()]
    runs = len((root / "journal.jsonl").read_text().splitlines())
    assert f"{runs}/{runs}" in text and "numpy_pty_cumsum_64_f64" in text, text[-4000:]
    assert max(len(line) for line in text.splitlines()) <= COLUMNS, text[-4000:]
    case_file.write_text("raise RuntimeError('my setup is broken')\n")
    status, raw = run_on_a_pty(argv, RUN_TIMEOUT_S)
    text = _ANSI.sub("", raw)
    assert status == 2 and "my setup is broken" in text and "mine.py" in text, text[-4000:]
    assert "ttfr: error:" in text, text[-4000:]  # one error, with the user's traceback tail under it


@pytest.mark.integration  # real programs, measured for real
def test_commands_run_on_a_terminal(tmp_path):
    """`ttfr run --command`: the live bar over two programs (one that fails, whose output holds
    rich markup and a secret), the summary with its reason, and a mistyped program's one error."""
    good, bad = tmp_path / "good.py", tmp_path / "bad.py"
    good.write_text("print('[bold]fit:[/bold] 0.5')\n")
    bad.write_text("import os, sys\nprint('[red]token', os.environ['PTY_API_TOKEN'])\nsys.exit(7)\n")
    out = tmp_path / "out"
    argv = [*TTFR, "run", "--out", str(out), "--command", f"{sys.executable} {good}",
            "--command", f"{sys.executable} {bad}", "--first-result", "fit:", "--cold-runs", "1"]  # fmt: skip
    status, raw = run_on_a_pty(argv, RUN_TIMEOUT_S, env={"PTY_API_TOKEN": "s3cr3t-value"})
    text = re.sub(r"\r*\n\r*", "\n", _ANSI.sub("", raw)).replace("\r", "\n")
    assert status == 1 and "Traceback" not in text, text[-4000:]  # a case failed: exit 1
    assert "ETA" in text and "\x1b[?25l" in raw and "\x1b[?25h" in raw, text[-4000:]
    flat = " ".join(text.split())
    assert "command_good_1_f64" in flat and "command_bad_1_f64" in flat, text[-4000:]
    assert "exited with code 7" in flat and "s3cr3t-value" not in raw, text[-4000:]
    assert "[red]token" in flat, text[-4000:]  # the program's words, shown as written, not as markup
    (root,) = [p for p in out.iterdir() if p.is_dir()]
    # 2 commands x 2 policies: the failed one's warm-cache run is skipped, and counted as done
    assert "4/4" in text and len((root / "journal.jsonl").read_text().splitlines()) == 3, text[-4000:]
    assert max(len(line) for line in text.splitlines()) <= COLUMNS, text[-4000:]
    assert validate_dir(root) == []
    status, raw = run_on_a_pty([*TTFR, "run", "--command", "pyhton3 x.py"], RUN_TIMEOUT_S)
    text = _ANSI.sub("", raw)
    assert status == 2 and "ttfr: error:" in text and "'pyhton3' is not on PATH" in " ".join(text.split()), text[-4000:]


def test_report_on_a_terminal_shows_tables_with_component_bars(tmp_path):
    """`ttfr report DIR` on a terminal: the summary with inline bars of the cold-start
    components (piped, the Markdown); a command case, without components, keeps its row."""
    out = tmp_path / "out"
    argv = [*FAKED, "run", "--out", str(out), "--cases", "numpy_matmul_64_f32",
            "--cache-policy", "cold-cache,warm", "--cold-runs", "2", "--warm-procs", "1", "--warm-samples", "3"]  # fmt: skip
    status, raw = run_on_a_pty(argv, RUN_TIMEOUT_S)
    assert status == 0, _ANSI.sub("", raw)[-3000:]
    (root,) = [p for p in out.iterdir() if p.is_dir()]
    status, raw = run_on_a_pty([*TTFR, "report", str(root)], RUN_TIMEOUT_S)
    text = re.sub(r"\r*\n\r*", "\n", _ANSI.sub("", raw))
    assert status == 0 and "Traceback" not in text, text[-4000:]
    assert "components (bar:" in text and "█" in text and "numpy_matmul_64_f32" in text, text[-4000:]
    assert max(len(line) for line in text.splitlines()) <= COLUMNS, text[-4000:]
    piped = subprocess.run([*TTFR, "report", str(root)], capture_output=True, text=True, timeout=120)
    assert piped.returncode == 0 and piped.stdout.startswith("# ttfr snapshot") and "█" not in piped.stdout


def test_publish_and_replicate_on_a_terminal(tmp_path):
    """`ttfr publish` and `ttfr replicate` (its live bar and its verdict lines) under a pty."""
    out = tmp_path / "out"
    argv = [*FAKED, "run", "--out", str(out), "--cases", "numpy_matmul_64_f32",
            "--cache-policy", "cold-cache,warm", "--cold-runs", "2", "--warm-procs", "1", "--warm-samples", "3",
            "--seed", "2"]  # fmt: skip
    status, raw = run_on_a_pty(argv, RUN_TIMEOUT_S)
    assert status == 0, _ANSI.sub("", raw)[-3000:]
    (root,) = [p for p in out.iterdir() if p.is_dir()]
    status, raw = run_on_a_pty([*TTFR, "publish", str(root), "--out", str(tmp_path / "snaps")], RUN_TIMEOUT_S)
    text = _ANSI.sub("", raw)
    assert status == 0 and "published:" in text and "Traceback" not in text, text[-3000:]
    (snap,) = (tmp_path / "snaps").iterdir()
    status, raw = run_on_a_pty([*FAKED, "replicate", str(snap), "--out", str(tmp_path / "again")], RUN_TIMEOUT_S)
    text = re.sub(r"\r*\n\r*", "\n", _ANSI.sub("", raw)).replace("\r", "\n")
    assert status == 0 and "Traceback" not in text, text[-4000:]
    assert "ETA" in text and "\x1b[?25h" in raw, text[-4000:]  # the live bar ran and gave the cursor back
    flat = " ".join(text.split())
    assert "replicated:" in flat and "NOT replicated" not in flat and "ttfr_replication_report.json" in flat, text[-4000:]
    assert max(len(line) for line in text.splitlines()) <= COLUMNS, text[-4000:]


def test_a_contended_run_ends_with_the_machine_health_line_on_a_terminal(tmp_path):
    """The health line is a path of the terminal summary that only a busy machine takes: every run
    of the fake machine waited for a CPU while other work ran (the real evidence is tested in
    tests/test_contention.py), so the case's figures are withheld and it says why."""
    argv = [*FAKED, "run", "--out", str(tmp_path), "--cases", "numpy_matmul_256_f32",
            "--cache-policy", "warm-process", "--warm-procs", "2", "--warm-samples", "8"]  # fmt: skip
    status, raw = run_on_a_pty(argv, RUN_TIMEOUT_S, env={"TTFR_FAKE": "contended"})
    text = re.sub(r"\r*\n\r*", "\n", _ANSI.sub("", raw)).replace("\r", "\n")
    assert "Traceback" not in text, text[-4000:]
    assert status == 0, text[-4000:]
    flat = " ".join(text.split())  # rich wraps the line at the pty's width
    assert "machine health:" in flat and "--threads 1" in flat, text[-4000:]
    assert "figures withheld (warm-process)" in flat and " warn " in flat, text[-4000:]  # its verdict, in the table
    (root,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    assert validate_dir(root) == []


def test_runs_added_for_precision_grow_the_live_bar_and_end_with_the_precision_line(tmp_path):
    """--precision adds tasks after the plan: the bar's total grows with them (and shrinks when
    the budget withdraws some), and the summary says how many statistics met the target."""
    argv = [*FAKED, "run", "--out", str(tmp_path), "--cases", "python_noop_1_f64",
            "--warm-samples", "3", "--precision", "0.3", "--budget", "120"]  # fmt: skip
    status, raw = run_on_a_pty(argv, RUN_TIMEOUT_S)
    text = re.sub(r"\r*\n\r*", "\n", _ANSI.sub("", raw)).replace("\r", "\n")
    assert "Traceback" not in text, text[-4000:]
    assert status == 0, text[-4000:]
    (root,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    runs = len((root / "journal.jsonl").read_text().splitlines())
    suite = json.loads((root / "suite.json").read_text())
    assert suite["precision"]["summary"]["added_runs"] == runs - 6 > 0  # the quick plan of a python case: 6 tasks
    assert f"{runs}/{runs}" in text, text[-4000:]  # the bar counted the added runs in its total
    flat = " ".join(text.split())
    added = suite["precision"]["summary"]["added_runs"]
    assert "precision ±30.0% at 95%:" in flat and f"{added} runs added" in flat, text[-4000:]
    assert validate_dir(root) == []


def test_a_failed_overhead_gate_on_a_terminal(tmp_path):
    """`ttfr selftest --harness` against a no-op the fake answers in 400 ms: the table, then the
    gate's sentence and exit 3 (the bare arms are real, tiny interpreters)."""
    status, raw = run_on_a_pty([*FAKED, "selftest", "--harness", "--harness-rounds", "6", "--no-hyperfine"], RUN_TIMEOUT_S)
    text = re.sub(r"\r*\n\r*", "\n", _ANSI.sub("", raw)).replace("\r", "\n")
    assert "Traceback" not in text and status == 3, text[-4000:]
    flat = " ".join(text.split())
    assert "ttfr: overhead gate: cold process_s:" in flat and "entirely above the limit 1.5×" in flat, text[-4000:]
    assert max(len(line) for line in text.splitlines()) <= COLUMNS, text[-4000:]


@pytest.mark.integration  # the self-test measures real workers
def test_selftest_and_the_ab_note_it_leads_to_on_a_terminal(tmp_path, monkeypatch):
    """`ttfr selftest` prints, on a terminal, how many rounds `ttfr ab` needs; `ttfr ab` with
    fewer fixed rounds then says so before its live bar starts (both paths only a person sees)."""
    monkeypatch.setenv("TTFR_STATE_DIR", str(tmp_path / "state"))
    status, raw = run_on_a_pty([*TTFR, "selftest", "--aa", "2", "--per-level", "1", "--rounds", "4", "--harness-rounds", "6",
                                "--no-hyperfine"], RUN_TIMEOUT_S)  # fmt: skip
    text = re.sub(r"\r*\n\r*", "\n", _ANSI.sub("", raw)).replace("\r", "\n")
    assert "Traceback" not in text and status == 0, text[-4000:]
    flat = " ".join(text.split())
    assert "ttfr ab, warm: +10% at 80% power" in flat and "ttfr ab, cold: +10% at 80% power" in flat, text[-4000:]
    assert "ttfr on itself (6 paired rounds" in flat and "cold process_s" in flat, text[-4000:]
    assert max(len(line) for line in text.splitlines()) <= COLUMNS, text[-4000:]
    argv = [*TTFR, "ab", "--b-env", "TTFR_PROBE=1", "--cases", "python_noop_1_f64",
            "--cache-policy", "warm", "--rounds", "2", "--min-rounds", "2",
            "--out", str(tmp_path / "ab")]  # fmt: skip
    status, raw = run_on_a_pty(argv, RUN_TIMEOUT_S)
    text = re.sub(r"\r*\n\r*", "\n", _ANSI.sub("", raw)).replace("\r", "\n")
    assert "Traceback" not in text and status in (0, 3), text[-4000:]
    flat = " ".join(text.split())
    # 2 rounds are below any answer (a signed-rank test needs 8 to reach p < 0.01 at all); a self-test on a
    # busy machine may have found no answer (no δ): then no note, so what is expected comes from the stored file
    from ttfr.pipeline import selftest

    note = selftest.rounds_advice(selftest.load_stored(), 2, None)
    if note is not None:
        assert " ".join(note.split()) in flat, text[-4000:]
    else:
        assert "note: ttfr selftest found" not in flat, text[-4000:]
    assert "ETA" in text, text[-4000:]  # the live bar ran after the note
