"""Comparison (`ttfr.comparison.v1`): arm B against arm A for every case and policy both ran (and
every concurrency point, `--concurrency`: a sharing mode at a group size N), the statistics behind
each verdict, and the gate. `ttfr ab` (paired rounds, one session) and
`ttfr compare` (two result directories) write it; comparison.md, comparison.html, the terminal
and `ttfr replicate` render it."""

from __future__ import annotations

from typing import Annotated, Literal

from msgspec import Meta

from ttfr.model.concurrency import point_label
from ttfr.model.base import UNSET, Artifact, Count, Fraction, Seconds, UnsetType
from ttfr.model.run_figures import PolicyName, PolicyOrMode
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
    """Number of values the estimate rests on: the rounds both arms have a value for (paired), else the smaller arm's
    number of values (unpaired)."""
    ratio: Ratio | None
    """The Hodges-Lehmann estimate of B/A, a ratio of times (1.10: B takes 10% longer); null with fewer than 2 values."""
    ci: RatioCI | None
    """The ratio's confidence interval [low, high] (paired: the signed-rank interval of the Walsh averages; unpaired:
    the Mann-Whitney one); null with fewer than 2 values."""
    ci_level: Fraction | None
    """The interval's coverage as a fraction: the paired interval's exact coverage (0.95 or just above, lower only when
    too few rounds allow a 95% one), 0.95 unpaired; null without an interval."""
    p_value: Fraction | None
    """Two-sided p-value of the Wilcoxon signed-rank test on the paired log ratios (paired) or of the Mann-Whitney U
    test (unpaired), before any correction; null with fewer than 2 values."""
    method: str | UnsetType = UNSET
    """The estimator, interval and test used, in words; absent when too few values allowed any."""


class Effect(Estimate, kw_only=True):
    """The estimate judged: the smallest effect that matters (delta), the gate's p-value
    (Holm-adjusted across the suite, or per case), Benjamini-Hochberg warnings, the verdict."""

    delta: Annotated[float, Meta(gt=0)]
    """The smallest effect that matters, as a fraction of A (0.05: 5%): the larger of 3% warm / 5% cold and twice this
    machine's A/A noise floor."""
    p_gate: Fraction
    """The p-value the gate judges: Holm-adjusted across every comparison of the document (correction holm), or p_value
    itself (none)."""
    gate_alpha: Fraction
    """The significance level p_gate must be below (a probability): 0.05 with Holm across the suite, 0.01 per
    comparison without correction."""
    correction: Literal["holm", "none"]
    """How the gate corrects for many comparisons: holm (Holm's step-down across the document) or none (each comparison
    at its own alpha)."""
    p_bh: Fraction
    """The Benjamini-Hochberg-adjusted p-value across the document's comparisons; it only raises warnings, never a
    verdict."""
    warning: bool
    """True when p_bh is below 0.10 but p_gate is not significant: an effect worth a closer look that the gate does not
    call."""
    verdict: Judgement
    """equivalent (the interval lies within 1/(1+delta)..1+delta), regression / improvement (significant at the gate
    and at least delta slower / faster), else inconclusive."""
    explanation: str
    """The verdict in one line: the change with its interval (`+6.2% [+3.1%, +9.5%]`) and why, or the smallest
    detectable effect."""
    smallest_detectable: float | None
    """The smallest relative change this run could detect at 80% power, as a fraction (0.04: 4%), from the interval's
    half-width; null without an interval."""


class Bimodality(Artifact):
    dip: float
    """Hartigan's dip statistic (package `diptest`): the largest distance between the values' empirical distribution
    function and the nearest unimodal one (dimensionless, at most 0.25)."""
    p_value: Fraction
    """The dip test's p-value against a unimodal distribution."""
    bimodal: bool
    """True when p_value is below 0.05: the values form more than one mode (two populations of runs)."""
    n: Count
    """Number of values tested (the test needs 30 or more)."""


class Drift(Artifact):
    relative_change: float | None
    """The Theil-Sen slope of the values against their position in the series, over the whole series, as a fraction of
    its median (0.03: +3%); null where the median is 0."""
    ci: Annotated[list[float], Meta(min_length=2, max_length=2)] | None
    """The 95% interval [low, high] of relative_change, as fractions of the median, from the slope's Theil-Sen
    interval; null with relative_change."""
    drifting: bool
    """True when the interval excludes 0 and the change is at least 2% either way."""


class SeriesDiagnostics(Artifact):
    """One arm's series in round order: a first-run outlier, bimodality (dip test), drift."""

    first_run_outlier: Outlier | None
    """The first value, when it lies more than 3.5 robust sigmas from the rest's median (a cold disk, first touch);
    null otherwise or with fewer than 4 values. It stays in every statistic."""
    bimodality: Bimodality | None
    """Hartigan's dip test of the values; null with fewer than 30."""
    drift: Drift | None
    """The trend across the series (Theil-Sen); null with fewer than 6 values."""

    def flagged(self) -> list[str]:
        """The diagnostics that found something, by name."""
        found = {"first_run_outlier": self.first_run_outlier is not None,
                 "bimodality": bool(self.bimodality and self.bimodality.bimodal),
                 "drift": bool(self.drift and self.drift.drifting)}  # fmt: skip
        return [name for name, hit in found.items() if hit]


