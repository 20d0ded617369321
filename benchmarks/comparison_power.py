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

from ttfr import selftest

TARGETS = {"false_alarm": 0.01, 0.20: 0.80, 0.10: 0.50, "coverage": 0.93}


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
        ok = "ok" if aa["false_alarm_rate"] <= TARGETS["false_alarm"] else "MISSED"
        print(f"A/A {regime:4s}: {aa['false_alarms']}/{aa['comparisons']} false alarms = {aa['false_alarm_rate']:.1%} "
              f"(target <= 1%: {ok}); noise floor p95 |B/A-1| = {aa['noise_floor_p95']:.1%}")  # fmt: skip
    for level in result["injected"]:
        target = TARGETS.get(level["nominal"])
        verdict = (
            ""
            if target is None
            else f" (target >= {target:.0%}: {'ok' if level['detected_as_regression'] >= target else 'MISSED'})"
        )
        coverage_ok = "ok" if level["ci_coverage"] >= TARGETS["coverage"] else "MISSED"
        print(f"+{level['nominal']:.0%} (measured {level['measured_ratio'] - 1:+.1%}): detected "
              f"{level['detected_as_regression']:.0%}{verdict}; CI covers the measured effect "
              f"{level['ci_coverage']:.0%} (target >= 93%: {coverage_ok})")  # fmt: skip
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(result, fh, indent=1)


if __name__ == "__main__":
    main()
