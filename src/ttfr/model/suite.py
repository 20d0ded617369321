"""SuiteResult (`ttfr.suite_result.v1`): the index of one result directory — every case file with
its hash, status and headline figures — and what is computed across cases: the summary,
break-even points, HistFactory scaling rows, loop strategies, and the --precision phase."""

from __future__ import annotations

from typing import Annotated, Literal

from msgspec import Meta

from ttfr.model.base import UNSET, Artifact, Count, Sha256, UnsetType
from ttfr.model.case import Headline, Status
from ttfr.model.run_figures import PolicyName
from ttfr.model.loops import LoopRow

SUITE_SCHEMA = "ttfr.suite_result.v1"
OptionalSeconds = Annotated[float, Meta(ge=0)] | None


class CaseRef(Artifact):
    case: str
    """The case's id: backend, workload, size and dtype (`jax_jit_cpu_hf_nll_grad_8_f64`)."""
    path: str
    """Its case file, relative to the result directory: `cases/<case>.json`."""
    sha256: Sha256
    """The sha256 of the case file's bytes as written; readers refuse a case file that no longer matches."""
    status: Status
    """The case's status, copied from its case file: `ok`, `warn` or `failed`."""
    reason: str | None
    """Why the case is not `ok`, copied from its case file; null for an `ok` case."""
    headline: Headline
    """Its headline medians (TTFR under each cold policy, the warm call), from its case file."""


class FileRef(Artifact):
    path: str
    """The file, relative to the result directory (`manifest.json`)."""
    sha256: Sha256
    """The sha256 of the file's bytes when suite.json was written; readers refuse a file that no longer matches."""


class WorstCase(Artifact):
    case: str
    """The id of the case (failed ones aside) with the slowest TTFR median."""
    ttfr_median_s: float
    """That case's TTFR median: its cold-cache one, or its warm-cache one where it has no cold-cache figure."""
    policy: PolicyName
    """The cache policy that median is of."""


class CaseReason(Artifact):
    case: str
    """The case's id."""
    reason: str | None
    """Why it failed or warned, copied from its case file."""


class SuiteSummary(Artifact):
    """Counts, the worst measured case by TTFR, and failed/warned cases listed apart."""

    n_cases: Count
    """Number of the plan's cases: those with a case file plus the pending ones."""
    n_ok: Count
    """Number of cases whose status is `ok`."""
    n_warn: Count
    """Number of cases whose status is `warn` (unavailable, or measured with a caveat their reason names)."""
    n_failed: Count
    """Number of cases whose status is `failed`."""
    n_pending: Count
    """Number of cases an interrupted run has not finished (listed in `pending`, no case file yet)."""
    worst_case: WorstCase | None
    """The case with the slowest TTFR median, failed cases aside; null when no case has a TTFR median."""
    failed: list[CaseReason]
    """The failed cases, each with its reason."""
    warned: list[CaseReason]
    """The cases whose status is `warn`, each with its reason."""


