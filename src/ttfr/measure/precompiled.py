"""Precompiled artifacts' mechanisms as a run knows them (issue 39): what each claims its load skips, which
backends offer it, and the check of that claim against what the runtime still compiled.

child/precompiled.py makes and loads each kind inside a worker; this module never imports a runtime.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ttfr.model.base import present
from ttfr.model.policies import precompiled_parts
from ttfr.model.record import RuntimeCounters
from ttfr.model.run_figures import CacheCheck, ClaimCheck, HitMiss


@dataclass(frozen=True)
class Mechanism:
    name: str
    framework: str  # the runtime whose artifact it is (catalog.Backend.framework)
    skips: str  # what the artifact's load claims to skip, in a few words
    how: str  # how it does (`ttfr list`, every report: `claims`)
    # What the first call may still build and how many times (a program's name -> at most): anything else it
    # builds, or more of these, is compiling what the mechanism claims to skip.
    allowed: dict[str, int] = field(default_factory=dict)

    @property
    def claims(self) -> str:
        return f"{self.skips}: {self.how}"


JAX_SERIALIZED = Mechanism(
    "jax_serialized", "jax", "tracing, lowering and compiling",
    "the serialized executable (jax.experimental.serialize_executable) is loaded "
    "onto the device and runs; no program is built",
)  # fmt: skip
JAX_EXPORT = Mechanism(
    "jax_export", "jax", "tracing and lowering the function",
    "the exported StableHLO (jax.export) is deserialized and run through "
    "Exported.call, whose small wrapper is traced, lowered and compiled once (one backend compile expected)",
    allowed={"call_exported": 1},
)  # fmt: skip
MECHANISMS = {m.name: m for m in (JAX_SERIALIZED, JAX_EXPORT)}


def check_claim(mechanism: str, counters: RuntimeCounters | None) -> ClaimCheck:
    """The run's first call against its mechanism's claim, from the runtime's counters right after it (JAX's
    programs: each function traced, built and hit by name). `held` null: no counters to judge by."""
    declared = MECHANISMS[mechanism]
    programs = counters.programs if counters is not None and present(counters.programs) else None
    if programs is None:
        return ClaimCheck(mechanism=mechanism, held=None, compiled={}, allowed={}, compiles=0, compile_s=None)
    built = {name: p.compiles for name, p in programs.items() if p.compiles}
    allowed = {name: n for name, n in built.items() if n <= declared.allowed.get(name, 0)}
    beyond = {name: n for name, n in built.items() if name not in allowed}
    seconds = sum(p.backend_s for name, p in programs.items() if p.compiles)
    return ClaimCheck(mechanism=mechanism, held=not beyond, compiled=beyond, allowed=allowed,
                      compiles=sum(built.values()), compile_s=seconds)  # fmt: skip


def verify(policy: str, counts: HitMiss | None, entries_before: int, entries_after: int,
           first: RuntimeCounters | None) -> CacheCheck:  # fmt: skip
    """A precompiled policy's run: its cache directory was what its setting says (emptied, or the template
    restored), and its first call compiled nothing its mechanism claims to skip (`first`: the runtime's counters
    right after it). A directory that was not is `flagged`; a load that compiled beyond the claim (or with no
    counters to tell) is `unverified`, with what compiled."""
    mechanism, setting = precompiled_parts(policy)
    claim = check_claim(mechanism, first)
    flags = []
    if setting == "cold-cache" and entries_before:
        flags.append("cold_cache_not_empty")
    if setting == "warm-cache" and not entries_before:
        flags.append("warm_cache_empty")
    if claim.held is False:
        flags.append("artifact_recompiled")
    if claim.held is None:
        note = "the worker reported no counters to check the mechanism's claim by"
    elif claim.held:
        note = f"{mechanism}: nothing compiled beyond what it allows ({_said(claim.allowed) or 'nothing'})"
    else:
        note = f"{mechanism} claims to skip {MECHANISMS[mechanism].skips}, yet the run compiled {_said(claim.compiled)}"
    verdict = "flagged" if set(flags) - {"artifact_recompiled"} else "verified" if claim.held else "unverified"
    found = {"hits": counts.hits, "misses": counts.misses, "counters": counts} if counts else {}
    return CacheCheck(verdict=verdict, flags=flags, entries_before=entries_before, entries_after=entries_after,
                      note=note, written=max(entries_after - entries_before, 0), claim=claim, **found)  # fmt: skip


def _said(built: dict[str, int]) -> str:
    return ", ".join(f"{name} x{n}" for name, n in sorted(built.items()))
