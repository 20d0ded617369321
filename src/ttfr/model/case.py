"""CaseResult (`ttfr.case_result.v2`): one case — backend x workload x size x dtype — with every
run's figures (raw data, kept whatever happened), the summaries per cache policy, the result
check, the flags and the status.

Figures of a failed case are null, never 0.0; its runs stay as raw data.
"""

from __future__ import annotations

from typing import Annotated, Literal

from msgspec import Meta

from ttfr.model.base import UNSET, Artifact, Count, Sha256, UnsetType
from ttfr.model.concurrency import Concurrency
from ttfr.model.flags import AnyFlag
from ttfr.model.explanation import Advice
from ttfr.model.policies import COLD_CACHE, WARM_CACHE, WARM_PROCESS, cache_state
from ttfr.model.policy_figures import Policies, PrecompiledPolicy
from ttfr.model.conversion_evidence import ConversionEvidence
from ttfr.model.record import Device, DevicePeaks, ThreadPool
from ttfr.model.result_check import Check
from ttfr.model.run_figures import Outcome, PolicyName
from ttfr.model.summary import Summary

CASE_SCHEMA = "ttfr.case_result.v2"
Status = Literal["ok", "warn", "failed"]


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
    advice: list[Advice] | UnsetType = UNSET
    """`--explain`: at most three things this run's evidence says would shorten the cold start, largest first
    (absent without --explain)."""

    def figure(self, policy: str, metric: str) -> Summary | None:
        """One metric's summary under one policy; None when not measured (or withheld)."""
        block = self.policies.get(policy)
        return block.figure(metric) if block else None

    def start_figure(self, policy: str) -> tuple[str, Summary] | None:
        """The TTFR a break-even takes for this case under a cold `policy`, and the policy it is measured under:
        its own; under a precompiled policy the case did not measure (its backend ships no such artifact), its
        standard policy of that setting (a new machine compiling, or a second job on a warm cache). None: neither
        measured."""
        block = self.policies.get(policy)
        # its backend ships no such artifact, or could not make one: it starts as that setting's standard policy;
        # an artifact made whose runs all failed stays lost
        shipped = isinstance(block, PrecompiledPolicy) and block.artifact.state == "made"
        used = policy if shipped else cache_state(policy)
        found = self.figure(used, "ttfr_s")
        return (used, found) if found else None

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
