"""The environment manifest (`ttfr.manifest.v1`, manifest.json): what a reader needs to judge a
number, recorded once per result directory before anything runs (artifacts/manifest.py collects
it). Fields added after the session and machine ids (ttfr 0.1.0's second release) are optional, so
that every result directory and snapshot written since still reads."""

from __future__ import annotations

from typing import Literal

from ttfr.model.base import UNSET, Artifact, Open, UnsetType, field

MANIFEST_SCHEMA = "ttfr.manifest.v1"


class Git(Artifact):
    commit: str | None
    """The HEAD commit of the git checkout ttfr's package was loaded from (`git rev-parse HEAD`); null for an
    installed ttfr (no checkout), or where git is missing."""
    dirty: bool | None
    """Whether tracked files differ from that commit (`git status --porcelain --untracked-files=no`; untracked
    files do not count); null where there is no commit."""


class Harness(Artifact):
    version: str
    """ttfr's own version (`ttfr.__version__`) that wrote this directory."""
    git: Git
    """The source checkout ttfr ran from, if any."""


class PythonInfo(Artifact):
    version: str
    """The version of the interpreter ttfr itself ran under (`platform.python_version()`, e.g. "3.11.9")."""
    implementation: str
    """That interpreter's implementation (`platform.python_implementation()`: CPython, PyPy)."""
    executable: str
    """The path of the interpreter ttfr ran under (`sys.executable`)."""
    worker_executable: str
    """The path of the interpreter its measured workers ran under (`--python`; ttfr's own where not given)."""


class OsInfo(Artifact):
    platform: str
    """`platform.platform()`: OS, kernel release, architecture and libc in one line."""
    system: str
    """The OS name (`uname` system: Linux, Darwin)."""
    release: str
    """The kernel release (`uname` release)."""
    machine: str
    """The hardware architecture (`uname` machine: x86_64, aarch64)."""
    libc: str | None
    """The C library and its version (`platform.libc_ver()`, e.g. "glibc 2.36"); null where it cannot tell."""


class CpuInfo(Artifact):
    model: str | None
    """The CPU's model name (/proc/cpuinfo's `model name`); null where it has none (no /proc, some ARM CPUs)."""
    logical_cores: int | None
    """Logical CPUs of the machine (`os.cpu_count()`, a count); null where unknown."""
    usable_cores: int | None
    """Logical CPUs ttfr's process may run on (the count in its CPU affinity, else `os.cpu_count()`); fewer than
    logical_cores under taskset, cgroup cpusets or Slurm."""


class MemoryInfo(Artifact):
    total_bytes: int | None
    """The machine's total memory (/proc/meminfo's MemTotal), in bytes; null without /proc/meminfo."""


class LoadedLibrary(Open):
    """One BLAS/OpenMP library NumPy loaded here and its thread count (threadpoolctl's fields; one it
    adds in a later version is not refused)."""

    user_api: str | None = None
    """The API the library serves, as threadpoolctl names it: "blas" or "openmp"."""
    internal_api: str | None = None
    """Which implementation it is: openblas, mkl, blis, or openmp (libgomp, libiomp)."""
    num_threads: int | None = None
    """The number of threads the library will use."""
    prefix: str | None = None
    """The prefix of the shared library's file name threadpoolctl matched (e.g. "libopenblas", "libgomp")."""
    filepath: str | None = None
    """The loaded shared library's path (threadpoolctl reports it; ttfr does not keep it, so it is absent)."""
    version: str | None = None
    """The library's version as threadpoolctl reads it; null where it cannot tell."""
    threading_layer: str | None = None
    """The threading layer of a BLAS library (e.g. "pthreads", "openmp", "intel"); null where it has none."""
    architecture: str | None = None
    """The CPU architecture the BLAS build's kernels target (e.g. "Haswell"; threadpoolctl reports it, ttfr does
    not keep it)."""