class ArmDiagnostics(Artifact):
    a: SeriesDiagnostics
    """Arm A's series: every value it has in round order, the rounds left out of a paired estimate included."""
    b: SeriesDiagnostics
    """Arm B's series, as for A."""


class Record(Artifact):
    """One case and policy, or one case's concurrency point (`policy` a sharing mode, `concurrency`
    its group size N; the statistic is each round's group's time until all N had a result): the
    verdict and why; when compared, both arms' summaries, their diagnostics and the judged effect;
    when not (an arm failed or measured nothing), which."""

    case: str
    """The case's id, the same in both arms."""
    policy: PolicyOrMode
    """The cache policy compared, or a concurrency point's sharing mode (cold-shared, warm-shared, cold-private)."""
    regime: Literal["cold", "warm"]
    """cold for the cold-process policies and the concurrency points, warm for warm-process: which minimum delta and
    noise floor apply."""
    metric: Literal["ttfr_s", "call_s", "all_results_s"]
    """The figure compared per run: ttfr_s (a cold run's time to first result), call_s (a warm process's median call)
    or all_results_s (a round's group: until all N had a result)."""
    paired: bool
    """True when the arms' values are paired by round (measured interleaved in one session); false for a cross-session
    comparison, whose verdicts carry ` (weak)`."""
    verdict: Verdict
    """The effect's verdict, with ` (weak)` appended when unpaired; not_compared when an arm failed, measured nothing,
    or never ran this concurrency point."""
    explanation: str
    """Why, in one line: the effect's explanation, or which arm was not compared and why."""
    concurrency: Annotated[int, Meta(ge=1)] | UnsetType = UNSET
    """A concurrency point's group size N (the number of processes started together); absent for a cache policy."""
    failed: bool | UnsetType = UNSET
    """Not compared only: true when an arm's case failed, false when it warned with nothing measured or did not run
    this point; absent when compared."""
    excluded_rounds: list[int] | UnsetType = UNSET
    """Paired only: the rounds (by index) only one arm has a value for, left out of the estimate and the summaries;
    absent when unpaired or not compared."""
    a: Summary | None | UnsetType = UNSET
    """Arm A's values of `metric` in seconds, summarised: those the estimate used (paired: the rounds both arms have);
    null when none; absent when not compared."""
    b: Summary | None | UnsetType = UNSET
    """Arm B's values of `metric` in seconds, summarised as for A."""
    diagnostics: ArmDiagnostics | UnsetType = UNSET
    """Each arm's first-run outlier, bimodality and drift; absent when not compared."""
    effect: Effect | UnsetType = UNSET
    """The estimate of B/A and its judgement; present exactly when compared."""

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
    """The arm's name: A or B."""
    python: str
    """The arm's interpreter (`--a` / `--b`; for `ttfr compare`, the worker executable its manifest names)."""
    env: dict[str, str]
    """The environment variables the arm sets (`--a-env` / `--b-env`), a secret's value replaced by `<redacted>`; empty
    for `ttfr compare`."""
    command: str | UnsetType = UNSET
    """The arm's own program (`--a-command` / `--b-command`) as a redacted command line; absent otherwise."""
    path_first: str | UnsetType = UNSET
    """Commands only: the directory put first on PATH for the arm's commands (its interpreter's, as if its virtualenv
    were active); absent otherwise."""


class Rounds(Artifact):
    """`ttfr ab`'s rounds: how many ran, the bounds and target it had, and what stopped it."""

    completed: Count
    """Number of rounds that ran to the end (each runs every stream's A and B once); the comparison uses these."""
    min: Count
    """The rounds that always run before precision or the budget may stop them: `--min-rounds` with `--precision`,
    else `--rounds` (every round runs)."""
    max: Count
    """The most rounds (`--rounds`); all of them run without a precision target."""
    precision: Annotated[float, Meta(gt=0)] | None
    """The target (`--precision`): stop once every comparison's relative CI half-width is at most this fraction (0.05:
    ±5%); null without one."""
    budget_s: Annotated[float, Meta(gt=0)] | None
    """`--budget`: once this many seconds have passed, no further round starts (checked after `min` rounds); null
    without one."""
    stopped_by: Literal["max_rounds", "precision", "budget", "interrupted"]
    """What ended the rounds: max_rounds (all ran), precision (every interval narrow enough), budget, or interrupted
    (Ctrl-C: the completed rounds are compared)."""
    elapsed_s: Annotated[float, Meta(ge=0)]
    """Seconds from the first round's start to the stop."""


