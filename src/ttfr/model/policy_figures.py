"""A case's figures per cache policy: a cold policy's runs and the summaries of its
components and stages, a warm policy's processes and their summary, each with its flags, and
the one rule for which runs a policy's figures come from (`figure_runs`).
"""

from __future__ import annotations

from typing import Literal

from ttfr.model.base import UNSET, Artifact, Count, UnsetType, field
from ttfr.model.explanation import Explanation
from ttfr.model.flags import AnyFlag, ContendedKept, CouldNotMeasureCleanly
from ttfr.model.loops import LoopSummary
from ttfr.model.policies import COLD_CACHE, WARM_CACHE, WARM_PROCESS
from ttfr.model.run_figures import RunFigures, per_stage
from ttfr.model.summary import Summary


class CacheVerification(Artifact):
    verdict: Literal["verified", "flagged", "unverified", "not_applicable"]
    """The policy's verdict over its ok runs: `flagged` if any run was, `verified` or `not_applicable` if all were, else
    `unverified` (also with no ok run)."""
    flags: list[str]
    """The cache flags its ok runs raised, each once, sorted."""
    hits_total: int | None
    """Persistent-cache hits summed over its ok runs (count); null: no run had counters."""
    misses_total: int | None
    """Persistent-cache misses summed over its ok runs (count); null: no run had counters."""
    runs_verified: Count
    """Number of ok runs whose cache check was `verified`."""
    runs: Count
    """Number of ok runs judged."""


class ColdSummary(Artifact):
    """A cold policy's figures: each component's summary over its headline runs (null: none)."""

    interpreter_s: Summary | None
    """Summary (seconds) of the headline runs' interpreter start-up; null: none."""
    import_s: Summary | None
    """Summary (seconds) of the headline runs' runtime stack import; null: none."""
    setup_s: Summary | None
    """Summary (seconds) of the headline runs' setup (inputs on the device); null: none."""
    first_call_s: Summary | None
    """Summary (seconds) of the headline runs' first call; null: none."""
    second_call_s: Summary | None
    """Summary (seconds) of the headline runs' second call; null: none."""
    ttfr_s: Summary | None
    """Summary (seconds) of the headline runs' time to first result; its median is the policy's headline figure. Null:
    none."""
    process_s: Summary | None
    """Summary (seconds) of the headline runs' whole process life, spawn to exit; null: none."""
    user_import_s: Summary | None | UnsetType = UNSET
    """Summary (seconds) of the headline runs' import of a user's case; null: none; absent where no run recorded it."""
    device_init_s: Summary | None | UnsetType = UNSET
    """Summary (seconds) of the headline runs' GPU device initialisation; null: none; absent where no run recorded it."""
    artifact_load_s: Summary | None | UnsetType = UNSET
    """Summary (seconds) of the headline runs' artifact load (a precompiled policy); null: none; absent where no run
    recorded it."""


StagesSummary = per_stage(
    "StagesSummary",
    Summary,
    "Each recorded stage's summary over a policy's headline runs.",
    "The summary (seconds) over the policy's headline runs of the first call's time spent {stage}.",
)


def keeps_contended(flags) -> bool:
    """Whether a policy's figures keep its contended runs: its ContendedKept flag says so."""
    return any(isinstance(f, ContendedKept) for f in flags)


def figure_runs(runs: list[RunFigures], keep_contended: bool = False) -> list[RunFigures]:
    """The ok runs a policy's figures come from. Contended runs stay in the artifact but are set
    aside when at least as many clean ones remain; with fewer, none: a figure measured mostly on
    a busy machine would be a precise-looking wrong number. `keep_contended` (the user's
    --keep-contended, flagged on the policy): every ok run."""
    ok = [r for r in runs if r.outcome == "ok"]
    if keep_contended:
        return ok
    clean = [r for r in ok if not (r.contention and r.contention.contended)]
    return clean if 2 * len(clean) >= len(ok) else []


class _Policy:
    """What both kinds of policy answer (mixed into their Structs)."""

    __slots__ = ()

    @property
    def keeps_contended(self) -> bool:
        return keeps_contended(self.flags)

    def figure_runs(self) -> list[RunFigures]:
        return figure_runs(self.measured, self.keeps_contended)

    def withheld(self) -> CouldNotMeasureCleanly | None:
        """Why this policy gives no figure although its runs are ok (None: it gives them, or it failed)."""
        return next((f for f in self.flags if isinstance(f, CouldNotMeasureCleanly)), None)


