"""CaseResult (`ttfr.case_result.v2`): one case — backend x workload x size x dtype — with every
run's figures (raw data, kept whatever happened), the summaries per cache policy, the result
check, the flags and the status.

Figures of a failed case are null, never 0.0; its runs stay as raw data.
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec
from msgspec import Meta

from ttfr.model.base import UNSET, Artifact, Count, Sha256, UnsetType, field
from ttfr.model.concurrency import Concurrency
from ttfr.model.journal import Host
from ttfr.model.loops import LoopSummary, RunLoop
from ttfr.model.policies import COLD_CACHE, WARM_CACHE, WARM_PROCESS
from ttfr.model.record import OUTCOMES, Check, ConversionEvidence, Device, DevicePeaks, ThreadPool
from ttfr.model.summary import Summary

CASE_SCHEMA = "ttfr.case_result.v2"
Outcome = Literal[OUTCOMES]  # type: ignore[valid-type]
Status = Literal["ok", "warn", "failed"]
PolicyName = Literal[COLD_CACHE, WARM_CACHE, WARM_PROCESS]  # type: ignore[valid-type]
Seconds = Annotated[float, Meta(ge=0)] | None
# The cold-start components, in the order of a process's life; a user's case also times its import.
COLD_METRICS = ("interpreter_s", "import_s", "setup_s", "first_call_s", "second_call_s", "ttfr_s", "process_s")
DEVICE_INIT = "device_init_s"  # a GPU case: the device's context, allocator and math library handles
USER_IMPORT = "user_import_s"
# Phases only some cases have, in the order of a process's life (after import, before setup).
OPTIONAL_METRICS = (DEVICE_INIT, USER_IMPORT)
# The spans a cold start is drawn as (bars, stacked plots, the components table), with their labels.
COMPONENT_LABELS = {"interpreter_s": "interpreter", "import_s": "import", DEVICE_INIT: "device init",
                    USER_IMPORT: "your import", "setup_s": "setup", "first_call_s": "first call"}  # fmt: skip
# The first call's stages, where the runtime splits it (JAX AOT; torch.compile's phases), in the
# order of the call, with the label every rendering uses: one list, so every output shows the same.
STAGE_LABELS = {
    "wrap_s": "wrap", "trace_s": "trace", "lower_s": "lower", "compile_s": "compile", "dynamo_s": "dynamo",
    "aot_autograd_s": "AOTAutograd", "inductor_s": "inductor", "backward_compile_s": "backward compile",
    "autotune_s": "Triton autotune", "first_execute_s": "first execute",
}  # fmt: skip
STAGE_METRICS = tuple(STAGE_LABELS)
# Stages that are part of others (torch's lazily compiled backward: its AOTAutograd and inductor time), so a
# drawing of the first call as segments leaves them out; every table still lists them.
NESTED_STAGES = ("backward_compile_s",)


class Metrics(Artifact):
    """One run's cold-start spans (seconds), from the parent's spawn mark, the worker's marks and
    the reap; null where the run did not reach the span's end."""

    interpreter_s: Seconds
    """From the parent's clock just before the spawn to the first line of the worker's `main`: the interpreter's
    start-up. Null for a command (it has no worker marks)."""
    import_s: Seconds
    """From the worker's `main` to its runtime stack imported (the backend's libraries; on a CPU, the runtime's client
    made too)."""
    setup_s: Seconds
    """From the previous phase's end (import, device init or the user's import) to the inputs on the device,
    synchronised: the workload's module imported, its inputs made or read and moved."""
    first_call_s: Seconds
    """From setup's end to the first result ready (synchronised): building, compiling and running the function once; a
    loop workload's whole loop. Split by stage in `stages`."""
    second_call_s: Seconds
    """The second call on the same inputs, synchronised, right after the first: the call once compiled. Null for a
    command."""
    ttfr_s: Seconds
    """Time to first result: from the parent's clock just before the spawn to the first result ready (a command's: its
    matching output line, its ttfr_mark.first_result() call or its exit)."""
    process_s: Seconds
    """From the spawn to the process's exit, teardown included (with --stop-at-first-result, to ttfr's kill at the first
    result); null when it was killed at the timeout."""
    user_import_s: Seconds | UnsetType = field(default=UNSET)
    """A user's case (--case-file): importing its case file or module, after the runtime stack (and a GPU's device
    init); absent for other cases."""
    device_init_s: Seconds | UnsetType = field(default=UNSET)
    """A GPU case: creating the device's context, its memory pool (JAX's preallocation) and math library handles
    (torch's cuBLAS), after the import; absent on a CPU."""


# What each stage of the first call holds, as the runtimes split it (child/backends).
STAGE_MEANINGS = {
    "wrap_s": "building the function and wrapping it for compilation (`jax.jit(fn)`, `torch.compile(fn)`, which "
              "imports torch.compile's own machinery)",
    "trace_s": "JAX tracing the function to a jaxpr (`jitted.trace`)",
    "lower_s": "JAX lowering the jaxpr to StableHLO (`traced.lower`)",
    "compile_s": "XLA compiling the lowered program (`lowered.compile`), a persistent-cache hit included",
    "dynamo_s": "TorchDynamo capturing the graph (its compile time less the backend compiler's)",
    "aot_autograd_s": "AOTAutograd tracing the joint forward and backward graph (forward and backward, without "
                      "inductor's share)",
    "inductor_s": "TorchInductor generating and compiling kernels (C++ or Triton), cache loads included",
    "backward_compile_s": "compiling the lazily compiled backward graph (AOTAutograd and inductor), within the "
                          "stages above",
    "autotune_s": "autotuning kernels with several configurations (Triton on a GPU; C++ kernels have none)",
    "first_execute_s": "running the compiled program for the first time, until its result was ready",
}  # fmt: skip


