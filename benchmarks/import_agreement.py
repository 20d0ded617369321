"""Where ttfr's import_s and hyperfine part ways, and where they agree.

hyperfine times a process from spawn to exit, so `import numpy` minus `pass` also holds the
interpreter's teardown with NumPy loaded; ttfr's import_s ends when the import returns. The
`os._exit(0)` variants end a process without its teardown, which splits hyperfine's
difference into the import and the teardown:

    import  = hyperfine(import numpy; os._exit)  - hyperfine(import os; os._exit)
    teardown = [hyperfine(import numpy) - hyperfine(pass)] - import

ttfr's import_s (numpy backend, worker as `ttfr run` starts it) is compared with the import;
then, on the same command (`python -c "import numpy"`), ttfr's time to exit (process_s, through
its command executor) with hyperfine's wall time. Rounds alternate hyperfine and ttfr.

    .venv/bin/python benchmarks/import_agreement.py [rounds] [runs-per-round]
"""

import json
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile

from _harness import run_worker, worker_job

from ttfr.pipeline import harness_check

PY = sys.executable
COMMANDS = {
    "import": "import numpy",
    "pass": "pass",
    "import_exit": "import numpy, os; os._exit(0)",
    "pass_exit": "import os; os._exit(0)",
}


def hyperfine_medians(runs: int) -> dict[str, float]:
    with tempfile.NamedTemporaryFile(suffix=".json") as export:
        subprocess.run(["hyperfine", "-N", "--warmup", "2", "--runs", str(runs), "--export-json", export.name,
                        *(shlex.join([PY, "-c", code]) for code in COMMANDS.values())],
                       check=True, capture_output=True)  # fmt: skip
        results = json.load(open(export.name))["results"]
    return {name: result["median"] for name, result in zip(COMMANDS, results)}


def main(rounds: int, runs: int) -> None:
    if not shutil.which("hyperfine"):
        raise SystemExit("hyperfine is not installed (Debian: apt-get install hyperfine; or `make bench`)")
    ratios, ttfr_all, imports, teardowns, with_teardown = [], [], [], [], []
    for _ in range(rounds):
        h = hyperfine_medians(runs)
        imported = h["import_exit"] - h["pass_exit"]
        whole = h["import"] - h["pass"]
        ttfr = statistics.median(
            run_worker(worker_job("numpy_backend", "matmul", size=2, dtype="float32"))[1].import_s for _ in range(runs)
        )
        ratios.append(ttfr / imported)
        ttfr_all.append(ttfr)
        imports.append(imported)
        with_teardown.append(whole)
        teardowns.append(whole - imported)
    agreement, why = harness_check.hyperfine_agreement(PY, rounds=rounds, runs_per_round=runs)
    ms = lambda values: f"{statistics.median(values) * 1e3:6.1f} ms"  # noqa: E731
    print(f"rounds: {rounds} x {runs} runs (hyperfine and ttfr alternate)")
    print(f"hyperfine: import numpy - pass (spawn to exit)      {ms(with_teardown)}")
    print(f"  of which the import (os._exit variants)           {ms(imports)}")
    print(f"  of which NumPy's share of interpreter teardown    {ms(teardowns)}")
    print(f"ttfr import_s (numpy backend)                       {ms(ttfr_all)}")
    print(f"ratio ttfr import_s / hyperfine's import            {statistics.median(ratios):.3f} "
          f"(per round: {', '.join(f'{r:.2f}' for r in ratios)})")  # fmt: skip
    whole_ratio = statistics.median(ttfr_all) / statistics.median(with_teardown)
    print(f"ratio ttfr import_s / hyperfine incl. teardown      {whole_ratio:.3f}")
    if agreement:
        print(f"same command, {shlex.join(agreement.command)}: ttfr process_s {agreement.ttfr_median_s * 1e3:.1f} ms, "
              f"hyperfine {agreement.hyperfine_median_s * 1e3:.1f} ms, ratio {agreement.ratio:.3f} "
              f"(per round: {', '.join(f'{r:.2f}' for r in agreement.per_round)})")  # fmt: skip
    else:
        print(f"same command: not measured ({why})")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5, int(sys.argv[2]) if len(sys.argv) > 2 else 10)
