"""What can be measured: backends, workloads and the case ids they combine into.

Case id: `<backend>_<workload>_<size>_<dtype>` (dtype `f32`/`f64`), e.g.
`jax_jit_cpu_matmul_512_f32`; a HistFactory case on the user's `--workspace` file is
`<backend>_<workload>_custom_<size>_<dtype>` (size: its parameter count), so it never shares
an id with the preset of the same parameter count. Availability is probed cheaply (find_spec, /dev/nvidia*),
never by importing a runtime: the worker has the final word and reports `warn` itself.
"""

from __future__ import annotations

import importlib.util
import re
import shutil
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from ttfr.child import hostinfo
from ttfr.child.conversion_routes import ROUTES
from ttfr.errors import UsageError, unknown_choice
from ttfr.measure.precompiled import JAX_EXPORT, JAX_SERIALIZED, TORCH_AOT_COMPILE, TORCH_AOTI, TORCH_MEGACACHE

DTYPES = {"f32": "float32", "f64": "float64", "bf16": "bfloat16"}  # bfloat16: conversion routes only
DTYPE_SHORT = {v: k for k, v in DTYPES.items()}


# How a backend's persistent-cache counters are read (measure/cache.py verifies them).
JAX_MONITORING = "jax_monitoring"  # jax.monitoring compilation-cache events
TORCH_COUNTERS = "torch_dynamo_counters"  # torch._dynamo.utils.counters (fxgraph / autograd cache)
# No counters: the files in the cache directories before and after a run (a command's program).
DIRECTORY_ENTRIES = "cache_directory_entries"

_SYNCHRONOUS = "synchronous: the call returns its finished result"
_JAX_SYNC = "jax.block_until_ready on every result, inside the timed region"
_TORCH_CPU_SYNC = "synchronous: CPU tensors are complete when the op returns"
_TORCH_CUDA_SYNC = "torch.cuda.synchronize() after every call, inside the timed region"
_INTEROP_SYNC = (
    "a route into JAX: jax.block_until_ready on its result; into or out of CUDA memory: "
    "torch.cuda.synchronize(); NumPy and CPU torch return finished arrays; inside the timed region"
)
_TORCH_COMPILE_LIMITATION = (
    "torch.compile stage split (dynamo / AOTAutograd / inductor) is derived from "
    "torch._dynamo.utils.compile_times, an internal API; the raw table is kept in journal.jsonl."
)


@dataclass(frozen=True)
class Backend:
    """Everything ttfr knows about a backend. Nothing outside this module and the child's
    adapters and workloads keys on a backend's or framework's name (tests/test_layers.py)."""

    name: str
    framework: str  # python | numpy | jax | torch | pyhf | nextstat (read by the adapter's workloads)
    adapter: str  # module under ttfr.child.backends run by the worker
    device: str  # cpu | gpu
    # Compiles (jax.jit, torch.compile rather than eager): the cache policies apply, and the
    # adapter is told to compile.
    compiles: bool
    requires: tuple[str, ...]  # top-level packages that must be importable
    description: str
    sync_policy: str  # how a timed call waits for its result; written into every case
    cost_prior_s: tuple[float, float]  # ETA guess per run: (fresh cache, from a template)
    # The call is asynchronous and the adapter waits on a barrier after it (JAX, CUDA): the
    # warm regime checks that a trailing barrier finds nothing left to wait for.
    barrier: bool = False
    cache_counters: str | None = None  # JAX_MONITORING | TORCH_COUNTERS | None
    variant: str = ""  # engine option for the adapter (pyhf's tensor backend)
    unsupported: tuple[tuple[str, str], ...] = ()  # (workload, why): a `warn` case, not an error
    env_defaults: tuple[tuple[str, str], ...] = ()  # worker environment, where the user set none
    xla_gpu_toolkit: bool = False  # point XLA at a CUDA toolkit's ptxas when one is installed
    limitations: tuple[str, ...] = ()  # declared in every case of this backend
    diagnostic: bool = False  # measures the harness; chosen only by name
    # ttfr's worker calls the workload in its own process (warm regime, result check). False for
    # a command: the program is a black box that starts, gives its first result and exits.
    in_process: bool = True
    # How the adapter runs CPU computations inline for a workload that asks (Workload.inline_cpu);
    # empty: it cannot, or its runtime is synchronous anyway.
    inline_cpu: str = ""
    # The float32 matmul arithmetic its adapter sets, written into every case: JAX on a GPU
    # defaults to TF32 where torch keeps FP32, so the two would time different arithmetic (and
    # TF32 misses the f32 tolerance). Empty: the runtime has one arithmetic.
    matmul_precision: str = ""
    # A declared variant of another backend (TF32 arithmetic): chosen only by name, never in a default suite.
    opt_in: bool = False
    # (workload, note): how that workload's timed calls run on this backend beyond its sync policy (what
    # bounds the figures, how reproducible the results are); written into those cases' sync_policy.
    workload_notes: tuple[tuple[str, str], ...] = ()
    # Precompiled artifacts its adapter makes and loads (measure/precompiled.py MECHANISMS): each one's policies
    # (`precompiled/<mechanism>/<setting>`) apply to its cases; empty: none.
    precompiled: tuple[str, ...] = ()