def _per_stage(name: str, kind, doc: str, meaning: str):
    """A struct with one optional field per first-call stage (STAGE_LABELS, in their order), each
    a `kind`: the stages are listed once, whatever holds them. `meaning` says a field's meaning
    given its stage's ({stage})."""
    docs = {stage: meaning.format(stage=STAGE_MEANINGS[stage]) for stage in STAGE_METRICS}
    struct = msgspec.defstruct(name, [(stage, kind | UnsetType, UNSET) for stage in STAGE_METRICS], bases=(Artifact,),
                               module=__name__, namespace={"__field_docs__": docs})  # fmt: skip
    struct.__doc__ = doc
    return struct


Stages = _per_stage(
    "Stages",
    float,
    "The first call split by stage, where the runtime allows (absent: not recorded).",
    "Seconds of the first call spent {stage}.",
)


class Resources(Artifact):
    peak_rss_bytes: Count | None
    """The worker's own peak resident memory since its exec (VmHWM); a command's: its process tree's largest, null where
    that is not above ttfr's own."""
    tree_peak_rss_bytes: Count | None
    """The largest peak RSS of any process of the run's tree (wait4's ru_maxrss: the worker or a reaped child, e.g. a
    compiler); null where not above ttfr's own, which a forked child's starts from."""
    cpu_user_s: float | None
    """User CPU seconds of the worker and its reaped children (wait4); null where the process never started."""
    cpu_sys_s: float | None
    """System (kernel) CPU seconds of the worker and its reaped children (wait4); null where the process never started."""
    involuntary_switches: Count | None
    """Number of involuntary context switches (preemptions) of the worker and its reaped children (wait4's ru_nivcsw);
    null where it never started."""


class HitMiss(Artifact):
    """The runtime's own cache counters over the run (measure/cache.py hit_miss)."""

    hits: int
    """Persistent-cache hits over the run (count): JAX's cache_hits events, or torch's FX-graph and AOTAutograd cache
    hits; plus executables an AOT loop loaded from its cache directory."""
    misses: int
    """Persistent-cache misses over the run (count): JAX's cache-using compile requests less its hits, or torch's
    FX-graph and AOTAutograd cache misses."""
    requests: int
    """Compile requests that consulted the persistent cache (count): JAX's compile_requests_use_cache events plus AOT
    loads, or torch's hits plus misses."""
    entries_written: int | UnsetType = UNSET
    """JAX only: the number of entries the run wrote to the persistent cache, as JAX counts them (its cache_misses
    events)."""
    graph_breaks: int | UnsetType = UNSET
    """torch only: the number of graph breaks TorchDynamo recorded over the run (its graph_break counters, summed)."""
    unique_graphs: int | UnsetType = UNSET
    """torch only: the number of distinct graphs TorchDynamo captured over the run (its stats' unique_graphs counter)."""


class CacheCheck(Artifact):
    """What the run's compilation cache really was, against its policy."""

    verdict: Literal["verified", "flagged", "unverified", "not_applicable"]
    """Whether the cache was what the policy says: `verified`, `flagged` (see `flags`), `unverified` (no counters
    reported) or `not_applicable` (no persistent cache, a warm process, a program that wrote none)."""
    flags: list[str]
    """The cache flags this run raised (`cold_cache_not_empty`, `warm_cache_no_hits`, ...); empty when none."""
    entries_before: Count
    """Number of files in the case's cache directories just before the spawn (after emptying them, or restoring the
    template)."""
    entries_after: Count
    """Number of files in the case's cache directories after the reap."""
    note: str | UnsetType = UNSET
    """What the verdict rests on, or why it does not apply, in words."""
    hits: int | UnsetType = UNSET
    """A compiling runtime's persistent-cache hits over the run (count, from `counters`); absent where it has no
    counters."""
    misses: int | UnsetType = UNSET
    """A compiling runtime's persistent-cache misses over the run (count, from `counters`); absent where it has no
    counters."""
    self_hits: int | UnsetType = UNSET
    """A cold-cache run's hits on entries it wrote itself (count): its directory started empty and it filled it (pyhf's
    JAX backend compiles some computations twice). Not a flag."""
    counters: HitMiss | UnsetType = UNSET
    """The runtime's own cache counters over the run, where it reports them."""
    written: int | UnsetType = UNSET
    """Number of files the run added to the cache directories: a command's (read from its directories), or the kernel
    files an eager GPU run's JIT cache gained."""
    by_directory: dict[str, list[Count]] | UnsetType = UNSET
    """A command's or a non-compiling runtime's files per cache variable's directory (`jax`, `inductor`, `cuda`, ...) as
    a [before, after] count; only directories holding any."""


