"""RunRecord: what one worker process (or a user's command, through its supervisor) reported,
typed where it arrives (measure/spawn.py, measure/command_run.py).

The worker writes a Python literal (it imports only the standard library before its last
timing mark); the parent parses it and decodes it into these types. A record that does not
decode is no record: the run failed with why. Fields a newer or older worker adds are ignored
(`Open`), fields analysis reads are checked here, once.
"""

from __future__ import annotations

from typing import Annotated, Any

from msgspec import Meta

from ttfr.model.base import UNSET, Count, Open, Seconds, Sha256, Stamp, UnsetType
from ttfr.model.conversion_evidence import ConversionEvidence
from ttfr.model.result_check import Check, Digest
from ttfr.model.torch_compile_evidence import TorchCompileEvidence

NonNegative = Annotated[float, Meta(ge=0)]

# Every outcome a run can have: the worker's, and those the parent adds (timeout, oom, signal).
OUTCOMES = ("ok", "unavailable", "error", "timeout", "oom", "signal", "invalid-measurement")


class Marks(Open):
    """CLOCK_MONOTONIC ns of the phase boundaries the worker reached (a failed phase ends them)."""

    main: Stamp | UnsetType = UNSET
    """When the worker's main() began, after the interpreter's start-up and the worker's own import (CLOCK_MONOTONIC
    nanoseconds)."""
    imported: Stamp | UnsetType = UNSET
    """When the runtime stack's imports were done, the end of the import phase (CLOCK_MONOTONIC nanoseconds)."""
    device_ready: Stamp | UnsetType = UNSET
    """A GPU case: when its device was initialised (context, memory pool, math handles), after the imports
    (CLOCK_MONOTONIC nanoseconds)."""
    user_imported: Stamp | UnsetType = UNSET
    """A user's case: when its module was imported, after the runtime stack (CLOCK_MONOTONIC nanoseconds)."""
    setup: Stamp | UnsetType = UNSET
    """When setup was done: the inputs made or loaded and put on the device, before the first call (CLOCK_MONOTONIC
    nanoseconds)."""
    artifact_loaded: Stamp | UnsetType = UNSET
    """A precompiled policy's run: when its artifact was loaded, after setup and before the first call
    (CLOCK_MONOTONIC nanoseconds)."""
    first: Stamp | UnsetType = UNSET
    """When the first call's result was ready (a loop: the whole first loop; a command: its first result)
    (CLOCK_MONOTONIC nanoseconds)."""
    second_start: Stamp | UnsetType = UNSET
    """When the second call began (CLOCK_MONOTONIC nanoseconds)."""
    second: Stamp | UnsetType = UNSET
    """When the second call's result was ready, synchronised (CLOCK_MONOTONIC nanoseconds)."""


class Overlap(Open):
    as_timed_s: list[float] | UnsetType = UNSET
    """Seconds per call of loops made as the timed loop makes them (its sync after each call), one per repeat."""
    each_waited_s: list[float] | UnsetType = UNSET
    """Seconds per call of loops whose every call waits on the runtime's barrier, interleaved with those (ABBA);
    as_timed_s faster means calls overlapped."""


class SampleEvidence(Open):
    """Beside each warm sample: its wall and CPU time and its threads' run-queue wait; the
    window and what the rest of the machine used in it."""

    wall_s: list[float | None] | UnsetType = UNSET
    """Each sample's wall-clock seconds (all its inner-loop calls)."""
    cpu_s: list[float] | UnsetType = UNSET
    """The CPU seconds every thread of the worker used during each sample."""
    runq_wait_s: list[float | None] | UnsetType = UNSET
    """The seconds the worker's threads spent runnable without a CPU during each sample (schedstat); null where the
    kernel has no schedstat."""
    window_ns: list[int] | None | UnsetType = UNSET
    """The sampling window [start, end] in CLOCK_MONOTONIC nanoseconds, to line the samples up with other processes'
    events."""
    others_cpu_s: float | None | UnsetType = UNSET
    """The CPU seconds the rest of the machine used during the window (its busy time less the worker's own, 10 ms
    resolution); null without /proc."""