@dataclass(frozen=True)
class PublishedFigure:
    """A figure measured elsewhere that the report shows beside ours (never mixed into our statistics)."""

    metric: str  # what it measures, as the report says it
    parameters: int
    value: float
    unit: str  # "s", or "abs" (an absolute error)
    ours: str  # the ScalingRow figure of ours it stands beside (warm_call_s, train_step_s, fd_max_abs_error)


# NextStat's published HistFactory figures (NextStat docs, "Differentiable Layer"): CUDA on another machine.
PUBLISHED_SOURCE = "NextStat docs, CUDA, RTX 4000 SFF Ada 20 GB: measured elsewhere, other hardware"
PUBLISHED_NAME = "NextStat CUDA"  # as a plot's legend names them
PUBLISHED_COLUMN = "NextStat, CUDA (published)"  # as a table's column does
# The family of the workloads that read a workspace, as a report titles their section.
WORKSPACE_FAMILY = "HistFactory"


@dataclass(frozen=True)
class Workload:
    name: str
    frameworks: tuple[str, ...]
    sizes: tuple[int, ...]  # catalogued sizes (the defaults of the larger profiles)
    size_range: tuple[int, int]  # what a user may ask for
    dtypes: tuple[str, ...]
    size_meaning: str
    description: str
    diagnostic: bool = False  # measures the harness; never in a default suite
    default: bool = True  # in the default suite when --workloads is not given
    # The gate process also runs the result check; for HistFactory that is the parity fits,
    # finite differences and two 20-step training loops, so it gets this multiple of --timeout.
    check_timeout_factor: float = 1.0
    reads_workspace: bool = False  # inputs are a HistFactory workspace file (a preset or the user's)
    module: str = ""  # the worker's module under ttfr.child.workloads (default: the name)
    # A loop workload: one Workload per strategy of a loop family, all sharing its module,
    # inputs and reference, so their results and costs compare configuration by configuration.
    loop: str = ""
    strategy: str = ""
    needs_compiler: bool = False  # a compiler's strategy (padded or dynamic shapes, AOT): compiling backends only
    source: str = ""  # a user's case: its case file (absolute) or `module:<name>` (measure/user_cases.py)
    command: bool = False  # a user's command (`ttfr run --command`): its program is in the run's spec
    # Each call's result is needed before the next (fits, a gradient step): CPU computations
    # run inline in the calling thread, not handed to a dispatch thread and waited for (JAX's
    # async dispatch costs ~60 us a synchronised call on this kind of machine: most of a small
    # model's NLL + gradient). Applies to ttfr's own engines; pyhf and user code run as given.
    inline_cpu: bool = False
    conversion: bool = False  # a conversion route (its strategy names it): the case records copy evidence
    published: tuple[PublishedFigure, ...] = ()  # figures measured elsewhere for this workload
    records_fd_error: bool = False  # its result check compares the signal gradient with finite differences

    @property
    def child_module(self) -> str:
        return self.module or self.name


_PYHF_NUMPY_UNSUPPORTED = (
    ("hf_profiled_q0", "pyhf's NumPy backend has no autodiff; dq0/ds would need 2 fits per signal bin"),
    ("hf_train_loop", "pyhf's NumPy backend has no autodiff to train through"),
    ("hf_train20", "pyhf's NumPy backend has no autodiff to train through"),
    ("hf_mass_scan_naive", "pyhf's NumPy backend has no autodiff; dq0/ds would need 2 fits per signal bin"),
    ("hf_fd_check", "pyhf's NumPy backend has no autodiff gradient to check (its gradient is finite differences)"),
)

_JAX = dict(
    framework="jax",
    adapter="jax_backend",
    compiles=True,
    requires=("jax", "jaxlib"),
    sync_policy=_JAX_SYNC,
    matmul_precision="highest: full float32 (jax_default_matmul_precision=highest; XLA's GPU default is TF32)",
    barrier=True,
    cache_counters=JAX_MONITORING,
    cost_prior_s=(3.0, 3.0),
    precompiled=(JAX_SERIALIZED.name, JAX_EXPORT.name),
)
# Keep a CPU case on a GPU machine from initialising CUDA. GPU cases keep jax's own platform
# choice: JAX_PLATFORMS=cuda without a CUDA plugin dies in an assert.
# A GPU worker sees one GPU (JAX creates a context on every visible one during import) and JAX's
# memory preallocation is pinned to its default rather than left to whatever the shell had:
# both change what setup and the first call cost (issue 27); the manifest records them.
_ONE_GPU = (("CUDA_VISIBLE_DEVICES", "0"),)
_JAX_GPU_ENV = (*_ONE_GPU, ("XLA_PYTHON_CLIENT_PREALLOCATE", "true"))
_JAX_CPU = dict(_JAX, device="cpu", env_defaults=(("JAX_PLATFORMS", "cpu"),),
                inline_cpu="jax_cpu_enable_async_dispatch=False")  # fmt: skip
