"""A case's figures per cache policy: a cold policy's runs and the summaries of its
components and stages, a warm policy's processes and their summary, each with its flags, and
the one rule for which runs a policy's figures come from (`figure_runs`).
"""

from __future__ import annotations

from typing import Annotated, Literal

from msgspec import Meta

from ttfr.model.base import UNSET, Artifact, Count, Fraction, Seconds, UnsetType, field
from ttfr.model.explanation import Explanation
from ttfr.model.flags import AnyFlag, ContendedKept, CouldNotMeasureCleanly
from ttfr.model.loops import LoopSummary
from ttfr.model.policies import (
    COLD_CACHE,
    PRECOMPILED_SETTINGS,
    WARM_CACHE,
    WARM_PROCESS,
    policy_order,
    precompiled_parts,
    precompiled_policy,
)
from ttfr.model.comparison import Effect
from ttfr.model.run_figures import PolicyName, RunFigures, per_stage
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
    compiler_runs: Summary | None | UnsetType = UNSET
    """Summary (count) of the compiler runs each headline run's process tree showed before its first result (not a
    component: it overlaps the first call); null: no headline run; absent where no run's tree was watched."""
    compiler_seen_s: Summary | None | UnsetType = UNSET
    """Summary (seconds) of the time those compiler runs were seen running per headline run; null and absent as
    `compiler_runs`."""


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


class ArtifactInfo(Artifact):
    """A precompiled policy's artifact, as the priming process that made it reported it."""

    mechanism: str
    """How it was made and is loaded (`jax_serialized`, `jax_export`, ...; `ttfr list` says what each claims)."""
    claims: str
    """What the mechanism claims the load skips, in words."""
    state: Literal["made", "unsupported", "failed"]
    """`made`; `unsupported`: the mechanism cannot take this workload (the runtime said so: data, not a failure);
    `failed`: its priming process failed otherwise. Either way `reason` says why and the policy has no runs."""
    bytes: Count | None
    """The artifact file's size in bytes; null: not made."""
    make_s: Seconds | None
    """Seconds the runtime took to turn the compiled code into the artifact's bytes; null: not made."""
    bound_to: dict[str, str]
    """What the artifact is bound to, as the priming process found it: the runtime packages' versions, the
    interpreter, the platform and the device. A process whose differ cannot be assumed to load it."""
    reason: str | UnsetType = UNSET
    """Why it was not made, in the runtime's words; absent where it was made."""


class StillCompiled(Artifact):
    """What a precompiled policy's headline runs still compiled in their first call (each run's claim check), beside
    the figure: what the artifact did not save."""

    runs_compiling: Count
    """Number of headline runs whose first call compiled anything (allowed compiles included)."""
    runs_beyond_claim: Count
    """Number of headline runs that compiled beyond what the mechanism allows (their claim did not hold)."""
    compiles: Summary | None
    """Summary (count) of the compiles per run; null: no headline run."""
    compile_s: Summary | None
    """Summary (seconds) of those compiles' time per run, by the runtime's count; null: none reported."""
    share_of_ttfr: Fraction | None
    """The compile time's median over the TTFR's median, a fraction (0..1): how much of the figure is still
    compiling; null: either is missing."""
    what: list[str]
    """Every program or compiler the headline runs compiled, each once, sorted (a compiler the process tree showed:
    `<name> (process)`)."""
    processes: Summary | None | UnsetType = UNSET
    """Summary (count) of the compiler runs each watched headline run's process tree showed during its load and
    first call (a witness beside the runtime's counters); absent where no headline run's tree was watched (older
    files)."""
    processes_s: Summary | None | UnsetType = UNSET
    """Summary (seconds) of the time those compiler runs were seen running, per watched run (a lower bound); absent
    where no headline run's tree was watched."""