class WarmRecord(Open):
    """The warm regime of one process (child/sampling.py)."""

    samples_s: list[Seconds]
    """Each sample's seconds per call: the time of inner_loops synchronised calls, divided by inner_loops."""
    inner_loops: Annotated[int, Meta(ge=1)]
    """The number of calls per sample, calibrated so that a sample lasts at least the minimum sample time."""
    warmup_per_call_s: list[float]
    """Seconds per call of each warm-up batch, until three in a row agreed within 5% or the warm-up budget ran out."""
    warmup_stable: bool
    """Whether the warm-up reached that agreement (false: its budget ran out first)."""
    trailing_sync_fraction: list[float] | UnsetType = UNSET
    """After each sample, the untimed trailing barrier's seconds as a fraction of the sample's (near 0 when the timed
    loop waited for every result)."""
    pending_after_loop: list[bool] | UnsetType = UNSET
    """After each sample, whether its last result was still pending by the runtime's non-blocking probe; empty where
    the runtime has none."""
    doubling_ratios: list[float | None] | UnsetType = UNSET
    """The time of 2 x inner_loops calls over that of inner_loops, per repeat (near 2 when calls do real work, but
    dispatching without waiting doubles too: evidence, not a flag); null: an infinite ratio."""
    overlap: Overlap | None | UnsetType = UNSET
    """The timed loop against one that waits on every call; null for runtimes without a barrier."""
    sample_evidence: SampleEvidence | None | UnsetType = UNSET
    """Each sample's wall, CPU and run-queue seconds, and the machine's use of the window."""


class DevicePeaks(Open):
    """A device's peak bytes at the end of each phase (a GPU case): since the previous reading where the
    runtime resets its peak (torch), else from the process's start (XLA keeps one peak)."""

    setup: Count | None
    """Peak device bytes through import, device initialisation and setup; null where the runtime has no reading."""
    first_call: Count | None
    """Peak device bytes at the first call's end, its compile and autotuning buffers included."""
    steady: Count | None
    """Peak device bytes at the end of the second call and the warm regime, before the check's own work."""


class Memory(Open):
    device_peak_bytes: Count | UnsetType = UNSET
    """The device's peak allocated bytes over the whole process (GPU cases); absent on a CPU."""
    device_peaks: DevicePeaks | UnsetType = UNSET
    """The device's peak at the end of each phase; absent where no phase has a reading."""
    device_peaks_reset: bool | UnsetType = UNSET
    """True when each phase's peak is its own (torch resets it at each reading), false when cumulative from the
    process's start (XLA)."""
    compiled: dict[str, int] | UnsetType = UNSET
    """JAX: the compiled executable's memory_analysis, bytes by name (argument, output, temp, alias and generated code
    sizes)."""


class Device(Open):
    platform: str
    """Where the timed work ran: cpu or gpu (JAX: its device's platform name)."""
    kind: str
    """The device's model: the GPU's name, or the CPU's model name from /proc/cpuinfo (`unknown` without one)."""
    count: Count
    """The number of devices the runtime sees (torch: CUDA devices; JAX: its devices; otherwise 1)."""


class OwnRusage(Open):
    """The worker's own resource use (its peak: VmHWM after exec)."""

    max_rss_bytes: Count | None | UnsetType = UNSET
    """The worker's own peak resident memory in bytes (VmHWM after exec, else ru_maxrss); a command's: its process
    tree's largest peak, null when not above ttfr's own."""
    user_s: float | UnsetType = UNSET
    """User CPU seconds; current workers do not write it (a run's CPU time is its process tree's, from the parent's
    wait4)."""
    sys_s: float | UnsetType = UNSET
    """System CPU seconds; current workers do not write it (as user_s)."""
    involuntary_switches: int | UnsetType = UNSET
    """The number of involuntary context switches; current workers do not write it (as user_s)."""


