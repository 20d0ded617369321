"""RunRecord: what one worker process (or a user's command, through its supervisor) reported,
typed where it arrives (measure/spawn.py, measure/command_run.py).

The worker writes a Python literal (it imports only the standard library before its last
timing mark); the parent parses it and decodes it into these types. A record that does not
decode is no record: the run failed with why. Fields a newer or older worker adds are ignored
(`Open`), fields analysis reads are checked here, once.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from msgspec import Meta

from ttfr.model.base import UNSET, Count, Open, Seconds, Sha256, Stamp, UnsetType

NonNegative = Annotated[float, Meta(ge=0)]

NO_REFERENCE = "none"  # a check's reference when there is nothing to compare the result with
# Every outcome a run can have: the worker's, and those the parent adds (timeout, oom, signal).
OUTCOMES = ("ok", "unavailable", "error", "timeout", "oom", "signal", "invalid-measurement")


class Marks(Open):
    """CLOCK_MONOTONIC ns of the phase boundaries the worker reached (a failed phase ends them)."""

    main: Stamp | UnsetType = UNSET
    imported: Stamp | UnsetType = UNSET
    device_ready: Stamp | UnsetType = UNSET  # a GPU case: its device initialised, after the runtime stack
    user_imported: Stamp | UnsetType = UNSET  # a user's case: its module imported, after the runtime stack
    setup: Stamp | UnsetType = UNSET
    first: Stamp | UnsetType = UNSET
    second_start: Stamp | UnsetType = UNSET
    second: Stamp | UnsetType = UNSET


class Digest(Open):
    """An order-free fingerprint of the result (a sum that overflowed float64 is null)."""

    sum: float | None
    sum_sq: float | None
    count: Count
    finite: bool


class ParityCheck(Open):
    engine: float | None
    reference: float | None
    tolerance: float
    passed: bool
    rel_diff: float | None | UnsetType = UNSET  # NLL: relative
    abs_diff: float | None | UnsetType = UNSET  # q0: absolute


class Parity(Open):
    nll: ParityCheck
    q0: ParityCheck


class FiniteDifferences(Open):
    """The signal gradient against central finite differences (histfactory/gate.py)."""

    of: str
    max_abs_error: float | None
    max_rel_error: float | None
    normalised_error: float | None
    relative_step: float
    bins: Count
    tolerance: float
    passed: bool


class TrainingRun(Open):
    losses: list[float | None]
    first_step_s: float | UnsetType = UNSET
    step_s_median: float | None | UnsetType = UNSET
    step_s: list[float] | UnsetType = UNSET
    # each step's seconds converting between runtimes (timed crossing by crossing), and their median's
    # share of the median step (the first step apart)
    conversion_s: list[float] | UnsetType = UNSET
    conversion_share: float | None | UnsetType = UNSET


class TrainLoop(Open):
    steps: int
    first_loss_of_timed_call: float | None | UnsetType = UNSET
    kde: TrainingRun | UnsetType = UNSET
    sigmoid: TrainingRun | UnsetType = UNSET


class Scan(Open):
    iterations: int
    max_normalised_error_vs_naive: float | None
    tolerance: float
    q0: list[float | None]


class Check(Open):
    """The result check (the gate) of a case's first call: against a float64 reference, or for
    HistFactory the parity with pyhf and the gradient against finite differences."""

    reference: str
    max_normalised_error: NonNegative | None  # None: no figure (shapes differ, nothing returned)
    tolerance: float
    passed: bool | None  # None: not checked (no reference to compare with); files before 0.1.2 say True
    detail: str | UnsetType = UNSET
    parity: Parity | UnsetType = UNSET
    fd: FiniteDifferences | UnsetType = UNSET
    train_loop: TrainLoop | UnsetType = UNSET
    scan: Scan | UnsetType = UNSET
    timed_call_normalised_error: float | None | UnsetType = UNSET  # hf_fd_check: its timed call's gradient

    @property
    def state(self) -> str:
        """`passed`, `failed`, or `not_checked` (a workload or case without a reference: nothing was compared)."""
        if self.passed is None or self.reference == NO_REFERENCE:
            return "not_checked"
        return "passed" if self.passed else "failed"


class Overlap(Open):
    as_timed_s: list[float] | UnsetType = UNSET
    each_waited_s: list[float] | UnsetType = UNSET


class SampleEvidence(Open):
    """Beside each warm sample: its wall and CPU time and its threads' run-queue wait; the
    window and what the rest of the machine used in it."""

    wall_s: list[float | None] | UnsetType = UNSET
    cpu_s: list[float] | UnsetType = UNSET
    runq_wait_s: list[float | None] | UnsetType = UNSET
    window_ns: list[int] | None | UnsetType = UNSET
    others_cpu_s: float | None | UnsetType = UNSET


class WarmRecord(Open):
    """The warm regime of one process (child/sampling.py)."""

    samples_s: list[Seconds]
    inner_loops: Annotated[int, Meta(ge=1)]
    warmup_per_call_s: list[float]
    warmup_stable: bool
    trailing_sync_fraction: list[float] | UnsetType = UNSET
    pending_after_loop: list[bool] | UnsetType = UNSET
    doubling_ratios: list[float | None] | UnsetType = UNSET  # null: an infinite ratio
    overlap: Overlap | None | UnsetType = UNSET
    sample_evidence: SampleEvidence | None | UnsetType = UNSET


class DevicePeaks(Open):
    """A device's peak bytes at the end of each phase (a GPU case): since the previous reading where the
    runtime resets its peak (torch), else from the process's start (XLA keeps one peak)."""

    setup: Count | None  # import, device init and setup
    first_call: Count | None  # compile and autotuning buffers included
    steady: Count | None  # the second call and the warm regime