_TORCH = dict(
    framework="torch",
    adapter="torch_backend",
    requires=("torch",),
    cache_counters=TORCH_COUNTERS,
    matmul_precision="highest: full float32 (torch.set_float32_matmul_precision('highest'), TF32 off)",
)
# A CPU torch case on a GPU machine would still load CUDA and create its context (issue 27): the
# GPUs are hidden from it unless the user set CUDA_VISIBLE_DEVICES themselves.
_HIDE_GPUS = (("CUDA_VISIBLE_DEVICES", ""),)
_TORCH_EAGER = dict(_TORCH, compiles=False, cost_prior_s=(4.0, 4.0))
_TORCH_COMPILE = dict(
    _TORCH,
    compiles=True,
    cost_prior_s=(25.0, 8.0),
    limitations=(_TORCH_COMPILE_LIMITATION,),
    precompiled=(TORCH_MEGACACHE.name, TORCH_AOT_COMPILE.name, TORCH_AOTI.name),
)
_TF32 = dict(variant="tf32", opt_in=True)
_TF32_JAX = dict(_TF32, matmul_precision="tensorfloat32: TF32 inputs, float32 accumulation "
                 "(jax_default_matmul_precision=tensorfloat32), a declared variant")  # fmt: skip
_TF32_TORCH = dict(_TF32, matmul_precision="high: TF32 inputs, float32 accumulation "
                   "(torch.set_float32_matmul_precision('high')), a declared variant")  # fmt: skip
