"""`ttfr selftest --harness`: ttfr measured on itself, in paired rounds (ABBA order, as `ttfr ab`
runs its arms), through the same executors a run uses.

- cold: ttfr's no-op case (`python_noop_1_f64`: the `python` backend, which imports nothing)
  against `python -I -c pass` run as a user's command, both spawned and reaped by ttfr's
  supervisor on one clock: its process_s (spawn to exit) and its ttfr_s (spawn to first result)
  against the bare interpreter's exit;
- warm: the no-op's per-call time in a warm worker against the same loop over the same call
  in a bare interpreter;
- hyperfine (when installed): ttfr's process_s of `python -c "import numpy"` against hyperfine's
  wall time of the same command, alternating rounds;
- the fast test tier's wall time, from a source checkout whose .venv is installed.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ttfr.analyse import overhead, runs
from ttfr.child.job import COLD, WARM, Job
from ttfr.measure import catalog
from ttfr.measure.executors import REAL, Executors
from ttfr.measure.spawn import ensure_worker_bytecode
from ttfr.measure.user_commands import UserCommand
from ttfr.model.harness import Agreement, HarnessCheck
from ttfr.pipeline.interleaved import paired_rounds

DEFAULT_LIMIT = 1.5
AGREEMENT = 0.05  # ttfr and hyperfine agree when their per-round ratio's median is within ±5%
TIMEOUT_S = 60.0
NOOP_CASE = "python_noop_1_f64"
_NOOP = Job(mode=COLD, adapter=catalog.BACKENDS["python"].adapter, workload="noop", size=1, dtype="float64")
_WARM_SAMPLES, _MIN_SAMPLE_S = 9, 0.01
# The bare warm arm: the worker's timed loop (child/sampling.py) over the same no-op call, calibrated
# to the same sample length, in an interpreter that imports nothing else.
BARE_WARM = f"""
import itertools, time
def noop():
    return None
clock, args = time.perf_counter_ns, ()
def loop(count):
    start = clock()
    for _ in itertools.repeat(None, count):
        noop(*args)
    return clock() - start
inner = 1
while loop(inner) < {_MIN_SAMPLE_S * 1e9:.0f}:
    inner *= 2
