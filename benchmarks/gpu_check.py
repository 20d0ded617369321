"""`make gpu-check`: every GPU row of ttfr on a machine with a GPU, in one command.

    python3 scripts/gpu_stack.py --wheelhouse wheelhouse -- [--quick | --full] [--out docs/gpu]
    .venv/bin/python benchmarks/gpu_check.py [--quick | --full] [--out docs/gpu]

`--quick` (the default) runs every GPU row at least once, in minutes: the array workloads (matmul,
f32 and f64) on every GPU backend under every cache policy, the declared TF32 variants, the host <->
device conversion routes at one size (4 MiB), the HistFactory workloads on the `simple` preset, one
ahead-of-time loop, then `pytest -m gpu`; one process per policy. `--full` is the whole check
(~300 processes): three array workloads, both conversion sizes, both AOT loops on both frameworks,
two processes per policy.

Before anything runs it prints the plan: the processes each `ttfr run` will start (ttfr's own
planner, as if a GPU were there) and the time they are estimated to take on one H100-class GPU
(GPU_PROCESS_S, below, says how). Then it fails (exit 1, never a warning) where no GPU is usable.
Otherwise it checks what the GPU rows promise — every GPU case ok with its result check passed, no
warm process unsynchronised, cold-cache runs verified with no hits and warm-cache runs with hits,
JAX's compile stages summing to at most its first call, a timed device_init phase, a device peak
memory (and one per phase: setup, first call, steady state), and the manifest's ptxas/driver/XLA
records — and writes to --out its report (markdown, with the command) and a compact summary
(gpu-check-<stamp>.json, ttfr.gpu_check_summary.v1: pass/fail per GPU row with the reason, a few
kilobytes).
"""

from __future__ import annotations

import argparse
import datetime as dt
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

from ttfr.artifacts.reader import load_finished
from ttfr.artifacts.store import ArtifactError, write_json
from ttfr.child.conversion_routes import ROUTES
from ttfr.commands import cli
from ttfr.commands import run as run_command
from ttfr.measure import catalog
from ttfr.measure.plan import CHECK, WARM, Task, build_plan
from ttfr.measure.spec import build_spec
from ttfr.model.base import decode, encode
from ttfr.model.policies import COLD_CACHE
from ttfr.model.gpu_check import GPU_CHECK_SCHEMA, REASON_CHARS, GpuCheckSummary

# the compute backends (the conversion backend has its own run: host <-> device routes)
GPU_BACKENDS = [name for name, b in catalog.BACKENDS.items() if b.device == "gpu" and not b.opt_in
                and b.framework != "interop_gpu"]  # fmt: skip
TF32_BACKENDS = [name for name, b in catalog.BACKENDS.items() if b.device == "gpu" and b.opt_in]
STANDARD = "cold-cache,warm-cache,warm-process"  # `all` would add the precompiled policies (their own run below)
# the quick check's: JAX's (a process of seconds); torch's makers and loads compile for minutes (the full check's)
PRECOMPILED_GPU = catalog.BACKENDS["jax_jit_gpu"].precompiled
FULL = {
    "arrays": ["--backends", ",".join(GPU_BACKENDS), "--workloads", "matmul,fused_chain,mlp_train_step", "--sizes",
               "512", "--dtypes", "f32,f64", "--cache-policy", STANDARD],
    # precompiled artifacts (issue 39): every mechanism a GPU backend offers, on an empty and on a warm cache
    "precompiled": ["--backends", ",".join(GPU_BACKENDS), "--workloads", "matmul,mlp_train_step", "--sizes", "512",
                    "--dtypes", "f32", "--cache-policy", "cold-cache,warm-cache,precompiled"],
    # the declared TF32 variants: float32 only (float64 has no TF32), their check at TF32's tolerance
    "tf32": ["--backends", ",".join(TF32_BACKENDS), "--workloads", "matmul,mlp_train_step", "--sizes", "512", "--dtypes",
             "f32"],
    # host <-> device conversions (issue 28): pageable and pinned, both directions, and DLPack on the device
    "conversions": ["--backends", "interop_gpu", "--workloads", "convert", "--sizes", "4194304,268435456"],
    "histfactory": ["--backends", "jax_jit_gpu,torch_eager_cuda", "--workloads", "hf_nll_grad,hf_profiled_q0,hf_train_loop",
                    "--workspace-preset", "simple"],
    "loops": ["--backends", "jax_jit_gpu,torch_compile_cuda", "--workloads", "sweep_mlp_aot,ragged_batches_aot"],
}  # fmt: skip
# Every row at least once, one process per policy: ~45 processes, estimated under 5 minutes.
QUICK = {
    "arrays": ["--backends", ",".join(GPU_BACKENDS), "--workloads", "matmul", "--sizes", "512", "--dtypes", "f32,f64",
               "--cache-policy", STANDARD],
    # each mechanism's artifact made on the GPU and loaded on an empty cache (its claim checked there)
    "precompiled": ["--backends", "jax_jit_gpu", "--workloads", "matmul", "--sizes", "512", "--dtypes", "f32",
                    "--cache-policy", ",".join(f"precompiled/{m}/cold-cache" for m in PRECOMPILED_GPU)],
    "tf32": ["--backends", ",".join(TF32_BACKENDS), "--workloads", "matmul", "--sizes", "512", "--dtypes", "f32",
             "--cache-policy", "warm-process"],
    "conversions": ["--backends", "interop_gpu", "--workloads", "convert", "--sizes", "4194304",
                    "--cache-policy", "warm-process"],
    "histfactory": ["--backends", "jax_jit_gpu,torch_eager_cuda", "--workloads", "hf_nll_grad,hf_profiled_q0,hf_train_loop",
                    "--workspace-preset", "simple", "--cache-policy", "cold-cache"],
    "loops": ["--backends", "jax_jit_gpu", "--workloads", "sweep_mlp_aot", "--cache-policy", STANDARD],
}  # fmt: skip
COMMON = {"quick": ["--cold-runs", "1", "--warm-procs", "1", "--seed", "1", "--no-html"],
          "full": ["--cold-runs", "2", "--warm-procs", "2", "--seed", "1", "--no-html"]}  # fmt: skip