# ttfr's own HistFactory engine in torch on a GPU (native.TorchEngine; issue 27, item 10).
_HF_FITS = ("hf_profiled_q0", "hf_train_loop", "hf_train20", "hf_mass_scan_naive")  # Newton fits in the timed call
_TORCH_CUDA_HF_NOTES = (
    *((w, "launch-bound: the Newton fits run on the GPU with one host synchronisation per iteration (the stop "
          "test) and small kernels, so kernel launches and those waits make most of the figures") for w in _HF_FITS),
    *((w, "not bit-deterministic: CUDA index_add (the scatter-adds of bins, Jacobian and constraints) adds with "
          "atomics in no fixed order; results compare within a tolerance (digests)")
      for w in ("hf_nll_grad", "hf_fd_check", *_HF_FITS)),
)  # fmt: skip
_PYHF = dict(framework="pyhf", adapter="pyhf_backend", device="cpu")
COMMAND = "command"  # the backend and framework of `ttfr run --command` cases
_COMMAND_SYNC = "the program's own: its first result is the line it prints (--first-result), its mark, or its exit"
_COMMAND_LIMITATIONS = (
    "A command is a black box: ttfr times its process from spawn to its first result and exit; the import, "
    "setup and compile stages inside it are not split, and there is no warm regime or result check.",
    "Its cache policy is verified by the files in the cache directories ttfr points JAX_COMPILATION_CACHE_DIR, "
    "TORCHINDUCTOR_CACHE_DIR, TRITON_CACHE_DIR and the like at (no runtime counters): a program that keeps its "
    "cache elsewhere is flagged.",
)
BACKENDS = {
    b.name: b
    for b in (
        Backend("python", "python", "python_backend", "cpu", False, (), "pure Python, no runtime stack (harness floor)",
                _SYNCHRONOUS, cost_prior_s=(0.1, 0.1), diagnostic=True),
        Backend("numpy", "numpy", "numpy_backend", "cpu", False, ("numpy",), "NumPy, eager",
                "synchronous: NumPy returns finished arrays", cost_prior_s=(0.6, 0.6)),
        Backend("jax_jit_cpu", description="jax.jit on the CPU platform", **_JAX_CPU),
        Backend("jax_jit_gpu", description="jax.jit on the GPU platform", device="gpu", xla_gpu_toolkit=True,
                env_defaults=_JAX_GPU_ENV, **_JAX),
        Backend("torch_eager_cpu", device="cpu", description="PyTorch eager on CPU", sync_policy=_TORCH_CPU_SYNC,
                env_defaults=_HIDE_GPUS, **_TORCH_EAGER),
        Backend("torch_compile_cpu", device="cpu", description="torch.compile (inductor, C++) on CPU",
                sync_policy=_TORCH_CPU_SYNC, env_defaults=_HIDE_GPUS, **_TORCH_COMPILE),
        Backend("torch_eager_cuda", device="gpu", description="PyTorch eager on CUDA", sync_policy=_TORCH_CUDA_SYNC,
                barrier=True, env_defaults=_ONE_GPU, workload_notes=_TORCH_CUDA_HF_NOTES, **_TORCH_EAGER),
        Backend("torch_compile_cuda", device="gpu", description="torch.compile (inductor, Triton) on CUDA",
                sync_policy=_TORCH_CUDA_SYNC, barrier=True, env_defaults=_ONE_GPU, workload_notes=_TORCH_CUDA_HF_NOTES,
                **_TORCH_COMPILE),
        # TF32 float32 matmuls, declared (issue 27): what JAX does on a GPU by default and what torch does with
        # set_float32_matmul_precision('high'), both asked for, so the two compare like with like; their result
        # check allows TF32's error (child/worker.py TF32_TOLERANCE, float32 only)
        Backend("jax_jit_gpu_tf32", description="jax.jit on the GPU platform, TF32 float32 matmuls", device="gpu",
                xla_gpu_toolkit=True, env_defaults=_JAX_GPU_ENV, **dict(_JAX, **_TF32_JAX)),
        Backend("torch_eager_cuda_tf32", device="gpu", description="PyTorch eager on CUDA, TF32 float32 matmuls",
                sync_policy=_TORCH_CUDA_SYNC, barrier=True, env_defaults=_ONE_GPU, workload_notes=_TORCH_CUDA_HF_NOTES,
                **dict(_TORCH_EAGER, **_TF32_TORCH)),
        Backend("torch_compile_cuda_tf32", device="gpu", description="torch.compile on CUDA, TF32 float32 matmuls",
                sync_policy=_TORCH_CUDA_SYNC, barrier=True, env_defaults=_ONE_GPU, workload_notes=_TORCH_CUDA_HF_NOTES,
                **dict(_TORCH_COMPILE, **_TF32_TORCH)),
        Backend("pyhf_numpy", compiles=False, requires=("pyhf",), description="pyhf 0.7, NumPy backend",
                sync_policy="synchronous: pyhf's NumPy backend returns finished arrays", cost_prior_s=(2.0, 2.0),
                variant="numpy", unsupported=_PYHF_NUMPY_UNSUPPORTED, **_PYHF),
        Backend("pyhf_jax", compiles=True, requires=("pyhf", "jax"), description="pyhf 0.7, JAX backend (jit)",
                sync_policy=_JAX_SYNC, barrier=True, cache_counters=JAX_MONITORING, cost_prior_s=(6.0, 5.0),
                variant="jax", env_defaults=_JAX_CPU["env_defaults"], **_PYHF),
        Backend("pyhf_pytorch", compiles=False, requires=("pyhf", "torch"), description="pyhf 0.7, PyTorch backend (eager)",
                sync_policy=_TORCH_CPU_SYNC, cost_prior_s=(6.0, 6.0), variant="pytorch", env_defaults=_HIDE_GPUS,
                **_PYHF),
        Backend(COMMAND, COMMAND, "", "cpu", True, (), "any program, started as a command (ttfr run --command)",
                _COMMAND_SYNC, cost_prior_s=(5.0, 5.0), cache_counters=DIRECTORY_ENTRIES, in_process=False,
                env_defaults=(("PYTHONUNBUFFERED", "1"),), limitations=_COMMAND_LIMITATIONS),
        # Array conversions between runtimes (issue 28): the route's libraries are its runtime stack
        Backend("interop", "interop", "interop_backend", "cpu", False, ("numpy",),
                "array conversions between NumPy, PyTorch and JAX on the CPU (conversion routes only)", _INTEROP_SYNC,
                cost_prior_s=(2.0, 2.0), barrier=True, env_defaults=(("JAX_PLATFORMS", "cpu"), *_HIDE_GPUS)),
        Backend("interop_gpu", "interop_gpu", "interop_backend", "gpu", False, ("numpy",),
                "host <-> device transfers with PyTorch and JAX, pageable and pinned (conversion routes only)",
                _INTEROP_SYNC, cost_prior_s=(3.0, 3.0), barrier=True, env_defaults=_ONE_GPU),
        Backend("nextstat", "nextstat", "nextstat_backend", "cpu", False, ("nextstat",),
                "NextStat's Rust core (PyPI CPU wheel) and its torch layer",
                "synchronous: NextStat's Rust core returns finished Python floats/lists", cost_prior_s=(2.0, 2.0)),
    )
}  # fmt: skip

_ARRAY_FRAMEWORKS = ("numpy", "jax", "torch")
_HF_FRAMEWORKS = ("jax", "torch", "pyhf", "nextstat")
# Parameter counts of the generated workspace presets (child/workloads/histfactory/workspace.py).
HF_PRESET_SIZES = {"simple": 3, "complex8p": 8, "mid72p": 72, "thu184p": 184, "ladder500": 500, "ladder1000": 1000,
                   "ladder2000": 2000}  # fmt: skip
