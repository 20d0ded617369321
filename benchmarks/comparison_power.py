"""What ttfr's comparisons achieve on this machine: false alarms over A/A comparisons,
detection of injected +5/+10/+20% slowdowns (real extra work, its size measured), and how
often the reported CI covers the injected effect. Every comparison is `--rounds` paired
rounds of real worker processes in ABBA order, judged at alpha 0.01 (one comparison).

Targets (2-core shared machine, 20 rounds): false alarms <= 1% over >= 200 A/A comparisons;
+20% detected >= 80%, +10% >= 50%; CI coverage >= 93%.

    .venv/bin/python benchmarks/comparison_power.py [--aa 200] [--per-level 60] [--rounds 20]
"""

import argparse
import json
import sys

from ttfr.pipeline import selftest
from ttfr.report.terminal import format_rate

TARGETS = {"false_alarm": 0.01, 0.20: 0.80, 0.10: 0.50, "coverage": 0.93}


def _meets(entry: dict, target: float, upper: bool = False) -> str:
    """ok / MISSED on the point estimate, and whether the interval still allows the target."""
    low, high = entry["ci95"]
    met = entry["rate"] <= target if upper else entry["rate"] >= target
    possible = low <= target if upper else high >= target
    return "ok" if met else ("MISSED (within the interval)" if possible else "MISSED")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--aa", type=int, default=200, help="A/A comparisons per regime (cold, warm)")
    parser.add_argument("--per-level", type=int, default=60)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--json", help="write the full result here")
    args = parser.parse_args()
    step = max(1, args.aa // 10)

    def progress(message):
        count = int(message.split()[-1].split("/")[0])
        if count % step == 0:
            print(message, file=sys.stderr, flush=True)

    result = selftest.run(args.aa, args.per_level, args.rounds, progress=progress)
    print(f"{args.rounds} paired rounds per comparison, alpha {result['alpha']}, {result['elapsed_s'] / 60:.1f} min")
    for regime, aa in result["aa"].items():
        alarm = aa["false_alarm"]
        print(f"A/A {regime:4s}: gate false alarms (regression verdicts) {format_rate(alarm)} "
              f"(target <= 1%: {_meets(alarm, TARGETS['false_alarm'], upper=True)}); significant either way "
              f"{format_rate(aa['significant_either_way'])}; noise floor p95 |B/A-1| = {aa['noise_floor_p95']:.1%}; "
              f"median CI half-width {aa['median_ci_half_width']:.1%}")  # fmt: skip
    for level in result["injected"]:
        target = TARGETS.get(level["nominal"])
        verdict = "" if target is None else f" (target >= {target:.0%}: {_meets(level['detected'], target)})"
        low, high = level["measured_ratio_range"]
        print(f"+{level['nominal']:.0%} (measured {level['measured_ratio'] - 1:+.1%}, {low - 1:+.1%} to {high - 1:+.1%} "
              f"over {level['truth_processes']} processes; median estimate {level['median_estimate'] - 1:+.1%}): "
              f"detected {format_rate(level['detected'])}{verdict}; CI covers the measured effect "
              f"{format_rate(level['coverage'])} (target >= 93%: {_meets(level['coverage'], TARGETS['coverage'])})")  # fmt: skip
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(result, fh, indent=1)


if __name__ == "__main__":
    main()