samples = sorted(loop(inner) / inner for _ in range({_WARM_SAMPLES}))
print("per_call_s=" + repr(samples[len(samples) // 2] / 1e9))
"""


def _process_s(result) -> float | None:
    """A run's spawn-to-exit seconds (None when it failed)."""
    return runs.run_metrics(result.spawn_ns, result.reaped_ns, None).process_s if result.outcome == "ok" else None


def cold_pairs(rounds: int, python: str, executors: Executors = REAL, env: dict | None = None):
    """Per round: (bare process_s, no-op process_s) and (bare process_s, no-op ttfr_s); None
    where a run failed."""
    env = dict(os.environ) if env is None else env
    # The bare arms are not process-watched: the gate's ratio then holds what the watch costs every cold worker.
    bare = UserCommand("bare_python", (python, "-I", "-c", "pass"), os.getcwd())

    def noop():
        result = executors.worker(_NOOP, env, TIMEOUT_S, python)
        if result.outcome != "ok":
            return None, None
        metrics = runs.run_metrics(result.spawn_ns, result.reaped_ns, result.record)
        return metrics.process_s, metrics.ttfr_s

    pairs = paired_rounds(rounds, 0, lambda: _process_s(executors.command(bare, env, TIMEOUT_S, watch_tree=False)), noop)
    return [(a, b[0]) for a, b in pairs], [(a, b[1]) for a, b in pairs]


def _per_call_s(result) -> float | None:
    """The bare loop's per-call seconds, from the output line its run was timed to."""
    line = result.record.first_result.line if result.outcome == "ok" and result.record and result.record.first_result else None
    try:
        return float(line.partition("=")[2]) if line else None
    except ValueError:
        return None


def warm_pairs(rounds: int, python: str, executors: Executors = REAL, env: dict | None = None):
    """Per round: (bare per-call s, no-op per-call s in a warm worker); None where one failed.
    The bare loop runs as a user's command that prints its figure (its first result)."""
    env = dict(os.environ) if env is None else env
    bare = UserCommand("bare_loop", (python, "-I", "-c", BARE_WARM), os.getcwd(), first_result=r"^per_call_s=")
    job = _NOOP.replace(mode=WARM, samples=_WARM_SAMPLES, min_sample_s=_MIN_SAMPLE_S, max_warmup_s=0.2)

    def noop():
        result = executors.worker(job, env, TIMEOUT_S, python)
        warm = result.record.warm if result.outcome == "ok" and result.record else None
        return statistics.median(warm.samples_s) if warm and warm.samples_s else None

    return paired_rounds(rounds, 1, lambda: _per_call_s(executors.command(bare, env, TIMEOUT_S, watch_tree=False)), noop)


def _hyperfine_median_s(hyperfine: str, argv: list[str], runs_per_round: int) -> float:
    with tempfile.TemporaryDirectory() as scratch:
        export = Path(scratch) / "hyperfine.json"
        subprocess.run([hyperfine, "-N", "--warmup", "1", "--runs", str(runs_per_round), "--export-json", str(export),
                        shlex.join(argv)], capture_output=True, check=True, timeout=600)  # fmt: skip
        return float(json.loads(export.read_text())["results"][0]["median"])


def hyperfine_agreement(python: str, rounds: int = 5, runs_per_round: int = 10, executors: Executors = REAL,
                        hyperfine: str | None = None) -> tuple[Agreement | None, str | None]:  # fmt: skip
    """ttfr's process_s of `python -c "import numpy"` against hyperfine's wall time of the same
    command; (None, why) when hyperfine is not installed or the command cannot run."""
    hyperfine = hyperfine or shutil.which("hyperfine")
    if not hyperfine:
        return None, "hyperfine is not installed (Debian: apt-get install hyperfine)"
    argv = [python, "-c", "import numpy"]
    command = UserCommand("import_numpy", tuple(argv), os.getcwd())
    env = dict(os.environ)
    ratios, ours, theirs = [], [], []
    for _round in range(rounds):
        try:
            external = _hyperfine_median_s(hyperfine, argv, runs_per_round)
        except (OSError, subprocess.SubprocessError, ValueError, KeyError) as exc:
            return None, f"hyperfine could not measure {argv[-1]!r}: {type(exc).__name__}"
        measured = []
        executors.command(command, env, TIMEOUT_S)  # as hyperfine's --warmup 1
        for _ in range(runs_per_round):
            result = executors.command(command, env, TIMEOUT_S)
            if result.outcome != "ok":
                return None, f"ttfr could not run {argv[-1]!r}: {result.reason}"
            measured.append(_process_s(result))
        ours.append(statistics.median(measured))
        theirs.append(external)
        ratios.append(ours[-1] / external)
    ratio = statistics.median(ratios)
    return Agreement(command=argv, rounds=rounds, runs_per_round=runs_per_round, ttfr_median_s=statistics.median(ours),
                     hyperfine_median_s=statistics.median(theirs), ratio=ratio, per_round=ratios,
                     agrees=abs(ratio - 1.0) <= AGREEMENT), None  # fmt: skip


def source_checkout() -> Path | None:
    """The checkout ttfr runs from, when it is one with its tests and an installed .venv."""
    root = Path(__file__).resolve().parents[3]
    if (root / "Makefile").is_file() and (root / "tests").is_dir() and (root / ".venv" / ".installed").is_file():
        return root
    return None


def fast_tier_s(root: Path) -> tuple[float | None, str | None]:
    """Wall time of `make test-fast` in the checkout (None, why) when make fails or is missing."""
    make = shutil.which("make")
    if not make:
        return None, "make is not installed"
    started = time.monotonic()
    done = subprocess.run([make, "-C", str(root), "test-fast", "PYTEST_ARGS=-q"], capture_output=True, text=True,
                          check=False, timeout=1800)  # fmt: skip
    elapsed = time.monotonic() - started
    if done.returncode != 0:
        return None, f"`make test-fast` failed (exit {done.returncode}) after {elapsed:.0f} s"
    return elapsed, None


def run(rounds: int = 20, limit: float = DEFAULT_LIMIT, python: str | None = None, executors: Executors | None = None,
        hyperfine: bool = True, fast_tier: bool = False, progress=None) -> HarnessCheck:  # fmt: skip
    """Measure the harness's figures and judge them against `limit`."""
    python = python or sys.executable
    executors = executors or REAL
    say = progress or (lambda _message: None)
    if executors.starts_workers:
        ensure_worker_bytecode()
    say(f"cold: {NOOP_CASE} against python -I -c pass, {rounds} paired rounds")
    process, first = cold_pairs(rounds, python, executors)
    bare = "python -I -c pass (spawn to exit)"
    ratios = [
        overhead.judge("cold process_s", f"{NOOP_CASE}: spawn to exit", bare, "process", process, limit),
        overhead.judge("cold ttfr_s", f"{NOOP_CASE}: spawn to first result", bare, "process", first, limit),
    ]
    say(f"warm: {NOOP_CASE}'s call against the same loop in a bare interpreter, {rounds} paired rounds")
    ratios.append(overhead.judge("warm call", f"{NOOP_CASE}: per call in a warm worker",
                                 "the same loop in python -I (per call)", "call", warm_pairs(rounds, python, executors),
                                 limit))  # fmt: skip
    extra = {}
    if hyperfine:
        say("hyperfine: the same command measured by both")
        extra["hyperfine"], extra["hyperfine_note"] = hyperfine_agreement(python, executors=executors)
    if fast_tier:
        root = source_checkout()
        if root is None:
            extra["fast_tier_note"] = "not a source checkout with its tests and an installed .venv"
        else:
            say(f"fast tier: make -C {root} test-fast")
            extra["fast_tier_s"], extra["fast_tier_note"] = fast_tier_s(root)
    return HarnessCheck(created_at=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), python=python,
                        rounds=rounds, limit=limit, ratios=ratios, **extra)  # fmt: skip