HF_PRESET_BY_SIZE = {size: name for name, size in HF_PRESET_SIZES.items()}
_HF = dict(size_range=(1, 1_000_000), dtypes=("float64",), size_meaning="parameters (workspace)", default=False,
           check_timeout_factor=4.0, reads_workspace=True, inline_cpu=True)  # fmt: skip
_BUILTIN_WORKLOADS = {
    w.name: w
    for w in (
        Workload("matmul", _ARRAY_FRAMEWORKS, (512, 1024), (2, 16384), ("float32", "float64"),
                 "n (two n x n matrices)", "dense matrix product A @ B"),
        Workload("fused_chain", _ARRAY_FRAMEWORKS, (4096, 32768), (1, 1 << 22), ("float32", "float64"),
                 "rows (of 256 columns)", "affine, GELU, layer-norm, softmax, weighted row sum"),
        Workload("mlp_train_step", _ARRAY_FRAMEWORKS, (64, 256), (2, 8192), ("float32", "float64"),
                 "width (2 hidden layers, batch 128)", "forward + backward + SGD update of a small MLP"),
        Workload("noop", ("python",), (1,), (1, 1), ("float64",),
                 "unused (1)", "a call that does nothing", diagnostic=True),
        Workload("spin", ("python",), (50,), (1, 1_000_000), ("float64",), "thousands of loop iterations per call",
                 "calibrated pure-Python work (self-test; TTFR_SPIN_EXTRA adds work)", diagnostic=True),
        Workload("hf_nll_grad", _HF_FRAMEWORKS, (8, 184), **_HF, records_fd_error=True,
                 published=(PublishedFigure("NLL + signal gradient", 8, 0.12e-3, "s", "warm_call_s"),
                            PublishedFigure("NLL + signal gradient", 184, 3.66e-3, "s", "warm_call_s")),
                 description="HistFactory NLL with its gradients w.r.t. the signal histogram and all parameters"),
        Workload("hf_profiled_q0", _HF_FRAMEWORKS, (8, 184), **_HF,
                 published=(PublishedFigure("profiled q0", 8, 3.0e-3, "s", "warm_call_s"),),
                 description="discovery q0 (free and mu=0 fits) and dq0/d(signal histogram)"),
        Workload("hf_train_loop", _HF_FRAMEWORKS, (8, 184), **_HF,
                 published=(PublishedFigure("20-step training loop, per step", 184, 2.4e-3, "s", "train_step_s"),),
                 description="a step of MLP -> soft histogram -> -Z0 training (20-step loop checked)"),
        Workload("hf_fd_check", _HF_FRAMEWORKS, (8, 184), **_HF, records_fd_error=True,
                 published=(PublishedFigure("signal gradient vs finite differences, max error", 184, 2.07e-9, "abs",
                                            "fd_max_abs_error"),),
                 description="signal-gradient accuracy: autodiff against central finite differences"),
        # A loop of one strategy: the whole 20-step training is the timed unit (TTFR + 20 steps).
        Workload("hf_train20", _HF_FRAMEWORKS, (8, 184), **_HF, loop="hf_train20", strategy="naive",
                 description="the 20-step training loop end to end: TTFR + 20 steps, compiles in the loop"),
        # The physics sweep: q0 over signal hypotheses (same shapes) and binnings (new shapes).
        Workload("hf_mass_scan_naive", _HF_FRAMEWORKS, (8, 184), **_HF, module="hf_mass_scan", loop="hf_mass_scan",
                 strategy="naive", description="q0 and dq0/ds over 6 signal hypotheses and 3 binnings; naive: one "
                 "compiled q0 (JAX) or an engine per binning"),
        Workload("hf_mass_scan_vmapped", ("jax",), (8, 184), **_HF, module="hf_mass_scan", loop="hf_mass_scan",
                 strategy="vmapped", description="the same scan; the hypotheses in one vmapped call"),
        Workload("hf_mass_scan_aot", ("jax",), (8, 184), **_HF, module="hf_mass_scan", loop="hf_mass_scan",
                 strategy="aot", needs_compiler=True,
                 description="the same scan; every binning compiled ahead, serialised, loaded by later runs"),
    )
}  # fmt: skip
HF_WORKLOADS = tuple(name for name, w in _BUILTIN_WORKLOADS.items() if w.reads_workspace)

