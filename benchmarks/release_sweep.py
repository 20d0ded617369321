"""`ttfr history --releases`: how long a sweep over a package's releases takes here, its environments
built for the first time (a fresh --env-cache; packages from uv's own cache where it has them) and
then reused.

- NumPy: 6 releases on numpy_matmul_512_f32 (quick profile, 5 rounds). Targets: <= 5 min with the
  environments' first build, <= 2 min with them cached.
- JAX (`--jax`): 6 releases on jax_jit_cpu_matmul_512_f32. Target: <= 20 min.

Each sweep is the command line a user runs, in a process of its own; the figures are wall times.

    .venv/bin/python benchmarks/release_sweep.py [--jax] [--json FILE]
"""

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

NUMPY = ("numpy=1.26.4,2.0.2,2.1.3,2.2.6,2.3.1,2.3.5", "numpy_matmul_512_f32", 300.0, 120.0)
JAX = ("jax=0.5.3,0.6.2,0.7.2,0.8.3,0.9.2,0.10.2", "jax_jit_cpu_matmul_512_f32", 1200.0, 1200.0)


def sweep(releases: str, case: str, envs: Path, out: Path) -> tuple[float, int, str]:
    argv = [sys.executable, "-m", "ttfr", "history", "--releases", releases, "--cases", case, "--env-cache", str(envs),
            "--out", str(out), "--figure", "ttfr_s,call_s,import_s"]  # fmt: skip
    started = time.monotonic()
    done = subprocess.run(argv, capture_output=True, text=True)
    elapsed = time.monotonic() - started
    lines = [line for line in done.stdout.splitlines() if not line.startswith("[")]
    return elapsed, done.returncode, "\n".join(lines[-25:]) + done.stderr[-2000:]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jax", action="store_true", help="also sweep 6 JAX releases (downloads ~0.5 GB once)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    report = {}
    for name, (releases, case, first_target, cached_target) in [("numpy", NUMPY), *([("jax", JAX)] if args.jax else [])]:
        with tempfile.TemporaryDirectory(prefix=f"ttfr-sweep-{name}-") as scratch:
            envs, out = Path(scratch) / "envs", Path(scratch) / "out"
            first, code, text = sweep(releases, case, envs, out)
            print(f"{name}: {releases} on {case}, environments built: {first:.0f} s (exit {code}; target "
                  f"<= {first_target:.0f} s: {first / first_target:.2f} of it)\n{text}")  # fmt: skip
            cached, code2, text2 = sweep(releases, case, envs, out)
            print(f"{name}: the same, environments reused: {cached:.0f} s (exit {code2}; target <= {cached_target:.0f} s:"
                  f" {cached / cached_target:.2f} of it)\n{text2}")  # fmt: skip
            report[name] = {"releases": releases, "case": case, "first_s": first, "cached_s": cached,
                            "first_target_s": first_target, "cached_target_s": cached_target, "exit": [code, code2]}  # fmt: skip
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
