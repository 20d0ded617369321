"""The environment and the Job a worker process gets for a task.

Priming and measured runs of a case get byte-identical environments (torch's cache key
depends on environment and thread count), apart from nothing: cache paths are per case.
"""

from __future__ import annotations

import os
from pathlib import Path

from ttfr.child import job as child_job
from ttfr.child.job import Job
from ttfr.measure import catalog
from ttfr.measure.cache import JAX_CACHE_SETTINGS
from ttfr.measure.plan import CHECK, EXPLAIN, MAKE, WARM, Task
from ttfr.measure.spec import RunSpec

_THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


TOOLKIT_REQUEST = "TTFR_CUDA_TOOLKIT"  # set (to a toolkit's root, or 1 for CUDA_HOME / /usr/local/cuda): use its ptxas


def toolkit_ptxas(environ=os.environ) -> Path | None:
    """A system CUDA toolkit's ptxas, only when the user asks for one (TTFR_CUDA_TOOLKIT): by
    default JAX uses the ptxas of its own CUDA wheels. A toolkit older than JAX needs breaks or
    miscompiles (jax-ml/jax#25344), one newer than the driver makes XLA give up parallel
    compilation (#19821): forcing /usr/local/cuda's, as ttfr did, was a silent choice."""
    request = environ.get(TOOLKIT_REQUEST, "").strip()
    if not request or request == "0":
        return None
    roots = [request] if request not in ("1", "yes", "true") else [environ.get("CUDA_ROOT"), environ.get("CUDA_HOME"),
                                                                    environ.get("CUDA_PATH"), "/usr/local/cuda"]  # fmt: skip
    return _ptxas_under(roots)


def _ptxas_under(roots) -> Path | None:
    """The first root's bin/ptxas that exists."""
    return next((Path(root) / "bin" / "ptxas" for root in roots if root and (Path(root) / "bin" / "ptxas").is_file()), None)


def build_env(case: catalog.Case, spec: RunSpec, cache_env: dict, base=None) -> dict:
    env = dict(os.environ if base is None else base)
    user = dict(env)
    env.update(cache_env)
    backend = case.backend_info
    if not backend.in_process:  # a user's program keeps the JAX cache thresholds it was given
        env.update({name: user[name] for name in JAX_CACHE_SETTINGS if name in user})
    for name, value in backend.env_defaults:
        env.setdefault(name, value)
    if backend.xla_gpu_toolkit:
        ptxas = toolkit_ptxas(env)
        if ptxas is not None:
            env["PATH"] = f"{ptxas.parent}{os.pathsep}{env.get('PATH', '')}"
            # JAX sets XLA's CUDA directory itself, from CUDA_ROOT or else its nvidia wheels, over any
            # --xla_gpu_cuda_data_dir in XLA_FLAGS (compat.py): CUDA_ROOT is what chooses the toolkit, the
            # one asked for (TTFR_CUDA_TOOLKIT=1 takes a CUDA_ROOT already set first)
            env["CUDA_ROOT"] = str(ptxas.parent.parent)
            flag = f"--xla_gpu_cuda_data_dir={ptxas.parent.parent}"
            if "xla_gpu_cuda_data_dir" not in env.get("XLA_FLAGS", ""):
                env["XLA_FLAGS"] = f"{env.get('XLA_FLAGS', '')} {flag}".strip()
    if spec.threads:
        for var in _THREAD_VARS:
            env[var] = str(spec.threads)
    if spec.deterministic:
        env["PYTHONHASHSEED"] = "0"
    return env


def build_job(task: Task, spec: RunSpec, dataset: dict | None = None, artifact: Path | None = None) -> Job:
    """The worker's job for a task; `dataset`: the HistFactory files of its size (Job fields); `artifact`: the file
    a precompiled mechanism's priming process writes (MAKE) or its policy's runs load."""
    case = task.case
    backend = case.backend_info
    job = Job(
        mode=child_job.WARM if task.kind in (WARM, CHECK) else child_job.COLD,
        adapter=backend.adapter,
        device=backend.device,
        compile=backend.compiles,
        variant=backend.variant,
        workload=case.workload_info.child_module,
        strategy=case.workload_info.strategy,
        size=case.size,
        dtype=case.dtype,
        seed=spec.seed,
        # the case's gate checks its result; later processes compare digests
        check=task.runs_check,
        explain=task.kind == EXPLAIN,
        inline_cpu=case.inline_cpu,
        **(dataset or {}),
    )
    source = case.workload_info.source
    if source:
        job = job.replace(case_source=source, case_name=case.workload, case_sha256=dict(spec.case_files).get(source, ""))
    if task.mechanism:
        action = child_job.ARTIFACT_MAKE if task.kind == MAKE else child_job.ARTIFACT_LOAD
        job = job.replace(precompiled=task.mechanism, artifact=str(artifact), artifact_action=action)
    if task.kind == WARM:
        job = job.replace(samples=spec.warm_samples, min_sample_s=spec.min_sample_s, max_warmup_s=spec.max_warmup_s)
    return job
