"""What `--explain` costs: the default quick suite with and without it, side by side in one run.

Each round runs `ttfr run` (the default CPU suite, --no-html) once plain and once with --explain,
in alternating order, each into a fresh directory, and times it end to end. --explain adds one
unmeasured diagnostic process per case and cold policy; the issue's target is at most 1.4x the
plain run's wall time (the cold torch.compile diagnostics dominate). Prints each arm's median and
the ratio; exits 1 when the median ratio is above 1.4.

    .venv/bin/python benchmarks/explain_cost.py [rounds] [extra ttfr run options...]
"""

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET = 1.4


def wall_s(argv: list[str]) -> float:
    started = time.monotonic()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.monotonic() - started


def main(rounds: int, extra: list[str]) -> int:
    ttfr = [str(Path(sys.executable).with_name("ttfr")), "run", "--no-html", *extra]
    arms = {"ttfr run": [], "ttfr run --explain": ["--explain"]}
    times = {name: [] for name in arms}
    for index in range(rounds):
        order = list(arms) if index % 2 == 0 else list(reversed(arms))
        for name in order:
            with tempfile.TemporaryDirectory() as out:
                times[name].append(wall_s([*ttfr, *arms[name], "--out", str(Path(out) / "r")]))
    plain, explained = (statistics.median(times[name]) for name in arms)
    print(f"rounds: {rounds} (alternating), ttfr run {' '.join(extra) or '(default suite)'} --no-html")
    for name, values in times.items():
        print(f"{name:<22} median {statistics.median(values):7.1f} s  ({', '.join(f'{v:.1f}' for v in values)})")
    ratio = explained / plain
    print(f"--explain costs {ratio:.2f}x the plain run's wall time (target <= {TARGET}x)")
    return 0 if ratio <= TARGET else 1


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 1, sys.argv[2:]))
