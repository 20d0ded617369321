"""ttfr's wall time against NextStat's seed ML suite on the same matrix: the two cases
numpy_matmul_512_f32 and jax_jit_cpu_matmul_512_f32, 5 fresh-process cold runs each under one
cache policy (ttfr: cold-process/cold-cache, plus its unmeasured check process per case;
NextStat: 5 cold runs plus one warm process per case: 12 processes each). Alternating rounds:
ttfr (report.html written), ttfr --no-html (JSON and report.md, as NextStat's suite writes JSON
only), NextStat's suite.

NextStat's suite is not part of ttfr: clone github.com/NextStat/nextstat-public-benchmarks and
pass its suites/ml/suite.py.

    .venv/bin/python benchmarks/end_to_end.py PATH/TO/suites/ml/suite.py [rounds]
"""

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CASES = "numpy_matmul_512_f32,jax_jit_cpu_matmul_512_f32"


def wall_s(argv: list[str]) -> float:
    started = time.monotonic()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.monotonic() - started


def main(nextstat_suite: Path, rounds: int) -> None:
    ttfr = [str(Path(sys.executable).with_name("ttfr")), "run", "--cases", CASES, "--cold-runs", "5",
            "--cache-policy", "cold-process/cold-cache"]  # fmt: skip
    arms = {
        "ttfr run": lambda out: [*ttfr, "--out", out],
        "ttfr run --no-html": lambda out: [*ttfr, "--no-html", "--out", out],
        "NextStat suites/ml/suite.py": lambda out: [sys.executable, str(nextstat_suite), "--out-dir", out, "--cold-runs",
                                                    "5", "--cases", "matmul_512_f32", "--backends", "numpy,jax_jit_cpu"],
    }  # fmt: skip
    times = {name: [] for name in arms}
    for index in range(rounds):
        order = list(arms) if index % 2 == 0 else list(reversed(arms))
        for name in order:
            with tempfile.TemporaryDirectory() as out:
                times[name].append(wall_s(arms[name](str(Path(out) / "r"))))
    reference = statistics.median(times["NextStat suites/ml/suite.py"])
    print(f"rounds: {rounds} (alternating; same 2 cases, 5 cold runs each)")
    for name, values in times.items():
        shown = ", ".join(f"{v:.2f}" for v in values)
        print(f"{name:<30} median {statistics.median(values):5.2f} s  ({shown})  "
              f"{statistics.median(values) / reference:.2f}x NextStat")  # fmt: skip


if __name__ == "__main__":
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    main(Path(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 4)