class ColdPolicy(Artifact, _Policy):
    runs: list[RunFigures]
    """Every measured run of the policy in (round, index) order, failed and contended ones included: the raw data."""
    summary: ColdSummary
    """Each cold-start span's summary over the headline runs (the clean ok runs; every ok run with --keep-contended)."""
    stages_summary: StagesSummary
    """Each recorded first-call stage's summary over the headline runs; empty where none was recorded."""
    cache_verification: CacheVerification
    """What the policy's cache really was, over its ok runs."""
    flags: list[AnyFlag]
    """The policy's flags (first-run outlier, cache, contention, compile counts), without `policy`; the case's `flags`
    repeat them with it."""
    loop_summary: LoopSummary | None | UnsetType = UNSET
    """A loop workload's figures over the headline runs; null: no headline run (withheld, or a failed case); absent: not
    a loop workload."""
    explanation: Explanation | UnsetType = UNSET
    """`--explain`: where the policy's cold start spent its imports, phase by phase, from an unmeasured diagnostic
    process; absent without --explain."""

    @property
    def measured(self) -> list[RunFigures]:
        return self.runs

    def figure(self, metric: str) -> Summary | None:
        """One component's summary (None: not measured, or withheld)."""
        return named(self.summary, metric)


class WarmSummary(Artifact):
    call_s: Summary | None
    """Summary (seconds per call) of the headline warm processes' medians (the clean ok ones; every ok one with
    --keep-contended): its median is the warm figure. Null: none."""
    samples_per_process: int | None
    """Number of samples a warm process took (the first ok one's); null: no ok process."""


class WarmPolicy(Artifact, _Policy):
    procs: list[RunFigures]
    """Every warm process of the policy in (round, index) order, failed and contended ones included, each with its
    samples."""
    summary: WarmSummary
    """The warm figure over the headline processes."""
    flags: list[AnyFlag]
    """The policy's flags (sync, warm-up, contention, disagreement, ticks, compile counts), without `policy`; the case's
    `flags` repeat them with it."""

    @property
    def measured(self) -> list[RunFigures]:
        return self.procs

    def figure(self, metric: str) -> Summary | None:
        return self.summary.call_s if metric == "call_s" else None


class Policies(Artifact):
    cold_cache: ColdPolicy | UnsetType = field(name=COLD_CACHE, default=UNSET)
    """`cold-process/cold-cache`: each run a fresh process on an emptied cache directory; absent: not run."""
    warm_cache: ColdPolicy | UnsetType = field(name=WARM_CACHE, default=UNSET)
    """`cold-process/warm-cache`: each run a fresh process on the cache restored from the case's template; absent: not
    run."""
    warm_process: WarmPolicy | UnsetType = field(name=WARM_PROCESS, default=UNSET)
    """`warm-process`: steady-state calls sampled after a warm-up, in fresh processes started from the template; absent:
    not run."""

    def get(self, name: str) -> ColdPolicy | WarmPolicy | None:
        """The policy named as artifacts name it (`cold-process/cold-cache`, ...); None: not run."""
        value = getattr(self, _POLICY_FIELDS[name])
        return None if value is UNSET else value

    def items(self) -> list[tuple[str, ColdPolicy | WarmPolicy]]:
        """The policies the case ran, in the order of a process's life (cold, warm cache, warm process)."""
        return [(name, policy) for name in _POLICY_FIELDS if (policy := self.get(name)) is not None]

    def cold(self) -> list[tuple[str, ColdPolicy]]:
        return [(name, policy) for name, policy in self.items() if name != WARM_PROCESS]

    def all_runs(self) -> list[RunFigures]:
        """Every measured run and warm process of every policy."""
        return [run for _name, policy in self.items() for run in policy.measured]


_POLICY_FIELDS = {COLD_CACHE: "cold_cache", WARM_CACHE: "warm_cache", WARM_PROCESS: "warm_process"}


def named(struct, name: str):
    """A field of `struct` by its name (a metric or stage name), None when unset or absent."""
    value = getattr(struct, name, None)
    return None if value is UNSET else value