class Sched(Open):
    on_cpu_s: float | None | UnsetType = UNSET
    """Seconds on a CPU, summed over the worker's threads alive at the end (/proc task schedstat); a command's: its
    leader's main thread's."""
    runq_wait_s: float | None | UnsetType = UNSET
    """Seconds those threads spent runnable without a CPU (their run-queue wait): the direct evidence of contention."""
    main_on_cpu_s: float | None | UnsetType = UNSET
    """The main thread's own seconds on a CPU (it does the timed work), read at read_ns."""
    main_runq_wait_s: float | None | UnsetType = UNSET
    """The main thread's own run-queue wait in seconds, read at read_ns."""
    read_ns: Stamp | UnsetType = UNSET
    """When the main thread's figures were read (CLOCK_MONOTONIC nanoseconds)."""


class LoopIteration(Open):
    label: str
    """The entry's label as the workload names it (an iteration's configuration or step, or the ahead-of-time phase)."""
    s: float
    """The entry's seconds, its result finished (host data, or waited on with the runtime's barrier), its copies
    included."""
    compiles: int | None | UnsetType = UNSET
    """The number of executables the runtime's counters saw built during the entry; null without counters."""
    persistent_hits: int | None | UnsetType = UNSET
    """The number of those the persistent compilation cache supplied; null without counters."""
    traces: int | None | UnsetType = UNSET
    """The number of traces during the entry (JAX: jaxpr traces; torch: frames dynamo traced); null without counters."""
    compile_s: int | float | None | UnsetType = UNSET
    """The runtime's compile seconds during the entry (an integer 0 when nothing compiled); null without counters."""
    ahead: bool | UnsetType = UNSET
    """True for an ahead-of-time phase before the loop (the AOT strategy's), which is not an iteration."""
    transfer_s: float | None | UnsetType = UNSET
    """Seconds of the entry's host<->device copies, each waited for (part of s); null: the loop moves no data or does
    not say."""


class LoopRecord(Open):
    """A loop workload's first run, iteration by iteration (child/loop.py)."""

    iterations: list[LoopIteration]
    """Every entry of the first loop in order, an ahead-of-time phase first where there is one."""
    loop_s: float
    """Seconds of the whole first loop: the sum of its entries' seconds."""
    expected_compiles: int | None | UnsetType = UNSET
    """The number of compiles the strategy expects; null where there is no compiler."""
    loaded: int | UnsetType = UNSET
    """The number of executables loaded from disk rather than compiled (an AOT strategy's)."""
    compiles: int | None | UnsetType = UNSET
    """The number of executables built over the loop by the runtime's counters; null without counters."""
    persistent_hits: int | None | UnsetType = UNSET
    """The number of those the persistent compilation cache supplied; null without counters."""
    traces: int | None | UnsetType = UNSET
    """The number of traces over the loop; null without counters."""
    compile_s: int | float | None | UnsetType = UNSET
    """The runtime's compile seconds over the loop; null without counters."""
    transfer_s: float | None | UnsetType = UNSET
    """Seconds of the loop's host<->device copies, summed over its entries; null where no entry says."""


# JAX's monitoring events of its persistent compilation cache (child/backends/jax_events.py)
JAX_CACHE_HITS = "/jax/compilation_cache/cache_hits"
JAX_CACHE_MISSES = "/jax/compilation_cache/cache_misses"
JAX_CACHE_REQUESTS = "/jax/compilation_cache/compile_requests_use_cache"
Amount = Annotated[int, Meta(ge=0)] | Annotated[float, Meta(ge=0)]


class ProgramCounts(Open):
    """One JAX function's compilation so far, from JAX's monitoring events named after it."""

    traces: Count = 0
    """How many times it was traced (a count)."""
    compiles: Count = 0
    """How many executables were built for it, compiled or loaded from the persistent cache (a count)."""
    hits: Count = 0
    """How many of those came from the persistent cache (a count)."""
    trace_s: float = 0.0
    """Seconds spent tracing it to a jaxpr."""
    lower_s: float = 0.0
    """Seconds spent lowering it to StableHLO."""
    backend_s: float = 0.0
    """Seconds XLA spent compiling it (or loading it, on a persistent-cache hit)."""


