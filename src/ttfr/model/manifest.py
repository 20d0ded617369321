"""The environment manifest (`ttfr.manifest.v1`, manifest.json): what a reader needs to judge a
number, recorded once per result directory before anything runs (artifacts/manifest.py collects
it). Fields added after the session and machine ids (ttfr 0.1.0's second release) are optional, so
that every result directory and snapshot written since still reads."""

from __future__ import annotations

from typing import Annotated, Literal

from msgspec import Meta

from ttfr.model.base import UNSET, Artifact, Open, UnsetType, field

MANIFEST_SCHEMA = "ttfr.manifest.v1"


class Git(Artifact):
    commit: str | None  # the source checkout's HEAD (None: an installed ttfr, no checkout)
    dirty: bool | None  # tracked files changed since that commit


class Harness(Artifact):
    version: str  # ttfr's own version
    git: Git


class PythonInfo(Artifact):
    version: str
    implementation: str  # CPython, PyPy
    executable: str  # the interpreter ttfr ran under
    worker_executable: str  # the one its workers ran under (--python)


class OsInfo(Artifact):
    platform: str  # platform.platform(): kernel and libc in one line
    system: str
    release: str
    machine: str
    libc: str | None


class CpuInfo(Artifact):
    model: str | None
    logical_cores: int | None
    usable_cores: int | None  # this process's CPU affinity


class MemoryInfo(Artifact):
    total_bytes: int | None


class LoadedLibrary(Open):
    """One BLAS/OpenMP library NumPy loaded here and its thread count (threadpoolctl's fields; one it
    adds in a later version is not refused)."""

    user_api: str | None = None  # blas, openmp
    internal_api: str | None = None  # openblas, mkl, blis, openmp
    num_threads: int | None = None
    prefix: str | None = None
    filepath: str | None = None
    version: str | None = None
    threading_layer: str | None = None
    architecture: str | None = None


class GpuDevice(Artifact):
    """One device as nvidia-smi --query-gpu reports it ([N/A] kept as it says)."""

    name: str
    memory: str | UnsetType = UNSET
    persistence_mode: str | UnsetType = UNSET
    mig_mode: str | UnsetType = field(default=UNSET, name="mig.mode.current")
    compute_mode: str | UnsetType = UNSET
    sm_clock: str | UnsetType = field(default=UNSET, name="clocks.sm")
    sm_clock_max: str | UnsetType = field(default=UNSET, name="clocks.max.sm")
    memory_clock: str | UnsetType = field(default=UNSET, name="clocks.mem")
    ecc_mode: str | UnsetType = field(default=UNSET, name="ecc.mode.current")


class Ptxas(Artifact):
    path: str
    source: str  # which one and why: a toolkit asked for, JAX's wheels, PATH, an installed toolkit
    version: str | None


class JaxCudaDirectory(Artifact):
    path: str | None  # what JAX hands XLA; None where it hands nothing usable
    source: str  # CUDA_ROOT, a wheel, or why none


class Gpu(Artifact):
    present: bool
    devices: list[GpuDevice]
    driver_version: str | None
    cuda_version: str | None  # the driver's CUDA version (nvidia-smi)
    ptxas: Ptxas | None
    packages: dict[str, str | None] | UnsetType = UNSET  # the GPU stack's distributions and versions
    jax_cuda_dir: JaxCudaDirectory | UnsetType = UNSET


class Policies(Artifact):
    cache: list[str]  # the cache policies the run measures
    cache_dirs: dict[str, str] | UnsetType = UNSET  # each cache variable -> where a case's directory is
    cache_settings: dict[str, str] | UnsetType = UNSET  # what every worker gets (JAX's persistent-cache thresholds)
    sync: dict[str, str] | UnsetType = UNSET  # backend -> how its timed calls wait for their results
    worker_env_defaults: dict[str, dict[str, str]] | UnsetType = UNSET  # backend -> variables set where unset


class Arm(Artifact):
    """`ttfr ab`: which arm this result directory is."""

    name: str  # A or B
    python: str  # the arm's interpreter
    env: dict[str, str]  # the arm's own environment variables, redacted
    command: str | UnsetType = UNSET  # `ttfr ab --command`: the arm's own program, as its text (redacted)
    path_first: str | UnsetType = UNSET  # the directory put first on PATH for its commands (its venv's bin)


class ShardOrigin(Artifact):
    """`ttfr merge`: one shard a merged result came from."""

    shard: str  # K/N
    machine_id: str | None
    session_id: str
    cpu: CpuInfo
    platform: str
    snapshot_id: str


class Manifest(Artifact):
    schema: Literal["ttfr.manifest.v1"]
    session_id: str  # runs measured interleaved (both arms of `ttfr ab`) share one; others never do
    machine_id: str | None  # a stable, anonymous hash of this machine's id
    ttfr: Harness
    python: PythonInfo
    os: OsInfo
    cpu: CpuInfo
    memory: MemoryInfo
    gpu: Gpu
    runtimes: dict[str, str | None]  # package -> version installed (None: not installed)
    command_line: list[str]  # redacted
    policies: Policies
    environment: dict[str, str]  # the allow-listed variables (JAX_*, XLA_*, TORCH*, ...), redacted
    limitations: list[str]  # what the run could not control, in words
    threadpools: (
        Annotated[
            list[LoadedLibrary] | None,
            Meta(
                description=(
                    "BLAS/OpenMP libraries NumPy loads in ttfr's own process and their thread counts (threadpoolctl); null "
                    "without threadpoolctl. Each worker records its own in its case file."
                )
            ),
        ]
        | UnsetType
    ) = UNSET
    shards: (
        Annotated[list[ShardOrigin], Meta(description="a merged result (ttfr merge): each shard's share, host and session")]
        | UnsetType
    ) = UNSET
    arm: Arm | UnsetType = UNSET
