"""SuiteResult (`ttfr.suite_result.v1`): the index of one result directory — every case file with
its hash, status and headline figures — and what is computed across cases: the summary,
break-even points, HistFactory scaling rows, loop strategies, and the --precision phase."""

from __future__ import annotations

from typing import Annotated, Literal

from msgspec import Meta

from ttfr.model.base import UNSET, Artifact, Count, Sha256, UnsetType
from ttfr.model.case import Headline, PolicyName, Status
from ttfr.model.loops import LoopRow

SUITE_SCHEMA = "ttfr.suite_result.v1"
OptionalSeconds = Annotated[float, Meta(ge=0)] | None


class CaseRef(Artifact):
    case: str
    path: str
    sha256: Sha256
    status: Status
    reason: str | None
    headline: Headline


class FileRef(Artifact):
    path: str
    sha256: Sha256


class WorstCase(Artifact):
    case: str
    ttfr_median_s: float
    policy: PolicyName


class CaseReason(Artifact):
    case: str
    reason: str | None


class SuiteSummary(Artifact):
    """Counts, the worst measured case by TTFR, and failed/warned cases listed apart."""

    n_cases: Count
    n_ok: Count
    n_warn: Count
    n_failed: Count
    n_pending: Count
    worst_case: WorstCase | None
    failed: list[CaseReason]
    warned: list[CaseReason]


class BreakEven(Artifact):
    """After how many calls in one process the backend that starts slower has caught up."""

    workload: str
    size: int
    dtype: str
    dataset: str
    cold_policy: PolicyName
    fast_start: str
    slow_start: str
    fast_start_ttfr_s: float
    slow_start_ttfr_s: float
    fast_start_call_s: float
    slow_start_call_s: float
    calls: Annotated[int, Meta(ge=1)] | None  # null: the slower starter never catches up
    calls_range: Annotated[list[Annotated[int, Meta(ge=1)] | None], Meta(min_length=2, max_length=2)]


class ScalingRow(Artifact):
    """Plot-ready figures of a HistFactory case against its parameter count."""

    workload: str
    engine: str
    parameters: int
    dataset: str
    status: Status
    ttfr_cold_cache_s: float | None
    ttfr_cold_cache_ci_low_s: float | None
    ttfr_cold_cache_ci_high_s: float | None
    ttfr_warm_cache_s: float | None
    ttfr_warm_cache_ci_low_s: float | None
    ttfr_warm_cache_ci_high_s: float | None
    warm_call_s: float | None
    warm_call_ci_low_s: float | None
    warm_call_ci_high_s: float | None
    first_call_cold_s: float | None
    nll_parity_rel: float | None
    q0_parity_abs: float | None
    fd_max_abs_error: float | None
    fd_max_rel_error: float | None
    train_first_step_s: float | None
    train_step_s: float | None
    train_loss_first: float | None
    train_loss_last: float | None
    # the median step's share spent converting between runtimes (null: not recorded)
    train_conversion_share: float | None | UnsetType = UNSET


class DatasetFile(Artifact):
    name: str
    size: int
    path: str
    sha256: Sha256


class PrecisionCounts(Artifact):
    target: float
    statistics: Count
    met: Count
    short: Count
    unreachable: Count
    busy: Count
    failing: Count
    added_runs: Count


class Statistic(Artifact):
    """One headline median's precision (analyse/precision.py)."""

    case: str
    policy: PolicyName
    metric: Literal["ttfr_s", "call_s"]
    runs: Annotated[int, Meta(ge=1)]
    n: Count
    contended: Count
    median: OptionalSeconds
    half_width: OptionalSeconds
    cost_s: OptionalSeconds
    state: Literal["met", "short", "unreachable", "busy", "failing"]
    needed_runs: Annotated[int, Meta(ge=1)] | None
    added: Count  # runs beyond the plan's count (the ones --precision added)

    @property
    def key(self) -> tuple[str, str]:
        return self.case, self.policy


class Precision(Artifact):
    """`ttfr run --precision`: the target (relative 95% CI half-width of each headline median), how
    the phase that added runs ended, and each statistic's state (derived from the case files)."""

    target: Annotated[float, Meta(gt=0, lt=1)]
    budget_s: Annotated[int, Meta(ge=1)] | Annotated[float, Meta(ge=1)] | None
    stopped_by: Literal["target_met", "budget", "cannot_improve", "process_limit", "interrupted"]
    # this session's time from its start to the end of the phase (a --resume starts its own clock and budget)
    elapsed_s: OptionalSeconds
    summary: PrecisionCounts
    statistics: list[Statistic]


class PendingCase(Artifact):
    """A case an interrupted run has not finished: how far its runs got."""

    case: str
    runs_done: Count
    runs_planned: Count


class SuiteResult(Artifact):
    """The suite index of one result directory."""

    schema: Literal["ttfr.suite_result.v1"]
    snapshot_id: str
    created_at: str
    state: Literal["complete", "incomplete"]
    ttfr_version: str
    deterministic: bool
    profile: str
    seed: int
    policies: list[PolicyName]
    manifest: FileRef
    cases: list[CaseRef]
    pending: list[str]
    summary: SuiteSummary
    break_even: list[BreakEven]
    scaling: list[ScalingRow]
    datasets: list[DatasetFile]
    loops: list[LoopRow] | UnsetType = UNSET
    precision: Precision | UnsetType = UNSET
    pending_runs: list[PendingCase] | UnsetType = UNSET  # the pending cases' progress (files before 0.1.2: none)