class Contention(Artifact):
    """Was the run measured on a busy machine (analyse/contention.py)? A cold run's evidence is its
    threads' CPU wait over its process time; a warm process's, its samples' waits."""

    contended: bool
    """The verdict: the run waited for a CPU and the rest of the machine used 0.5 cores or more meanwhile (one reading
    alone where the other is missing; the runnable-task fallback where both are)."""
    waited: bool | None
    """The run-queue wait's verdict: a cold run's threads waited over 5% of its process time; more than 30% of a warm
    process's samples waited over 5% of their wall time. Null: no reading."""
    others_cores: float | None
    """CPU cores the rest of the machine used on average meanwhile (/proc/stat busy time less the run's own CPU time,
    over its process time or the sampling window); null: no reading."""
    runnable_cores: Count | None
    """Set where the fallback (neither reading) found the run contended: the usable cores that other runnable tasks
    filled before and after it (/proc/loadavg); null otherwise."""
    wait_fraction: float | None | UnsetType = UNSET
    """A cold run: its threads' run-queue wait as a fraction of its process time (above 1 when threads wait at once; a
    command: its main thread's); null: no reading."""
    samples_contended: int | None | UnsetType = UNSET
    """A warm process: the number of samples that waited for a CPU over 5% of their wall time; null: no sample had a
    reading."""
    samples_with_evidence: int | UnsetType = UNSET
    """A warm process: the number of samples with a run-queue wait reading."""
    median_wait_fraction: float | None | UnsetType = UNSET
    """A warm process: the median over its samples of the run-queue wait as a fraction of the sample's wall time; null:
    no reading."""
    max_wait_fraction: float | None | UnsetType = UNSET
    """A warm process: the largest of its samples' run-queue wait as a fraction of the sample's wall time; null: no
    reading."""
    median_cpu_per_wall: float | None | UnsetType = UNSET
    """A warm process: the median over its samples of its CPU seconds per wall-clock second (the cores it kept busy);
    null: no reading."""


class Warmup(Artifact):
    per_call_s: list[float]
    """Seconds per call of each warm-up batch of the calibrated inner calls, in order, until three in a row agreed
    within 5% or the warm-up time ran out."""
    stable: bool
    """Whether three warm-up batches in a row agreed within 5% before max_warmup_s ran out (false: flagged
    warmup_unstable)."""


class SyncCheck(Artifact):
    trailing_sync_fraction_median: float | None
    """The median over samples of what the barrier after a sample's timed loop cost, as a fraction of the sample's time;
    null: a backend without a barrier."""
    doubling_ratio_median: float | None
    """The median ratio of the time of 2n calls to that of n calls; recorded, flags nothing. Null: no finite ratio."""
    overlap_ratio: float | None
    """The fastest loop of calls as timed over the fastest loop of the same calls each waited on (below 0.75:
    unsynchronised); null: no such evidence."""
    unsynchronised: bool
    """Whether the timed calls were judged not synchronised (any of `problems`): the process is flagged
    `unsynchronised`."""
    problems: list[str]
    """Why, one sentence per trigger (the last result still pending, the trailing barrier's wait, overlapping calls);
    empty: synchronised."""


class Tick(Artifact):
    quantised: bool
    """Whether 60% or more of the samples' wall times sit whole scheduler ticks apart, at two or more grid points."""
    tick_s: float | None
    """The tick the samples sit on (0.001, 0.004 or 0.01 seconds); null when not quantised."""
    share: float | None
    """The fraction of samples whose wall time lies on that grid; null when not quantised."""
    steps: list[int]
    """The grid points held by two samples or more, as a number of whole ticks above the shortest sample; empty when not
    quantised."""


class RunFigures(Artifact):
    """One measured run (a cold run, or a warm process: then with its samples)."""

    index: Count
    """The run's index in its policy's stream, from 0 (cold-cache run 0 may make the case's cache template; warm process
    0 checks the result)."""
    round: Count
    """The index of the plan round it ran in: 0 the template producers, 1 the result checks, then the interleaved rounds
    (runs --precision added come last)."""
    outcome: Outcome
    """How the run ended: `ok`, `unavailable`, `error`, `timeout`, `oom`, `signal` or `invalid-measurement` (a result
    unlike the checked run's, a warm process without samples)."""
    reason: str | None
    """Why it was not ok, in words; null when ok."""
    metrics: Metrics
    """Its cold-start spans, in seconds."""
    stages: Stages
    """Its first call split by stage, where the runtime records them (JAX's AOT steps, torch.compile's phases)."""
    resources: Resources
    """Its memory, CPU time and context switches."""
    cache: CacheCheck
    """What its compilation cache really was, against its policy."""
    host: Host | None
    """The machine around the run, read before the spawn and after the reap (load, CPU pressure, runnable tasks, busy
    CPU time); null: not read."""
    exit_code: int | None
    """The process's exit status (negative: killed by that signal number); null: it never started."""
    loop: RunLoop | UnsetType = UNSET
    """A loop workload's figures for this run: its timeline, compiles and cache hits."""
    contention: Contention | UnsetType = UNSET
    """Whether it was measured on a busy machine, with the readings; absent for a cold run that was not ok."""
    threadpools: list[ThreadPool] | None | UnsetType = UNSET
    """Case files before ttfr 0.1.1 only: the BLAS/OpenMP pools this run loaded (now recorded once per case, in the
    case's `threadpools`)."""
    output_tail: str | None | UnsetType = UNSET
    """The end of a failed run's output (stdout and stderr, redacted); absent when ok; null: none kept."""
    traceback: str | UnsetType = UNSET
    """A failed run of a user's case: its traceback cut to their own frames (ttfr's stay in the journal)."""
    samples_s: Annotated[list[Annotated[float, Meta(gt=0)]], Meta(min_length=1)] | UnsetType = UNSET
    """A warm process: seconds per call of each sample (a timed loop of `inner_loops` synchronised calls over their
    count); absent when it returned none."""
    inner_loops: Annotated[int, Meta(ge=1)] | UnsetType = UNSET
    """A warm process: the number of calls per sample, calibrated so that one sample lasts at least min_sample_s."""
    median_s: float | UnsetType = UNSET
    """A warm process: the median of its samples, seconds per call: its figure."""
    warmup: Warmup | UnsetType = UNSET
    """A warm process: its warm-up before the samples."""
    sync_check: SyncCheck | UnsetType = UNSET
    """A warm process: whether its timed calls were really synchronised, checked outside the timed region."""
    tick: Tick | None | UnsetType = UNSET
    """A warm process: whether its samples sit whole scheduler ticks apart; null: fewer than five samples to judge."""


