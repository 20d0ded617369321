"""`ttfr history`'s step detection against this machine's real session-to-session noise.

1. Real sessions: `--sessions` separate `ttfr run`s of the calibrated CPU-bound workload
   (python_spin_5000_f64, cold-cache, `--runs` cold runs each), the same code every time. Their
   within-session spread and between-session scatter are what a history of CPU-bound work here
   has to see through.
2. False steps over repeated flat histories: `--histories` histories of `--points` sessions drawn
   (without replacement, in random order) from the real ones, each through the same detection
   `ttfr history` runs (analyse/history_steps.py): the share that shows any step. Then the same on
   simulated flat series with the measured noise, at several lengths.
3. Power: simulated series with the measured noise and a step of +40% after the 4th point: how
   often the step is found at the right point, and how often its interval covers +40%; how often
   asv's step detection (asv.step_detect) puts its step within one point, same sign.

Targets: false steps <= 1% (the penalty's design rate) on real and simulated flat histories.

    .venv/bin/python benchmarks/history_steps.py [--sessions 12] [--runs 8] [--points 8] [--histories 2000] [--json FILE]
"""

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from ttfr.analyse import history_steps

CASE = "python_spin_5000_f64"


def real_sessions(sessions: int, runs: int) -> list[list[float]]:
    """Each session's cold-cache TTFR runs, one separate `ttfr run` each."""
    found = []
    with tempfile.TemporaryDirectory(prefix="ttfr-history-bench-") as scratch:
        for i in range(sessions):
            out = Path(scratch) / f"s{i}"
            subprocess.run([sys.executable, "-m", "ttfr", "run", "--cases", CASE, "--cache-policy", "cold-cache",
                            "--cold-runs", str(runs), "--no-html", "--out", str(out)], check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
            (result,) = out.iterdir()
            case = json.loads((result / "cases" / f"{CASE}.json").read_text())
            block = case["policies"]["cold-process/cold-cache"]
            found.append([r["metrics"]["ttfr_s"] for r in block["runs"] if r["outcome"] == "ok" and r["metrics"]["ttfr_s"]])
            print(f"  session {i + 1}/{sessions}: median {np.median(found[-1]) * 1e3:.1f} ms", flush=True)
    return found


def simulate(levels, within_sd, between_sd, runs, rng) -> list[list[float]]:
    return [list(level * np.exp(rng.normal(0, between_sd)) * np.exp(rng.normal(0, within_sd, runs))) for level in levels]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=12)
    parser.add_argument("--runs", type=int, default=8)
    parser.add_argument("--points", type=int, default=8)
    parser.add_argument("--histories", type=int, default=2000)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    started = time.monotonic()
    print(f"{args.sessions} real sessions of {CASE} ({args.runs} cold runs each):")
    sessions = real_sessions(args.sessions, args.runs)
    logs = [np.log(s) for s in sessions]
    within_sd = float(np.median([np.std(x, ddof=1) for x in logs]))
    medians = np.array([np.median(x) for x in logs])
    between_sd = float(np.sqrt(max(np.var(medians, ddof=1) - within_sd**2 * np.pi / 2 / args.runs, 0.0)))
    print(f"within-session spread {within_sd:.1%} a run; between-session scatter {between_sd:.1%}")
    rng = random.Random(0)
    false_real = 0
    for _ in range(args.histories):
        picked = rng.sample(sessions, args.points)
        false_real += bool(history_steps.detect(picked).steps)
    report = {"within_sd": within_sd, "between_sd": between_sd, "points": args.points,
              "false_step_rate_real": false_real / args.histories}  # fmt: skip
    print(f"false steps, {args.histories} flat histories of {args.points} real sessions: {false_real / args.histories:.2%}")
    generator = np.random.default_rng(0)
    for n in (6, 8, 12, 20):
        false = sum(bool(history_steps.detect(simulate([1.0] * n, within_sd, between_sd, args.runs, generator)).steps)
                    for _ in range(args.histories))  # fmt: skip
        report[f"false_step_rate_simulated_{n}"] = false / args.histories
        print(f"false steps, simulated flat histories of {n} points: {false / args.histories:.2%}")
    from asv import step_detect

    found = covered = asv_agrees = 0
    trials = args.histories // 4
    for _ in range(trials):
        series = simulate([1.0] * 3 + [1.4] * 8, within_sd, between_sd, args.runs, generator)
        detection = history_steps.detect(series)
        if [s.at for s in detection.steps] == [3]:
            found += 1
            covered += detection.steps[0].ci[0] <= 1.4 <= detection.steps[0].ci[1]
        asv_steps = step_detect.detect_steps([float(np.median(s)) for s in series])
        asv_agrees += len(asv_steps) == 2 and abs(asv_steps[1][0] - 3) <= 1 and asv_steps[1][2] > asv_steps[0][2]
    report.update(step_found=found / trials, step_covered=covered / max(found, 1), asv_agrees=asv_agrees / trials)
    print(f"a +40% step after 3 of 11 points, this machine's noise: found {found / trials:.1%}, interval covers +40% "
          f"in {covered / max(found, 1):.1%} of those; asv finds it (±1 point) in {asv_agrees / trials:.1%}")  # fmt: skip
    report["elapsed_s"] = time.monotonic() - started
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