# Loop strategies: (name, frameworks, needs a compiler, what it does).
LOOP_STRATEGIES = (
    ("naive", ("numpy", "jax", "torch"), False, "one compiled step called with whatever shapes come"),
    ("bucketed", ("jax", "torch"), True, "shapes padded to power-of-two buckets, the batch masked"),
    ("vmapped", ("jax", "torch"), False, "all configurations padded, stacked and trained in one batched call"),
    ("dynamic", ("jax", "torch"), True, "one program for every shape (torch dynamic=True; jax.export symbolic shapes)"),
    (
        "aot",
        ("jax", "torch"),
        True,
        "every shape compiled before the loop (JAX .lower().compile(); torch.export + "
        "AOTInductor), serialised, and loaded by later runs",
    ),
)
_ALL_STRATEGIES = tuple(s[0] for s in LOOP_STRATEGIES)
_LOOPS = (
    ("sweep_mlp", (16,), (1, 192), "K (configurations of the sweep)",
     "K 20-step trainings over a seeded grid of learning rate, width and batch size", _ALL_STRATEGIES),
    # Each step starts from the previous one's parameters: nothing to batch (no vmapped).
    ("ragged_batches", (50,), (1, 2000), "N (batches of the training loop)",
     "one SGD step per batch over N batches of seeded ragged length (16..256)", ("naive", "bucketed", "dynamic", "aot")),
)  # fmt: skip
for _family, _sizes, _range, _meaning, _what, _strategies in _LOOPS:
    for _strategy, _frameworks, _compiler, _how in LOOP_STRATEGIES:
        if _strategy not in _strategies:
            continue
        _name = f"{_family}_{_strategy}"
        _BUILTIN_WORKLOADS[_name] = Workload(_name, _frameworks, _sizes, _range, ("float32", "float64"), _meaning,
                                    f"{_what}; {_strategy}: {_how}", default=False, module=_family, loop=_family,
                                    strategy=_strategy, needs_compiler=_compiler)  # fmt: skip
# Conversion routes (issue 28): one workload per route, sizes in bytes; a route's module is `convert`,
# told its route as the job's strategy. Quick runs the first catalogued size (4 MiB, where a copy is a
# copy's cost rather than a call's); standard all of them (1 GiB included).
CONVERSION_SIZES = (4 << 20, 1 << 10, 64 << 10, 256 << 20, 1 << 30)
# whole rows of 64 elements at every dtype: a size is then the bytes measured, never rounded down
CONVERSION_SIZE_STEP = 64 * 8
for _route in ROUTES.values():
    _BUILTIN_WORKLOADS[_route.name] = Workload(
        _route.name, ("interop_gpu",) if _route.device == "gpu" else ("interop",), CONVERSION_SIZES, (1 << 10, 1 << 34),
        ("float32", "float64", "bfloat16"), "bytes (of the source array, 64 columns)",
        f"{_route.source} -> {_route.destination}: {_route.api}", default=False, module="convert",
        strategy=_route.name, conversion=True)  # fmt: skip
LOOP_FAMILIES = {family: tuple(f"{family}_{s}" for s in strategies) for family, *_, strategies in _LOOPS}
LOOP_FAMILIES["convert"] = tuple(ROUTES)  # every route: --workloads convert
LOOP_FAMILIES["hf_train20"] = ("hf_train20",)
LOOP_FAMILIES["hf_mass_scan"] = tuple(name for name, w in _BUILTIN_WORKLOADS.items() if w.loop == "hf_mass_scan")
# The built-in workloads, read-only: a user's cases and commands make a Catalog of their own
# (Catalog.with_workloads), never an entry here.
WORKLOADS: Mapping[str, Workload] = MappingProxyType(_BUILTIN_WORKLOADS)


USER_CASE_MODULE = "user_case"  # the worker's module for every user case


def command_workload(name: str, description: str) -> Workload:
    """The workload of a user's command `name` (its program and options are in the run's spec)."""
    return Workload(name, (COMMAND,), (1,), (1, 1), ("float64",), "unused (1)", description, default=False,
                    source=COMMAND, command=True)  # fmt: skip


def expand_workloads(names) -> list[str]:
    """Workload names with each loop family (`sweep_mlp`) replaced by its strategies' workloads."""
    out = []
    for name in names:
        for expanded in LOOP_FAMILIES.get(name, (name,)):
            if expanded not in out:
                out.append(expanded)
    return out


CUSTOM = "custom"  # the size marker of a case on the user's --workspace file