# ------------------------------------------------------------------ flags
class Flag(Artifact, tag_field="flag", kw_only=True):
    """Evidence beside the figures: something a reader must know to trust them. A flag holds its
    evidence as numbers and names; report/flag_text.py says it as a sentence, for every output."""

    policy: PolicyName | UnsetType = UNSET
    """In the case's `flags`: the policy that raised it (`cold-process/cold-cache`, ...); absent in a policy's own
    `flags` and on a flag of the whole case (conversion, concurrency)."""

    @property
    def name(self) -> str:
        """The flag's name as artifacts write it (its tag: `contended`, `first_run_outlier`, ...)."""
        return type(self).__struct_config__.tag


class FirstRunOutlier(Flag, tag="first_run_outlier"):
    """The first run's figure lies far from the others' (a cold disk or first-touch effect); it stays in every figure."""

    metric: str
    """The figure judged (`ttfr_s`)."""
    value: float
    """The first run's value of that figure, in seconds."""
    robust_z: float
    """How many robust σ (1.4826 × the MAD of the other runs) the first run lies from their median; above 3.5 is
    flagged."""


class ColdCacheNotEmpty(Flag, tag="cold_cache_not_empty"):
    """The cache directory held entries before a cold-cache run: that run was not cold."""


class ColdCacheHits(Flag, tag="cold_cache_hits"):
    """A cold-cache run loaded compiled code it had not written itself."""


class CacheNotWritten(Flag, tag="cache_not_written"):
    """A cold-cache run wrote nothing into its cache directory."""


class WarmCacheEmpty(Flag, tag="warm_cache_empty"):
    """A warm-cache run started with an empty cache directory."""


class WarmCacheNoHits(Flag, tag="warm_cache_no_hits"):
    """A warm-cache run never hit its persistent cache."""


class WarmCachePartialHits(Flag, tag="warm_cache_partial_hits"):
    """A warm-cache run hit its persistent cache for only part of its compiles."""


class WarmCacheGrew(Flag, tag="warm_cache_grew"):
    """A warm-cache run stored new cache files."""


class KernelCacheGrew(Flag, tag="kernel_cache_grew"):
    """An eager GPU run stored kernels in the CUDA driver's JIT cache."""


class ContendedRun(Artifact):
    """One contended run's (or warm process's) evidence, as the run records it."""

    index: Count
    """The run's (or warm process's) index in its policy's stream."""
    contention: Contention
    """Its contention readings and verdict, as the run records them."""


class SetAside(Artifact):
    """Contended runs set aside: the figures use the clean ones."""

    contended: Count
    """Number of contended ok runs (or warm processes) set aside from the figures."""
    clean: Count
    """Number of clean ok runs (or warm processes) the figures use."""
    ok: Count
    """Number of ok runs (or warm processes) in all, contended ones included."""


class Contended(Flag, tag="contended"):
    """Runs or warm processes measured while other work competed for the CPUs."""

    evidence: list[ContendedRun]
    """Each contended run's (or warm process's) index and contention readings."""
    runs: list[int] | UnsetType = UNSET
    """Indexes of the contended runs (a cold policy); absent for warm processes."""
    processes: list[int] | UnsetType = UNSET
    """Indexes of the contended warm processes; absent for a cold policy."""
    set_aside: SetAside | UnsetType = UNSET
    """How many were set aside and how many clean ones the figures use; absent when too few clean ones were left, or
    with --keep-contended."""


class CouldNotMeasureCleanly(Flag, tag="could_not_measure_cleanly"):
    """Too few clean runs were left to give a figure: the policy's figures are withheld."""

    contended: Count
    """Number of the policy's ok runs (or warm processes) that were contended."""
    ok: Count
    """Number of the policy's ok runs (or warm processes), contended ones included."""
    unit: Literal["run", "process"]
    """What the counts count: `run` (a cold policy) or `process` (warm processes)."""


class ContendedKept(Flag, tag="contended_kept"):
    """`--keep-contended`: the figures include the contended runs (its presence is the rule
    figure_runs applies, so every reader derives the same figures)."""

    runs: list[int] | UnsetType = UNSET
    """Indexes of the contended runs the figures keep (a cold policy)."""
    processes: list[int] | UnsetType = UNSET
    """Indexes of the contended warm processes the figures keep."""


class CompileCountMismatch(Flag, tag="compile_count_mismatch"):
    """Runs compiled another number of times than the loop's strategy expects."""

    runs: list[int]
    """Indexes of the ok runs whose compile count was not the expected one."""
    expected: int | None
    """The number of compiles the loop's strategy expects of a run (the first mismatched run's); null: no fixed count."""
    observed: list[int]
    """The distinct numbers of compiles those runs observed, ascending."""


class Unsynchronised(Flag, tag="unsynchronised"):
    """Warm processes whose timed calls were not synchronised: their figures may time dispatch."""

    processes: list[int]
    """Indexes of the ok warm processes whose sync check found their timed calls unsynchronised."""