class BreakEven(Artifact):
    """After how many calls in one process the backend that starts slower has caught up."""

    workload: str
    """The workload both backends ran."""
    size: int
    """The cases' size, in the unit the workload's catalogue gives it (a HistFactory workspace's number of
    parameters, a conversion route's bytes, ...)."""
    dtype: str
    """The cases' dtype (`float32`, `float64`, `bfloat16`)."""
    dataset: str
    """The cases' dataset id (the inputs both read): a --workspace file and the preset of its size never pair."""
    cold_policy: PolicyName
    """The cold-process cache policy whose TTFR medians are compared (each pair has a row per cold policy; a
    precompiled policy's rows pair a backend that ships its artifact with the others as they start in its
    setting)."""
    fast_start: str
    """The backend with the lower TTFR median under `cold_policy`."""
    slow_start: str
    """The backend with the higher TTFR median under `cold_policy` (on a tie, the later name)."""
    fast_start_ttfr_s: float
    """`fast_start`'s TTFR median under `cold_policy`."""
    slow_start_ttfr_s: float
    """`slow_start`'s TTFR median under `cold_policy`."""
    fast_start_call_s: float
    """`fast_start`'s warm-process call median (the median of its processes' medians)."""
    slow_start_call_s: float
    """`slow_start`'s warm-process call median (the median of its processes' medians)."""
    calls: Annotated[int, Meta(ge=1)] | None
    """The fewest calls n in one fresh process after which the slow starter has spent no more time, TTFR + (n - 1)
    warm calls, than the fast one; null: the slower starter never catches up (its call is no faster)."""
    calls_range: Annotated[list[Annotated[int, Meta(ge=1)] | None], Meta(min_length=2, max_length=2)]
    """[fewest, most] calls to break even, from the ends of the four medians' confidence intervals most and least
    favourable to the slow starter; an end is null where the slow starter never catches up there."""
    fast_start_policy: PolicyName | UnsetType = UNSET
    """Under a precompiled `cold_policy`: the policy `fast_start`'s TTFR is measured under (`cold_policy` where its
    backend ships that artifact, else the standard policy of its setting); absent for a standard `cold_policy`."""
    slow_start_policy: PolicyName | UnsetType = UNSET
    """Under a precompiled `cold_policy`: the policy `slow_start`'s TTFR is measured under, as `fast_start_policy`."""


class ScalingRow(Artifact):
    """Plot-ready figures of a HistFactory case against its parameter count."""

    workload: str
    """The HistFactory workload."""
    engine: str
    """The backend that ran it (`jax_jit_cpu`, `pyhf_jax`, `nextstat`, ...)."""
    parameters: int
    """The workspace's number of parameters (the case's size)."""
    dataset: str
    """The case's dataset id: which workspace (a preset, or the --workspace file) and seed."""
    status: Status
    """The case's status, `ok` or `warn` (failed cases have no row)."""
    ttfr_cold_cache_s: float | None
    """The TTFR median under cold-process/cold-cache; null where not measured."""
    ttfr_cold_cache_ci_low_s: float | None
    """The low end of that median's confidence interval (order statistics); null where not measured."""
    ttfr_cold_cache_ci_high_s: float | None
    """The high end of that median's confidence interval (order statistics); null where not measured."""
    ttfr_warm_cache_s: float | None
    """The TTFR median under cold-process/warm-cache; null where not measured."""
    ttfr_warm_cache_ci_low_s: float | None
    """The low end of that median's confidence interval (order statistics); null where not measured."""
    ttfr_warm_cache_ci_high_s: float | None
    """The high end of that median's confidence interval (order statistics); null where not measured."""
    warm_call_s: float | None
    """The warm-process call median (the median of the processes' medians); null where not measured."""
    warm_call_ci_low_s: float | None
    """The low end of that median's confidence interval (order statistics); null where not measured."""
    warm_call_ci_high_s: float | None
    """The high end of that median's confidence interval (order statistics); null where not measured."""
    first_call_cold_s: float | None
    """The first call's median under cold-process/cold-cache (from setup done to its result, compilation
    included); null where not measured."""
    nll_parity_rel: float | None
    """The NLL's relative difference from the result check's reference, |engine - reference| / |reference| (a
    dimensionless ratio; the gate's tolerance is 1e-8); null where not recorded."""
    q0_parity_abs: float | None
    """The discovery test statistic q0's absolute difference from the reference, |engine - reference| (q0 is
    dimensionless; the gate's tolerance is 1e-4); null where not recorded."""
    fd_max_abs_error: float | None
    """The largest |autodiff - central finite differences| of the signal gradient over the bins, in the gradient's
    unit (NLL or q0 per unit of a bin's signal count); null where the workload has no FD check."""
    fd_max_rel_error: float | None
    """The largest |autodiff - finite differences| / max(|finite differences|, 1e-12) over the bins (a dimensionless
    ratio); null where the workload has no FD check."""
    train_first_step_s: float | None
    """The result check's training loop (its KDE variant): the first step, timed apart from the rest; null where
    not recorded."""
    train_step_s: float | None
    """The median of that loop's later steps (all but the first); null where not recorded."""
    train_loss_first: float | None
    """The first loss of the KDE training run the check records (hf_train20: its timed call's), -Z0 =
    -sqrt(q0 + 1e-12), dimensionless; null where not recorded."""
    train_loss_last: float | None
    """The last loss of that training run (its 20th step), -Z0, dimensionless; null where not recorded."""
    train_conversion_share: float | None | UnsetType = UNSET
    """The seconds that loop's median step spent converting arrays between runtimes, as a fraction of the median
    step (the first step apart); null: not timed for this engine; absent: no training loop."""