class RuntimeCounters(Open):
    """A runtime's own counters at one moment: JAX's monitoring events and their durations, or
    torch's counter table (dynamo, inductor, AOTAutograd) and compile times; read per backend
    kind by measure/cache.py."""

    events: dict[str, Amount] | UnsetType = UNSET
    """JAX: the count of each persistent-compilation-cache monitoring event (hits, misses, requests that use the
    cache), by event name."""
    durations_s: dict[str, Any] | UnsetType = UNSET
    """JAX: the seconds summed per monitoring duration event (tracing, lowering, backend compile, ...), by event name."""
    counters: dict[str, dict[str, Amount]] | UnsetType = UNSET
    """torch: dynamo's counter tables (inductor, aot_autograd, stats, graph_break, frames), each a count by name."""
    compile_times_s: dict[str, Any] | UnsetType = UNSET
    """torch: compile seconds by stage, from torch._dynamo's compile-time table."""
    compiler_runs_s: dict[str, list[Seconds]] | UnsetType = UNSET
    """torch: each run of a compiler Inductor timed (`compile_file`: g++ building a kernel, a header or a vector-ISA
    probe), its seconds, by timer name; absent where none ran (and from workers before issue 39)."""
    aot_loaded: Count | UnsetType = UNSET
    """The number of executables an AOT loop loaded from its cache directory."""
    programs: dict[str, ProgramCounts] | UnsetType = UNSET
    """JAX: each function compiled so far (its `fun_name`, `jit(f)` as `f`) with its traces, executables and
    stage seconds (absent from workers before --explain)."""

    def __post_init__(self):
        if self.events and self.events.get(JAX_CACHE_HITS, 0) > self.events.get(JAX_CACHE_REQUESTS, 0):
            raise ValueError("more persistent-cache hits than requests")


class CacheCounters(Open):
    """The runtime's counters at the first result and at the end of the run."""

    first: RuntimeCounters | None | UnsetType = UNSET
    """The counters right after the first call; null where the runtime has none."""
    end: RuntimeCounters | None | UnsetType = UNSET
    """The counters after the second call, before any warm samples; null where the runtime has none."""


class ThreadPool(Open):
    """One BLAS/OpenMP library a process loaded and its thread count (threadpoolctl's view)."""

    user_api: str | None = None
    """The kind of library, as threadpoolctl groups it: blas or openmp."""
    internal_api: str | None = None
    """The implementation: openblas, mkl, blis or openmp."""
    num_threads: int | None = None
    """The number of threads its pool uses."""
    version: str | None = None
    """The library's version, where threadpoolctl can read it."""
    threading_layer: str | None = None
    """A BLAS's threading layer (e.g. pthreads, openmp); null where the library does not say."""
    prefix: str | None = None
    """The shared library's file-name prefix (e.g. libopenblas, libgomp)."""


class FirstResult(Open):
    """How a command's first result was taken (`ttfr run --command`)."""

    by: str
    """How the first result was taken: output (the first output line matching the case's regex), mark
    (ttfr_mark.first_result()) or exit."""
    line: str | None
    """The output line that matched (its first 200 characters, redacted); null unless by is output."""
    stopped: bool | UnsetType = UNSET
    """Whether ttfr ended the command at its first result (`--stop-at-first-result`)."""


class ArtifactMade(Open):
    """A precompiled policy's artifact, as the priming process that made it wrote it (child/precompiled.py)."""

    mechanism: str
    """The mechanism that made it (`jax_serialized`, ...)."""
    bytes: Count
    """The artifact file's size in bytes."""
    make_s: Seconds
    """Seconds the runtime took to turn the first call's compiled code into the artifact's bytes (after the
    compile itself, which is the priming process's first call)."""
    sha256: Sha256 | UnsetType = UNSET
    """The sha256 of the artifact's files as written (the artifact, then the file kept beside it: AOTInductor's
    package): a run loads it only while its files still hash to this, else it is made again; absent in older
    journals."""


