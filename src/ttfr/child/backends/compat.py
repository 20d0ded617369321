"""Where the runtime stacks ttfr supports differ by version, and the one place that knows it.

ttfr is developed on torch 2.13 and jax 0.10.2 (CPU builds, requirements/cpu-lock.txt) and runs on GPU
images that bring their own stack (the first supported: torch 2.11.0+cu130, triton 3.6, jax 0.11.2
with the CUDA 13 plugin; requirements/gpu-image.toml). Everything here either works on each of them
or says, in words, why it is unavailable: an adapter records that, it never crashes on it.

What was compared (the released wheels' sources, 2026-11; a GPU run still has to confirm the CUDA side):
- torch 2.11 and 2.13 agree on every API the adapters call (RUNTIME_SURFACE): the compile-time table
  and its timer names, dynamo's counters, set_float32_matmul_precision (no deprecation warning in
  either; never mixed here with the newer fp32_precision settings, which raises), the CUDA memory
  readings, AOTInductor and torch.export.
- jax 0.10.2 and 0.11.2 agree on the config options, the monitoring events (duration events carry
  fun_name), the AOT stages, memory_analysis / memory_stats, is_ready, serialize_executable and the
  cache settings. They differ in: programs with host callbacks are written to the persistent cache
  from 0.11 on (skipped before), and jax.export's serialization version (11 -> 12): an export or a
  serialized executable is bound to its jax version. jax 0.11 needs Python 3.12 or newer.
- CUDA 13's wheels moved: ptxas is in nvidia/cu13/bin (CUDA 12: nvidia/cuda_nvcc/bin), the
  distributions lost their -cu12 suffix. JAX finds its CUDA directory itself (CUDA_ROOT, else the
  nvidia.cu13 / nvidia.cuda_nvcc wheels) and that overrides --xla_gpu_cuda_data_dir in XLA_FLAGS:
  a toolkit is chosen for it through CUDA_ROOT (measure/workerenv.py).

Standard library only at module level: the worker imports this before it starts timing.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

# The GPU stack's own distributions, whatever CUDA generation names them: CUDA 12's wheels carry a
# -cu12 suffix (nvidia-cublas-cu12, jax-cuda12-plugin), CUDA 13's mostly none (nvidia-cublas,
# nvidia-cuda-nvcc) and jax-cuda13-*. The manifest records the version of each one installed.
GPU_STACK_DISTRIBUTIONS = re.compile(
    r"jax-cuda\d+-(plugin|pjrt)|nvidia-(cudnn|cublas|cuda-nvcc|cuda-runtime|nvjitlink)(-cu\d+)?|triton"
)


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


_DIST_INFO = re.compile(r"(?P<name>.+?)-(?P<version>\d[^-]*)(-py[\d.]+)?\.(dist|egg)-info")


def gpu_stack_versions(paths=None) -> dict[str, str]:
    """name -> version of every installed GPU-stack distribution (GPU_STACK_DISTRIBUTIONS), read from
    the dist-info folders' names on the import path: no package's metadata is opened (every run's
    manifest asks, and reading each installed distribution's metadata costs ~30 ms)."""
    import os
    import sys

    found = {}
    for entry in sys.path if paths is None else paths:
        try:
            names = [e.name for e in os.scandir(entry or ".") if e.name.endswith((".dist-info", ".egg-info"))]
        except OSError:
            continue
        for folder in names:
            parsed = _DIST_INFO.fullmatch(folder)  # name-version: the version starts at the first '-<digit>'
            if parsed and GPU_STACK_DISTRIBUTIONS.fullmatch(canonical(parsed["name"])):
                found.setdefault(canonical(parsed["name"]), parsed["version"])
    return dict(sorted(found.items()))


# Where the nvidia-cuda-nvcc wheel that JAX's CUDA plugin depends on puts ptxas: CUDA 12's wheel
# under the `nvidia.cuda_nvcc` package, CUDA 13's under `nvidia/cu13` (one folder for all its wheels).
_NVCC_WHEEL_ROOTS = ("cu13", "cuda_nvcc")  # JAX's own order: the first one installed decides


def jax_cuda_directory(environ) -> dict:
    """The CUDA directory JAX will hand XLA (its jax/_src/lib `_cuda_path`, the same in 0.10.2 and
    0.11.2): CUDA_ROOT; else the first of the nvidia.cu13 / nvidia.cuda_nvcc wheels that is installed,
    its folder holding bin/ptxas. A nvidia/cu13 with no ptxas (torch's CUDA 13 libraries without
    nvidia-cuda-nvcc) makes JAX hand over the string 'None' rather than look further: said here, so a
    GPU run that cannot find ptxas can be read (TTFR_CUDA_TOOLKIT=1 sets CUDA_ROOT to a toolkit)."""
    if environ.get("CUDA_ROOT"):
        return {"path": environ["CUDA_ROOT"], "source": "CUDA_ROOT"}
    try:
        spec = importlib.util.find_spec("nvidia")
    except (ImportError, ValueError):
        spec = None
    bases = [Path(b) for b in (spec.submodule_search_locations or [])] if spec else []
    for root in _NVCC_WHEEL_ROOTS:
        folders = [base / root for base in bases if (base / root).is_dir()]
        if folders:
            with_ptxas = [f for f in folders if (f / "bin" / "ptxas").is_file()]
            if with_ptxas:
                return {"path": str(with_ptxas[0]), "source": f"nvidia.{root} wheel"}
            return {"path": None, "source": f"nvidia.{root} is installed without bin/ptxas: JAX hands XLA the "
                    "directory 'None' and XLA searches its defaults (TTFR_CUDA_TOOLKIT=1 names a toolkit)"}  # fmt: skip
    return {"path": None, "source": "no CUDA_ROOT and no nvidia-cuda-nvcc wheel: XLA searches its defaults"}


# Every runtime attribute an adapter, the stage split, the cache counters, the TF32 setting, the device
# peaks or the loops call, by dotted name: tests/test_runtime_surface.py checks them on the installed
# versions (CI's lock file; `pytest -m gpu` on a GPU image), so a runtime that lost one is named
# there, before a measured process fails on it.
RUNTIME_SURFACE = {
    "torch": (
        "torch.compile", "torch.set_float32_matmul_precision", "torch.get_num_threads", "torch.from_numpy",
        "torch._dynamo.utils.compile_times", "torch._dynamo.utils.counters",
        "torch._dynamo.utils.compilation_time_metrics", "torch._dynamo.config",
        "torch.cuda.is_available", "torch.cuda.init", "torch.cuda.synchronize", "torch.cuda.current_blas_handle",
        "torch.cuda.max_memory_allocated", "torch.cuda.reset_peak_memory_stats", "torch.cuda.get_device_name",
        "torch.cuda.device_count", "torch.cuda.OutOfMemoryError", "torch.version.cuda",
        "torch.export.export", "torch._inductor.aoti_compile_and_package", "torch._inductor.aoti_load_package",
        "torch.fx.experimental._config.use_duck_shape", "torch.from_dlpack",
        "torch.compiler.save_cache_artifacts", "torch.compiler.load_cache_artifacts",
    ),
    "jax": (
        "jax.jit", "jax.config.update", "jax.devices", "jax.device_put", "jax.block_until_ready",
        "jax.tree_util.tree_leaves", "jax.monitoring.register_event_listener",
        "jax.monitoring.register_event_duration_secs_listener", "jax.stages.Traced.lower", "jax.stages.Lowered.compile",
        "jax.stages.Compiled.memory_analysis", "jax.export.export",
        "jax.experimental.serialize_executable.serialize",
        "jax.experimental.serialize_executable.deserialize_and_load", "jax.dlpack.from_dlpack",
        "jax.export.deserialize", "jax._src.lax.linalg.initialize_lapack",
    ),
}  # fmt: skip


def missing_surface(names) -> list[str]:
    """The dotted names that do not resolve here (importing the modules they need), each with why."""
    import importlib

    missing = []
    for name in names:
        parts = name.split(".")
        found, error = False, None
        for cut in range(len(parts), 0, -1):  # the longest importable module, then attributes
            try:
                obj = importlib.import_module(".".join(parts[:cut]))
            except ImportError as exc:
                error = exc
                continue
            try:
                for attribute in parts[cut:]:
                    obj = getattr(obj, attribute)
                found, error = True, None
            except AttributeError as exc:
                error = exc
            break
        if not found:
            missing.append(f"{name}: {type(error).__name__}: {error}")
    return missing
