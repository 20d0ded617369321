"""The environment manifest (`ttfr.manifest.v1`): what a reader needs to judge a number.

Runtime versions come from package metadata (nothing is imported); each case result also
carries the versions its worker actually imported. Environment variables are recorded
from an allow-list of prefixes only, and every recorded value and the command line pass
through ttfr/redaction.py.
"""

from __future__ import annotations

import functools
import importlib.metadata
import os
import platform
import re
import shutil
import subprocess
import sys
from pathlib import Path

import ttfr
from ttfr.redaction import redact_argv, redact_env
from ttfr.artifacts.store import MANIFEST_SCHEMA
from ttfr.child import hostinfo
from ttfr.measure import cache, catalog
from ttfr.child.backends.compat import gpu_stack_versions, jax_cuda_directory
from ttfr.measure.workerenv import TOOLKIT_REQUEST, toolkit_ptxas
from ttfr.model.base import decode
from ttfr.model.manifest import Manifest

ENV_PREFIXES = ("JAX_", "XLA_", "TORCH", "CUDA_", "OMP_", "MKL_", "PYTHON")
# ttfr's own variables that change what its workers do (the spin workload's extra work, the CUDA toolkit)
ENV_NAMES = ("TTFR_SPIN_EXTRA", "TTFR_CUDA_TOOLKIT")
# Every package a backend requires, plus the harness's own runtime dependencies.
RUNTIME_PACKAGES = (*catalog.required_packages(), "scipy", "jsonschema-rs", "rich")


def allowed_environment(environ=None) -> dict:
    environ = os.environ if environ is None else environ
    return redact_env({name: value for name, value in sorted(environ.items())
                       if name.startswith(ENV_PREFIXES) or name in ENV_NAMES})  # fmt: skip


@functools.cache  # a process's packages: reading their metadata took 9 ms a manifest
def _package_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def _run(argv, timeout=10.0) -> str | None:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


def _git(source: Path) -> dict:
    commit = _run(["git", "-C", str(source), "rev-parse", "HEAD"])
    if not commit:
        return {"commit": None, "dirty": None}
    status = _run(["git", "-C", str(source), "status", "--porcelain", "--untracked-files=no"])
    return {"commit": commit.strip(), "dirty": bool(status and status.strip())}


def ptxas_info(environ=None, jax_dir: dict | None = None) -> dict | None:
    """Which ptxas a GPU compile uses, in the order JAX's workers find one: a toolkit's where the user
    asked for it (TTFR_CUDA_TOOLKIT), else the one in the CUDA directory JAX hands XLA (CUDA_ROOT, or
    its nvidia-cuda-nvcc wheel), else the one on PATH, else an installed toolkit's (CUDA_ROOT,
    CUDA_HOME, CUDA_PATH, /usr/local/cuda)."""
    environ = os.environ if environ is None else environ
    path, source = toolkit_ptxas(environ), "cuda_toolkit (TTFR_CUDA_TOOLKIT)"
    if path is None:
        jax_dir = jax_cuda_directory(environ) if jax_dir is None else jax_dir
        candidate = Path(jax_dir["path"]) / "bin" / "ptxas" if jax_dir["path"] else None
        if candidate is not None and candidate.is_file():
            path, source = candidate, f"JAX's CUDA directory ({jax_dir['source']})"
    if path is None:
        found = shutil.which("ptxas", path=environ.get("PATH"))
        path, source = (Path(found), "PATH") if found else (None, None)
    if path is None:  # a toolkit installed but neither asked for nor on PATH (a GPU image's nvcc)
        path = toolkit_ptxas({**environ, TOOLKIT_REQUEST: "1"})
        source = "cuda_toolkit (installed, not asked for: XLA's own search may use it)"
    if path is None:
        return None
    text = _run([str(path), "--version"]) or ""
    match = re.search(r"release ([\d.]+), V([\d.]+)", text)
    return {"path": str(path), "source": source, "version": match.group(2) if match else None}


def workers_cuda_environment(environ=None) -> dict:
    """The environment a JAX GPU worker gets, as far as finding CUDA goes: a toolkit asked for with
    TTFR_CUDA_TOOLKIT is its CUDA_ROOT (measure/workerenv.py)."""
    environ = dict(os.environ if environ is None else environ)
    toolkit = toolkit_ptxas(environ)
    if toolkit is not None:
        environ["CUDA_ROOT"] = str(toolkit.parent.parent)
    return environ


# What a GPU's timings depend on besides the chip (nvidia-smi --query-gpu fields, per device)
GPU_QUERY = ("name", "driver_version", "memory.total", "persistence_mode", "mig.mode.current", "compute_mode",
             "clocks.sm", "clocks.max.sm", "clocks.mem", "ecc.mode.current")  # fmt: skip


def gpu_devices(listing: str) -> list[dict]:
    """nvidia-smi's CSV answer to --query-gpu=GPU_QUERY, one record per device (`[N/A]` kept)."""
    devices = []
    for line in listing.strip().splitlines():
        values = [part.strip() for part in line.split(",")]
        if len(values) == len(GPU_QUERY):
            record = dict(zip(GPU_QUERY, values))
            devices.append({"name": record.pop("name"), "memory": record.pop("memory.total"), **record})
    return devices


