"""`make gpu-check`: every GPU row of ttfr on a machine with a GPU, in one command (~10 min on an H100).

    .venv/bin/python benchmarks/gpu_check.py [--out docs/gpu] [--quick]

Fails (exit 1, never a warning) where no GPU is usable. Otherwise runs, in one `ttfr run` each:
the array workloads at 512 (f32, f64) on every GPU backend under every cache policy; the declared
TF32 variants on matmul and the MLP step (f32); the host <-> device conversion routes (4 and 256
MiB); the HistFactory workloads on the `simple` preset;
the ahead-of-time loops; then `pytest -m gpu`. It checks what the GPU rows promise — every GPU
case ok with its result check passed, no warm process unsynchronised, cold-cache runs verified
with no hits and warm-cache runs with hits, JAX's compile stages summing to at most its first
call, a timed device_init phase, a device peak memory (and one per phase: setup, first call,
steady state), and the manifest's ptxas/driver/XLA records — and writes its report (markdown,
with the command) to --out.
"""

from __future__ import annotations

import argparse
import datetime as dt
import shlex
import subprocess
import sys
from pathlib import Path

from ttfr.artifacts.reader import load_finished
from ttfr.child.conversion_routes import ROUTES
from ttfr.measure import catalog
from ttfr.model.base import encode

# the compute backends (the conversion backend has its own run: host <-> device routes)
GPU_BACKENDS = [name for name, b in catalog.BACKENDS.items() if b.device == "gpu" and not b.opt_in
                and b.framework != "interop_gpu"]  # fmt: skip
TF32_BACKENDS = [name for name, b in catalog.BACKENDS.items() if b.device == "gpu" and b.opt_in]
RUNS = {
    "arrays": ["--backends", ",".join(GPU_BACKENDS), "--workloads", "matmul,fused_chain,mlp_train_step", "--sizes",
               "512", "--dtypes", "f32,f64", "--cache-policy", "all"],
    # the declared TF32 variants: float32 only (float64 has no TF32), their check at TF32's tolerance
    "tf32": ["--backends", ",".join(TF32_BACKENDS), "--workloads", "matmul,mlp_train_step", "--sizes", "512", "--dtypes",
             "f32"],
    # host <-> device conversions (issue 28): pageable and pinned, both directions, and DLPack on the device
    "conversions": ["--backends", "interop_gpu", "--workloads", "convert", "--sizes", "4194304,268435456"],
    "histfactory": ["--backends", "jax_jit_gpu,torch_eager_cuda", "--workloads", "hf_nll_grad,hf_profiled_q0,hf_train_loop",
                    "--workspace-preset", "simple"],
    "loops": ["--backends", "jax_jit_gpu,torch_compile_cuda", "--workloads", "sweep_mlp_aot,ragged_batches_aot"],
}  # fmt: skip
COMMON = ["--cold-runs", "2", "--warm-procs", "2", "--seed", "1", "--no-html"]