class GpuDevice(Artifact):
    """One device as nvidia-smi --query-gpu reports it ([N/A] kept as it says)."""

    name: str
    """The device's product name (nvidia-smi `name`, e.g. "NVIDIA H100 80GB HBM3")."""
    memory: str | UnsetType = UNSET
    """Its total memory as nvidia-smi prints `memory.total`, unit included (e.g. "81559 MiB")."""
    persistence_mode: str | UnsetType = UNSET
    """Whether the driver stays loaded with no process on the device (nvidia-smi `persistence_mode`: Enabled,
    Disabled); disabled, a cold process also pays for initialising the driver."""
    mig_mode: str | UnsetType = field(default=UNSET, name="mig.mode.current")
    """Whether the GPU is partitioned into MIG instances now (nvidia-smi `mig.mode.current`: Enabled, Disabled,
    [N/A])."""
    compute_mode: str | UnsetType = UNSET
    """How many processes may use the device at once (nvidia-smi `compute_mode`: Default, Exclusive_Process,
    Prohibited)."""
    sm_clock: str | UnsetType = field(default=UNSET, name="clocks.sm")
    """The SM (graphics) clock when the manifest was taken, as nvidia-smi prints `clocks.sm`, unit included
    (e.g. "1980 MHz"); an idle GPU reads low."""
    sm_clock_max: str | UnsetType = field(default=UNSET, name="clocks.max.sm")
    """The device's maximum SM clock (nvidia-smi `clocks.max.sm`, unit included, e.g. "1980 MHz")."""
    memory_clock: str | UnsetType = field(default=UNSET, name="clocks.mem")
    """The memory clock when the manifest was taken (nvidia-smi `clocks.mem`, unit included, e.g. "2619 MHz")."""
    ecc_mode: str | UnsetType = field(default=UNSET, name="ecc.mode.current")
    """Whether ECC memory error correction is on (nvidia-smi `ecc.mode.current`: Enabled, Disabled, [N/A])."""


class Ptxas(Artifact):
    path: str
    """The path of the ptxas binary (CUDA's PTX assembler) a JAX GPU worker's compile would use."""
    source: str
    """Where it was found and why that one: the toolkit TTFR_CUDA_TOOLKIT asked for, the CUDA directory JAX hands
    XLA, PATH, or an installed toolkit nobody asked for (XLA's own search may use it)."""
    version: str | None
    """Its version from `ptxas --version` (e.g. "12.4.131"); null where that did not run or did not say."""


class JaxCudaDirectory(Artifact):
    path: str | None
    """The CUDA directory JAX hands XLA in a worker (CUDA_ROOT, else the nvidia-cuda-nvcc wheel's folder holding
    bin/ptxas); null where it hands nothing usable and XLA searches its defaults."""
    source: str
    """Where that directory comes from ("CUDA_ROOT", "nvidia.<folder> wheel"), or, with no path, why there is
    none."""


class Gpu(Artifact):
    present: bool
    """Whether this machine looks like it has an NVIDIA GPU: /dev/nvidia<N> device nodes, or nvidia-smi on PATH
    (not that a runtime can use it)."""
    devices: list[GpuDevice]
    """Each device nvidia-smi lists, in its order; empty without nvidia-smi."""
    driver_version: str | None
    """The NVIDIA driver's version (nvidia-smi `driver_version`); null without nvidia-smi."""
    cuda_version: str | None
    """The newest CUDA version the driver supports ("CUDA Version" in nvidia-smi's header), not an installed
    toolkit's; null without nvidia-smi."""
    ptxas: Ptxas | None
    """The ptxas a JAX GPU worker's compile would use; null where none was found."""
    packages: dict[str, str | None] | UnsetType = UNSET
    """The GPU stack's installed distributions (the JAX CUDA plugin, cuDNN, cuBLAS, nvcc, Triton, ...): name ->
    version, read from the dist-info folders on ttfr's own import path."""
    jax_cuda_dir: JaxCudaDirectory | UnsetType = UNSET
    """The CUDA directory JAX hands XLA in a worker, as the workers' environment gives it."""


class Policies(Artifact):
    cache: list[str]
    """The cache policies the run measures, by name (e.g. "cold-process/cold-cache")."""
    cache_dirs: dict[str, str] | UnsetType = UNSET
    """Each cache environment variable ttfr sets in a worker -> the directory it points to, as a template
    (`<result>/.work/cache/<case>/<dir>`): every case has its own."""
    cache_settings: dict[str, str] | UnsetType = UNSET
    """Environment variables every worker gets: JAX's persistent-cache thresholds (minimum compile time 0,
    minimum entry size -1), so that JAX caches every program; a user's command keeps its own where set."""
    sync: dict[str, str] | UnsetType = UNSET
    """Backend -> how its timed calls wait for their results before the clock stops (its sync policy, in
    words)."""
    worker_env_defaults: dict[str, dict[str, str]] | UnsetType = UNSET
    """Backend -> the environment variables its workers get where the user set none (e.g. a CPU backend's
    empty CUDA_VISIBLE_DEVICES, hiding the GPUs); backends with none are left out."""