RUN_TIMEOUT_S = 1800
# Seconds per process, read on the first GPU lease (2026-11-28, one H200 on Firecracker, 16 cores, torch
# 2.11.0+cu130, jax 0.11.2; docs/gpu/2026-11-28-h200.md): each process's wall from spawn to reap in the
# runs' journals. A JAX process ~4 s (its first cold-cache compile on a fresh machine ~11 s: XLA's GPU
# compile of a 512 matmul took 5.5 s), torch eager ~5 s, a conversion ~6 s, torch.compile ~21 s cold and
# ~24 s on a warm cache (importing Inductor inside torch.compile(fn) took 8.6 s, cache or not), and the
# AOT sweep's cold-cache process 57 s (every program compiled). The first check had guessed 5 min from
# CPU figures; it took 8.4 min.
GPU_PROCESS_S = {
    "jax": 4.5,
    "torch": 5.5,
    "torch_compile_cold": 22.0,
    "torch_compile_warm_cache": 24.0,
    "interop_gpu": 6.5,
    "aot_loop_cold": 55.0,
}
WARM_EXTRA_S = 0.5  # a warm-regime process's calibration and samples
RUN_OVERHEAD_S = 3.5  # one `ttfr run`: its imports, analysis and writes
PYTEST_S = 25.0
PYTEST = "pytest"  # the check's last run: `pytest -m gpu`


def process_seconds(task: Task) -> float:
    backend = task.case.backend_info
    if backend.framework == "interop_gpu":
        base = GPU_PROCESS_S["interop_gpu"]
    elif task.case.workload.endswith("_aot") and task.policy == COLD_CACHE and not task.uses_template:
        base = GPU_PROCESS_S["aot_loop_cold"]  # the loop's every program compiled
    elif backend.framework == "torch" and backend.compiles:
        # a process on the case's warmed cache (warm-cache, warm-process) reads the kernels the first one built
        base = GPU_PROCESS_S["torch_compile_warm_cache" if task.uses_template else "torch_compile_cold"]
    else:
        base = GPU_PROCESS_S.get(backend.framework, GPU_PROCESS_S["torch"])
    return base + (WARM_EXTRA_S if task.kind in (WARM, CHECK) else 0.0)


def as_if_gpu(backend, workload=None):
    """The planner's availability on the GPU machine: every backend there but what a case cannot do."""
    why = catalog.unsupported_reason(backend, workload) if workload is not None else None
    return f"unsupported: {why}" if why else None


def planned(runs: dict, common: list[str], work: Path) -> dict[str, list[Task]]:
    """Each run's processes, as ttfr's own planner lays them out (its spec checks included)."""
    plans = {}
    for label, options in runs.items():
        args = cli.build_parser().parse_args(["run", *options, *common, "--out", str(work / label)])
        plans[label] = list(build_plan(build_spec(run_command.request(args)), availability=as_if_gpu).tasks)
    return plans