class WarmupUnstable(Flag, tag="warmup_unstable"):
    """Warm processes that did not settle within the warm-up time."""

    processes: list[int]
    """Indexes of the ok warm processes whose warm-up did not settle."""


class ProcessDisagreement(Flag, tag="process_disagreement"):
    """The warm processes' medians differ by more than their own spread explains."""

    disagree: bool
    """Whether the processes disagree: p_value below 0.01 and max_over_min_median above 1.10 (true in a raised flag)."""
    p_value: float
    """The Kruskal-Wallis p-value of the processes' samples (1.0 where every value is identical)."""
    max_over_min_median: float
    """The ratio of the largest process median to the smallest."""
    process_medians_s: list[float]
    """Each process's median, in seconds per call (the ok processes with three finite samples or more)."""


class TickQuantised(Flag, tag="tick_quantised"):
    """Warm processes whose samples sit whole scheduler ticks apart."""

    processes: list[int]
    """Indexes of the ok warm processes whose samples are tick-quantised."""
    tick_s: float
    """The scheduler tick found, in seconds (the first such process's: 0.001, 0.004 or 0.01)."""


class InvalidMeasurement(Flag, tag="invalid_measurement"):
    """A run's result differed from the checked run's, or a warm process returned no samples."""


class ConversionLeak(Flag, tag="conversion_leak"):
    """The process's memory kept growing through a conversion route's calls."""

    calls: Count
    """Number of conversions the leak probe ran in the checking process."""
    growth_per_call_bytes: float
    """The resident memory's growth from before the first to after the last conversion, in bytes per conversion."""


class ConversionWrongValues(Flag, tag="conversion_wrong_values"):
    """A conversion route gave other values than its source for some layouts."""

    layouts: list[str]
    """The source layouts whose converted values differed from the source's."""


class CopyEvidenceDisagrees(Flag, tag="copy_evidence_disagrees"):
    """For some layouts the buffers' addresses and a write through the source disagree on whether the route copied."""

    layouts: list[str]
    """The source layouts where the address ranges and a write through the source disagree (their `copied` is null)."""


class SharedCacheNotWhole(Flag, tag="shared_cache_not_whole"):
    """After some concurrency groups the shared cache was not whole."""

    groups: list[str]
    """The concurrency groups (`cold-shared x8 #0`, ...) after which a cache file could not be read, or a fresh process
    on the cache still compiled."""


class WarmSharedCompiled(Flag, tag="warm_shared_compiled"):
    """Processes compiled although their shared cache was filled first."""

    groups: list[str]
    """The warm-shared groups (`warm-shared x8 #0`, ...) in which a process compiled (its cache use `compiled` or
    `mixed`)."""


CACHE_FLAGS = {cls.__struct_config__.tag: cls for cls in (ColdCacheNotEmpty, ColdCacheHits, CacheNotWritten, WarmCacheEmpty,
                                                         WarmCacheNoHits, WarmCachePartialHits, WarmCacheGrew,
                                                         KernelCacheGrew)}  # fmt: skip
AnyFlag = (FirstRunOutlier | ColdCacheNotEmpty | ColdCacheHits | CacheNotWritten | WarmCacheEmpty | WarmCacheNoHits
           | WarmCachePartialHits | WarmCacheGrew | KernelCacheGrew | Contended | CouldNotMeasureCleanly | ContendedKept
           | CompileCountMismatch | Unsynchronised | WarmupUnstable | ProcessDisagreement | TickQuantised
           | InvalidMeasurement | ConversionLeak | ConversionWrongValues | CopyEvidenceDisagrees
           | SharedCacheNotWhole | WarmSharedCompiled)  # fmt: skip


# ------------------------------------------------------------------ policies
class CacheVerification(Artifact):
    verdict: Literal["verified", "flagged", "unverified", "not_applicable"]
    """The policy's verdict over its ok runs: `flagged` if any run was, `verified` or `not_applicable` if all were, else
    `unverified` (also with no ok run)."""
    flags: list[str]
    """The cache flags its ok runs raised, each once, sorted."""
    hits_total: int | None
    """Persistent-cache hits summed over its ok runs (count); null: no run had counters."""
    misses_total: int | None
    """Persistent-cache misses summed over its ok runs (count); null: no run had counters."""
    runs_verified: Count
    """Number of ok runs whose cache check was `verified`."""
    runs: Count
    """Number of ok runs judged."""


class ColdSummary(Artifact):
    """A cold policy's figures: each component's summary over its headline runs (null: none)."""

    interpreter_s: Summary | None
    """Summary (seconds) of the headline runs' interpreter start-up; null: none."""
    import_s: Summary | None
    """Summary (seconds) of the headline runs' runtime stack import; null: none."""
    setup_s: Summary | None
    """Summary (seconds) of the headline runs' setup (inputs on the device); null: none."""
    first_call_s: Summary | None
    """Summary (seconds) of the headline runs' first call; null: none."""
    second_call_s: Summary | None
    """Summary (seconds) of the headline runs' second call; null: none."""
    ttfr_s: Summary | None
    """Summary (seconds) of the headline runs' time to first result; its median is the policy's headline figure. Null:
    none."""
    process_s: Summary | None
    """Summary (seconds) of the headline runs' whole process life, spawn to exit; null: none."""
    user_import_s: Summary | None | UnsetType = UNSET
    """Summary (seconds) of the headline runs' import of a user's case; null: none; absent where no run recorded it."""
    device_init_s: Summary | None | UnsetType = UNSET
    """Summary (seconds) of the headline runs' GPU device initialisation; null: none; absent where no run recorded it."""


