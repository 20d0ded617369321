"""History (`ttfr.history.v1`, history.json): figures of many results in series, one series per
case, cache policy, figure and machine, each ordered by date or by a package's version, with the
steps found in it and what changed at each. `ttfr history` writes it; history.md, history.html,
history.csv and the terminal render it."""

from __future__ import annotations

from typing import Annotated, Literal

from msgspec import Meta

from ttfr.model.base import UNSET, Artifact, Count, Fraction, Seconds, UnsetType
from ttfr.model.comparison import ExplanationChange, RatioCI

HISTORY_SCHEMA = "ttfr.history.v1"

SourceKind = Literal["result", "snapshot", "nextstat", "release"]


class Machine(Artifact):
    """What a series' results were measured on: the fields its fingerprint is made of."""

    cpu: str | None
    """The CPU model (null: not recorded)."""
    logical_cores: int | None
    """The machine's logical cores (null: not recorded)."""
    usable_cores: int | None
    """The cores the run could use (its affinity; null: not recorded)."""
    gpu: list[str]
    """The GPU devices' names, in order; empty without a GPU."""
    os: str
    """The operating system and architecture (`Linux x86_64 glibc 2.36`): a kernel update is a difference at a
    point, not a machine of its own. A NextStat snapshot records only its platform string."""


class Source(Artifact):
    """One result read into the history: a result directory, a snapshot, or a NextStat snapshot."""

    id: str
    """The result's own id: a snapshot's id, else its suite's `snapshot_id`."""
    kind: SourceKind
    """result (a result directory), snapshot (published by `ttfr publish`, verified by its index), nextstat (a
    NextStat snapshot of ML results only: the figures its contract holds) or release (a release of a --releases sweep
    whose environment could not be built or import ttfr's worker: gaps with its reason)."""
    path: str
    """Where it was read, as given on the command line (or resolved from the registry)."""
    created_at: str
    """When it was measured: its run's plan time (a NextStat snapshot: its index's generated_at), UTC ISO 8601."""
    machine: str
    """Its machine's fingerprint: a key of the history's `machines`."""
    label: str
    """What places it in its series: its date, or the ordering package's version (`jax 0.10.2`)."""
    ttfr_version: str | None
    """The ttfr version that measured it (null: a NextStat snapshot)."""
    manifest: dict[str, str]
    """What the step report compares: the environment as flat keys (`runtime.jax`, `python`, `ttfr`, `env.XLA_FLAGS`,
    `gpu.driver`, `cache.<setting>`, `command_line`, ...) and their values."""
    changed: list[Change]
    """What differs from the previous result on the same machine (its manifest values); empty for the first."""


class LeftOut(Artifact):
    """A path that was not read into the history, and why (it did not verify, or holds no result)."""

    path: str
    """The path as given."""
    reason: str
    """Why, in the reader's words."""


class Point(Artifact):
    """One result's figure in a series, or the gap it leaves."""

    source: str
    """The source's id."""
    runs_s: list[Seconds]
    """The headline runs' values, seconds (cold: each run's figure; warm call: each process's median; a NextStat
    snapshot's warm calls: every sample); empty at a gap."""
    median_s: Seconds | None
    """The median of `runs_s`; null at a gap."""
    gap: str | None
    """Why this result gives no figure (withheld on a contended machine, failed, not measured there); null when it
    gives one."""
    segment: Count | None
    """The index of the segment it belongs to (0: before the first step); null at a gap."""


class Step(Artifact):
    """A change in a series' level, at the first result after it."""

    at: Count
    """The index into the series' points of the first result after the step."""
    source: str
    """The id of the first result after the step."""
    created_at: str
    """When that result was measured."""
    label: str
    """That result's label (its date or version)."""
    before_s: Seconds
    """The level of the segment before the step: the weighted mean of its points' log medians, as seconds."""
    after_s: Seconds
    """The level of the segment after the step, as `before_s`."""
    ratio: Annotated[float, Meta(gt=0)]
    """after / before (1.40: 40% slower after the step)."""
    ci: RatioCI
    """The ratio's bootstrap interval at `ci_level`: each point's runs resampled, each point's session effect drawn
    from the series' between-session scatter."""
    ci_level: Fraction
    """The interval's coverage, a fraction (0.95)."""
    changed: list[Change]
    """What differs between the manifests of the results either side of the step (empty: nothing recorded
    changed)."""
    explained: list[ExplanationChange] | UnsetType = UNSET
    """Both results either side ran --explain for this case and policy: what moved between their diagnostic
    processes (modules, distributions, programs, frames, first-call parts; A is the result before the step, B the
    one after), largest first, as `ttfr compare` lists it; empty: nothing moved beyond its threshold; absent: a side
    has no explanation."""