@dataclass(frozen=True, order=True)
class Case:
    backend: str
    workload: str
    size: int
    dtype: str  # float32 | float64
    custom: bool = False  # a HistFactory case on the user's --workspace file (not a preset)
    # The workload itself, from the catalogue that made the case (a user's case or command is
    # in no module-level table); a case written by hand names a built-in one.
    info: Workload | None = field(default=None, compare=False, repr=False)

    @property
    def size_token(self) -> str:
        """The size as the id writes it (`8`, or `custom_8` for the user's workspace); also
        the key of the case's workspace in plan.json's `datasets`."""
        return f"{CUSTOM}_{self.size}" if self.custom else str(self.size)

    @property
    def id(self) -> str:
        return f"{self.backend}_{self.workload}_{self.size_token}_{DTYPE_SHORT[self.dtype]}"

    @property
    def backend_info(self) -> Backend:
        return BACKENDS[self.backend]

    @property
    def workload_info(self) -> Workload:
        return self.info if self.info is not None else WORKLOADS[self.workload]

    @property
    def uses_workspace(self) -> bool:
        return self.workload_info.reads_workspace

    @property
    def runs_groups(self) -> bool:
        """It compiles in ttfr's worker: --concurrency starts groups of it on a shared compilation cache."""
        return self.backend_info.compiles and self.backend_info.in_process

    @property
    def inline_cpu(self) -> bool:
        """Its worker runs CPU computations inline (the workload asks, the adapter can)."""
        return self.workload_info.inline_cpu and bool(self.backend_info.inline_cpu)

    @property
    def sync_policy(self) -> str:
        """How its timed calls wait for their results, and the arithmetic they run (JAX and torch:
        float32 matmuls at full precision, set explicitly), with the backend's notes on the workload
        (torch on CUDA: what bounds the HistFactory fits' figures), as every case file says."""
        policy = self.backend_info.sync_policy
        if self.inline_cpu:
            policy += f"; CPU computations run inline in the calling thread ({self.backend_info.inline_cpu})"
        if self.backend_info.matmul_precision:
            policy += f"; float32 matmul precision {self.backend_info.matmul_precision}"
        return "; ".join([policy, *(note for workload, note in self.backend_info.workload_notes if workload == self.workload)])


@dataclass(frozen=True)
class SweptPackage:
    """What a sweep over a package's releases (`ttfr history --releases`) must know of it."""

    requirement: str = "{name}=={version}"  # what installs one release for this machine's CPU
    pinned_with: tuple[str, ...] = ()  # packages released with it, never pinned apart from it (the lock's pins dropped)
    large: str | None = None  # why a release's environment is several GB (--allow-large), if it is


SWEPT_PACKAGES = {
    "jax": SweptPackage("jax[cpu]=={version}", pinned_with=("jaxlib",)),  # its matching jaxlib comes with the extra
    "torch": SweptPackage(large="PyTorch's Linux wheels on PyPI pull several GB of CUDA packages (nvidia-*) per release"),
}


def swept_package(name: str) -> SweptPackage:
    return SWEPT_PACKAGES.get(name, SweptPackage())


def required_packages() -> tuple[str, ...]:
    """Every package some backend needs (the manifest records their versions)."""
    return tuple(dict.fromkeys(package for b in BACKENDS.values() for package in b.requires))


def supports(backend: Backend, workload: Workload) -> bool:
    return backend.framework in workload.frameworks and (backend.compiles or not workload.needs_compiler)


def unsupported_reason(backend: Backend, workload: str) -> str | None:
    return dict(backend.unsupported).get(workload)


def check_size(workload: Workload, size: int, extra_sizes=(), custom: bool = False) -> None:
    """`extra_sizes`: the parameter count of the run's --workspace file (at most one), which
    only a `custom` case may name; any other HistFactory size is a preset's."""
    if workload.name in HF_WORKLOADS:
        if custom:
            if size not in extra_sizes:
                mine = f"has {extra_sizes[0]} parameters" if extra_sizes else "was not given"
                raise UsageError(
                    f"size {CUSTOM}_{size} names the --workspace file with {size} parameters, but --workspace {mine}; "
                    f"presets: {', '.join(f'{name}={n}' for name, n in HF_PRESET_SIZES.items())}"
                )
            return
        if size not in HF_PRESET_SIZES.values():
            presets = ", ".join(f"{name}={n}" for name, n in HF_PRESET_SIZES.items())
            mine = f"; the file given with --workspace is size {CUSTOM}_{extra_sizes[0]}" if extra_sizes else ""
            raise UsageError(
                f"size {size} is not a HistFactory workspace of this run: sizes are parameter counts of the "
                f"presets ({presets}) or {CUSTOM}_<n> for the file given with --workspace{mine}"
            )
        return
    if custom:
        raise UsageError(f"size {CUSTOM}_{size}: only the HistFactory workloads ({', '.join(HF_WORKLOADS)}) "
                         "read a --workspace file")  # fmt: skip
    if workload.conversion and size % CONVERSION_SIZE_STEP:
        raise UsageError(f"size {size} of conversion route {workload.name!r} is bytes of a (rows x 64) array: a "
                         f"multiple of {CONVERSION_SIZE_STEP} bytes (64 float64s), e.g. 1024, 65536, 4194304")  # fmt: skip
    low, high = workload.size_range
    if not low <= size <= high:
        raise UsageError(
            f"size {size} is out of range for workload {workload.name!r} ({workload.size_meaning}): "
            f"valid sizes are {low}..{high}; catalogued: {', '.join(map(str, workload.sizes))}"
        )


