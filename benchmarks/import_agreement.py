"""Agreement of ttfr's import_s with an external tool: for NumPy, ttfr's import_s against
hyperfine's `python -c "import numpy"` minus `python -c pass`, interleaved round by round.

    .venv/bin/python benchmarks/import_agreement.py [rounds] [runs-per-round]
"""

import json
import shutil
import statistics
import subprocess
import sys
import tempfile

from _harness import run_worker, worker_job


def hyperfine_medians(runs: int) -> tuple[float, float]:
    with tempfile.NamedTemporaryFile(suffix=".json") as export:
        subprocess.run(
            ["hyperfine", "-N", "--warmup", "2", "--runs", str(runs), "--export-json", export.name,
             f"{sys.executable} -c 'import numpy'", f"{sys.executable} -c pass"],
            check=True, capture_output=True,
        )  # fmt: skip
        results = json.load(open(export.name))["results"]
    return results[0]["median"], results[1]["median"]


def main(rounds: int, runs: int) -> None:
    if not shutil.which("hyperfine"):
        raise SystemExit("hyperfine is not installed (Debian: apt-get install hyperfine; or `make bench`)")
    ratios, ttfr_all, external_all = [], [], []
    for _ in range(rounds):
        numpy_s, pass_s = hyperfine_medians(runs)
        external = numpy_s - pass_s
        imports = [run_worker(worker_job("numpy_backend", "matmul", size=2, dtype="float32"))[1].import_s for _ in range(runs)]
        ttfr = statistics.median(imports)
        ratios.append(ttfr / external)
        ttfr_all.append(ttfr)
        external_all.append(external)
    print(f"rounds: {rounds} x {runs} runs (hyperfine and ttfr alternate)")
    print(f"hyperfine: import numpy - pass   median {statistics.median(external_all) * 1e3:6.1f} ms")
    print(f"ttfr import_s (numpy backend)    median {statistics.median(ttfr_all) * 1e3:6.1f} ms")
    print(
        f"ratio ttfr / hyperfine           {statistics.median(ratios):.3f} (per-round: {', '.join(f'{r:.2f}' for r in ratios)})"
    )


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5, int(sys.argv[2]) if len(sys.argv) > 2 else 10)
