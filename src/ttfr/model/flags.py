"""Flags: evidence beside a case's figures that a reader must know to trust them (a contended
run, a cache that was not what its policy says, ...). Each holds numbers and names;
report/flag_text.py says it as a sentence.
"""

from __future__ import annotations

from typing import Literal

from ttfr.model.base import UNSET, Artifact, Count, UnsetType
from ttfr.model.run_figures import Contention, PolicyName


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


class ArtifactRecompiled(Flag, tag="artifact_recompiled"):
    """A precompiled policy's run compiled what its mechanism claims the artifact's load skips (each run's `claim`
    says what): its figure is shown, unverified."""


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


class ExplanationDisagrees(Flag, tag="explanation_disagrees"):
    """--explain: the diagnostic process's figures disagree with the measured runs — its imports in a phase differ
    from the phase's median by more than 20%, or its time to first result (`ttfr`) or its compile stage's seconds by
    the runtime's counters lie outside the runs' range widened by 25%: that process
    explains a different run (a busy machine, a cache in another state), not these figures."""

    phase: str
    """What disagrees: a phase's imports (`import`, ...), the time to first result (`ttfr`), or a compile stage
    (`compile_s` for JAX, `dynamo_s+aot_autograd_s+inductor_s` for torch.compile)."""
    traced_s: float
    """The diagnostic process's seconds for it."""
    measured_s: float
    """The phase's median over the policy's runs, in seconds."""


CACHE_FLAGS = {cls.__struct_config__.tag: cls for cls in (ColdCacheNotEmpty, ColdCacheHits, CacheNotWritten, WarmCacheEmpty,
                                                         WarmCacheNoHits, WarmCachePartialHits, WarmCacheGrew,
                                                         KernelCacheGrew, ArtifactRecompiled)}  # fmt: skip
AnyFlag = (FirstRunOutlier | ColdCacheNotEmpty | ColdCacheHits | CacheNotWritten | WarmCacheEmpty | WarmCacheNoHits
           | WarmCachePartialHits | WarmCacheGrew | KernelCacheGrew | ArtifactRecompiled | Contended | CouldNotMeasureCleanly
           | ContendedKept | CompileCountMismatch | Unsynchronised | WarmupUnstable | ProcessDisagreement | TickQuantised
           | InvalidMeasurement | ConversionLeak | ConversionWrongValues | CopyEvidenceDisagrees
           | SharedCacheNotWhole | WarmSharedCompiled | ExplanationDisagrees)  # fmt: skip