class Change(Artifact):
    """One manifest value that differs across a step."""

    key: str
    """The flat key (`runtime.jax`, `env.XLA_FLAGS`, `ttfr`, ...)."""
    before: str | None
    """Its value before the step (null: absent)."""
    after: str | None
    """Its value after the step (null: absent)."""


class Noise(Artifact):
    """The series' noise model: what a step must exceed."""

    within_rel: Annotated[float, Meta(ge=0)] | None
    """The median standard error of a point's log median from its own runs (a relative spread); null without runs."""
    between_rel: Annotated[float, Meta(ge=0)] | None
    """The point-to-point (session-to-session) scatter of the series beyond its runs' spread, a relative standard
    deviation estimated from its successive differences (robustly: a step moves one difference), at least 0.5%
    (a floor: sessions of a sleep-bound program on one machine scattered 0.58% pooled, and a robust estimate near 0
    made a 1% slowdown of one session a step); null with fewer than 3 points."""
    penalty: Annotated[float, Meta(ge=0)] | None
    """The cost a step must save, dimensionless (a chi-square in units of the noise): the method's rule at this series'
    length; null where no detection ran."""


class Newest(Artifact):
    """The newest segment against the one before it: what the gate (--fail-above) judges."""

    step: Count | None
    """The index into `steps` of the step that starts the newest segment; null: the series has no step."""
    ratio: Annotated[float, Meta(gt=0)] | None
    """That step's ratio (newest over the segment before); null: no step."""
    fails: bool
    """True when the newest segment is a step up beyond --fail-above (its interval's low end above 1 + the limit)."""


class Series(Artifact):
    """One case's figure under one cache policy on one machine, in order."""

    case: str
    """The case id."""
    policy: str
    """The cache policy (cold policies and precompiled ones by name; warm-process for the warm call)."""
    figure: str
    """The figure: `ttfr_s`, a component (`import_s`, `setup_s`, `first_call_s`, ...) or `call_s` (warm); a NextStat
    snapshot's own figures are prefixed `nextstat.` (its `ttfr_s` starts at the worker, not at the spawn)."""
    machine: str
    """The machine fingerprint (a key of the history's `machines`): series never mix machines."""
    points: list[Point]
    """One point per source in order, gaps included."""
    noise: Noise
    """The noise model the detection used."""
    steps: list[Step]
    """The steps found, in order."""
    newest: Newest
    """The newest segment against the one before it."""
    status: Literal["detected", "too_short"]
    """detected (the detection ran), too_short (fewer than `min_points` points with a figure: no step is claimed)."""


class Method(Artifact):
    """How steps are found, stated as the code applies it."""

    library: str
    """The change-point library and its version (`ruptures 1.1.10`)."""
    search: str
    """The search (`Pelt`), its cost and its minimum segment."""
    penalty_rule: str
    """The penalty rule, in words."""
    min_points: Count
    """The fewest points (a count of results with a figure) a series needs before a step is claimed."""
    ci_level: Fraction
    """The steps' interval coverage."""
    bootstrap: Count
    """The bootstrap's resamples per step."""
    seed: int
    """The bootstrap's seed (fixed: the same inputs give the same history)."""


class Gate(Artifact):
    """--fail-above: exit 3 when a series' newest segment is a step up beyond the limit."""

    fail_above: Annotated[float, Meta(ge=0)] | None
    """The limit as a fraction (0.10: 10%); null: no gate."""
    failing: list[str]
    """The series that fail (`case · policy · figure · machine`)."""
    exit_code: Literal[0, 3]
    """0, or 3 when a series fails."""


class History(Artifact):
    schema: Literal["ttfr.history.v1"]
    """This document's schema id: ttfr.history.v1."""
    created_at: str
    """When the history was made, UTC ISO 8601."""
    ttfr_version: str
    """The ttfr version that made it."""
    order_by: str
    """`date`, or the package whose version orders the series (--by)."""
    figures: list[str]
    """The figures the series were made for."""
    machines: dict[str, Machine]
    """Each machine fingerprint and what it is made of."""
    sources: list[Source]
    """The results read, in order."""
    left_out: list[LeftOut]
    """The paths not read, with why."""
    series: list[Series]
    """Every series, by case, policy, figure and machine."""
    method: Method
    """How steps were found."""
    gate: Gate
    """The gate's verdict."""