_CASE_TAIL = re.compile(r"^(?P<head>.+?)(?P<custom>_custom)?_(?P<size>\d+)_(?P<dtype>f32|f64|bf16)$")
# What any case id looks like (lower-case words, size, dtype): safe as a file name. A custom
# case's `custom_<n>` size is two such words.
CASE_ID_GRAMMAR = re.compile(r"^[a-z0-9]+(?:_[a-z0-9]+)*_[0-9]+_(?:f32|f64|bf16)$")


def is_case_id(text) -> bool:
    return isinstance(text, str) and CASE_ID_GRAMMAR.match(text) is not None


@dataclass(frozen=True, eq=False)
class Catalog:
    """The workloads one run can name: the built-ins plus the users' cases and commands it read.
    Immutable and passed to whoever needs it: adding workloads makes a new catalogue, so
    nothing one run (or test) reads leaks into another."""

    workloads: Mapping[str, Workload]

    def with_workloads(self, added: Iterable[Workload]) -> Catalog:
        """This catalogue and the users' workloads; a name must not be a built-in workload's, a
        loop family's or another source's case."""
        workloads = dict(self.workloads)
        for workload in added:
            known = workloads.get(workload.name)
            if workload.name in LOOP_FAMILIES or (known is not None and known.source != workload.source):
                where = f"a case in {known.source}" if known is not None and known.source else "a built-in workload"
                where = "another command" if known is not None and known.command else where
                what = f"command {workload.name!r}" if workload.command else f"case {workload.name!r} from {workload.source}"
                fix = "name it with --command-name" if workload.command else "rename it"
                raise UsageError(f"{what} has the name of {where}: {fix}")
            workloads[workload.name] = workload
        return Catalog(MappingProxyType(workloads))

    def names(self) -> list[str]:
        """What --workloads accepts: every workload and loop family."""
        return [*self.workloads, *LOOP_FAMILIES]

    def catalogued_cases(self) -> list[Case]:
        """Every catalogued combination (sizes and dtypes from the catalogue)."""
        return sorted(
            Case(b.name, w.name, size, dtype, info=w)
            for b in BACKENDS.values()
            for w in self.workloads.values()
            if supports(b, w)
            for size in w.sizes
            for dtype in w.dtypes
        )

    def make_case(self, backend: str, workload: str, size: int, dtype: str, extra_sizes=(), custom: bool = False) -> Case:
        if backend not in BACKENDS:
            raise unknown_choice("backend", backend, BACKENDS)
        if workload not in self.workloads:
            raise unknown_choice("workload", workload, self.workloads)
        b, w = BACKENDS[backend], self.workloads[workload]
        if not supports(b, w):
            able = sorted(x.name for x in BACKENDS.values() if supports(x, w))
            raise UsageError(f"backend {backend!r} does not run workload {workload!r}; backends that do: {', '.join(able)}")
        dtype = DTYPES.get(dtype, dtype)
        if dtype not in w.dtypes:
            raise UsageError(
                f"dtype {dtype!r} is not offered by workload {workload!r}; valid: "
                + ", ".join(f"{DTYPE_SHORT[d]} ({d})" for d in w.dtypes)
            )
        check_size(w, size, extra_sizes, custom)
        return Case(backend, workload, size, dtype, custom, info=w)

    def parse_case_id(self, case_id: str, extra_sizes=()) -> Case:
        """`jax_jit_cpu_matmul_512_f32` -> Case; any size in the workload's range is accepted.
        `..._custom_<n>_...` is a HistFactory case on the --workspace file (`extra_sizes`: its
        parameter count)."""
        match = _CASE_TAIL.match(case_id)
        if match:
            head = match["head"]
            for backend in sorted(BACKENDS, key=len, reverse=True):
                if head.startswith(backend + "_") and head[len(backend) + 1 :] in self.workloads:
                    return self.make_case(backend, head[len(backend) + 1 :], int(match["size"]), match["dtype"],
                                          extra_sizes, custom=bool(match["custom"]))  # fmt: skip
        raise unknown_choice("case id", case_id, [c.id for c in self.catalogued_cases()])

    def knows_case_id(self, case_id: str) -> bool:
        try:
            self.parse_case_id(case_id)
        except UsageError:
            return False
        return True


BUILTIN = Catalog(WORKLOADS)  # what ttfr itself offers


def gpu_present() -> bool:
    return bool(hostinfo.gpu_device_nodes()) or shutil.which("nvidia-smi") is not None


def availability(backend: Backend, workload: str | None = None) -> str | None:
    """None when the backend can be tried here, else the `warn` reason."""
    why = unsupported_reason(backend, workload) if workload is not None else None
    if why:
        return f"unsupported: {why}"
    for package in backend.requires:
        if importlib.util.find_spec(package) is None:
            return f"missing_dependency: {package}"
    if backend.device == "gpu" and not gpu_present():
        return "gpu_unavailable"
    return None