StagesSummary = _per_stage(
    "StagesSummary",
    Summary,
    "Each recorded stage's summary over a policy's headline runs.",
    "The summary (seconds) over the policy's headline runs of the first call's time spent {stage}.",
)


def keeps_contended(flags) -> bool:
    """Whether a policy's figures keep its contended runs: its ContendedKept flag says so."""
    return any(isinstance(f, ContendedKept) for f in flags)


def figure_runs(runs: list[RunFigures], keep_contended: bool = False) -> list[RunFigures]:
    """The ok runs a policy's figures come from. Contended runs stay in the artifact but are set
    aside when at least as many clean ones remain; with fewer, none: a figure measured mostly on
    a busy machine would be a precise-looking wrong number. `keep_contended` (the user's
    --keep-contended, flagged on the policy): every ok run."""
    ok = [r for r in runs if r.outcome == "ok"]
    if keep_contended:
        return ok
    clean = [r for r in ok if not (r.contention and r.contention.contended)]
    return clean if 2 * len(clean) >= len(ok) else []


class _Policy:
    """What both kinds of policy answer (mixed into their Structs)."""

    __slots__ = ()

    @property
    def keeps_contended(self) -> bool:
        return keeps_contended(self.flags)

    def figure_runs(self) -> list[RunFigures]:
        return figure_runs(self.measured, self.keeps_contended)

    def withheld(self) -> CouldNotMeasureCleanly | None:
        """Why this policy gives no figure although its runs are ok (None: it gives them, or it failed)."""
        return next((f for f in self.flags if isinstance(f, CouldNotMeasureCleanly)), None)


class ColdPolicy(Artifact, _Policy):
    runs: list[RunFigures]
    """Every measured run of the policy in (round, index) order, failed and contended ones included: the raw data."""
    summary: ColdSummary
    """Each cold-start span's summary over the headline runs (the clean ok runs; every ok run with --keep-contended)."""
    stages_summary: StagesSummary
    """Each recorded first-call stage's summary over the headline runs; empty where none was recorded."""
    cache_verification: CacheVerification
    """What the policy's cache really was, over its ok runs."""
    flags: list[AnyFlag]
    """The policy's flags (first-run outlier, cache, contention, compile counts), without `policy`; the case's `flags`
    repeat them with it."""
    loop_summary: LoopSummary | None | UnsetType = UNSET
    """A loop workload's figures over the headline runs; null: no headline run (withheld, or a failed case); absent: not
    a loop workload."""

    @property
    def measured(self) -> list[RunFigures]:
        return self.runs

    def figure(self, metric: str) -> Summary | None:
        """One component's summary (None: not measured, or withheld)."""
        return named(self.summary, metric)


class WarmSummary(Artifact):
    call_s: Summary | None
    """Summary (seconds per call) of the headline warm processes' medians (the clean ok ones; every ok one with
    --keep-contended): its median is the warm figure. Null: none."""
    samples_per_process: int | None
    """Number of samples a warm process took (the first ok one's); null: no ok process."""


class WarmPolicy(Artifact, _Policy):
    procs: list[RunFigures]
    """Every warm process of the policy in (round, index) order, failed and contended ones included, each with its
    samples."""
    summary: WarmSummary
    """The warm figure over the headline processes."""
    flags: list[AnyFlag]
    """The policy's flags (sync, warm-up, contention, disagreement, ticks, compile counts), without `policy`; the case's
    `flags` repeat them with it."""

    @property
    def measured(self) -> list[RunFigures]:
        return self.procs

    def figure(self, metric: str) -> Summary | None:
        return self.summary.call_s if metric == "call_s" else None


class Policies(Artifact):
    cold_cache: ColdPolicy | UnsetType = field(name=COLD_CACHE, default=UNSET)
    """`cold-process/cold-cache`: each run a fresh process on an emptied cache directory; absent: not run."""
    warm_cache: ColdPolicy | UnsetType = field(name=WARM_CACHE, default=UNSET)
    """`cold-process/warm-cache`: each run a fresh process on the cache restored from the case's template; absent: not
    run."""
    warm_process: WarmPolicy | UnsetType = field(name=WARM_PROCESS, default=UNSET)
    """`warm-process`: steady-state calls sampled after a warm-up, in fresh processes started from the template; absent:
    not run."""

    def get(self, name: str) -> ColdPolicy | WarmPolicy | None:
        """The policy named as artifacts name it (`cold-process/cold-cache`, ...); None: not run."""
        value = getattr(self, _POLICY_FIELDS[name])
        return None if value is UNSET else value

    def items(self) -> list[tuple[str, ColdPolicy | WarmPolicy]]:
        """The policies the case ran, in the order of a process's life (cold, warm cache, warm process)."""
        return [(name, policy) for name in _POLICY_FIELDS if (policy := self.get(name)) is not None]

    def cold(self) -> list[tuple[str, ColdPolicy]]:
        return [(name, policy) for name, policy in self.items() if name != WARM_PROCESS]

    def all_runs(self) -> list[RunFigures]:
        """Every measured run and warm process of every policy."""
        return [run for _name, policy in self.items() for run in policy.measured]


_POLICY_FIELDS = {COLD_CACHE: "cold_cache", WARM_CACHE: "warm_cache", WARM_PROCESS: "warm_process"}


