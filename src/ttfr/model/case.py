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
    import_s: Seconds
    setup_s: Seconds
    first_call_s: Seconds
    second_call_s: Seconds
    ttfr_s: Seconds
    process_s: Seconds
    user_import_s: Seconds | UnsetType = field(default=UNSET)  # a user's case: importing its case file or module
    # a GPU case: creating the device's context, its allocator's pool and math library handles (issue 27)
    device_init_s: Seconds | UnsetType = field(default=UNSET)


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
    peak_rss_bytes: Count | None  # the worker's own peak
    tree_peak_rss_bytes: Count | None  # its process tree's (compiler children included)
    cpu_user_s: float | None
    cpu_sys_s: float | None
    involuntary_switches: Count | None


class HitMiss(Artifact):
    """The runtime's own cache counters over the run (measure/cache.py hit_miss)."""

    hits: int
    misses: int
    requests: int
    entries_written: int | UnsetType = UNSET
    graph_breaks: int | UnsetType = UNSET
    unique_graphs: int | UnsetType = UNSET


class CacheCheck(Artifact):
    """What the run's compilation cache really was, against its policy."""

    verdict: Literal["verified", "flagged", "unverified", "not_applicable"]
    flags: list[str]
    entries_before: Count
    entries_after: Count
    note: str | UnsetType = UNSET
    # the runtime's counters (a compiling backend): persistent-cache hits and misses over the run
    hits: int | UnsetType = UNSET
    misses: int | UnsetType = UNSET
    self_hits: int | UnsetType = UNSET  # a cold-cache run's hits on entries it wrote itself
    counters: HitMiss | UnsetType = UNSET
    # a program's cache (a user's command): the files it wrote, per cache variable's directory
    written: int | UnsetType = UNSET
    by_directory: dict[str, list[Count]] | UnsetType = UNSET


class Contention(Artifact):
    """Was the run measured on a busy machine (analyse/contention.py)? A cold run's evidence is its
    threads' CPU wait over its process time; a warm process's, its samples' waits."""

    contended: bool
    # the run-queue wait's verdict: above its threshold (a cold run's fraction; a warm process's share of
    # samples); None: no reading
    waited: bool | None
    others_cores: float | None
    # judged by the fallback (neither reading): the usable cores other runnable tasks filled before and
    # after; None: judged by the readings
    runnable_cores: Count | None
    wait_fraction: float | None | UnsetType = UNSET
    samples_contended: int | None | UnsetType = UNSET
    samples_with_evidence: int | UnsetType = UNSET
    median_wait_fraction: float | None | UnsetType = UNSET
    max_wait_fraction: float | None | UnsetType = UNSET
    median_cpu_per_wall: float | None | UnsetType = UNSET


class Warmup(Artifact):
    per_call_s: list[float]
    stable: bool


class SyncCheck(Artifact):
    trailing_sync_fraction_median: float | None
    doubling_ratio_median: float | None
    overlap_ratio: float | None
    unsynchronised: bool
    problems: list[str]


class Tick(Artifact):
    quantised: bool
    tick_s: float | None
    share: float | None
    steps: list[int]


class RunFigures(Artifact):
    """One measured run (a cold run, or a warm process: then with its samples)."""

    index: Count
    round: Count
    outcome: Outcome
    reason: str | None
    metrics: Metrics
    stages: Stages
    resources: Resources
    cache: CacheCheck
    host: Host | None
    exit_code: int | None
    loop: RunLoop | UnsetType = UNSET
    contention: Contention | UnsetType = UNSET
    threadpools: list[ThreadPool] | None | UnsetType = UNSET  # files before 0.1.1: each run's (now the case's)
    output_tail: str | None | UnsetType = UNSET
    traceback: str | UnsetType = UNSET  # a failed run of a user's case: where in their code (their frames)
    # a warm process (absent when it returned no samples)
    samples_s: Annotated[list[Annotated[float, Meta(gt=0)]], Meta(min_length=1)] | UnsetType = UNSET
    inner_loops: Annotated[int, Meta(ge=1)] | UnsetType = UNSET
    median_s: float | UnsetType = UNSET
    warmup: Warmup | UnsetType = UNSET
    sync_check: SyncCheck | UnsetType = UNSET
    tick: Tick | None | UnsetType = UNSET


# ------------------------------------------------------------------ flags
class Flag(Artifact, tag_field="flag", kw_only=True):
    """Evidence beside the figures: something a reader must know to trust them. A flag holds its
    evidence as numbers and names; report/flag_text.py says it as a sentence, for every output."""

    policy: PolicyName | UnsetType = UNSET  # on the case: which policy raised it

    @property
    def name(self) -> str:
        """The flag's name as artifacts write it (its tag: `contended`, `first_run_outlier`, ...)."""
        return type(self).__struct_config__.tag