class RunRecord(Open):
    outcome: str
    """How the worker's run ended: ok, unavailable (a missing dependency or device), error, oom or invalid-measurement
    (a non-finite result, a changed case file)."""
    reason: str | None | UnsetType = UNSET
    """Why the run was not ok, in one line (at most 500 characters); null when ok."""
    protocol: int | UnsetType = UNSET
    """The record format's version number (1)."""
    phase: str | UnsetType = UNSET
    """The phase that failed: import, device_init, user_import, setup, artifact_load, first_call, second_call,
    after_second_call, artifact_make, warm, check or conversion_evidence."""
    traceback: str | UnsetType = UNSET
    """The failure's traceback (its last 4,000 characters; a user's case: its own frames); absent when ok or
    unavailable."""
    marks_ns: Marks | UnsetType = UNSET
    """The phase boundaries the worker reached, in CLOCK_MONOTONIC nanoseconds."""
    stages_s: dict[str, Seconds] | UnsetType = UNSET
    """The first call's stages in seconds, as the runtime splits it (e.g. wrap_s, trace_s, lower_s, compile_s,
    first_execute_s); empty for a loop."""
    cache: CacheCounters | None | UnsetType = UNSET
    """The runtime's compilation-cache counters after the first and the second call."""
    digest: Digest | None | UnsetType = UNSET
    """A fingerprint of the second call's result; null where it returned no arrays."""
    check: Check | None | UnsetType = UNSET
    """The result check, made by the process that checks the case's result."""
    dataset_sha256: Sha256 | None | UnsetType = UNSET
    """The SHA-256 of the run's dataset, from the checking process: every input array's dtype, shape and bytes
    (HistFactory: its workspace file's bytes)."""
    warm: WarmRecord | None | UnsetType = UNSET
    """The warm regime's samples (a warm process)."""
    loop: LoopRecord | None | UnsetType = UNSET
    """A loop workload's first loop, entry by entry."""
    conversion: ConversionEvidence | None | UnsetType = UNSET
    """A conversion route's evidence, from its checking process."""
    memory: Memory | None | UnsetType = UNSET
    """The device's peak memory and JAX's memory analysis of the compiled program."""
    device: Device | None | UnsetType = UNSET
    """The device the runtime ran on."""
    versions: dict[str, str | int | None] | None | UnsetType = UNSET
    """The runtime's library versions by name (e.g. jax, jaxlib), and for torch its thread count (torch_threads)."""
    distributions: dict[str, list[str | None]] | UnsetType = UNSET
    """--explain's diagnostic process: each imported top-level package's installed distribution and version
    (`[name, version]`; `python`: the standard library), read after its last timed phase."""
    torch_compile: TorchCompileEvidence | None | UnsetType = UNSET
    """--explain's diagnostic process, torch.compile: the first call's compiled frames, graph breaks and compiler
    runs (null: nothing was compiled)."""
    artifact: ArtifactMade | UnsetType = UNSET
    """A precompiled policy's priming process: the artifact it made; absent in every other process."""
    cache_log: list[str] | UnsetType = UNSET
    """--explain's diagnostic process, JAX: what the runtime said of its caches during the first call
    (`jax_explain_cache_misses`: why it traced, whether the persistent cache had the program and whether it stored it),
    verbatim, redacted like every recorded text; at most 40 messages of at most 2,000 characters."""
    rusage_self: OwnRusage | UnsetType = UNSET
    """The worker's own resource use: its peak resident memory."""
    sched: Sched | None | UnsetType = UNSET
    """Its threads' CPU and run-queue seconds at the end (schedstat); null where the kernel has none."""
    threadpools: list[ThreadPool] | None | UnsetType = UNSET
    """The BLAS/OpenMP libraries loaded and their thread counts (threadpoolctl), only in the process that checked the
    result; null without threadpoolctl."""
    first_result: FirstResult | UnsetType = UNSET
    """A command's run: how its first result was taken."""
    pid: int | UnsetType = UNSET
    """The worker's process id (pid)."""