class Memory(Open):
    device_peak_bytes: Count | UnsetType = UNSET  # the whole process's
    device_peaks: DevicePeaks | UnsetType = UNSET
    device_peaks_reset: bool | UnsetType = UNSET  # each phase's peak is its own (else cumulative)
    compiled: dict[str, int] | UnsetType = UNSET  # JAX memory_analysis of the compiled executable


class Device(Open):
    platform: str
    kind: str
    count: Count


class OwnRusage(Open):
    """The worker's own resource use (its peak: VmHWM after exec)."""

    max_rss_bytes: Count | None | UnsetType = UNSET
    user_s: float | UnsetType = UNSET
    sys_s: float | UnsetType = UNSET
    involuntary_switches: int | UnsetType = UNSET


class Sched(Open):
    on_cpu_s: float | None | UnsetType = UNSET  # summed over the threads alive at the end
    runq_wait_s: float | None | UnsetType = UNSET
    # the main thread's own (it does the timed work), read at `read_ns` (CLOCK_MONOTONIC)
    main_on_cpu_s: float | None | UnsetType = UNSET
    main_runq_wait_s: float | None | UnsetType = UNSET
    read_ns: Stamp | UnsetType = UNSET


class LoopIteration(Open):
    label: str
    s: float
    compiles: int | None | UnsetType = UNSET
    persistent_hits: int | None | UnsetType = UNSET
    traces: int | None | UnsetType = UNSET
    compile_s: int | float | None | UnsetType = UNSET
    ahead: bool | UnsetType = UNSET
    transfer_s: float | None | UnsetType = UNSET  # its host<->device copies (None: the loop moves no data)


class LoopRecord(Open):
    """A loop workload's first run, iteration by iteration (child/loop.py)."""

    iterations: list[LoopIteration]
    loop_s: float
    expected_compiles: int | None | UnsetType = UNSET
    loaded: int | UnsetType = UNSET
    compiles: int | None | UnsetType = UNSET
    persistent_hits: int | None | UnsetType = UNSET
    traces: int | None | UnsetType = UNSET
    compile_s: int | float | None | UnsetType = UNSET
    transfer_s: float | None | UnsetType = UNSET


# JAX's monitoring events of its persistent compilation cache (child/backends/jax_events.py)
JAX_CACHE_HITS = "/jax/compilation_cache/cache_hits"
JAX_CACHE_MISSES = "/jax/compilation_cache/cache_misses"
JAX_CACHE_REQUESTS = "/jax/compilation_cache/compile_requests_use_cache"
Amount = Annotated[int, Meta(ge=0)] | Annotated[float, Meta(ge=0)]