def gpu_info() -> dict:
    info = {"present": catalog.gpu_present(), "devices": [], "driver_version": None, "cuda_version": None}
    # the GPU stack's own packages (the JAX CUDA plugin, cuDNN, cuBLAS, nvcc, Triton) as installed, CUDA 12's or 13's
    info["packages"] = gpu_stack_versions()
    if shutil.which("nvidia-smi"):
        listing = _run(["nvidia-smi", f"--query-gpu={','.join(GPU_QUERY)}", "--format=csv,noheader"])
        info["devices"] = gpu_devices(listing or "")
        for device in info["devices"]:
            info["driver_version"] = device.pop("driver_version")
        header = _run(["nvidia-smi"]) or ""
        match = re.search(r"CUDA Version:\s*([\d.]+)", header)
        info["cuda_version"] = match.group(1) if match else None
    workers = workers_cuda_environment()
    info["jax_cuda_dir"] = jax_cuda_directory(workers)  # what JAX hands XLA (compat.py: it can be 'None')
    info["ptxas"] = ptxas_info(workers, info["jax_cuda_dir"])
    return info


def machine_id() -> str | None:
    """A stable, anonymous id of this machine (hash of /etc/machine-id, else of the host name)."""
    import hashlib

    try:
        raw = Path("/etc/machine-id").read_text().strip()
    except OSError:
        raw = platform.node()
    return hashlib.sha256(f"ttfr:{raw}".encode()).hexdigest()[:16] if raw else None


def threadpools() -> list[dict] | None:
    """The BLAS/OpenMP NumPy loads here and its thread count (threadpoolctl); each case's
    checking process records its own (the case file's `threadpools`), which --threads changes."""
    try:
        import numpy  # noqa: F401  (loads its BLAS)
    except ImportError:
        return None
    return hostinfo.threadpools()


def collect(command_line: list[str] | None = None, worker_python: str | None = None, policies=(),
            session_id: str | None = None) -> dict:  # fmt: skip
    source = Path(ttfr.__file__).resolve().parent
    uname = platform.uname()
    return {
        "schema": MANIFEST_SCHEMA,
        # Runs measured interleaved (both arms of `ttfr ab`) share a session; others never do.
        "session_id": session_id or os.urandom(8).hex(),
        "machine_id": machine_id(),
        "ttfr": {"version": ttfr.__version__, "git": _git(source)},
        "python": {
            "version": platform.python_version(),
            "implementation": platform.python_implementation(),
            "executable": sys.executable,
            "worker_executable": worker_python or sys.executable,
        },
        "os": {
            "platform": platform.platform(),
            "system": uname.system,
            "release": uname.release,
            "machine": uname.machine,
            "libc": " ".join(platform.libc_ver()).strip() or None,
        },
        "cpu": {
            "model": hostinfo.cpu_model(),
            "logical_cores": os.cpu_count(),
            "usable_cores": hostinfo.usable_cpus(),
        },
        "memory": {"total_bytes": hostinfo.memory_total_bytes()},
        "threadpools": threadpools(),
        "gpu": gpu_info(),
        "runtimes": {name: _package_version(name) for name in RUNTIME_PACKAGES},
        "command_line": redact_argv(command_line or sys.argv),
        "policies": {
            "cache": list(policies),
            "cache_dirs": {var: f"<result>/.work/cache/<case>/{sub}" for var, sub in cache.CACHE_SUBDIRS.items()},
            "cache_settings": dict(cache.JAX_CACHE_SETTINGS),
            "sync": {name: backend.sync_policy for name, backend in catalog.BACKENDS.items()},
            # what each backend's workers get where the user set nothing (a CPU case hides the GPUs)
            "worker_env_defaults": {name: dict(b.env_defaults) for name, b in catalog.BACKENDS.items() if b.env_defaults},
        },
        "environment": allowed_environment(),
        "limitations": list(cache.LIMITATIONS),
    }


def differences(recorded: Manifest) -> list[str]:
    """What differs between the machine and versions a result directory recorded and this one's, in words
    (empty: the same): what `ttfr explain DIR` refuses, since its diagnostic processes would explain
    another machine's cold start than the figures beside them. The runtimes compared are those ttfr's own
    interpreter imports (as the manifest records them), not a --python worker's."""
    now = decode(collect(worker_python=recorded.python.worker_executable), Manifest)
    checks = [
        ("machine", recorded.machine_id, now.machine_id),
        ("CPU", recorded.cpu.model, now.cpu.model),
        ("usable cores", recorded.cpu.usable_cores, now.cpu.usable_cores),
        ("OS kernel", recorded.os.release, now.os.release),
        ("Python", recorded.python.version, now.python.version),
        ("ttfr", recorded.ttfr.version, now.ttfr.version),
        ("GPU driver", recorded.gpu.driver_version, now.gpu.driver_version),
        ("GPUs", [d.name for d in recorded.gpu.devices], [d.name for d in now.gpu.devices]),
    ]
    checks += [(name, recorded.runtimes.get(name), now.runtimes.get(name))
               for name in sorted(set(recorded.runtimes) | set(now.runtimes))]  # fmt: skip
    # a merged directory: every shard's machine (the manifest's own is the first shard's)
    checks += [(f"shard {shard.shard}'s machine", shard.machine_id, now.machine_id)
               for shard in (recorded.shards or [])]  # fmt: skip
    return [f"{what}: {was} there, {is_} here" for what, was, is_ in checks if was != is_]