def case_problems(case: dict) -> list[str]:
    """What a GPU case's file says against the GPU rows' promises (empty: it keeps them)."""
    name = case["case"]
    if case["status"] != "ok":
        return [f"{name}: {case['status']}: {case['reason']}"]
    problems = []
    check = case.get("correctness") or {}
    if check.get("passed") is not True:
        problems.append(f"{name}: result check not passed ({check.get('detail') or check.get('passed')})")
    policies = case.get("policies", {})
    for proc in (policies.get("warm-process") or {}).get("procs", []):
        if (proc.get("sync_check") or {}).get("unsynchronised"):
            problems.append(f"{name}: warm process {proc['index']} unsynchronised")
    cold, warm = policies.get("cold-process/cold-cache"), policies.get("cold-process/warm-cache")
    compiles = catalog.BACKENDS[case["backend"]].compiles
    if compiles and cold:
        verification = cold["cache_verification"]
        if verification["verdict"] != "verified" or verification.get("hits_total"):
            problems.append(f"{name}: cold cache {verification['verdict']} with {verification.get('hits_total')} hits")
    if compiles and warm and not (warm["cache_verification"].get("hits_total") or 0) > 0:
        problems.append(f"{name}: warm cache without hits ({warm['cache_verification']['verdict']})")
    if case["backend"].startswith("jax") and cold:
        stages, first = cold.get("stages_summary") or {}, (cold["summary"].get("first_call_s") or {}).get("median")
        parts = [(stages.get(k) or {}).get("median") or 0.0 for k in ("trace_s", "lower_s", "compile_s")]
        if first and sum(parts) > first * 1.05:
            problems.append(f"{name}: JAX's stages sum to {sum(parts):.3g} s, above its first call {first:.3g} s")
    if case["workload"] in ROUTES:  # a conversion: its copy evidence, not a compute case's memory and stages
        evidence = (case.get("conversion") or {}).get("evidence") or {}
        if evidence.get("copied") is None:
            problems.append(f"{name}: no copy verdict ({'no evidence' if not evidence else 'the evidence disagrees'})")
        return problems
    memory = case.get("memory") or {}
    if not memory.get("device_peak_bytes"):
        problems.append(f"{name}: no device peak memory")
    peaks = memory.get("device_peaks") or {}
    if not all(peaks.get(phase) for phase in ("setup", "first_call", "steady")):
        problems.append(f"{name}: no device peak for every phase ({peaks or 'none recorded'})")
    if cold and not (cold["summary"].get("device_init_s") or {}).get("median"):
        problems.append(f"{name}: no device_init phase timed")
    return problems


def manifest_problems(manifest: dict) -> list[str]:
    gpu = manifest.get("gpu") or {}
    problems = [] if gpu.get("driver_version") and gpu.get("cuda_version") else ["manifest: no driver or CUDA version"]
    if not gpu.get("ptxas"):
        problems.append("manifest: no ptxas recorded")
    return problems


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=Path("docs/gpu"), help="where the report goes")
    ap.add_argument("--work", type=Path, default=Path("gpu-check-results"), help="where the runs go")
    args = ap.parse_args(argv)
    if not catalog.gpu_present():
        print("gpu-check: no GPU here (no /dev/nvidia* and no nvidia-smi): nothing to check, and that is a failure",
              file=sys.stderr)  # fmt: skip
        return 1
    lines, problems = [], []
    for label, options in RUNS.items():
        out = args.work / label
        argv_run = [sys.executable, "-m", "ttfr", "run", *options, *COMMON, "--out", str(out)]
        done = subprocess.run(argv_run, capture_output=True, text=True, timeout=1800)
        lines.append(f"- `{shlex.join(['ttfr', *argv_run[3:]])}`: exit {done.returncode}")
        roots = sorted(p for p in out.iterdir() if p.is_dir()) if out.is_dir() else []
        if not roots:
            problems.append(f"{label}: no result ({done.stderr.strip()[-500:]})")
            continue
        root = roots[-1]
        finished = load_finished(root)  # verified (schemas, hashes), as every reader of a result directory
        problems += manifest_problems(finished.manifest)
        for case in map(encode, finished.cases):
            if catalog.BACKENDS[case["backend"]].device == "gpu":
                problems += case_problems(case)
    tests = subprocess.run([sys.executable, "-m", "pytest", "-m", "gpu", "-q", "-p", "no:cacheprovider"], capture_output=True,
                           text=True, timeout=1800)  # fmt: skip
    lines.append(f"- `pytest -m gpu`: exit {tests.returncode}: {tests.stdout.strip().splitlines()[-1:]}")
    if tests.returncode not in (0, 5):  # 5: no test collected
        problems.append("pytest -m gpu failed")
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    args.out.mkdir(parents=True, exist_ok=True)
    report = args.out / f"gpu-check-{stamp}.md"
    body = [f"# make gpu-check, {stamp}", "", "Command: `make gpu-check`", "", *lines, "",
            f"## {len(problems)} problem(s)", "", *(f"- {p}" for p in problems or ["none"]), ""]  # fmt: skip
    report.write_text("\n".join(body))
    print("\n".join(body))
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