class RuntimeCounters(Open):
    """A runtime's own counters at one moment: JAX's monitoring events and their durations, or
    torch's counter table (dynamo, inductor, AOTAutograd) and compile times; read per backend
    kind by measure/cache.py."""

    events: dict[str, Amount] | UnsetType = UNSET
    durations_s: dict[str, Any] | UnsetType = UNSET
    counters: dict[str, dict[str, Amount]] | UnsetType = UNSET
    compile_times_s: dict[str, Any] | UnsetType = UNSET
    aot_loaded: Count | UnsetType = UNSET  # executables an AOT loop loaded from its cache directory

    def __post_init__(self):
        if self.events and self.events.get(JAX_CACHE_HITS, 0) > self.events.get(JAX_CACHE_REQUESTS, 0):
            raise ValueError("more persistent-cache hits than requests")


class CacheCounters(Open):
    """The runtime's counters at the first result and at the end of the run."""

    first: RuntimeCounters | None | UnsetType = UNSET
    end: RuntimeCounters | None | UnsetType = UNSET


class ThreadPool(Open):
    """One BLAS/OpenMP library a process loaded and its thread count (threadpoolctl's view)."""

    user_api: str | None = None  # blas, openmp
    internal_api: str | None = None  # openblas, mkl, blis, openmp
    num_threads: int | None = None
    version: str | None = None
    threading_layer: str | None = None
    prefix: str | None = None


class FirstResult(Open):
    """How a command's first result was taken (`ttfr run --command`)."""

    by: str
    line: str | None
    stopped: bool | UnsetType = UNSET


class ConversionLayout(Open):
    """A conversion route on one layout of its source (child/workloads/convert.py): refused (the
    library's words), not applicable, or converted: copied or not (the buffers' address ranges and, where
    the source is writable, a write through it; null where the two disagree), its values, its time."""

    layout: str
    outcome: Literal["ok", "refused", "not_applicable"]
    reason: str | None
    copied: bool | None
    shares_memory: bool | None
    write_through: bool | None  # null: the source cannot be written (read-only, immutable)
    values_ok: bool | None
    call_s: NonNegative | None  # median of a few synchronised conversions in the checking process
    source_offset_64: Annotated[int, Meta(ge=0, lt=64)] | None  # the source's address modulo 64


class LeakProbe(Open):
    """Repeated conversions in one process, its RSS read before, at each tenth and after."""

    calls: Count
    rss_samples: list[Count]
    growth_per_call_bytes: float | None
    grows: bool | None  # the RSS still grew over the second half (by 4 MiB or more)


class ConversionEvidence(Open):
    """What the checking process of a conversion case measured beside its timed calls."""

    route: str
    source: str
    destination: str
    api: str
    bytes: Count
    source_offset_64: Annotated[int, Meta(ge=0, lt=64)] | None
    copied: bool | None  # the contiguous source's (the timed calls')
    layouts: list[ConversionLayout]
    memcpy_s: NonNegative  # np.copyto of the same bytes into a touched destination (median)
    memcpy_fresh_s: NonNegative  # into a fresh one: first-touch page faults included
    leak: LeakProbe


class RunRecord(Open):
    outcome: str
    reason: str | None | UnsetType = UNSET
    protocol: int | UnsetType = UNSET
    phase: str | UnsetType = UNSET
    traceback: str | UnsetType = UNSET
    marks_ns: Marks | UnsetType = UNSET
    stages_s: dict[str, Seconds] | UnsetType = UNSET
    cache: CacheCounters | None | UnsetType = UNSET
    digest: Digest | None | UnsetType = UNSET
    check: Check | None | UnsetType = UNSET
    dataset_sha256: Sha256 | None | UnsetType = UNSET
    warm: WarmRecord | None | UnsetType = UNSET
    loop: LoopRecord | None | UnsetType = UNSET
    conversion: ConversionEvidence | None | UnsetType = UNSET  # a conversion route's checking process
    memory: Memory | None | UnsetType = UNSET
    device: Device | None | UnsetType = UNSET
    versions: dict[str, str | int | None] | None | UnsetType = UNSET
    rusage_self: OwnRusage | UnsetType = UNSET
    sched: Sched | None | UnsetType = UNSET
    threadpools: list[ThreadPool] | None | UnsetType = UNSET  # only the process that checked the result
    first_result: FirstResult | UnsetType = UNSET
    pid: int | UnsetType = UNSET