def estimate_s(plans: dict[str, list[Task]], with_pytest: bool = True) -> float:
    return sum(sum(map(process_seconds, tasks)) + RUN_OVERHEAD_S for tasks in plans.values()) + PYTEST_S * with_pytest


def plan_lines(mode: str, plans: dict[str, list[Task]], with_pytest: bool = True) -> list[str]:
    total = sum(map(len, plans.values()))
    then = ", then `pytest -m gpu`" if with_pytest else ""
    lines = [f"gpu-check {mode}: {total} processes in {len(plans)} `ttfr run`s{then}; estimated "
             f"{estimate_s(plans, with_pytest) / 60:.1f} min on one H100/H200-class GPU (per process: {_priors()})"]  # fmt: skip
    for label, tasks in plans.items():
        cases = len({t.case.id for t in tasks})
        lines.append(f"  {label:<12} {cases:>3} cases {len(tasks):>4} processes ~{sum(map(process_seconds, tasks)):5.0f} s")
    return lines


def _priors() -> str:
    return ", ".join(f"{name} {seconds:g} s" for name, seconds in GPU_PROCESS_S.items()) + f", +{WARM_EXTRA_S:g} s warm"


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
        sync = proc.get("sync_check") or {}
        if sync.get("unsynchronised"):  # with the check's own words: which trigger fired, and its figures
            why = "; ".join(sync.get("problems") or []) or "no reason recorded"
            problems.append(f"{name}: warm process {proc['index']} unsynchronised: {why}")
    cold, warm = policies.get("cold-process/cold-cache"), policies.get("cold-process/warm-cache")
    compiles = catalog.BACKENDS[case["backend"]].compiles
    if compiles and cold:
        verification = cold["cache_verification"]
        if verification["verdict"] != "verified" or verification.get("hits_total"):
            problems.append(f"{name}: cold cache {verification['verdict']} with {verification.get('hits_total')} hits")
    if compiles and warm and not (warm["cache_verification"].get("hits_total") or 0) > 0:
        problems.append(f"{name}: warm cache without hits ({warm['cache_verification']['verdict']})")
    # a precompiled policy: its artifact made on the GPU (or the mechanism said it cannot take the workload), its
    # runs loaded it in a timed phase; `unverified` (it still compiled) is a finding, a flagged cache is not
    for key, shipped in (policies.get("precompiled") or {}).items():
        state = shipped["artifact"]["state"]
        if state == "failed":
            problems.append(f"{name}: precompiled/{key}: its artifact was not made ({shipped['artifact'].get('reason')})")
        elif state == "made" and not (shipped["summary"].get("artifact_load_s") or {}).get("median"):
            problems.append(f"{name}: precompiled/{key}: no artifact load timed")
        if shipped["cache_verification"]["verdict"] == "flagged":
            problems.append(f"{name}: precompiled/{key}: its cache was flagged {shipped['cache_verification']['flags']}")
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


def _cut(text: str) -> str:
    text = " ".join(str(text).split()) or "no reason given"
    return text if len(text) <= REASON_CHARS else text[: REASON_CHARS - 1] + "…"


SUMMARY_REASONS = 3  # a row's reasons kept in the summary (the result directories hold every detail)


def first_reasons(reasons: list[str], limit: int = SUMMARY_REASONS) -> list[str]:
    """The first reasons, each cut short, and how many more there were: what keeps the summary small."""
    kept = [_cut(r) for r in reasons[:limit]]
    return kept + ([f"and {len(reasons) - limit} more (see the runs' result directories)"] if len(reasons) > limit else [])


def _versions(manifest: dict) -> dict[str, str]:
    gpu = manifest.get("gpu") or {}
    found = {**(manifest.get("runtimes") or {}), **(gpu.get("packages") or {})}
    return {name: str(version) for name, version in sorted(found.items()) if version}


ROOT = Path(__file__).resolve().parent.parent


def run_child(argv: list[str], timeout_s: float, cwd: Path | None = None) -> tuple[int | None, str, str]:
    """(exit code, None when it ran past `timeout_s`; its stdout; its stderr). A child past its time
    is asked to stop as Ctrl-C asks (SIGTERM: a `ttfr run` writes what it measured), then killed; on
    Ctrl-C here the terminal interrupts it too, and it is waited for rather than killed."""
    child = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd)
    try:
        out, err = child.communicate(timeout=timeout_s)
        return child.returncode, out, err
    except subprocess.TimeoutExpired:
        child.terminate()
        try:
            out, err = child.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            child.kill()
            out, err = child.communicate()
        return None, out, f"timed out after {timeout_s:g} s; {err}"
    except KeyboardInterrupt:
        # Ctrl-C reached the child too and it is writing what it measured; a SIGTERM sent to this process alone
        # did not: after a moment it is asked as well, then killed if it will not stop
        for ask in (None, child.terminate, child.kill):
            if ask:
                ask()
            try:
                child.communicate(timeout=5 if ask is None else 60)
                break
            except subprocess.TimeoutExpired:
                continue
        raise


