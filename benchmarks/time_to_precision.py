"""Time to precision: `ttfr run --precision 0.05` (the quick profile, then runs where they buy
the most precision per second) against the fixed `standard` profile (10 cold runs per policy,
5 warm processes) on the same cases: the quick matrix, every CPU case `ttfr run` picks by
default. Both are real `ttfr run`s, one after the other (alternating which goes first when
--pairs > 1); each one's wall time is measured around the process.

Precision of a result: every headline statistic (each cold policy's TTFR, the warm call) of
every ok case is assessed at the target by the same code the allocator uses
(ttfr.analyse.precision.assess: 95% order-statistic interval, half-width <= 5% of the median).

Target (issue 10): --precision reaches +-5% at 95% for every statistic in at most half the wall
time the fixed standard profile needs for equal or better precision. Standard's 5 warm
processes cannot give any 95% interval (6 is the fewest), so when standard misses some
statistics, the time it needs is projected: a fixed profile gives every stream the same run
count, so it needs, per stream kind, the most runs any statistic of that kind needs
(`needed_runs`: 1/sqrt(n) from its own interval), at least standard's counts, each run costing
what that stream's runs cost in the standard run. A statistic standard left without any
interval counts as needing 6 runs for the lower bound (the verdict), and as many as the most
any statistic of its kind needed under --precision for the estimate. The measured times, the
lower bound and the estimate are all printed.

    .venv/bin/python benchmarks/time_to_precision.py [--target 0.05] [--pairs 1] [--standard-first] [--backends B]
    .venv/bin/python benchmarks/time_to_precision.py --from-json FIGURES.json   # re-judge a saved run
"""

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ttfr.analyse import precision
from ttfr.artifacts.reader import load_finished
from ttfr.model.policies import WARM_PROCESS


