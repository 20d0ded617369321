"""Loop workloads' figures: one run's timeline, a policy's loop summary, and the suite's
comparison of strategies (analyse/loops.py computes them).

`transfer_s`: the host<->device copies a loop's strategy timed inside its iterations (its
inputs to the device, its losses back), the rest of the time being compute; null where the
loop moves no data (NumPy) or does not say, absent from the figures of records that predate it."""

from __future__ import annotations

from typing import Annotated

from msgspec import Meta

from ttfr.model.base import UNSET, Artifact, Count, Fraction, Seconds, UnsetType
from ttfr.model.summary import Summary

OptionalCount = Count | None
# A runtime's compile-time counter may be a whole number (0 when nothing compiled)
CompileSeconds = Annotated[int, Meta(ge=0)] | Annotated[float, Meta(ge=0)] | None
Share = Annotated[float, Meta(ge=0)]


class LoopStep(Artifact):
    """One iteration of one run: its seconds, what the runtime's counters saw during it, and its
    host<->device copies' seconds (part of `s`; the rest is compute)."""

    label: str
    s: float
    compiles: OptionalCount
    persistent_hits: OptionalCount
    traces: OptionalCount
    compile_s: CompileSeconds
    ahead: bool  # an ahead-of-time phase before the loop (AOT), not an iteration
    transfer_s: Seconds | None | UnsetType = UNSET


class RunLoop(Artifact):
    """One run's loop figures (its record's `loop` block, with the ratios derived from it)."""

    iterations: list[LoopStep]
    loop_s: Annotated[float, Meta(ge=0)]
    compiles: OptionalCount
    expected_compiles: OptionalCount
    counts_match: bool | None
    persistent_hits: OptionalCount
    traces: OptionalCount
    loaded: Count
    compile_s: CompileSeconds
    compile_share: Annotated[float, Meta(ge=0)] | None
    iteration_hit_rate: Fraction | None
    persistent_hit_rate: Annotated[float, Meta(ge=0)] | None
    transfer_s: Seconds | None | UnsetType = UNSET  # the loop's host<->device copies, every entry's
    transfer_share: Share | None | UnsetType = UNSET  # of loop_s


class TimelineStep(Artifact):
    label: str
    ahead: bool
    s: Summary | None
    compiles: OptionalCount  # null where the runs disagree
    persistent_hits: OptionalCount
    transfer_s: Summary | None | UnsetType = UNSET


class LoopSummary(Artifact):
    """A policy's loop figures from its headline runs: summaries of the loop, its compile time and
    share, the time before it, peak RSS, and the cold-start share (1 - the run's second loop /
    its total: what a process that had run the loop once would not pay again); compile counts
    (null where runs disagree); median hit rates; the timeline with each iteration's summary; and
    summaries of the host<->device copies' seconds and share of the loop."""

    loop_s: Summary | None
    compile_s: Summary | None
    compile_share: Summary | None
    before_loop_s: Summary | None
    cold_start_share: Summary | None
    peak_rss_bytes: Summary | None
    compiles: OptionalCount
    expected_compiles: OptionalCount
    persistent_hits: OptionalCount
    loaded: OptionalCount
    iteration_hit_rate: Fraction | None
    persistent_hit_rate: Annotated[float, Meta(ge=0)] | None
    timeline: list[TimelineStep]
    transfer_s: Summary | None | UnsetType = UNSET
    transfer_share: Summary | None | UnsetType = UNSET


class CostPoint(Artifact):
    k: Annotated[int, Meta(ge=1)]
    s: float


class LoopRow(Artifact):
    """Per loop family, backend, dtype, cold policy and size: one strategy's total (process start
    to the loop's end), loop, compile and host<->device copy time, compile counts against its
    expectation, hit rates, cost relative to naive, cost against loop length k (from the
    timeline's iteration medians), and the smallest k from which it costs no more than naive at
    every longer length measured."""

    loop: str
    backend: str
    dtype: str
    policy: str
    strategy: str
    size: Annotated[int, Meta(ge=1)]
    case: str
    total_s: Summary | None
    loop_s: Summary | None
    compile_s: Summary | None
    compile_share: Annotated[float, Meta(ge=0)] | None
    cold_start_share: Annotated[float, Meta(le=1)] | None
    compiles: OptionalCount
    expected_compiles: OptionalCount
    loaded: OptionalCount
    iteration_hit_rate: Fraction | None
    persistent_hit_rate: Annotated[float, Meta(ge=0)] | None
    peak_rss_bytes: Annotated[float, Meta(ge=0)] | None
    vs_naive: Annotated[float, Meta(gt=0)] | None
    overtakes_naive_at_k: Annotated[int, Meta(ge=1)] | None
    cost_curve: list[CostPoint] | None
    transfer_s: Summary | None | UnsetType = UNSET
    transfer_share: Share | None | UnsetType = UNSET
