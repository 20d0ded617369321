"""The report's Precompiled artifacts section (issue 39): per case and precompiled policy, its TTFR beside the
standard cold policies' (a ratio with its interval and verdict), its artifact's load, what its runs still compiled,
whether its mechanism's claim held, and the artifact itself (size, time to make, what it is bound to). Every cell
is a field of the case's policy (analyse/precompiled.py decided them once); report.md and report.html render the
same rows."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ttfr.model.base import present
from ttfr.model.case import CaseResult
from ttfr.model.comparison import Effect
from ttfr.model.policies import COLD_CACHE, WARM_CACHE, precompiled_parts
from ttfr.model.policy_figures import PrecompiledPolicy
from ttfr.report.formatting import DASH, code, fmt_bytes, fmt_percent, fmt_seconds, fmt_summary, one_line, table

TITLE = "Precompiled artifacts"
INTRO = (
    "Each precompiled policy loads compiled code a priming process made from the case's first call, in a timed "
    "component of its own (artifact load), on an emptied cache directory (cold cache: a new machine or container) "
    "or on the case's warm one (warm cache: a second job on the same machine). Against: its TTFR over the standard "
    "policy's, precompiled / standard (below 1: the artifact starts faster), the two-sample Hodges-Lehmann ratio "
    "of their headline runs with its 95% interval (3 runs against 3 allow none) and the verdict: improvement or "
    "regression when significant at 1% and at least 5%, equivalent when the interval lies within ±5%, else "
    "inconclusive. Still compiled: what the "
    "runs' first calls compiled anyway (the runtime's own counters), its median time and share of the TTFR, and the "
    "compiler runs the worker's process tree showed during the load and first call (a second witness). Claim: "
    "verified (nothing compiled beyond what the mechanism allows), unverified (it did, or no counters said), "
    "flagged (the cache directory was not what the setting says)."
)
HEADER = ["case", "mechanism", "setting", "TTFR", "artifact load", "against cold cache", "against warm cache",
          "still compiled", "claim", "artifact"]  # fmt: skip


@dataclass
class Tables:
    header: list[str]
    rows: list[list[str]]
    claims: list[str]  # what each mechanism in the rows claims to skip
    bound: list[str]  # what each case's artifacts are bound to


def against(effect: Effect | None, measured: bool = False) -> str:
    """A ratio precompiled / standard with its interval and verdict, as every output says it; `measured`: the
    standard policy ran (no effect then means too few runs for a 95% interval)."""
    if effect is None:
        return "too few runs for a 95% interval" if measured else DASH
    if effect.ratio is None:
        return f"too few runs ({effect.n})"
    low, high = effect.ci
    return f"×{effect.ratio:.3g} [{low:.3g}, {high:.3g}] {effect.verdict}"


def still(policy: PrecompiledPolicy) -> str:
    compiled = policy.still_compiled
    if compiled is None:
        return DASH
    if not compiled.runs_compiling:
        return "nothing"
    seconds = compiled.compile_s.median if compiled.compile_s else None
    tree = compiled.processes if present(compiled.processes) else None
    seen = (f"; the process tree: {tree.median:g} compiler run(s) a run, seen for {fmt_seconds(compiled.processes_s.median)}"
            if tree and tree.median and compiled.processes_s else "")  # fmt: skip
    return (f"{', '.join(compiled.what)}: {fmt_seconds(seconds)} ({fmt_percent(compiled.share_of_ttfr)} of TTFR)"
            + seen
            + (f", beyond its claim in {compiled.runs_beyond_claim} run(s)" if compiled.runs_beyond_claim else ""))  # fmt: skip


def _both_ran(case: CaseResult, policy: PrecompiledPolicy, standard: str) -> bool:
    """Both policies have headline runs (their comparison missing then means too few of them)."""
    other = case.policies.get(standard)
    return bool(other and other.figure("ttfr_s") and policy.figure("ttfr_s"))


def _claim(policy: PrecompiledPolicy) -> str:
    """The claim's verdict; a policy with no runs says why (its artifact unsupported or not made)."""
    if policy.artifact.state != "made":
        return policy.artifact.state
    if policy.runs and not any(r.outcome == "ok" for r in policy.runs):
        return "every run failed"
    return policy.cache_verification.verdict if policy.runs else DASH


def artifact(policy: PrecompiledPolicy) -> str:
    made = policy.artifact
    if made.state != "made":
        return f"{made.state}: {one_line(made.reason)}"
    return f"{fmt_bytes(made.bytes)}, made in {fmt_seconds(made.make_s)}"


def tables(cases: list[CaseResult], mark: Callable[[str], str] = code) -> Tables | None:
    """The section's rows; None when no case ran a precompiled policy."""
    rows, claims, bound = [], {}, {}
    for case in cases:
        for name, policy in case.policies.items():
            if not isinstance(policy, PrecompiledPolicy):
                continue
            mechanism, setting = precompiled_parts(name)
            claims[mechanism] = policy.artifact.claims
            if policy.artifact.bound_to:
                bound[(case.case, mechanism)] = ", ".join(f"{k} {v}" for k, v in policy.artifact.bound_to.items())
            rows.append([mark(case.case), mark(mechanism), setting, fmt_summary(policy.figure("ttfr_s")),
                         fmt_summary(policy.figure("artifact_load_s"), with_ci=False),
                         *(against(policy.versus.get(p), _both_ran(case, policy, p)) for p in (COLD_CACHE, WARM_CACHE)),
                         still(policy), _claim(policy),
                         artifact(policy)])  # fmt: skip
    if not rows:
        return None
    return Tables(HEADER, rows, [f"{mark(m)} claims to skip {text}" for m, text in claims.items()],
                  [f"{mark(m)} of {mark(c)}: {text}" for (c, m), text in bound.items()])  # fmt: skip


def section(cases: list[CaseResult]) -> list[str]:
    found = tables(cases)
    if found is None:
        return []
    return [f"## {TITLE}", "", INTRO, "", *table(found.header, found.rows), "",
            "What each mechanism claims:", "", *(f"- {line}" for line in found.claims), "",
            "What each artifact is bound to (its priming process's runtime and device):", "",
            *(f"- {line}" for line in found.bound), ""]  # fmt: skip