def one_run(out: Path, extra: list[str]) -> tuple[float, Path]:
    argv = [sys.executable, "-m", "ttfr", "run", "--out", str(out), *extra]
    started = time.monotonic()
    done = subprocess.run(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    wall = time.monotonic() - started
    if done.returncode not in (0, 1):  # 1: a case failed; its statistics are simply not assessed
        raise SystemExit(f"{' '.join(argv)} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    (root,) = [p for p in out.iterdir() if p.is_dir()]
    return wall, root


def assess(root: Path, target: float) -> list[precision.Statistic]:
    return precision.assess(load_finished(root).cases, target)


def fixed_profile_needs(statistics: list[precision.Statistic], cold_runs: int, warm_procs: int,
                        informed: list[precision.Statistic] | None = None) -> dict:  # fmt: skip
    """Runs per stream a fixed profile needs for every statistic to meet the target, and the
    projected time of those runs (at each stream's measured cost per run). A statistic with
    no 95% interval counts as needing MIN_RUNS (a lower bound), or, with `informed` (the
    --precision run's statistics), the most runs any met statistic of its kind needed there."""
    needs = {"cold": cold_runs, "warm": warm_procs}
    informed_need = {"cold": precision.MIN_RUNS, "warm": precision.MIN_RUNS}
    for s in informed or []:
        kind = "warm" if s.policy == WARM_PROCESS else "cold"
        if s.state == precision.MET:
            informed_need[kind] = max(informed_need[kind], s.n)
    unknown = []
    for s in statistics:
        kind = "warm" if s.policy == WARM_PROCESS else "cold"
        if s.state == precision.MET:
            continue
        if s.needed_runs is None:  # no 95% interval at all (e.g. 5 warm processes)
            needs[kind] = max(needs[kind], informed_need[kind])
            unknown.append(f"{s.case} {s.policy}")
        else:
            needs[kind] = max(needs[kind], s.needed_runs)
    measured = sum(s.runs * s.cost_s for s in statistics if s.cost_s)
    projected = sum(needs["warm" if s.policy == WARM_PROCESS else "cold"] * s.cost_s for s in statistics if s.cost_s)
    return {"runs": needs, "measured_runs_s": measured, "projected_runs_s": projected, "without_interval": unknown}


def describe(name: str, wall: float, statistics: list[precision.Statistic]) -> str:
    met = sum(s.state == precision.MET for s in statistics)
    runs = sum(s.runs for s in statistics)
    worst = max((s for s in statistics if s.half_width is not None), key=lambda s: s.half_width, default=None)
    missing = sum(s.half_width is None for s in statistics)
    text = f"{name}: {wall:.0f} s wall, {runs} measured runs; {met}/{len(statistics)} statistics within the target"
    if worst:
        text += f"; widest +-{worst.half_width:.1%} ({worst.case} {worst.policy})"
    if missing:
        text += f"; {missing} without any 95% interval"
    return text


def judge(p_wall, p_stats, p_stopped, s_wall, s_stats) -> dict:
    """Print and return one pair's figures."""
    print(describe("  --precision", p_wall, p_stats) + f"; stopped: {p_stopped}")
    print(describe("  standard   ", s_wall, s_stats))
    every_met = all(s.state == precision.MET for s in s_stats)
    p_met = all(s.state == precision.MET for s in p_stats)
    figure = {"precision_wall_s": p_wall, "standard_wall_s": s_wall, "precision_met_all": p_met,
              "standard_met_all": every_met, "ratio_measured": p_wall / s_wall, "precision_stopped_by": p_stopped,
              "precision_statistics": [s.to_json() for s in p_stats],
              "standard_statistics": [s.to_json() for s in s_stats]}  # fmt: skip
    for name, informed in (("lower bound", None), ("estimate", p_stats)):
        needs = fixed_profile_needs(s_stats, 10, 5, informed)
        # the standard run's wall time scaled by what its runs would cost at the needed counts
        needed = s_wall if every_met else s_wall * needs["projected_runs_s"] / needs["measured_runs_s"]
        counted = "6, the fewest with one" if informed is None else "what --precision needed for their kind"
        basis = (
            ""
            if every_met
            else (
                f" ({needs['runs']['cold']} cold runs per policy, {needs['runs']['warm']} warm processes; "
                f"{len(needs['without_interval'])} statistics without an interval counted as needing {counted})"
            )
        )
        ratio = p_wall / needed
        verdict = "MET" if p_met and ratio <= 0.5 else "MISSED"
        print(f"  standard needs for equal precision, {name}: {needed:.0f} s{basis}; ratio {ratio:.2f}: {verdict}")
        figure[name.replace(" ", "_")] = {"standard_needed_s": needed, "runs": needs["runs"], "ratio": ratio}
    print(f"  measured ratio --precision / standard: {p_wall / s_wall:.2f}; every statistic met with --precision: "
          f"{p_met}")  # fmt: skip
    return figure


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", type=float, default=0.05)
    parser.add_argument("--pairs", type=int, default=1)
    parser.add_argument("--backends", help="limit the matrix (default: the quick matrix, every available backend)")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--standard-first", action="store_true", help="start the first pair with the standard run")
    parser.add_argument("--from-json", type=Path, help="judge the figures a previous run wrote with --json")
    args = parser.parse_args()
    if args.from_json:
        figures = []
        for old in json.loads(args.from_json.read_text()):
            p_stats = [precision.Statistic(**{"added": 0, **d}) for d in old["precision_statistics"]]
            s_stats = [precision.Statistic(**{"added": 0, **d}) for d in old["standard_statistics"]]
            figures.append(judge(old["precision_wall_s"], p_stats, old["precision_stopped_by"],
                                 old["standard_wall_s"], s_stats))  # fmt: skip
        return _exit(figures)
    selection = ["--backends", args.backends] if args.backends else []
    from ttfr.measure.spec import RunRequest, build_spec

    from ttfr.measure import catalog

    planned = build_spec(RunRequest(backends=args.backends or ())).cases
    cases = [c.id for c in planned if not catalog.availability(c.backend_info)]
    print(f"{len(cases)} cases (the quick matrix{' of ' + args.backends if args.backends else ''}), "
          f"target +-{args.target:.0%} at 95%, {os.cpu_count()} CPUs, {args.pairs} pair(s)")  # fmt: skip
    arms = {
        "precision": ["--precision", str(args.target), *selection],
        "standard": ["--profile", "standard", "--cases", ",".join(cases)],
    }
    figures = []
    with tempfile.TemporaryDirectory() as work:
        for pair in range(args.pairs):
            order = ("precision", "standard") if (pair + args.standard_first) % 2 == 0 else ("standard", "precision")
            got = {}
            for name in order:
                wall, root = one_run(Path(work) / f"{name}-{pair}", arms[name])
                got[name] = (wall, assess(root, args.target), json.loads((root / "suite.json").read_text()))
            p_wall, p_stats, p_suite = got["precision"]
            s_wall, s_stats, _ = got["standard"]
            figures.append({"pair": pair, "order": order,
                            **judge(p_wall, p_stats, p_suite["precision"]["stopped_by"], s_wall, s_stats)})  # fmt: skip
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1))
    return _exit(figures)


def _exit(figures: list[dict]) -> int:
    worst = max(f["lower_bound"]["ratio"] for f in figures)
    return 0 if all(f["precision_met_all"] for f in figures) and worst <= 0.5 and math.isfinite(worst) else 1


if __name__ == "__main__":
    sys.exit(main())