class FirstRunOutlier(Flag, tag="first_run_outlier"):
    """The first run's figure lies far from the others' (a cold disk or first-touch effect); it stays in every figure."""

    metric: str
    value: float
    robust_z: float


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
    contention: Contention


class SetAside(Artifact):
    """Contended runs set aside: the figures use the clean ones."""

    contended: Count
    clean: Count
    ok: Count


class Contended(Flag, tag="contended"):
    """Runs or warm processes measured while other work competed for the CPUs."""

    evidence: list[ContendedRun]
    runs: list[int] | UnsetType = UNSET
    processes: list[int] | UnsetType = UNSET
    set_aside: SetAside | UnsetType = UNSET


class CouldNotMeasureCleanly(Flag, tag="could_not_measure_cleanly"):
    """Too few clean runs were left to give a figure: the policy's figures are withheld."""

    contended: Count
    ok: Count  # the policy's ok runs (or warm processes), contended ones included
    unit: Literal["run", "process"]


class ContendedKept(Flag, tag="contended_kept"):
    """`--keep-contended`: the figures include the contended runs (its presence is the rule
    figure_runs applies, so every reader derives the same figures)."""

    runs: list[int] | UnsetType = UNSET
    processes: list[int] | UnsetType = UNSET


class CompileCountMismatch(Flag, tag="compile_count_mismatch"):
    """Runs compiled another number of times than the loop's strategy expects."""

    runs: list[int]
    expected: int | None
    observed: list[int]


class Unsynchronised(Flag, tag="unsynchronised"):
    """Warm processes whose timed calls were not synchronised: their figures may time dispatch."""

    processes: list[int]


class WarmupUnstable(Flag, tag="warmup_unstable"):
    """Warm processes that did not settle within the warm-up time."""

    processes: list[int]


class ProcessDisagreement(Flag, tag="process_disagreement"):
    """The warm processes' medians differ by more than their own spread explains."""

    disagree: bool
    p_value: float
    max_over_min_median: float
    process_medians_s: list[float]


class TickQuantised(Flag, tag="tick_quantised"):
    """Warm processes whose samples sit whole scheduler ticks apart."""

    processes: list[int]
    tick_s: float


class InvalidMeasurement(Flag, tag="invalid_measurement"):
    """A run's result differed from the checked run's, or a warm process returned no samples."""


class ConversionLeak(Flag, tag="conversion_leak"):
    """The process's memory kept growing through a conversion route's calls."""

    calls: Count
    growth_per_call_bytes: float


class ConversionWrongValues(Flag, tag="conversion_wrong_values"):
    """A conversion route gave other values than its source for some layouts."""

    layouts: list[str]


class CopyEvidenceDisagrees(Flag, tag="copy_evidence_disagrees"):
    """For some layouts the buffers' addresses and a write through the source disagree on whether the route copied."""

    layouts: list[str]


class SharedCacheNotWhole(Flag, tag="shared_cache_not_whole"):
    """After some concurrency groups the shared cache was not whole."""

    groups: list[str]


class WarmSharedCompiled(Flag, tag="warm_shared_compiled"):
    """Processes compiled although their shared cache was filled first."""

    groups: list[str]


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
    flags: list[str]
    hits_total: int | None
    misses_total: int | None
    runs_verified: Count
    runs: Count


class ColdSummary(Artifact):
    """A cold policy's figures: each component's summary over its headline runs (null: none)."""

    interpreter_s: Summary | None
    import_s: Summary | None
    setup_s: Summary | None
    first_call_s: Summary | None
    second_call_s: Summary | None
    ttfr_s: Summary | None
    process_s: Summary | None
    user_import_s: Summary | None | UnsetType = UNSET
    device_init_s: Summary | None | UnsetType = UNSET


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
    summary: ColdSummary
    stages_summary: StagesSummary
    cache_verification: CacheVerification
    flags: list[AnyFlag]
    loop_summary: LoopSummary | None | UnsetType = UNSET

    @property
    def measured(self) -> list[RunFigures]:
        return self.runs

    def figure(self, metric: str) -> Summary | None:
        """One component's summary (None: not measured, or withheld)."""
        return named(self.summary, metric)


class WarmSummary(Artifact):
    call_s: Summary | None  # the median of the processes' medians, over the clean processes
    samples_per_process: int | None


class WarmPolicy(Artifact, _Policy):
    procs: list[RunFigures]
    summary: WarmSummary
    flags: list[AnyFlag]

    @property
    def measured(self) -> list[RunFigures]:
        return self.procs

    def figure(self, metric: str) -> Summary | None:
        return self.summary.call_s if metric == "call_s" else None