def named(struct, name: str):
    """A field of `struct` by its name (a metric or stage name), None when unset or absent."""
    value = getattr(struct, name, None)
    return None if value is UNSET else value


# ------------------------------------------------------------------ the case
class Config(Artifact):
    profile: str
    """The run profile (`quick`, `standard`, `publish`) that gave the settings' defaults."""
    policies: Annotated[list[PolicyName], Meta(min_length=1)]
    """The cache policies the run measured, as the artifacts name them."""
    cold_runs: Annotated[int, Meta(ge=1)]
    """Number of fresh processes per cold policy and case (--precision may add more)."""
    warm_procs: Annotated[int, Meta(ge=1)]
    """Number of warm processes per case (--precision may add more)."""
    warm_samples: Annotated[int, Meta(ge=1)]
    """Number of samples each warm process takes."""
    min_sample_s: Annotated[float, Meta(gt=0)]
    """The least a warm sample lasts: its inner loop's call count is calibrated to reach it."""
    max_warmup_s: Annotated[float, Meta(ge=0)]
    """A warm process's warm-up time limit: past it, warm-up stops unsettled (flagged warmup_unstable)."""
    timeout_s: Annotated[float, Meta(gt=0)]
    """Each worker process's time limit (--timeout; some workloads' checking process gets a multiple): past it, its
    process group is killed."""
    seed: int
    """The seed of the input data and of each round's shuffled order."""
    threads: Annotated[int, Meta(ge=1)] | None
    """--threads: the OMP/MKL/OpenBLAS thread count set in every worker; null: the libraries' defaults."""
    deterministic: bool
    """--deterministic: seed 0 unless given, PYTHONHASHSEED=0 and a snapshot id from the spec, so the JSON is
    byte-stable but for timings and timestamps."""
    keep_contended: bool | UnsetType = UNSET
    """--keep-contended: the figures keep contended runs (each such policy carries a contended_kept flag); absent in
    files before ttfr 0.1.2."""
    precision: Annotated[float, Meta(gt=0, lt=1)] | UnsetType = UNSET
    """--precision: the relative half-width of the 95% interval every headline statistic should reach, as a fraction of
    its median (0.05: ±5%); absent without it."""
    budget_s: Annotated[int, Meta(ge=1)] | Annotated[float, Meta(ge=1)] | None | UnsetType = UNSET
    """--budget: the run's wall-time limit, which the runs --precision adds must fit (its profile's runs always
    complete); null: no budget; absent without --precision."""


class Dataset(Artifact):
    id: Annotated[str, Meta(min_length=1)]
    """The id the case's inputs are published under: `<workload>-<size>-<dtype>-seed<n>`, or
    `histfactory-<preset>-<size>p-seed<n>` for a workspace."""
    sha256: Sha256 | None
    """The inputs' sha256 (their dtypes, shapes and bytes; a workspace's file) as the checking process hashed them;
    null: no process checked."""


class CaseMemory(Artifact):
    peak_rss_bytes: Summary | None | UnsetType = UNSET
    """Summary of the worker's own peak RSS over the ok runs of the cold-cache policy (warm-cache without it); null: a
    failed case, or no reading; absent: no cold policy."""
    device_peak_bytes: Count | UnsetType = UNSET
    """A GPU case: the device's peak memory in use over the whole process, from a warm process where one ran (else the
    first ok run)."""
    device_peaks: DevicePeaks | UnsetType = UNSET
    """A GPU case: the device's peak memory at the end of setup, of the first call and of the steady state, from a warm
    process where one ran."""
    device_peaks_reset: bool | UnsetType = UNSET
    """Whether each phase's device peak is its own (torch resets it at each reading) or a running total since the
    process started (XLA's: false)."""
    compiled: dict[str, int] | UnsetType = UNSET
    """JAX: the compiled executable's memory_analysis() sizes (argument, output, temp, alias, generated code), in bytes."""


class UnmeasuredRun(Artifact):
    """A run that is not a measurement (the template producer, the check run), and its outcome."""

    kind: str
    """What the run was for: `prime` (it filled the cache template) or `check` (it checked the result)."""
    outcome: Outcome
    """How it ended, as a measured run's outcome."""
    reason: str | None
    """Why it was not ok, in words; null when ok."""


class CommandInfo(Artifact):
    """A user's command (`ttfr run --command`): its program and how its first result is taken,
    as plan.json records them (redacted)."""

    argv: Annotated[list[str], Meta(min_length=1)]
    """The program and its arguments as run (without a shell), secrets redacted."""
    cwd: str
    """The directory it ran in."""
    first_result: str | None
    """A regex on its output: the first matching line is its first result; null: not taken from its output."""
    mark: bool
    """Whether its first result is its call of ttfr_mark.first_result() (neither this nor first_result: its exit)."""
    prepare: list[str] | None
    """The --prepare command, as arguments, run untimed before each of its runs; null: none."""
    stop_at_first_result: bool | UnsetType = UNSET
    """Whether ttfr ended each run (killed its process group) at its first result (--stop-at-first-result)."""


class Headline(Artifact):
    """The few numbers a suite index and a summary table show (null when not measured)."""

    ttfr_cold_cache_median_s: Annotated[float, Meta(ge=0)] | None
    """The cold-cache policy's median time to first result over its headline runs; null: not measured, withheld or
    failed."""
    ttfr_warm_cache_median_s: Annotated[float, Meta(ge=0)] | None
    """The warm-cache policy's median time to first result over its headline runs; null: not measured, withheld or
    failed."""
    warm_call_median_s: Annotated[float, Meta(ge=0)] | None
    """The warm processes' median of their medians, seconds per call; null: not measured, withheld or failed."""