def run_ttfr(label: str, options: list[str], common: list[str], work: Path, planned_count: int):
    """One `ttfr run` of the check: (its Run, its GPU rows, problems outside them, its manifest)."""
    out = work / label
    argv = [sys.executable, "-m", "ttfr", "run", *options, *common, "--out", str(out)]
    earlier = set(out.iterdir()) if out.is_dir() else set()  # an earlier check's results are not this run's
    started = time.monotonic()
    exit_code, _stdout, stderr = run_child(argv, RUN_TIMEOUT_S)
    run = {"run": label, "command": shlex.join(["ttfr", *argv[3:]]), "exit_code": exit_code,
           "wall_s": time.monotonic() - started, "processes_planned": planned_count}  # fmt: skip
    roots = sorted(p for p in out.iterdir() if p.is_dir() and p not in earlier) if out.is_dir() else []
    if not roots:
        return run, [], [f"{label}: no result ({str(stderr).strip()[-500:]})"], {}
    try:
        finished = load_finished(roots[-1])  # verified (schemas, hashes), as every reader of a result directory
    except ArtifactError as exc:
        return run, [], [f"{label}: its result directory does not verify: {exc}"], {}
    rows = []
    for case in map(encode, finished.cases):
        if catalog.BACKENDS[case["backend"]].device == "gpu":
            found = case_problems(case)
            rows.append({"run": label, "row": case["case"], "verdict": "fail" if found else "pass",
                         "reasons": first_reasons(found)})  # fmt: skip
    manifest = encode(finished.manifest)  # read as the typed Manifest; judged here as the JSON it is
    return run, rows, manifest_problems(manifest), manifest


def run_pytest():
    """`pytest -m gpu` from the checkout: (its Run, its row)."""
    argv = [sys.executable, "-m", "pytest", "-m", "gpu", "-q", "-p", "no:cacheprovider"]
    started = time.monotonic()
    exit_code, stdout, _stderr = run_child(argv, RUN_TIMEOUT_S, cwd=ROOT)  # the checkout's tests
    last = (stdout.strip().splitlines() or ["no output"])[-1] if exit_code is not None else f"timed out after {RUN_TIMEOUT_S} s"
    passed = exit_code in (0, 5)  # 5: no test collected
    run = {"run": "pytest", "command": "pytest -m gpu", "exit_code": exit_code, "wall_s": time.monotonic() - started,
           "processes_planned": 0}  # fmt: skip
    row = {"run": "pytest", "row": "pytest -m gpu", "verdict": "pass" if passed else "fail",
           "reasons": [] if passed else [_cut(f"exit {exit_code}: {last}")]}  # fmt: skip
    return run, row