class HostNoise(Artifact):
    """Medians over the runs of the machine's load, CPU pressure, steal and involuntary
    switches, and why they make the machine noisy (empty: they do not)."""

    load_average_1m: float | None
    """Median of the machine's 1-minute load average read before each run (the average number of tasks running,
    runnable or in uninterruptible sleep); null without readings (`ttfr compare` has none)."""
    load_per_core: float | None
    """load_average_1m over the CPUs ttfr may use (its affinity): a ratio of tasks to cores; above 1 the machine is
    noisy."""
    cpu_pressure_avg10: float | None
    """Median of the CPU pressure read before each run (PSI `some avg10`: the percent of the last 10 s in which some
    task waited for a CPU); above 10 noisy; null without PSI."""
    steal_fraction: float | None
    """Median over the runs of the share of the machine's CPU time a hypervisor stole from spawn to reap (/proc/stat);
    above 0.02 noisy."""
    involuntary_switches: float | None
    """Median over the runs of the number of involuntary context switches of each run's process tree (its rusage)."""
    noisy: bool
    """True when any reading is above its limit (listed in `why`)."""
    why: list[str]
    """Each reading above its limit, e.g. `load_per_core 1.6 > 1`; empty when the machine was quiet."""


class ExplanationChange(Artifact):
    """Something whose time changed between A's and B's --explain diagnostic processes (one process each, so no
    interval: a change counts beyond the threshold the comparison states, EXPLAIN_THRESHOLD)."""

    case: str
    """The case's id, the same in both arms."""
    policy: PolicyName
    """The cold policy whose diagnostic processes are compared."""
    kind: Literal["distribution", "module", "program", "frame", "first_call_part"]
    """What changed: a phase's imports of a distribution, one of the costliest modules (kept in both arms' lists), a
    JAX program (trace, lower and compile), a torch.compile frame (its compile), or a part of the first call."""
    phase: str | None
    """The phase, for a distribution or a module; null for the others (all in the first call)."""
    name: str
    """The distribution, module, program, frame (`function` or `backward of function`) or part."""
    a_s: Seconds | None
    """Its seconds in A's diagnostic process; null where A's explanation does not have it (not imported, not
    compiled)."""
    b_s: Seconds | None
    """Its seconds in B's, as for A."""
    change_s: float
    """B less A in seconds (a missing side counts as 0 s: absent from a complete list, such as the programs)."""


class ComparisonSummary(Artifact):
    counts: dict[str, Count]
    """Number of comparison records per verdict, the ` (weak)` mark left off (e.g. equivalent: 5, regression: 1)."""
    regressions: list[str]
    """The records judged regression, each as `case (policy)` or `case (mode xN)`."""
    inconclusive: list[str]
    """The records judged inconclusive, named as regressions are."""
    failed: list[str]
    """The cases not compared because an arm failed, sorted."""
    fail_on: Literal["regression", "inconclusive"]
    """What fails the gate (`--fail-on`): regression, or inconclusive (an inconclusive verdict too)."""
    gate: Literal["pass", "fail"]
    """fail when a record is a regression (or inconclusive, with fail_on inconclusive), else pass."""
    exit_code: Literal[0, 1, 3]
    """The command's exit code: 3 when the gate fails, else 1 when an arm's case failed, else 0."""


class Comparison(Artifact):
    """Verdicts of arm B against arm A for every case, policy and concurrency point, with the statistics behind them."""

    schema: Literal["ttfr.comparison.v1"]
    """The document's schema name and version."""
    paired: bool
    """True when values are paired by round (`ttfr ab`, or `ttfr compare` of two directories from one session); false
    for a cross-session comparison."""
    session: str | None
    """The session id both arms share (random, provenance only); null for a cross-session comparison."""
    arms: Annotated[list[RecordedArm], Meta(min_length=2, max_length=2)]
    """Arm A, then arm B, as recorded."""
    correction: Literal["holm", "none"]
    """The gate's multiple-comparison correction (`--correction`): holm across every comparison here, or none (alpha
    0.01 per comparison)."""
    noise_floor: dict[str, float] | None
    """This machine's A/A noise floor per regime (cold, warm) from `ttfr selftest`: the 95th percentile of |B/A - 1| as
    a fraction, delta at least twice it; null without a stored self-test."""
    rounds: Rounds | None
    """`ttfr ab`'s rounds; null for `ttfr compare`."""
    warning: str | None
    """What a reader must know first: a cross-session comparison's weak verdicts (and different machines), or arms
    whose timed calls wait differently (sync_policy); null when none."""
    host_noise: HostNoise
    """The machine's load over both arms' runs; every reading null for `ttfr compare`, which reads no runs' journal."""
    comparisons: list[Record]
    """One record per case and policy, then per concurrency point, in arm A's case order."""
    summary: ComparisonSummary
    """The verdicts counted and the gate's outcome."""
    explained: list[ExplanationChange] | UnsetType = UNSET
    """Where both arms ran `--explain`: per case and cold policy, what changed most between their diagnostic
    processes beyond the stated threshold (at most ten each, largest first); absent where no case was explained in
    both arms."""