class Conversion(Artifact):
    """A conversion case's evidence and what it gives (analyse/conversions.py), decided once: every
    output renders these. Bytes are counted once, as copy tools count them (STREAM counts a copy's
    read and write: twice)."""

    evidence: ConversionEvidence
    """What the checking process measured beside the timed calls: whether the route copied, each layout, memcpy's time,
    the leak probe."""
    first_call_s: float | None
    """The cold-cache policy's median first call: the first conversion in a fresh process; null: no such figure."""
    call_s: float | None
    """The warm-process median of process medians: a conversion in the steady state; null: no such figure."""
    memcpy_bytes_per_s: float | None
    """This machine's np.copyto of the same bytes in the same process, in bytes per second; null: too fast to time."""
    bytes_per_s: float | None
    """Where the route copied: the source's bytes over call_s, in bytes per second; null where it did not copy, or
    without call_s."""
    memcpy_fraction: float | None
    """Where the route copied: memcpy's time over the route's call_s, a ratio (1.0: as fast as memcpy); null otherwise."""
    below_half_memcpy: bool | None
    """Whether memcpy_fraction is below 0.5 (the report names such routes); null without it."""


class CaseResult(Artifact):
    """One case (backend x workload x size x dtype): raw runs and summaries per cache policy."""

    schema: Literal["ttfr.case_result.v2"]
    """The format's name and version: `ttfr.case_result.v2`."""
    case: Annotated[str, Meta(pattern="^[a-z0-9_]+_[0-9]+_(f32|f64|bf16)$")]
    """The case id, `<backend>_<workload>_<size>_<dtype>` (e.g. `jax_jit_cpu_matmul_512_f32`; a user's workspace:
    `..._custom_<size>_...`)."""
    backend: Annotated[str, Meta(min_length=1)]
    """The backend as the catalogue names it (`numpy`, `jax_jit_cpu`, ...; `command` for --command)."""
    workload: Annotated[str, Meta(min_length=1)]
    """The workload: a catalogued one, a user's case, or a command's name."""
    size: Annotated[int, Meta(ge=1)]
    """The workload's size, a whole number whose meaning is the workload's (n of a matmul, rows, width, parameter count,
    K or N of a loop, a conversion's bytes; 1 for a command)."""
    dtype: Literal["float32", "float64", "bfloat16"]
    """The inputs' floating-point type (bfloat16: conversion routes only)."""
    status: Status
    """`ok`; `warn` (unavailable, some runs failed, figures withheld, contended runs kept, unreferenced backends'
    results differ); `failed` (a failed result check or gate run, or every run of a policy failed)."""
    reason: str | None
    """Why the status is not ok, in words; null when ok."""
    config: Config
    """The run settings the case was measured with."""
    sync_policy: Annotated[str, Meta(min_length=1)]
    """How a timed call waits for its result on this backend (and any note on this workload), in words."""
    dataset: Dataset
    """The id and hash of the case's inputs."""
    device: Device | None
    """The device the first ok run computed on, as its runtime reported it; null: no ok run, or none reported."""
    versions: dict[str, str | int | None]
    """The runtime libraries' versions the first ok run reported (`jax`, `torch`, ...; torch's also `torch_threads`, its
    thread count)."""
    correctness: Check | None
    """The check of the first call's result (the checking process's; a failed one where any failed); null: no process
    checked."""
    policies: Policies
    """Each measured cache policy's runs, figures and flags."""
    memory: CaseMemory
    """The case's memory figures: the workers' peak RSS and, on a GPU, the device's peaks."""
    flags: list[AnyFlag]
    """Every flag of the case: each policy's (with `policy`), invalid measurements, and the case's own (conversion,
    concurrency)."""
    unmeasured_runs: list[UnmeasuredRun]
    """The runs that are no measurement (a template priming run, a check run) and their outcomes."""
    limitations: list[str]
    """What ttfr cannot control for this case (the page cache, bytecode caches, frequency scaling, ...), as sentences."""
    command: CommandInfo | UnsetType = UNSET
    """A command case (--command): its program and how its first result is taken."""
    threadpools: list[ThreadPool] | None | UnsetType = UNSET
    """The BLAS/OpenMP pools its checking process loaded and their thread counts; null: threadpoolctl not installed
    there (or failing); absent: no process checked (a command)."""
    conversion: Conversion | UnsetType = UNSET
    """A conversion route's evidence and figures."""
    concurrency: Concurrency | UnsetType = UNSET
    """--concurrency: its groups of simultaneous cold starts and their figures."""

    def figure(self, policy: str, metric: str) -> Summary | None:
        """One metric's summary under one policy; None when not measured (or withheld)."""
        block = self.policies.get(policy)
        return block.figure(metric) if block else None

    def headline(self) -> Headline:
        def median(policy, metric):
            summary = self.figure(policy, metric)
            return summary.median if summary else None

        return Headline(
            ttfr_cold_cache_median_s=median(COLD_CACHE, "ttfr_s"),
            ttfr_warm_cache_median_s=median(WARM_CACHE, "ttfr_s"),
            warm_call_median_s=median(WARM_PROCESS, "call_s"),
        )

    def __post_init__(self):
        if (self.status == "ok") != (self.reason is None):
            raise ValueError("an ok case has no reason, and every other status has one")
        if self.reason is not None and not self.reason:
            raise ValueError("a case's reason is never empty")