class DatasetFile(Artifact):
    name: str
    """The workspace's name: its preset's (`complex8p`), or `custom-<sha8>` for the --workspace file."""
    size: int
    """The workspace's number of parameters (not the file's size)."""
    path: str
    """The file, relative to the result directory: the workspace (`workspaces/<name>.json`) or the seeded point
    every engine evaluates it at (`workspaces/<name>.point.json`)."""
    sha256: Sha256
    """The sha256 of the file's bytes when suite.json was written; readers refuse a file that no longer matches."""


class PrecisionCounts(Artifact):
    target: float
    """The target: the largest relative 95% CI half-width, as a fraction of the median (`Precision.target`)."""
    statistics: Count
    """Number of headline statistics assessed."""
    met: Count
    """Number of statistics whose 95% interval is within the target."""
    short: Count
    """Number of statistics above the target (or without a 95% interval yet) not judged unreachable, busy or
    failing: more runs could still have narrowed them."""
    unreachable: Count
    """Number of statistics projected to need over twice the per-stream run limit."""
    busy: Count
    """Number of statistics with at least 6 contended runs, outnumbering their clean ones."""
    failing: Count
    """Number of statistics with at least 6 failed runs, outnumbering their ok ones."""
    added_runs: Count
    """Number of runs --precision added beyond the plan's, over every statistic."""


class Statistic(Artifact):
    """One headline median's precision (analyse/precision.py)."""

    case: str
    """The case's id."""
    policy: PolicyName
    """The cache policy of the stream of runs."""
    metric: Literal["ttfr_s", "call_s"]
    """Which median: `ttfr_s` under a cold-process policy, `call_s` (the median of per-process medians) under
    warm-process."""
    runs: Annotated[int, Meta(ge=1)]
    """Number of measured runs of the stream (warm-process: processes), whatever their outcome."""
    n: Count
    """Number of values the median summarises: the stream's clean ok runs (none where contended ones outnumber
    them; every ok run with --keep-contended)."""
    contended: Count
    """Number of its ok runs judged contended (analyse/contention.py)."""
    median: OptionalSeconds
    """The headline median, in seconds; null where there is none."""
    half_width: OptionalSeconds
    """Half the median's 95% interval, (high - low) / 2, as a fraction of the median (not seconds); null until the
    interval reaches 95% coverage."""
    cost_s: OptionalSeconds
    """What one more run costs: the median of its runs' process spans (spawn to exit); null where none has one."""
    state: Literal["met", "short", "unreachable", "busy", "failing"]
    """`met` (its interval within the target), else `busy` (contended runs outnumber clean ones), `failing`
    (failed runs outnumber ok ones), `unreachable` (projected past twice the per-stream run limit), or `short`."""
    needed_runs: Annotated[int, Meta(ge=1)] | None
    """The projected number of runs to reach the target, n (half_width / target)^2, at least n and 6; null until
    there is a 95% interval."""
    added: Count
    """Number of its runs beyond the plan's count (the ones --precision added)."""

    @property
    def key(self) -> tuple[str, str]:
        return self.case, self.policy


