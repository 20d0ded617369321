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
    total: Count
    rate: Fraction | None  # None: nothing counted (total 0)
    ci95: Annotated[list[Fraction], Meta(min_length=2, max_length=2)] | None


class IdenticalArms(Artifact):
    """A/A: comparisons of identical arms in one regime."""

    comparisons: Count
    false_alarms: Count
    false_alarm_rate: Fraction
    false_alarm: Annotated[Rate, Meta(description="regression verdicts on identical arms (what fails the gate)")]
    significant_either_way: Annotated[Rate, Meta(description="p below alpha in either direction, whatever the size")]
    noise_floor_p95: Annotated[float, Meta(ge=0)]  # the 95th percentile of |B/A - 1|
    median_ci_half_width: Annotated[float, Meta(ge=0)] | UnsetType = UNSET  # relative
    median_smallest_detectable: Annotated[float, Meta(ge=0)] | None | UnsetType = UNSET


class InjectedSlowdown(Artifact):
    """Arm B doing `nominal` more real work in the warm call: how often it was caught."""

    nominal: float
    measured_ratio: Annotated[float, Meta(gt=0)]  # the injected ratio as fresh processes measured it (the truth)
    comparisons: Count
    detected_as_regression: Fraction
    ci_coverage: Fraction
    detected: Rate
    coverage: Rate  # how often the reported interval held the measured ratio
    measured_ratio_range: Annotated[list[float], Meta(min_length=2, max_length=2)] | UnsetType = UNSET
    truth_processes: Count | UnsetType = UNSET
    significant_slowdown: Fraction | UnsetType = UNSET
    median_estimate: float | UnsetType = UNSET


class PowerCheck(Artifact):
    injected_effect: float
    modelled_power: Fraction
    measured: Rate


class RoundsForPower(Artifact):
    """The paired rounds `ttfr ab` needs here to call `effect` a regression with `power`."""

    effect: float
    power: float
    alpha: float
    delta: float  # the smallest effect that matters here
    measured_at_rounds: Annotated[int, Meta(ge=2)]
    power_at_measured_rounds: Fraction
    rounds: Annotated[int, Meta(ge=2)] | None  # None: not detectable (reason)
    precision: Annotated[float, Meta(ge=0)] | None  # the --precision that stops there
    reason: str | None
    check: PowerCheck | UnsetType = UNSET  # warm: the model against the measured detection of the injected +10%


class SelfTest(Artifact):
    schema: Literal["ttfr.selftest.v1"]
    created_at: str  # UTC, ISO 8601
    machine_id: str | None
    rounds: Annotated[int, Meta(ge=2)]  # paired rounds per comparison
    alpha: float  # the gate's
    aa: dict[str, IdenticalArms]  # per regime: cold, warm
    injected: list[InjectedSlowdown]
    noise_floor: dict[str, Annotated[float, Meta(ge=0)]]  # per regime: what `ttfr ab` takes into delta
    elapsed_s: Seconds
    rounds_for_power: Annotated[dict[str, RoundsForPower], Meta(description=(
        "Per regime: paired rounds `ttfr ab` needs here to call a +10% slowdown a regression with 80% power "
        "(modelled from the A/A intervals), and the `--precision` that stops there; warm also checks the model "
        "against the measured detection of the injected +10%"))] | UnsetType = UNSET  # fmt: skip
