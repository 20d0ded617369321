"""A precompiled policy's figures (issue 39): its cold figures with the artifact its runs loaded (from the priming
process that made it) and what they still compiled (each run's claim check), beside the figure."""

from __future__ import annotations

import msgspec

from ttfr.analyse import stats
from ttfr.measure.precompiled import MECHANISMS
from ttfr.model.base import UNSET, present
from ttfr.model.journal import JournalEntry
from ttfr.model.policies import precompiled_parts
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
    return StillCompiled(
        runs_compiling=sum(1 for c in claims if c.compiles),
        runs_beyond_claim=sum(1 for c in claims if c.held is False),
        compiles=stats.summarize([float(c.compiles) for c in claims]),
        compile_s=compile_s,
        share_of_ttfr=min(share, 1.0) if share is not None else None,
        what=sorted({name for c in claims for name in (*c.compiled, *c.allowed)}),
    )


def precompiled_policy(name: str, cold: ColdPolicy, maker: JournalEntry | None) -> PrecompiledPolicy:
    """The precompiled policy `name` from its cold figures and its mechanism's priming process."""
    mechanism, setting = precompiled_parts(name)
    fields = {f: getattr(cold, f) for f in cold.__struct_fields__}
    return PrecompiledPolicy(**fields, setting=setting, artifact=artifact_info(mechanism, maker),
                             still_compiled=still_compiled(cold))  # fmt: skip


def recomputed(policy: PrecompiledPolicy) -> PrecompiledPolicy:
    """The policy with its `still_compiled` recomputed from its runs (a reader's check of an edited figure)."""
    return msgspec.structs.replace(policy, still_compiled=still_compiled(policy))