class PrecompiledPolicy(ColdPolicy, kw_only=True):
    """A precompiled policy's figures (`precompiled/<mechanism>/<setting>`): a cold policy whose runs load an artifact
    in a timed component of their own (`artifact_load_s`), with the artifact and what still compiled."""

    setting: Literal[PRECOMPILED_SETTINGS]  # type: ignore[valid-type]
    """The cache directory the runs started from: `cold-cache` emptied (a new machine), `warm-cache` the case's
    template (a second job on the same machine)."""
    artifact: ArtifactInfo
    """The artifact its runs loaded."""
    still_compiled: StillCompiled | None
    """What the headline runs still compiled; null: no headline run (unsupported, withheld or failed)."""
    versus: dict[PolicyName, Effect]
    """Its TTFR against each standard cold policy the case measured (`cold-process/cold-cache`: a new machine
    compiling; `cold-process/warm-cache`: a second job on a warm cache): the ratio precompiled / standard of the
    headline runs (two-sample Hodges-Lehmann on log times, its 95% interval, the verdict: significance at 1% per
    comparison, equivalence by the interval); absent where too few runs allow a 95% interval (3 against 3)."""

    @property
    def unsupported(self) -> bool:
        return self.artifact.state == "unsupported"


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


PrecompiledKey = Annotated[str, Meta(pattern=f"^[a-z][a-z0-9_]*/({'|'.join(PRECOMPILED_SETTINGS)})$")]


class Policies(Artifact):
    cold_cache: ColdPolicy | UnsetType = field(name=COLD_CACHE, default=UNSET)
    """`cold-process/cold-cache`: each run a fresh process on an emptied cache directory; absent: not run."""
    warm_cache: ColdPolicy | UnsetType = field(name=WARM_CACHE, default=UNSET)
    """`cold-process/warm-cache`: each run a fresh process on the cache restored from the case's template; absent: not
    run."""
    warm_process: WarmPolicy | UnsetType = field(name=WARM_PROCESS, default=UNSET)
    """`warm-process`: steady-state calls sampled after a warm-up, in fresh processes started from the template; absent:
    not run."""

    precompiled: dict[PrecompiledKey, PrecompiledPolicy] | UnsetType = UNSET
    """The precompiled policies, keyed `<mechanism>/<setting>` (`jax_export/cold-cache`): each run a fresh process
    that loads the artifact a priming process made, on an emptied cache directory or on the case's template; absent:
    none run."""

    def get(self, name: str) -> ColdPolicy | WarmPolicy | None:
        """The policy named as artifacts name it (`cold-process/cold-cache`, `precompiled/jax_export/warm-cache`,
        ...); None: not run."""
        parts = precompiled_parts(name)
        if parts:
            return None if self.precompiled is UNSET else self.precompiled.get("/".join(parts))
        field_name = _POLICY_FIELDS.get(name)
        value = getattr(self, field_name) if field_name else UNSET
        return None if value is UNSET else value

    def items(self) -> list[tuple[str, ColdPolicy | WarmPolicy]]:
        """The policies the case ran, in the order of a process's life (cold, warm cache, the precompiled ones,
        warm process)."""
        names = [*_POLICY_FIELDS, *(precompiled_policy(*key.split("/")) for key in self.precompiled or {})]
        return [(name, policy) for name in sorted(names, key=policy_order) if (policy := self.get(name)) is not None]

    def cold(self) -> list[tuple[str, ColdPolicy]]:
        return [(name, policy) for name, policy in self.items() if name != WARM_PROCESS]

    def all_runs(self) -> list[RunFigures]:
        """Every measured run and warm process of every policy."""
        return [run for _name, policy in self.items() for run in policy.measured]


_POLICY_FIELDS = {COLD_CACHE: "cold_cache", WARM_CACHE: "warm_cache", WARM_PROCESS: "warm_process"}


def policies_of(by_name: dict) -> Policies:
    """The Policies of a {policy name: its figures} mapping (any order)."""
    standard = {field_name: by_name[name] for name, field_name in _POLICY_FIELDS.items() if name in by_name}
    shipped = {"/".join(parts): policy for name, policy in by_name.items() if (parts := precompiled_parts(name))}
    return Policies(**standard, **({"precompiled": shipped} if shipped else {}))


def named(struct, name: str):
    """A field of `struct` by its name (a metric or stage name), None when unset or absent."""
    value = getattr(struct, name, None)
    return None if value is UNSET else value
