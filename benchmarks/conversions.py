"""Issue 28's targets for the conversion routes, measured by ttfr itself (`ttfr run`, real processes):

1. the harness adds no copy of its own: a zero-copy route's warm call is flat from the smallest to
   the largest size (largest / smallest <= 2x), and for every route the copy evidence agrees with
   the timing (a route that copied grows with size, one that did not stays flat);
2. a copying route whose copy is a plain memcpy (`numpy_copy`: np.array(a, copy=True)) runs within
   10% of the same process's memcpy at >= 4 MiB, against the memcpy into a fresh destination (the
   route allocates its own: first-touch included) and the touched one; the routes below 50% of
   memcpy are named;
3. the whole catalogue at its quick defaults (every route, 4 MiB, f32) runs in <= 3 minutes.

    .venv/bin/python benchmarks/conversions.py [--large-bytes N] [--skip-catalogue]

Prints the figures and the verdict of each target (exit 1 when one is missed). The large size
defaults to 1 GiB (issue 28); it needs ~10 GiB free (the memory guard skips it otherwise).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ttfr.artifacts.reader import load_finished
from ttfr.child.conversion_routes import ROUTES
from ttfr.model.base import encode

SMALL = 1 << 10
LARGE = 1 << 30
MEMCPY_SIZES = (4 << 20, 64 << 20)
FLAT_LIMIT = 2.0
MEMCPY_TOLERANCE = 0.10
CATALOGUE_LIMIT_S = 180.0
CPU_ROUTES = [name for name, route in ROUTES.items() if route.device == "cpu"]


def ttfr_run(out: Path, *options: str) -> list[dict]:
    """One `ttfr run` (its cases, read back verified, as JSON data); the wall time is the caller's to take."""
    argv = [str(Path(sys.executable).with_name("ttfr")), "run", "--backends", "interop", "--no-html", "--out", str(out),
            *options]  # fmt: skip
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    (result,) = [p for p in out.iterdir() if p.is_dir()]
    return [encode(case) for case in load_finished(result).cases]  # verified (schemas, hashes), as every reader


def by_route(cases: list[dict]) -> dict[str, dict[int, dict]]:
    table: dict[str, dict[int, dict]] = {}
    for case in cases:
        table.setdefault(case["workload"], {})[case["size"]] = case
    return table


def flat_and_agreeing(large: int) -> list[str]:
    """Targets 1: every CPU route at the smallest and the large size, warm process only."""
    misses = []
    with tempfile.TemporaryDirectory() as tmp:
        cases = ttfr_run(Path(tmp), "--workloads", ",".join(CPU_ROUTES), "--sizes", f"{SMALL},{large}", "--cache-policy",
                         "warm-process", "--warm-procs", "1", "--warm-samples", "10")  # fmt: skip
    print(f"\nwarm call, {SMALL} B vs {large} B (f32); copied = the evidence's verdict at the large size")
    print(f"{'route':34} {'copied':>7} {'small':>10} {'large':>10} {'ratio':>9}  verdict")
    for route, sizes in by_route(cases).items():
        small, big = sizes.get(SMALL), sizes.get(large)
        figures = [c.get("conversion") if c and c["status"] != "failed" else None for c in (small, big)]
        if not all(figures) or None in (figures[0]["call_s"], figures[1]["call_s"]):
            why = next((c["reason"] for c in (small, big) if c and c["reason"]), "no figure")
            print(f"{route:34} {'':>7} {'':>10} {'':>10} {'':>9}  no figure: {why}")
            continue
        ratio = figures[1]["call_s"] / figures[0]["call_s"]
        copied = figures[1]["evidence"]["copied"]
        # a view's time does not depend on its bytes; a copy's grows with them (1 KiB -> 1 GiB: ~1e6x)
        agrees = (ratio <= FLAT_LIMIT) if copied is False else (ratio > 10 * FLAT_LIMIT) if copied else None
        verdict = "flat" if ratio <= FLAT_LIMIT else "grows"
        verdict += "" if agrees else " (DISAGREES with the copy evidence)" if agrees is False else " (no copy verdict)"
        if agrees is False:
            misses.append(f"{route}: copied={copied} but {large}/{SMALL} B warm ratio {ratio:.3g}")
        print(f"{route:34} {str(copied):>7} {figures[0]['call_s']:10.3g} {figures[1]['call_s']:10.3g} {ratio:9.3g}  {verdict}")
    return misses


def against_memcpy() -> list[str]:
    """Target 2: every CPU route at >= 4 MiB against the same process's memcpy."""
    misses = []
    with tempfile.TemporaryDirectory() as tmp:
        cases = ttfr_run(Path(tmp), "--workloads", ",".join(CPU_ROUTES), "--sizes", ",".join(map(str, MEMCPY_SIZES)),
                         "--cache-policy", "warm-process", "--warm-procs", "1", "--warm-samples", "10")  # fmt: skip
    print("\ncopying routes against memcpy (np.copyto of the same bytes; bytes counted once)")
    print(f"{'route':34} {'size':>9} {'GB/s':>7} {'% memcpy':>9} {'% fresh':>8}")
    below = set()
    for route, sizes in by_route(cases).items():
        for size, case in sorted(sizes.items()):
            figures = case.get("conversion")
            if not figures or figures["memcpy_fraction"] is None:
                continue
            fresh = figures["evidence"]["memcpy_fresh_s"] / figures["call_s"]
            print(f"{route:34} {size:9d} {figures['bytes_per_s'] / 1e9:7.2f} {100 * figures['memcpy_fraction']:8.0f}% "
                  f"{100 * fresh:7.0f}%")  # fmt: skip
            if figures["below_half_memcpy"]:
                below.add(route)
            if route == "numpy_copy" and abs(fresh - 1.0) > MEMCPY_TOLERANCE:
                misses.append(f"numpy_copy at {size} B: {fresh:.2f} of a fresh-destination memcpy (limit ±10%)")
    print(f"below 50% of memcpy: {', '.join(sorted(below)) or 'none'}")
    return misses


def catalogue_time() -> list[str]:
    """Target 3: `--workloads convert` at the quick profile's defaults."""
    with tempfile.TemporaryDirectory() as tmp:
        started = time.monotonic()
        cases = ttfr_run(Path(tmp), "--workloads", "convert")
        wall = time.monotonic() - started
    statuses = {}
    for case in cases:
        statuses[case["status"]] = statuses.get(case["status"], 0) + 1
    print(f"\nquick catalogue (--workloads convert): {len(cases)} cases in {wall:.0f} s ({statuses})")
    return [f"quick catalogue took {wall:.0f} s (limit {CATALOGUE_LIMIT_S:.0f} s)"] if wall > CATALOGUE_LIMIT_S else []


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--large-bytes", type=int, default=LARGE)
    parser.add_argument("--skip-catalogue", action="store_true")
    args = parser.parse_args(argv)
    misses = flat_and_agreeing(args.large_bytes) + against_memcpy()
    if not args.skip_catalogue:
        misses += catalogue_time()
    print("\n" + ("every target met" if not misses else "missed:\n  " + "\n  ".join(misses)))
    return 1 if misses else 0


if __name__ == "__main__":
    sys.exit(main())
