"""The environment and job words a worker process gets.

Priming and measured runs of a case get byte-identical environments (torch's cache key
depends on environment and thread count), apart from nothing: cache paths are per case.
"""

from __future__ import annotations

import os
from pathlib import Path

from ttfr.measure import catalog
from ttfr.measure.plan import CHECK, WARM, Task
from ttfr.measure.spec import RunSpec

_THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def toolkit_ptxas(environ=os.environ) -> Path | None:
    """A CUDA toolkit's ptxas, preferred over one bundled in pip wheels (as the seed did)."""
    roots = [environ.get("CUDA_HOME"), environ.get("CUDA_PATH"), "/usr/local/cuda"]
    for root in roots:
        if root and (Path(root) / "bin" / "ptxas").is_file():
            return Path(root) / "bin" / "ptxas"
    return None


def build_env(case: catalog.Case, spec: RunSpec, cache_env: dict, base=None) -> dict:
    env = dict(os.environ if base is None else base)
    env.update(cache_env)
    backend = case.backend_info
    if backend.framework == "jax" and backend.device == "cpu" and "JAX_PLATFORMS" not in env:
        # Keep a CPU case on a GPU machine from initialising CUDA. GPU cases keep jax's own
        # platform choice: JAX_PLATFORMS=cuda without a CUDA plugin dies in an assert.
        env["JAX_PLATFORMS"] = "cpu"
    if backend.framework == "jax" and backend.device == "gpu":
        ptxas = toolkit_ptxas(env)
        if ptxas is not None:
            env["PATH"] = f"{ptxas.parent}{os.pathsep}{env.get('PATH', '')}"
            flag = f"--xla_gpu_cuda_data_dir={ptxas.parent.parent}"
            if "xla_gpu_cuda_data_dir" not in env.get("XLA_FLAGS", ""):
                env["XLA_FLAGS"] = f"{env.get('XLA_FLAGS', '')} {flag}".strip()
    if spec.threads:
        for var in _THREAD_VARS:
            env[var] = str(spec.threads)
    if spec.deterministic:
        env["PYTHONHASHSEED"] = "0"
    return env


def job_words(task: Task, spec: RunSpec) -> dict:
    case = task.case
    backend = case.backend_info
    job = {
        "mode": "warm" if task.kind in (WARM, CHECK) else "cold",
        "adapter": backend.adapter,
        "device": backend.device,
        "compile": "1" if backend.compiles else "0",
        "workload": case.workload,
        "size": str(case.size),
        "dtype": case.dtype,
        "seed": str(spec.seed),
    }
    if backend.variant:
        job["variant"] = backend.variant
    if task.kind == WARM:
        job.update(samples=str(spec.warm_samples), min_sample_s=repr(spec.min_sample_s), max_warmup_s=repr(spec.max_warmup_s))
    if task.runs_check:
        job["check"] = "1"  # the case's gate checks its result; later processes compare digests
    return job
