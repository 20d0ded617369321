"""One measured run's figures, as a case file holds them (`RunFigures`): its cold-start spans,
the first call split by stage, its resources, what its compilation cache was, whether it was
contended, and a warm process's samples. The names of the spans and stages are listed here once.
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec
from msgspec import Meta

from ttfr.model.base import UNSET, Artifact, Count, UnsetType, field
from ttfr.model.journal import Host
from ttfr.model.loops import RunLoop
from ttfr.model.policies import CONCURRENCY_MODES, POLICY_NAME_PATTERN
from ttfr.model.record import OUTCOMES, ThreadPool

Outcome = Literal[OUTCOMES]  # type: ignore[valid-type]
# A cache policy as artifacts name it: the standard three, or a precompiled one (`precompiled/<mechanism>/<setting>`).
PolicyName = Annotated[str, Meta(pattern=POLICY_NAME_PATTERN)]
# A policy, or a --concurrency point's sharing mode (one string type: msgspec takes one per union).
PolicyOrMode = Annotated[str, Meta(pattern=POLICY_NAME_PATTERN[:-2] + "|" + "|".join(CONCURRENCY_MODES) + ")$")]
Seconds = Annotated[float, Meta(ge=0)] | None
# The cold-start components, in the order of a process's life; a user's case also times its import.
COLD_METRICS = ("interpreter_s", "import_s", "setup_s", "first_call_s", "second_call_s", "ttfr_s", "process_s")
DEVICE_INIT = "device_init_s"  # a GPU case: the device's context, allocator and math library handles
USER_IMPORT = "user_import_s"
ARTIFACT_LOAD = "artifact_load_s"  # a precompiled policy's run: loading its artifact (after setup)
# Phases only some cases have (where they fall in a process's life: COMPONENT_LABELS' order).
OPTIONAL_METRICS = (DEVICE_INIT, USER_IMPORT, ARTIFACT_LOAD)
# The spans a cold start is drawn as (bars, stacked plots, the components table), with their labels, in the
# order of a process's life.
COMPONENT_LABELS = {"interpreter_s": "interpreter", "import_s": "import", DEVICE_INIT: "device init",
                    USER_IMPORT: "your import", "setup_s": "setup", ARTIFACT_LOAD: "artifact load",
                    "first_call_s": "first call"}  # fmt: skip
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
    """From setup's end (a precompiled policy's run: its artifact's load) to the first result ready
    (synchronised): building, compiling and running the function once; a loop workload's whole loop. Split by stage
    in `stages`."""
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
    artifact_load_s: Seconds | UnsetType = field(default=UNSET)
    """A precompiled policy's run: reading its artifact file and the runtime loading the compiled code from it,
    after setup; absent in other runs."""


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


def per_stage(name: str, kind, doc: str, meaning: str):
    """A struct with one optional field per first-call stage (STAGE_LABELS, in their order), each
    a `kind`: the stages are listed once, whatever holds them. `meaning` says a field's meaning
    given its stage's ({stage})."""
    docs = {stage: meaning.format(stage=STAGE_MEANINGS[stage]) for stage in STAGE_METRICS}
    struct = msgspec.defstruct(name, [(stage, kind | UnsetType, UNSET) for stage in STAGE_METRICS], bases=(Artifact,),
                               module=__name__, namespace={"__field_docs__": docs})  # fmt: skip
    struct.__doc__ = doc
    return struct


Stages = per_stage(
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
    compiler_runs: Count | UnsetType = UNSET
    """Number of compiler runs (g++, clang, nvcc, ptxas, ... each counted by its outermost compiler process) the
    worker's process tree showed from the spawn to its first result: native code built during the cold start, by a
    witness outside the runtime. A lower bound (a run shorter than the watch's 50 ms poll can be missed); absent where
    the tree was not watched (a warm process, a group's member, an older file) or the run has no first result."""
    compiler_seen_s: Seconds | UnsetType = UNSET
    """Seconds those compiler runs were seen running before the first result, summed over runs (runs in parallel add
    up; each from the first poll that saw it to the last: a lower bound); absent as `compiler_runs`."""


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


class ClaimCheck(Artifact):
    """A precompiled policy's run: what its mechanism claims the artifact's load skips, against what the runtime still
    compiled (measure/precompiled.py)."""

    mechanism: str
    """The mechanism whose artifact the run loaded (`jax_serialized`, `jax_export`, ...)."""
    held: bool | None
    """Whether the run compiled nothing beyond what the mechanism allows; null: the runtime reported nothing to judge
    it by."""
    compiled: dict[str, Count]
    """What still compiled in the first call, beyond what the mechanism allows: each compiled program or compiler
    (JAX's functions by name, a compiler's runs) and how many times; empty when nothing did."""
    allowed: dict[str, Count]
    """What the mechanism expects to compile (`jax_export`: its call wrapper, once) and how many times it did."""
    compiles: Count
    """Number of compiles the first call ran, allowed ones included (count)."""
    compile_s: Seconds
    """Seconds those compiles took by the runtime's own count; null: it reports no durations."""
    processes: dict[str, Count] | UnsetType = UNSET
    """Compiler runs the worker's process tree showed from the artifact load's start to the first result, by the
    driver's name (`g++`, `nvcc`, `ptxas`) and how many times: a witness beside the runtime's counters, beyond the
    claim but for those the mechanism's allowed compile may run (`jax_export`: ptxas); absent where the tree was not
    watched. A lower bound: a run shorter than the watch's poll interval can be missed."""
    processes_s: Seconds | UnsetType = UNSET
    """Seconds those compiler runs were seen running within that span (from the first poll that saw each to the
    last: a lower bound)."""


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
    claim: ClaimCheck | UnsetType = UNSET
    """A precompiled policy's run: its mechanism's claim checked against what still compiled; absent in every other
    run."""
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
