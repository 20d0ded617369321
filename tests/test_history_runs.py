"""`ttfr history` on real runs: eleven separate `ttfr run` sessions of a calibrated program whose
work (a 200 ms wait, so that this shared machine's CPU speed, which scatters ~12% from one session
to the next, does not drown it) is 40% longer from the 4th session on, the variable that says so
recorded in each manifest. The step is named at the 4th result with an interval covering the
injected change and the variable that changed; the eight sessions of the same code after it, a
history of their own, show no step. (CPU-bound work on this machine: benchmarks/history_steps.py.)"""

import json
import sys

import pytest

from ttfr.commands import cli

WORK_S = 0.2
BEFORE, AFTER = 3, 8
PROGRAM = "import os, time; time.sleep({work} * (1 + float(os.environ['TTFR_SPIN_EXTRA'])))"


def _session(out, monkeypatch, extra):
    """One `ttfr run` session of the calibrated program."""
    monkeypatch.setenv("TTFR_SPIN_EXTRA", extra)  # ttfr's manifest records it: the step's "what changed"
    argv = ["run", "--command", f'{sys.executable} -S -c "{PROGRAM.format(work=WORK_S)}"', "--command-name", "calibrated",
            "--cache-policy", "cold-process/cold-cache", "--cold-runs", "5", "--no-html", "--out", str(out)]  # fmt: skip
    assert cli.main(argv) == 0
    (result,) = out.iterdir()
    return result


def _history(tmp_path, name, results):
    out = tmp_path / name
    assert cli.main(["history", *map(str, results), "--out", str(out), "--fail-above", "10"]) in (0, 3)
    (folder,) = out.iterdir()
    document = json.loads((folder / "history.json").read_text())
    return {s["case"]: s for s in document["series"]}, document


@pytest.mark.integration
def test_a_real_step_is_found_at_the_fourth_result_and_eight_sessions_of_the_same_code_show_none(tmp_path, monkeypatch):
    results = [_session(tmp_path / f"s{i}", monkeypatch, "0" if i < BEFORE else "0.4") for i in range(BEFORE + AFTER)]
    series, document = _history(tmp_path, "all", results)
    assert [s["id"] for s in document["sources"]] == [r.name for r in results]  # by date: as measured
    calibrated = series["command_calibrated_1_f64"]
    assert len(calibrated["steps"]) == 1, calibrated
    (step,) = calibrated["steps"]
    assert step["at"] == BEFORE and step["source"] == results[BEFORE].name
    # The injected change is 0.4 x WORK_S more waiting; the TTFR holds the interpreter's start and the program's
    # imports too, so the ratio it predicts is over the level before the step (a CI run whose prediction took the
    # empty program's start as the calibrated one's, 1-2 ms less, fell 0.15% outside a 2%-wide interval). That
    # start is CPU work on a shared machine: in one CI run the sessions after the step took 1.3 ms more than the
    # injected wait, and the interval, narrow because sleeps barely scatter, missed the prediction by 0.02%. So
    # the prediction is a band of +-3 ms of start-up around the injected wait, which the interval must meet; a
    # wrong ratio (inverted, on the wrong level, the step's size halved) misses it by far more.
    slack_s = 0.003
    predicted = [1 + (0.4 * WORK_S + sign * slack_s) / step["before_s"] for sign in (-1, 1)]
    assert step["ci"][0] <= predicted[1] and predicted[0] <= step["ci"][1], (predicted, step)
    assert {"key": "env.TTFR_SPIN_EXTRA", "before": "0", "after": "0.4"} in step["changed"]
    assert document["gate"]["exit_code"] == 3 and calibrated["newest"]["fails"]
    flat, flat_document = _history(tmp_path, "flat", results[BEFORE:])
    assert flat["command_calibrated_1_f64"]["steps"] == [], flat  # the same code in eight sessions
    assert flat_document["gate"]["exit_code"] == 0