class Precision(Artifact):
    """`ttfr run --precision`: the target (relative 95% CI half-width of each headline median), how
    the phase that added runs ended, and each statistic's state (derived from the case files)."""

    target: Annotated[float, Meta(gt=0, lt=1)]
    """--precision: the largest 95% CI half-width each headline median may have, as a fraction of the median."""
    budget_s: Annotated[int, Meta(ge=1)] | Annotated[float, Meta(ge=1)] | None
    """--budget: the session's wall-time limit, counted from its start (the plan's runs included); null without
    one."""
    stopped_by: Literal["target_met", "budget", "cannot_improve", "process_limit", "interrupted"]
    """Why the phase stopped adding runs: every statistic met the target, the budget left no room for a run, no
    statistic could still improve, ttfr's worker-process limit was reached, or the run was interrupted."""
    elapsed_s: OptionalSeconds
    """This session's time from its start to the end of the phase (a --resume starts its own clock and budget)."""
    summary: PrecisionCounts
    """The statistics counted by state, and the runs added."""
    statistics: list[Statistic]
    """Every headline statistic assessed, with its state."""


class PendingCase(Artifact):
    """A case an interrupted run has not finished: how far its runs got."""

    case: str
    """The pending case's id."""
    runs_done: Count
    """Number of the case's planned tasks the journal holds (runs, priming and check processes alike; a
    --concurrency group counts once)."""
    runs_planned: Count
    """Number of tasks the plan has for the case, counted the same way."""


class SuiteResult(Artifact):
    """The suite index of one result directory."""

    schema: Literal["ttfr.suite_result.v1"]
    """The schema this file follows."""
    snapshot_id: str
    """The result directory's name (a published snapshot's own id is in its index)."""
    created_at: str
    """When the run was planned (plan.json's `created_at`): UTC, ISO 8601."""
    state: Literal["complete", "incomplete"]
    """`incomplete` while cases are pending (an interrupted run; `ttfr run --resume DIR` finishes it)."""
    ttfr_version: str
    """The ttfr version that started the run (a resume by another version is refused)."""
    deterministic: bool
    """--deterministic: seed 0 and JSON byte-stable apart from timings and timestamps."""
    profile: str
    """The run's profile (`quick`, `standard`, `publish`), which sets its default run counts."""
    seed: int
    """The run's seed: the rounds' shuffled order, the generated workspaces and the inputs derive from it."""
    policies: list[PolicyName]
    """The cache policies the run measures."""
    manifest: FileRef
    """The run's environment manifest, manifest.json, with its sha256."""
    cases: list[CaseRef]
    """Every case with a case file: path, sha256, status, reason and headline medians."""
    pending: list[str]
    """The ids of the cases an interrupted run has not finished (they have no case file yet)."""
    summary: SuiteSummary
    """Counts by status, the worst case by TTFR, and the failed and warned cases."""
    break_even: list[BreakEven]
    """For each pair of backends that ran the same workload, size, dtype and dataset, per cold policy: after how
    many calls the slower starter catches up."""
    scaling: list[ScalingRow]
    """The HistFactory cases' figures against their parameter count (also written as scaling.csv)."""
    datasets: list[DatasetFile]
    """The HistFactory files the cases read, each workspace and its evaluation point, smallest workspace first."""
    loops: list[LoopRow] | UnsetType = UNSET
    """The loop workloads: each strategy's figures against naive's, per family, backend, dtype, cold policy and
    size; absent where no loop workload ran."""
    precision: Precision | UnsetType = UNSET
    """`ttfr run --precision`: how the phase that added runs ended and each statistic's state; absent without it."""
    pending_runs: list[PendingCase] | UnsetType = UNSET
    """How far each pending case's tasks got; absent when nothing is pending (and in files before 0.1.2)."""
