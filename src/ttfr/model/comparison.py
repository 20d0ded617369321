"""Comparison (`ttfr.comparison.v1`): arm B against arm A for every case and policy both ran (and
every concurrency point, `--concurrency`: a sharing mode at a group size N), the statistics behind
each verdict, and the gate. `ttfr ab` (paired rounds, one session) and
`ttfr compare` (two result directories) write it; comparison.md, comparison.html, the terminal
and `ttfr replicate` render it."""

from __future__ import annotations

from typing import Annotated, Literal

from msgspec import Meta

from ttfr.model.concurrency import point_label
from ttfr.model.base import UNSET, Artifact, Count, Fraction, UnsetType
from ttfr.model.case import PolicyName
from ttfr.model.concurrency import Mode
from ttfr.model.policies import CONCURRENCY_MODES
from ttfr.model.summary import Outlier, Summary

COMPARISON_SCHEMA = "ttfr.comparison.v1"
WEAK_MARK = " (weak)"  # appended to verdicts of unpaired, cross-session comparisons
REGRESSION, IMPROVEMENT, EQUIVALENT, INCONCLUSIVE = "regression", "improvement", "equivalent", "inconclusive"
NOT_COMPARED = "not_compared"

Judgement = Literal["regression", "improvement", "equivalent", "inconclusive"]
Verdict = Literal[
    "regression", "improvement", "equivalent", "inconclusive", "not_compared",
    "regression (weak)", "improvement (weak)", "equivalent (weak)", "inconclusive (weak)",
]  # fmt: skip
Ratio = Annotated[float, Meta(gt=0)]
# JSON arrays are lists (a tuple would stay a tuple in the builtins the schema checks)
RatioCI = Annotated[list[Ratio], Meta(min_length=2, max_length=2, description="the ratio's interval: low, high")]


class Estimate(Artifact):
    """B/A as a ratio (Hodges-Lehmann on log times) with its interval and test; `ratio`, `ci`
    and `p_value` are null when too few runs allow any (then no method is named)."""

    n: Count
    ratio: Ratio | None
    ci: RatioCI | None
    ci_level: Fraction | None
    p_value: Fraction | None
    method: str | UnsetType = UNSET


class Effect(Estimate, kw_only=True):
    """The estimate judged: the smallest effect that matters (delta), the gate's p-value
    (Holm-adjusted across the suite, or per case), Benjamini-Hochberg warnings, the verdict."""

    delta: Annotated[float, Meta(gt=0)]
    p_gate: Fraction
    gate_alpha: Fraction
    correction: Literal["holm", "none"]
    p_bh: Fraction
    warning: bool
    verdict: Judgement
    explanation: str
    smallest_detectable: float | None


class Bimodality(Artifact):
    dip: float
    p_value: Fraction
    bimodal: bool
    n: Count


class Drift(Artifact):
    relative_change: float | None
    ci: Annotated[list[float], Meta(min_length=2, max_length=2)] | None
    drifting: bool


class SeriesDiagnostics(Artifact):
    """One arm's series in round order: a first-run outlier, bimodality (dip test), drift."""

    first_run_outlier: Outlier | None
    bimodality: Bimodality | None
    drift: Drift | None

    def flagged(self) -> list[str]:
        """The diagnostics that found something, by name."""
        found = {"first_run_outlier": self.first_run_outlier is not None,
                 "bimodality": bool(self.bimodality and self.bimodality.bimodal),
                 "drift": bool(self.drift and self.drift.drifting)}  # fmt: skip
        return [name for name, hit in found.items() if hit]


class ArmDiagnostics(Artifact):
    a: SeriesDiagnostics
    b: SeriesDiagnostics


class Record(Artifact):
    """One case and policy, or one case's concurrency point (`policy` a sharing mode, `concurrency`
    its group size N; the statistic is each round's group's time until all N had a result): the
    verdict and why; when compared, both arms' summaries, their diagnostics and the judged effect;
    when not (an arm failed or measured nothing), which."""

    case: str
    policy: PolicyName | Mode  # a cache policy, or a concurrency point's sharing mode
    regime: Literal["cold", "warm"]
    metric: Literal["ttfr_s", "call_s", "all_results_s"]
    paired: bool
    verdict: Verdict
    explanation: str
    concurrency: Annotated[int, Meta(ge=1)] | UnsetType = UNSET  # a concurrency point: its group size N
    failed: bool | UnsetType = UNSET  # not compared: whether an arm failed (else it warned)
    excluded_rounds: list[int] | UnsetType = UNSET  # paired: rounds one arm has no value for
    a: Summary | None | UnsetType = UNSET
    b: Summary | None | UnsetType = UNSET
    diagnostics: ArmDiagnostics | UnsetType = UNSET
    effect: Effect | UnsetType = UNSET

    def __post_init__(self):
        compared = self.verdict != NOT_COMPARED
        if compared != (self.effect is not UNSET) or compared == (self.failed is not UNSET):
            raise ValueError("a compared record has an effect, one not compared says whether an arm failed")
        point = self.policy in CONCURRENCY_MODES
        if point != (self.concurrency is not UNSET) or point != (self.metric == "all_results_s"):
            raise ValueError("a concurrency point (a sharing mode) has its group size and compares all_results_s")

    @property
    def base_verdict(self) -> str:
        """The verdict without the cross-session "(weak)" mark."""
        return self.verdict.removesuffix(WEAK_MARK)

    @property
    def point(self) -> str:
        """The policy, or a concurrency point as the reports name it: "cold-shared x8"."""
        return self.policy if self.concurrency is UNSET else point_label(self.policy, self.concurrency)

    @property
    def label(self) -> str:
        return f"{self.case} ({self.point})"


class RecordedArm(Artifact):
    """An arm as recorded: secrets in its environment keep their names only."""

    name: str
    python: str
    env: dict[str, str]
    command: str | UnsetType = UNSET
    path_first: str | UnsetType = UNSET


class Rounds(Artifact):
    """`ttfr ab`'s rounds: how many ran, the bounds and target it had, and what stopped it."""

    completed: Count
    min: Count
    max: Count
    precision: Annotated[float, Meta(gt=0)] | None
    budget_s: Annotated[float, Meta(gt=0)] | None
    stopped_by: Literal["max_rounds", "precision", "budget", "interrupted"]
    elapsed_s: Annotated[float, Meta(ge=0)]


class HostNoise(Artifact):
    """Medians over the runs of the machine's load, CPU pressure, steal and involuntary
    switches, and why they make the machine noisy (empty: they do not)."""

    load_average_1m: float | None
    load_per_core: float | None
    cpu_pressure_avg10: float | None
    steal_fraction: float | None
    involuntary_switches: float | None
    noisy: bool
    why: list[str]


class ComparisonSummary(Artifact):
    counts: dict[str, Count]  # base verdict -> comparisons
    regressions: list[str]
    inconclusive: list[str]
    failed: list[str]  # cases an arm failed
    fail_on: Literal["regression", "inconclusive"]
    gate: Literal["pass", "fail"]
    exit_code: Literal[0, 1, 3]


class Comparison(Artifact):
    """Verdicts of arm B against arm A for every case, policy and concurrency point, with the statistics behind them."""

    schema: Literal["ttfr.comparison.v1"]
    paired: bool
    session: str | None
    arms: Annotated[list[RecordedArm], Meta(min_length=2, max_length=2)]
    correction: Literal["holm", "none"]
    noise_floor: dict[str, float] | None  # regime -> the A/A noise floor `ttfr selftest` measured
    rounds: Rounds | None
    warning: str | None
    host_noise: HostNoise
    comparisons: list[Record]
    summary: ComparisonSummary