class Arm(Artifact):
    """`ttfr ab`: which arm this result directory is."""

    name: str
    """The arm's letter: "A" or "B"."""
    python: str
    """The path of the arm's interpreter (`--a`/`--b`, a virtualenv resolved to its bin/python; ttfr's own where
    not given)."""
    env: dict[str, str]
    """The arm's own environment variables (`--a-env`/`--b-env`), which its processes get on top of ttfr's;
    secrets keep their names only."""
    command: str | UnsetType = UNSET
    """`ttfr ab --a-command/--b-command`: the arm's own program, as its command line text (redacted); absent
    where both arms run the same cases."""
    path_first: str | UnsetType = UNSET
    """The directory put first on PATH for the arm's commands (its interpreter's bin directory, as if its venv
    were activated); absent unless the run measures commands with `--a`/`--b` given."""


class ShardOrigin(Artifact):
    """`ttfr merge`: one shard a merged result came from."""

    shard: str
    """Which shard it was, as `--shard` named it: "K/N" (shard K of N)."""
    machine_id: str | None
    """The anonymous id of the machine the shard ran on (its manifest's machine_id); null where it had none."""
    session_id: str
    """The shard's own session id (its manifest's session_id)."""
    cpu: CpuInfo
    """The CPU of the machine the shard ran on."""
    platform: str
    """The shard machine's `platform.platform()` line (OS, kernel, architecture, libc)."""
    snapshot_id: str
    """The name of the shard's result directory."""


class Manifest(Artifact):
    schema: Literal["ttfr.manifest.v1"]
    """The artifact's format and version: always "ttfr.manifest.v1"."""
    session_id: str
    """A random id (16 hex digits) drawn when the run started; runs measured interleaved (both arms of `ttfr ab`)
    share one, others never do."""
    machine_id: str | None
    """A stable, anonymous id of this machine: 16 hex digits of a sha256 of /etc/machine-id (else of the host
    name); null where neither is known."""
    ttfr: Harness
    """The ttfr that wrote this directory: its version and source checkout."""
    python: PythonInfo
    """The interpreters: ttfr's own and its workers'."""
    os: OsInfo
    """The operating system ttfr ran on."""
    cpu: CpuInfo
    """The machine's CPU and the cores ttfr's process could use."""
    memory: MemoryInfo
    """The machine's memory."""
    gpu: Gpu
    """The NVIDIA GPUs, their driver and the CUDA tools a GPU worker would use (nvidia-smi, ptxas)."""
    runtimes: dict[str, str | None]
    """Every package a backend requires and ttfr's own runtime dependencies -> its installed version, from
    package metadata in ttfr's own interpreter (null: not installed); each case file has its worker's."""
    command_line: list[str]
    """The ttfr command line that created this directory (for a merge, the merge's), word by word, secrets
    redacted."""
    policies: Policies
    """The cache policies and what every worker is given with them."""
    environment: dict[str, str]
    """ttfr's environment variables whose names start with JAX_, XLA_, TORCH, CUDA_, OMP_, MKL_ or PYTHON, when
    the run started; secrets keep their names only."""
    limitations: list[str]
    """What the run could not control (the OS page cache, bytecode caches, CPU frequency, GPU driver caches), in
    words."""
    threadpools: list[LoadedLibrary] | None | UnsetType = UNSET
    """The BLAS/OpenMP libraries NumPy loads in ttfr's own process and their thread counts (threadpoolctl); null
    without threadpoolctl or NumPy. Each case file records its own worker's."""
    shards: list[ShardOrigin] | UnsetType = UNSET
    """A merged result (`ttfr merge`): each shard's share, machine and session; the rest of this manifest is the
    first shard's. Absent where the directory is no merge."""
    arm: Arm | UnsetType = UNSET
    """`ttfr ab`: which arm this result directory is, with its interpreter and environment; absent outside
    `ttfr ab`."""
