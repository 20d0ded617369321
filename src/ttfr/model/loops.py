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
    """The entry's label as the workload names it (an iteration's configuration, batch or step; or the ahead-of-time
    phase)."""
    s: float
    """The entry's seconds, its result finished (host data, or waited on with the runtime's barrier), its copies
    included."""
    compiles: OptionalCount
    """The number of executables the runtime's counters saw built during the entry (JAX: compiled or loaded from the
    persistent cache, of the loop's own functions; torch: graphs dynamo compiled); null without counters."""
    persistent_hits: OptionalCount
    """The number of those the persistent compilation cache supplied (JAX: its hits; torch: FX-graph or AOT-autograd
    cache hits); null without counters."""
    traces: OptionalCount
    """The number of traces during the entry (JAX: jaxpr traces of the loop's functions; torch: frames dynamo traced);
    null without counters."""
    compile_s: CompileSeconds
    """The runtime's compile seconds during the entry (JAX: tracing, lowering and backend compiling of the loop's
    functions; torch: dynamo's compile time); null without counters."""
    ahead: bool
    """True for an ahead-of-time phase before the loop (the AOT strategy compiling or loading every shape), which is
    not an iteration."""
    transfer_s: Seconds | None | UnsetType = UNSET
    """Seconds of the entry's host<->device copies, each waited for (part of s; the rest is compute); null where the
    loop moves no data or does not say."""


class RunLoop(Artifact):
    """One run's loop figures (its record's `loop` block, with the ratios derived from it)."""

    iterations: list[LoopStep]
    """The timeline: every entry of the run's loop in order, an ahead-of-time phase first where there is one."""
    loop_s: Annotated[float, Meta(ge=0)]
    """Seconds of the whole loop: the sum of its entries' seconds, an ahead-of-time phase included."""
    compiles: OptionalCount
    """The number of executables built over the loop, by the runtime's counters (as for an entry); null without
    counters."""
    expected_compiles: OptionalCount
    """The number of compiles the strategy expects (naive: one per distinct shape; bucketed: one per bucket; vmapped:
    one; AOT from a warm cache: none); null where there is no compiler."""
    counts_match: bool | None
    """Whether compiles equals expected_compiles (false flags the case compile_count_mismatch); null where either is
    unknown."""
    persistent_hits: OptionalCount
    """The number of the loop's executables the persistent compilation cache supplied; null without counters."""
    traces: OptionalCount
    """The number of traces over the loop; null without counters."""
    loaded: Count
    """The number of executables the AOT strategy loaded from its cache directory instead of compiling (0 for the other
    strategies)."""
    compile_s: CompileSeconds
    """The runtime's compile seconds over the loop; null without counters."""
    compile_share: Annotated[float, Meta(ge=0)] | None
    """compile_s / loop_s: the loop's share spent compiling; null where either is unknown or loop_s is 0."""
    iteration_hit_rate: Fraction | None
    """The fraction of iterations (the ahead-of-time phase apart) that compiled nothing, every executable already built
    (in memory or ahead of time); null unless every iteration has counts."""
    persistent_hit_rate: Annotated[float, Meta(ge=0)] | None
    """persistent_hits / compiles: the persistent cache's share of the executables built (a ratio of the runtime's two
    counters); null where either is unknown or nothing compiled."""
    transfer_s: Seconds | None | UnsetType = UNSET
    """Seconds of the loop's host<->device copies, summed over its entries; null where no entry says; absent from
    records that predate it."""
    transfer_share: Share | None | UnsetType = UNSET
    """transfer_s / loop_s: the loop's share spent copying; null where either is unknown."""


class TimelineStep(Artifact):
    label: str
    """The entry's label (the first headline run's)."""
    ahead: bool
    """True for an ahead-of-time phase before the loop, which is not an iteration."""
    s: Summary | None
    """The entry's seconds over the headline runs, summarised; null where none has it."""
    compiles: OptionalCount
    """The number of executables built during the entry when every run agrees; null where they disagree or have no
    counters."""
    persistent_hits: OptionalCount
    """The number of those the persistent compilation cache supplied when every run agrees; null where they disagree or
    have no counters."""
    transfer_s: Summary | None | UnsetType = UNSET
    """The entry's host<->device copy seconds over the runs, summarised; null where none says; absent when every record
    predates it."""