class Policies(Artifact):
    cold_cache: ColdPolicy | UnsetType = field(name=COLD_CACHE, default=UNSET)
    warm_cache: ColdPolicy | UnsetType = field(name=WARM_CACHE, default=UNSET)
    warm_process: WarmPolicy | UnsetType = field(name=WARM_PROCESS, default=UNSET)

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
    policies: Annotated[list[PolicyName], Meta(min_length=1)]
    cold_runs: Annotated[int, Meta(ge=1)]
    warm_procs: Annotated[int, Meta(ge=1)]
    warm_samples: Annotated[int, Meta(ge=1)]
    min_sample_s: Annotated[float, Meta(gt=0)]
    max_warmup_s: Annotated[float, Meta(ge=0)]
    timeout_s: Annotated[float, Meta(gt=0)]
    seed: int
    threads: Annotated[int, Meta(ge=1)] | None
    deterministic: bool
    keep_contended: bool | UnsetType = UNSET  # --keep-contended (files before 0.1.2: none)
    precision: Annotated[float, Meta(gt=0, lt=1)] | UnsetType = UNSET
    budget_s: Annotated[int, Meta(ge=1)] | Annotated[float, Meta(ge=1)] | None | UnsetType = UNSET


class Dataset(Artifact):
    id: Annotated[str, Meta(min_length=1)]
    sha256: Sha256 | None


class CaseMemory(Artifact):
    peak_rss_bytes: Summary | None | UnsetType = UNSET  # the worker's own peak over the cold runs
    device_peak_bytes: Count | UnsetType = UNSET
    # a GPU case's peak per phase, from a warm process where there is one (its steady state is the warm regime's)
    device_peaks: DevicePeaks | UnsetType = UNSET
    device_peaks_reset: bool | UnsetType = UNSET
    compiled: dict[str, int] | UnsetType = UNSET


class UnmeasuredRun(Artifact):
    """A run that is not a measurement (the template producer, the check run), and its outcome."""

    kind: str
    outcome: Outcome
    reason: str | None


class CommandInfo(Artifact):
    """A user's command (`ttfr run --command`): its program and how its first result is taken,
    as plan.json records them (redacted)."""

    argv: Annotated[list[str], Meta(min_length=1)]
    cwd: str
    first_result: str | None  # a regex on its output: the first matching line is its first result
    mark: bool  # its first result is its call of ttfr_mark.first_result() (neither: its exit)
    prepare: list[str] | None
    stop_at_first_result: bool | UnsetType = UNSET  # each run was ended by ttfr at its first result


class Headline(Artifact):
    """The few numbers a suite index and a summary table show (null when not measured)."""

    ttfr_cold_cache_median_s: Annotated[float, Meta(ge=0)] | None
    ttfr_warm_cache_median_s: Annotated[float, Meta(ge=0)] | None
    warm_call_median_s: Annotated[float, Meta(ge=0)] | None


class Conversion(Artifact):
    """A conversion case's evidence and what it gives (analyse/conversions.py), decided once: every
    output renders these. Bytes are counted once, as copy tools count them (STREAM counts a copy's
    read and write: twice)."""

    evidence: ConversionEvidence
    first_call_s: float | None  # the cold-cache median: the first conversion in a fresh process
    call_s: float | None  # the warm-process median: the steady state
    memcpy_bytes_per_s: float | None  # this machine's np.copyto of the same bytes, in the same process (null: no time)
    bytes_per_s: float | None  # where the route copied: bytes / call_s
    memcpy_fraction: float | None  # where it copied: memcpy's time / the route's (1.0: as fast as memcpy)
    below_half_memcpy: bool | None


class CaseResult(Artifact):
    """One case (backend x workload x size x dtype): raw runs and summaries per cache policy."""

    schema: Literal["ttfr.case_result.v2"]
    case: Annotated[str, Meta(pattern="^[a-z0-9_]+_[0-9]+_(f32|f64|bf16)$")]
    backend: Annotated[str, Meta(min_length=1)]
    workload: Annotated[str, Meta(min_length=1)]
    size: Annotated[int, Meta(ge=1)]
    dtype: Literal["float32", "float64", "bfloat16"]
    status: Status
    reason: str | None
    config: Config
    sync_policy: Annotated[str, Meta(min_length=1)]
    dataset: Dataset
    device: Device | None
    versions: dict[str, str | int | None]
    correctness: Check | None
    policies: Policies
    memory: CaseMemory
    flags: list[AnyFlag]
    unmeasured_runs: list[UnmeasuredRun]
    limitations: list[str]
    command: CommandInfo | UnsetType = UNSET
    # The BLAS/OpenMP pools its checking process loaded and their thread counts (None: threadpoolctl
    # is not installed there; absent: no process checked the result, e.g. a command's case).
    threadpools: list[ThreadPool] | None | UnsetType = UNSET
    conversion: Conversion | UnsetType = UNSET  # a conversion route's evidence and figures
    concurrency: Concurrency | UnsetType = UNSET  # --concurrency: its groups of cold starts at once

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
