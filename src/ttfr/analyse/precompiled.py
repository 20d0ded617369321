"""A precompiled policy's figures (issue 39): its cold figures with the artifact its runs loaded (from the priming
process that made it) and what they still compiled (each run's claim check), beside the figure."""

from __future__ import annotations

import msgspec

import math

from ttfr.analyse import comparison_stats, stats
from ttfr.measure.precompiled import MECHANISMS
from ttfr.model.base import UNSET, present
from ttfr.model.journal import JournalEntry
from ttfr.model.comparison import Effect
from ttfr.model.policies import COLD_POLICIES, precompiled_parts
from ttfr.model.policy_figures import ArtifactInfo, ColdPolicy, PrecompiledPolicy, StillCompiled


def artifact_info(mechanism: str, maker: JournalEntry | None) -> ArtifactInfo:
    """The artifact as its (last) priming process left it: made, with its size, making time and what it is bound
    to; or not, with why in the runtime's words."""
    claims = MECHANISMS[mechanism].claims
    made = maker.record.artifact if maker and maker.outcome == "ok" and maker.record else UNSET
    if not present(made):
        # the runtime's own words where the mechanism cannot take the workload (the worker's `unavailable`)
        unsupported = maker is not None and maker.outcome == "unavailable"
        why = (
            (maker.reason or maker.outcome)
            if unsupported
            else ((f"{maker.outcome}: {maker.reason}" if maker.reason else maker.outcome) if maker else "no priming process ran")
        )
        return ArtifactInfo(mechanism=mechanism, claims=claims, state="unsupported" if unsupported else "failed",
                            bytes=None, make_s=None, bound_to={}, reason=why)  # fmt: skip
    return ArtifactInfo(mechanism=mechanism, claims=claims, state="made", bytes=made.bytes, make_s=made.make_s,
                        bound_to=bound_to(maker))  # fmt: skip


def bound_to(maker: JournalEntry) -> dict[str, str]:
    """The runtime's package versions and the device the priming process found: what its artifact is bound to."""
    record = maker.record
    found = {name: str(v) for name, v in (record.versions or {}).items() if v is not None}
    if present(record.device):
        found["device"] = f"{record.device.platform}: {record.device.kind}"
    return found


def still_compiled(policy: ColdPolicy) -> StillCompiled | None:
    """What the headline runs' first calls still compiled, and its share of the TTFR figure; None: no headline
    run."""
    chosen = [r for r in policy.figure_runs() if present(r.cache.claim)]
    if not chosen:
        return None
    claims = [r.cache.claim for r in chosen]
    compile_s = stats.summarize([c.compile_s for c in claims if c.compile_s is not None])
    ttfr = policy.figure("ttfr_s")
    share = compile_s.median / ttfr.median if compile_s and ttfr and ttfr.median > 0 else None
    watched = [c for c in claims if present(c.processes)]
    return StillCompiled(
        runs_compiling=sum(1 for c in claims if c.compiles or (present(c.processes) and c.processes)),
        runs_beyond_claim=sum(1 for c in claims if c.held is False),
        compiles=stats.summarize([float(c.compiles) for c in claims]),
        compile_s=compile_s,
        share_of_ttfr=min(share, 1.0) if share is not None else None,
        what=sorted(
            {name for c in claims for name in (*c.compiled, *c.allowed)}
            | {f"{name} (process)" for c in watched for name in c.processes}
        ),
        # absent where no run was watched (a file written before the watch): what its runs give, unchanged
        processes=stats.summarize([float(sum(c.processes.values())) for c in watched]) if watched else UNSET,
        processes_s=stats.summarize([c.processes_s for c in watched]) if watched else UNSET,
    )


def precompiled_policy(name: str, cold: ColdPolicy, maker: JournalEntry | None) -> PrecompiledPolicy:
    """The precompiled policy `name` from its cold figures and its mechanism's priming process."""
    mechanism, setting = precompiled_parts(name)
    fields = {f: getattr(cold, f) for f in cold.__struct_fields__}
    return PrecompiledPolicy(**fields, setting=setting, artifact=artifact_info(mechanism, maker),
                             still_compiled=still_compiled(cold), versus={})  # fmt: skip


def versus(policy: ColdPolicy, policies: dict) -> dict[str, Effect]:
    """The precompiled policy's TTFR against each standard cold policy measured: precompiled / standard over their
    headline runs, unpaired (their runs share rounds but not one process each), judged per comparison."""
    mine = _log_ttfr(policy)
    compared = {name: _log_ttfr(policies[name]) for name in COLD_POLICIES if name in policies}
    # only where the runs allow a 95% interval (4 a side, or more on one side: 3 against 3 do not)
    compared = {name: logs for name, logs in compared.items()
                if logs and mine and comparison_stats.unpaired_rank(len(logs), len(mine)) >= 1}  # fmt: skip
    effects = [comparison_stats.unpaired(logs, mine) for logs in compared.values()]
    judged = comparison_stats.judge(effects, [comparison_stats.delta_for("cold")] * len(effects), correction="none")
    return dict(zip(compared, judged))


def _log_ttfr(policy: ColdPolicy) -> list[float]:
    return [math.log(r.metrics.ttfr_s) for r in policy.figure_runs() if r.metrics.ttfr_s]


def with_versus(policies: dict) -> dict:
    """Every precompiled policy with its comparisons against the standard cold policies beside it."""
    return {name: msgspec.structs.replace(p, versus=versus(p, policies)) if isinstance(p, PrecompiledPolicy) else p
            for name, p in policies.items()}  # fmt: skip


def recomputed(policy: PrecompiledPolicy, policies: dict) -> PrecompiledPolicy:
    """The policy with what it still compiled and its comparisons recomputed from the runs (a reader's check of an
    edited figure); `policies`: the case's, by name."""
    return msgspec.structs.replace(policy, still_compiled=still_compiled(policy), versus=versus(policy, policies))


def disagreements(name: str, policy: PrecompiledPolicy, policies: dict) -> list[str]:
    """Where a case file's precompiled policy does not hold together: its name, setting and artifact's mechanism
    differ, an artifact not made has runs (or one made has no size), or what it still compiled and its comparisons
    are not what its runs give (an edited figure)."""
    mechanism, setting = precompiled_parts(name)
    problems = []
    if (policy.artifact.mechanism, policy.setting) != (mechanism, setting):
        problems.append(f"{name}: its artifact's mechanism or setting is not its name's")
    made = policy.artifact.state == "made"
    if made != (policy.artifact.bytes is not None) or (not made and policy.runs):
        problems.append(f"{name}: its artifact's state ({policy.artifact.state}) does not fit its size and runs")
    if policy != recomputed(policy, policies):
        problems.append(f"{name}: what it still compiled, or its comparisons, are not what the runs give")
    return problems