class LoopSummary(Artifact):
    """A policy's loop figures from its headline runs: summaries of the loop, its compile time and
    share, the time before it, peak RSS, and the cold-start share (1 - the run's second loop /
    its total: what a process that had run the loop once would not pay again); compile counts
    (null where runs disagree); median hit rates; the timeline with each iteration's summary; and
    summaries of the host<->device copies' seconds and share of the loop."""

    loop_s: Summary | None
    """Each run's loop seconds, summarised."""
    compile_s: Summary | None
    """Each run's compile seconds over the loop, summarised; null without counters."""
    compile_share: Summary | None
    """Each run's compile share (compile_s / loop_s, a fraction), summarised; null without counters."""
    before_loop_s: Summary | None
    """Each run's seconds before the loop (its ttfr_s less its loop_s: start-up, imports, setup), summarised."""
    cold_start_share: Summary | None
    """Each run's (ttfr_s - second_call_s) / ttfr_s, a fraction, summarised: what a process that had run the loop once
    would not pay again."""
    peak_rss_bytes: Summary | None
    """Each run's peak resident memory in bytes (the worker's own), summarised."""
    compiles: OptionalCount
    """The number of executables built over the loop when every run agrees; null where they disagree or have no
    counters."""
    expected_compiles: OptionalCount
    """The number of compiles the strategy expects (the first run's figure); null where there is no compiler."""
    persistent_hits: OptionalCount
    """The number of those the persistent compilation cache supplied when every run agrees; null otherwise."""
    loaded: OptionalCount
    """The number of executables loaded from the AOT cache directory when every run agrees; null otherwise."""
    iteration_hit_rate: Fraction | None
    """The median over the runs of the fraction of iterations that compiled nothing; null where no run has it."""
    persistent_hit_rate: Annotated[float, Meta(ge=0)] | None
    """The median over the runs of persistent_hits / compiles (a ratio); null where no run has it."""
    timeline: list[TimelineStep]
    """Each entry of the loop (by the first run's entries), summarised over the runs."""
    transfer_s: Summary | None | UnsetType = UNSET
    """Each run's host<->device copy seconds, summarised; null where no run says; absent when every record predates it."""
    transfer_share: Summary | None | UnsetType = UNSET
    """Each run's copy share of its loop (transfer_s / loop_s, a fraction), summarised; absent as transfer_s."""


class CostPoint(Artifact):
    k: Annotated[int, Meta(ge=1)]
    """The loop length: the number of iterations done."""
    s: float
    """Seconds from process start to the end of iteration k: the median time before the loop, any ahead-of-time phase,
    then the iterations' median seconds."""


class LoopRow(Artifact):
    """Per loop family, backend, dtype, cold policy and size: one strategy's total (process start
    to the loop's end), loop, compile and host<->device copy time, compile counts against its
    expectation, hit rates, cost relative to naive, cost against loop length k (from the
    timeline's iteration medians), and the smallest k from which it costs no more than naive at
    every longer length measured."""

    loop: str
    """The loop family (e.g. sweep_mlp, ragged_batches, hf_train20, hf_mass_scan)."""
    backend: str
    """The case's backend (e.g. jax_jit_cpu)."""
    dtype: str
    """The case's dtype (e.g. float32)."""
    policy: str
    """The cold policy: cold-process/cold-cache or cold-process/warm-cache."""
    strategy: str
    """The loop strategy: naive, bucketed, vmapped, dynamic or aot."""
    size: Annotated[int, Meta(ge=1)]
    """The case's size (`--sizes`): sweep_mlp's number of configurations K, ragged_batches' number of batches N, a
    HistFactory loop's workspace's number of parameters."""
    case: str
    """The case's id."""
    total_s: Summary | None
    """The runs' ttfr_s, summarised: seconds from process start to the loop's last result."""
    loop_s: Summary | None
    """The runs' loop seconds, summarised."""
    compile_s: Summary | None
    """The runs' compile seconds over the loop, summarised; null without counters."""
    compile_share: Annotated[float, Meta(ge=0)] | None
    """The median of the runs' compile share (compile_s / loop_s); null without counters."""
    cold_start_share: Annotated[float, Meta(le=1)] | None
    """The median of the runs' (ttfr_s - second_call_s) / ttfr_s: what a process that had run the loop once would not
    pay again."""
    compiles: OptionalCount
    """The number of executables built over the loop when every run agrees; null otherwise."""
    expected_compiles: OptionalCount
    """The number of compiles the strategy expects; null where there is no compiler."""
    loaded: OptionalCount
    """The number of executables loaded from the AOT cache directory when every run agrees; null otherwise."""
    iteration_hit_rate: Fraction | None
    """The median over the runs of the fraction of iterations that compiled nothing; null where no run has it."""
    persistent_hit_rate: Annotated[float, Meta(ge=0)] | None
    """The median over the runs of persistent_hits / compiles (a ratio); null where no run has it."""
    peak_rss_bytes: Annotated[float, Meta(ge=0)] | None
    """The median of the runs' peak resident memory, in bytes."""
    vs_naive: Annotated[float, Meta(gt=0)] | None
    """Its median total over naive's at the same size, backend, dtype and policy (a ratio: below 1 is cheaper than
    naive); null without naive."""
    overtakes_naive_at_k: Annotated[int, Meta(ge=1)] | None
    """The smallest loop length k (a number of iterations) from which it costs no more than naive at every longer
    length measured, over all sizes' cost curves; null for naive, or where it never does."""
    cost_curve: list[CostPoint] | None
    """Total cost against loop length at this size, one point per iteration (a batched strategy: one point, at its
    size); null where a median is missing."""
    transfer_s: Summary | None | UnsetType = UNSET
    """The runs' host<->device copy seconds, summarised; absent when every record predates them."""
    transfer_share: Share | None | UnsetType = UNSET
    """The median of the runs' copy share of their loop (transfer_s / loop_s); absent as transfer_s."""
