"""A machine's self-test (`ttfr.selftest.v1`, stored per machine): what it can resolve, measured on
it — false alarms of identical arms, detection and interval coverage of injected slowdowns, its noise
floor, and the rounds `ttfr ab` needs there (pipeline/selftest.py)."""

from __future__ import annotations

from typing import Annotated, Literal

from msgspec import Meta

from ttfr.model.base import UNSET, Artifact, Count, Fraction, Seconds, UnsetType

SELFTEST_SCHEMA = "ttfr.selftest.v1"


class Rate(Artifact):
    """A proportion with its exact (Clopper-Pearson) 95% interval."""

    count: Count
    """Number of comparisons that showed what the rate counts."""
    total: Count
    """Number of comparisons in all."""
    rate: Fraction | None
    """count / total, a fraction; null: nothing counted (total 0)."""
    ci95: Annotated[list[Fraction], Meta(min_length=2, max_length=2)] | None
    """The rate's exact (Clopper-Pearson) 95% interval [low, high], as fractions; null with total 0."""


class IdenticalArms(Artifact):
    """A/A: comparisons of identical arms in one regime."""

    comparisons: Count
    """Number of A/A comparisons (--aa), each of `rounds` paired rounds judged like one `ttfr ab` comparison."""
    false_alarms: Count
    """Number of those whose verdict was regression: what would make `ttfr ab` exit 3 on identical arms."""
    false_alarm_rate: Fraction
    """false_alarms / comparisons, a fraction."""
    false_alarm: Rate
    """The regression verdicts on identical arms (what fails the gate), with their 95% interval."""
    significant_either_way: Rate
    """The comparisons whose p-value was below alpha in either direction, whatever the size of the difference."""
    noise_floor_p95: Annotated[float, Meta(ge=0)]
    """The 95th percentile (nearest rank) of |B/A - 1| over the comparisons' Hodges-Lehmann estimates, a fraction
    (0.02: 2%): this regime's noise floor."""
    median_ci_half_width: Annotated[float, Meta(ge=0)] | UnsetType = UNSET
    """The median over the comparisons of their interval's half-width relative to the ratio, a fraction (0.03: ±3%);
    absent in older self-tests."""
    median_smallest_detectable: Annotated[float, Meta(ge=0)] | None | UnsetType = UNSET
    """The median over the comparisons of the smallest change each could detect at 80% power, a fraction; null where
    none had an interval; absent in older self-tests."""


class InjectedSlowdown(Artifact):
    """Arm B doing `nominal` more real work in the warm call: how often it was caught."""

    nominal: float
    """The extra work injected into arm B's warm call, as a fraction of A's loop iterations (0.10: +10%)."""
    measured_ratio: Annotated[float, Meta(gt=0)]
    """The injected ratio as fresh processes measured it (the truth): the median of their ratios of the longer loop's
    time to the plain one's, the two loops timed alternately."""
    comparisons: Count
    """Number of warm comparisons of A against the slowed B (--per-level), each of `rounds` paired rounds."""
    detected_as_regression: Fraction
    """The fraction of the comparisons whose verdict was regression."""
    ci_coverage: Fraction
    """The fraction of the comparisons whose interval held measured_ratio."""
    detected: Rate
    """The regression verdicts, with their 95% interval."""
    coverage: Rate
    """How often the reported interval held the measured ratio, with its 95% interval."""
    measured_ratio_range: Annotated[list[float], Meta(min_length=2, max_length=2)] | UnsetType = UNSET
    """The lowest and the highest ratio the fresh processes measured, [min, max]; absent in older self-tests."""
    truth_processes: Count | UnsetType = UNSET
    """Number of fresh processes whose measurement gave measured_ratio (one per comparison, failed ones left out);
    absent in older self-tests."""
    significant_slowdown: Fraction | UnsetType = UNSET
    """The fraction of the comparisons with p below alpha and B slower, whatever the size; absent in older
    self-tests."""
    median_estimate: float | UnsetType = UNSET
    """The median of the comparisons' Hodges-Lehmann estimates of B/A, a ratio; absent in older self-tests."""


class PowerCheck(Artifact):
    injected_effect: float
    """The injected +10% as fresh processes measured it (its measured_ratio - 1), a fraction."""
    modelled_power: Fraction
    """The model's probability of a regression verdict for that effect at the self-test's rounds."""
    measured: Rate
    """How often the comparisons of that injected slowdown did call it a regression."""


class RoundsForPower(Artifact):
    """The paired rounds `ttfr ab` needs here to call `effect` a regression with `power`."""

    effect: float
    """The slowdown to detect, as a fraction of A (0.10: +10%)."""
    power: float
    """The probability of a regression verdict asked for (0.80)."""
    alpha: float
    """The significance level of one comparison, uncorrected (0.01, a probability)."""
    delta: float
    """The smallest effect that matters here, as a fraction: the larger of 3% warm / 5% cold and twice this regime's
    noise floor."""
    measured_at_rounds: Annotated[int, Meta(ge=2)]
    """Number of paired rounds of the A/A comparisons whose interval width the model scales (the self-test's rounds)."""
    power_at_measured_rounds: Fraction
    """The model's probability of a regression verdict at measured_at_rounds."""
    rounds: Annotated[int, Meta(ge=2)] | None
    """Number of paired rounds needed (never fewer than the signed-rank test needs to reach p < alpha at all: 8 at
    0.01; modelled up to 100000); null: not detectable here (see reason)."""
    precision: Annotated[float, Meta(ge=0)] | None
    """The `ttfr ab --precision` that stops there: the relative 95% interval half-width at those rounds, a fraction;
    null with rounds."""
    reason: str | None
    """Why rounds is null, in words (delta is not below the effect); null otherwise."""
    check: PowerCheck | UnsetType = UNSET
    """Warm only: the model's power against the measured detection of the injected +10%; absent otherwise."""


class SelfTest(Artifact):
    schema: Literal["ttfr.selftest.v1"]
    """The artifact's format and version: always "ttfr.selftest.v1"."""
    created_at: str
    """When the self-test started: UTC, ISO 8601 to the second."""
    machine_id: str | None
    """The anonymous id of the machine it ran on, as the manifest's machine_id (16 hex digits of a sha256 of
    /etc/machine-id, else of the host name); null where neither is known."""
    rounds: Annotated[int, Meta(ge=2)]
    """Number of paired rounds per comparison (--rounds): each round one fresh worker process per arm, in ABBA order."""
    alpha: float
    """The gate's significance level for one comparison, uncorrected (0.01, a probability)."""
    aa: dict[str, IdenticalArms]
    """The A/A comparisons per regime: cold (the no-op case's time to first result) and warm (a spin call's median
    time per call)."""
    injected: list[InjectedSlowdown]
    """One entry per injected slowdown (+5%, +10%, +20%, warm): how often it was caught."""
    noise_floor: dict[str, Annotated[float, Meta(ge=0)]]
    """Per regime: its A/A noise_floor_p95, a fraction, which `ttfr ab` takes into delta (max(3% warm / 5% cold,
    2 x noise floor))."""
    elapsed_s: Seconds
    """The self-test's wall time, start to end."""
    rounds_for_power: dict[str, RoundsForPower] | UnsetType = UNSET
    """Per regime: the paired rounds `ttfr ab` needs here to call a +10% slowdown a regression with 80% power
    (modelled from the A/A intervals), and the `--precision` that stops there; warm also checks the model against the
    measured detection of the injected +10%."""