def render(summary: GpuCheckSummary, command: str) -> str:
    """The report: the summary, in words (it renders the typed summary, never re-judges a row)."""
    failed = [f"{r.row}: {'; '.join(r.reasons)}" for r in summary.rows if r.verdict == "fail"]
    lines = [f"# make gpu-check ({summary.mode}), {summary.stamp}: {summary.verdict}", "", f"Command: `{command}`", "",
             f"GPU: {summary.gpu or 'unknown'}, driver {summary.driver or 'unknown'}; "
             + ", ".join(f"{k} {v}" for k, v in summary.versions.items()), "",
             f"{summary.processes_planned} processes planned, estimated {summary.estimated_s:.0f} s, "
             f"took {summary.wall_s:.0f} s", "",
             *(f"- `{r.command}`: exit {r.exit_code}, {r.wall_s:.0f} s" for r in summary.runs), "",
             f"{sum(r.verdict == 'pass' for r in summary.rows)} of {len(summary.rows)} rows passed", "",
             f"## {len(summary.problems) + len(failed)} problem(s)", "",
             *(f"- {p}" for p in [*summary.problems, *failed] or ["none"]), ""]  # fmt: skip
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=Path("docs/gpu"), help="where the report and its summary go")
    ap.add_argument("--work", type=Path, default=Path("gpu-check-results"), help="where the runs go")
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--quick", dest="mode", action="store_const", const="quick", help="every GPU row once (default)")
    mode.add_argument("--full", dest="mode", action="store_const", const="full", help="the whole check (~300 processes)")
    ap.add_argument("--runs", type=run_names, default=None, metavar="NAMES",
                    help=f"only these of the check's runs, comma-separated: {', '.join([*QUICK, PYTEST])} (e.g. the "
                         "ones a short GPU lease did not reach)")  # fmt: skip
    args = ap.parse_args(argv)
    args.mode = args.mode or "quick"
    runs, common = (QUICK if args.mode == "quick" else FULL), COMMON[args.mode]
    chosen = args.runs or [*runs, PYTEST]
    runs = {label: options for label, options in runs.items() if label in chosen}
    plans = planned(runs, common, args.work)
    print("\n".join(plan_lines(args.mode, plans, PYTEST in chosen)), flush=True)
    if not catalog.gpu_present():
        print("gpu-check: no GPU here (no /dev/nvidia* and no nvidia-smi): nothing to check, and that is a failure",
              file=sys.stderr)  # fmt: skip
        return 1
    began = time.monotonic()
    done_runs, rows, problems, manifest = [], [], [], {}
    # a lease's or a scheduler's time limit (SIGTERM) ends the check as Ctrl-C does: what finished is summarised
    previous = signal.signal(signal.SIGTERM, _interrupted)
    interrupted = False
    try:
        for label, options in runs.items():
            run, run_rows, run_problems, run_manifest = run_ttfr(label, options, common, args.work, len(plans[label]))
            done_runs.append(run)
            rows += run_rows
            problems += [p for p in run_problems if p not in problems]  # the manifest's, once rather than per run
            manifest = run_manifest or manifest
        if PYTEST in chosen:
            run, row = run_pytest()
            done_runs.append(run)
            rows.append(row)
    except KeyboardInterrupt:
        interrupted = True
        left = [label for label in [*runs, PYTEST] if label in chosen and label not in {r["run"] for r in done_runs}]
        problems.insert(0, f"interrupted: {len(done_runs)} of {len(runs) + (PYTEST in chosen)} runs finished; not "
                           f"run: {', '.join(left)} (their results, if any, are under {args.work})")  # fmt: skip
        print(f"gpu-check: {problems[0]}", file=sys.stderr)
    # the summary is written whatever comes now (a second SIGTERM, a lease ending): it takes a moment
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        summary = write_summary(args, plans, chosen, done_runs, rows, problems, manifest, time.monotonic() - began, argv)
    finally:
        signal.signal(signal.SIGTERM, previous)
    return 130 if interrupted else 1 if summary.verdict == "fail" else 0


def write_summary(args, plans, chosen, done_runs, rows, problems, manifest, wall_s, argv) -> GpuCheckSummary:
    """The summary (--out/gpu-check-<stamp>.json) and its report (.md, printed too) of what ran."""
    gpu = manifest.get("gpu") or {}
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    summary = decode({
        "schema": GPU_CHECK_SCHEMA, "mode": args.mode, "stamp": stamp,
        "verdict": "fail" if problems or any(r["verdict"] == "fail" for r in rows) else "pass",
        "gpu": next((d.get("name") for d in gpu.get("devices") or []), None), "driver": gpu.get("driver_version"),
        "versions": _versions(manifest), "processes_planned": sum(map(len, plans.values())),
        "estimated_s": estimate_s(plans, PYTEST in chosen), "wall_s": wall_s, "runs": done_runs,
        "rows": rows,
        "problems": first_reasons(problems, 4 * SUMMARY_REASONS),
    }, GpuCheckSummary)  # fmt: skip
    args.out.mkdir(parents=True, exist_ok=True)
    write_json(args.out / f"gpu-check-{stamp}.json", encode(summary), GPU_CHECK_SCHEMA)
    command = "make gpu-check" + ("" if args.mode == "quick" else " FULL=1")
    text = render(summary, f"{command} (benchmarks/gpu_check.py {shlex.join(sys.argv[1:] if argv is None else argv)})")
    (args.out / f"gpu-check-{stamp}.md").write_text(text)
    print(text)
    return summary


def _interrupted(_signum, _frame):
    raise KeyboardInterrupt


def run_names(text: str) -> list[str]:
    """--runs: the check's run names, each known (argparse's error, exit 2, names the valid ones)."""
    valid = [*QUICK, PYTEST]
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in valid]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"unknown run {', '.join(unknown) or '(none given)'}; valid: {', '.join(valid)}")
    return names


if __name__ == "__main__":
    raise SystemExit(main())
