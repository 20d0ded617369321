"""--explain: a cold policy's diagnostic process's import trace -> where the cold start's imports
went (`Explanation`), checked against the policy's measured medians.

Each phase's imports are the top-level imports' cumulative times summed (their modules' self
times add up to the same); a module's time goes to the distribution of its top-level package
(`python` for the standard library), and a module no distribution owns is `unattributed`, never
spread over the others. The explanation is a measurement of another process: its import phase is
compared with the policy's `import_s` median and flagged beyond ±20%.
"""

from __future__ import annotations

from ttfr.model.base import UNSET, UnsetType, present
from ttfr.model.flags import ExplanationDisagrees
from ttfr.model.explanation import (
    PHASES,
    Advice,
    CompiledProgram,
    UNATTRIBUTED,
    DistributionTime,
    Explanation,
    ImportTrace,
    ModuleTime,
    PhaseImports,
    TracedImport,
)
from ttfr.model.journal import JournalEntry
from ttfr.model.policies import COLD_CACHE, WARM_CACHE
from ttfr.model.policy_figures import ColdPolicy
from ttfr.model.record import JAX_CACHE_MISSES

JAX_DEFAULT_MIN_COMPILE_S = 1.0  # jax_persistent_cache_min_compile_time_secs' default: faster programs are never stored
STDLIB = "python"  # child/distributions.py's name for the standard library
AGREEMENT = 0.20  # the traced import phase within ±20% of the measured median
RANGE_WIDENING = 0.25  # the diagnostic process's TTFR within the measured runs' range widened by 25%
TOP_DISTRIBUTIONS = 6
TOP_MODULES = 8
OTHER = "other"


def explain(entry: JournalEntry | None, policy: ColdPolicy) -> tuple[Explanation | UnsetType, list]:
    """The policy's explanation and the flag it raises (UNSET, none: no diagnostic process ran)."""
    if entry is None:
        return UNSET, []
    if entry.outcome != "ok" or entry.imports is UNSET:
        reason = entry.reason or "the diagnostic process returned no import trace"
        return Explanation(outcome=entry.outcome if entry.outcome != "ok" else "error", reason=reason, phases=[],
                           traced_import_s=None, traced_ttfr_s=None, import_ratio=None,
                           unattributed_fraction=None), []  # fmt: skip
    phases = [_phase(name, imports, entry.imports, policy) for name in PHASES
              if (imports := [i for i in entry.imports.imports if i.phase == name])]  # fmt: skip
    imported = next((p for p in phases if p.phase == "import"), None)
    ratio = imported.share if imported else None
    unattributed = None
    if imported and imported.imports_s > 0:
        owned = sum(d.self_s for d in imported.distributions if d.distribution == UNATTRIBUTED)
        unattributed = min(1.0, owned / imported.imports_s)
    traced_ttfr = _traced_ttfr_s(entry)
    explanation = Explanation(outcome="ok", reason=None, phases=phases, traced_import_s=_traced_import_s(entry),
                              traced_ttfr_s=traced_ttfr,
                                    import_ratio=ratio, unattributed_fraction=unattributed,
                                    programs=_programs(entry))  # fmt: skip
    flags = []
    if ratio is not None and abs(ratio - 1.0) > AGREEMENT:
        flags.append(ExplanationDisagrees(phase="import", traced_s=imported.imports_s, measured_s=imported.measured_s))
    ttfr = policy.figure("ttfr_s")
    low, high = ((1 - RANGE_WIDENING) * ttfr.min, (1 + RANGE_WIDENING) * ttfr.max) if ttfr else (None, None)
    if traced_ttfr is not None and ttfr and not low <= traced_ttfr <= high:
        flags.append(ExplanationDisagrees(phase="ttfr", traced_s=traced_ttfr, measured_s=ttfr.median))
    return explanation, flags


def _programs(entry: JournalEntry) -> list[CompiledProgram] | UnsetType:
    """The first call's programs, from the runtime's counters right after it (JAX's events by function)."""
    counters = entry.record.cache.first if entry.record and present(entry.record.cache) else None
    if not counters or not present(counters.programs):
        return UNSET
    programs = counters.programs
    built = sum(p.compiles - p.hits for p in programs.values())
    # JAX's cache_misses event fires only when an entry is written, and names no function
    written = (counters.events or {}).get(JAX_CACHE_MISSES, 0) if present(counters.events) else 0
    unhit = "written" if written == built else "not_written" if written == 0 else "miss"
    rows = [CompiledProgram(name=name, traces=p.traces, executables=p.compiles, trace_s=p.trace_s, lower_s=p.lower_s,
                            compile_s=p.backend_s, persistent_cache="hit" if p.hits else unhit,
                            default_settings_skip=None if p.hits else p.backend_s < JAX_DEFAULT_MIN_COMPILE_S)
            for name, p in programs.items() if p.compiles or p.traces]  # fmt: skip
    return sorted(rows, key=lambda r: -(r.trace_s + r.lower_s + r.compile_s))


def _traced_ttfr_s(entry: JournalEntry) -> float | None:
    marks = entry.record.marks_ns if entry.record else UNSET
    if not present(marks) or not present(marks.first) or not entry.spawn_ns:
        return None
    return max(0.0, (marks.first - entry.spawn_ns) / 1e9)


def _traced_import_s(entry: JournalEntry) -> float | None:
    marks = entry.record.marks_ns if entry.record else UNSET
    if not present(marks) or not present(marks.main) or not present(marks.imported):
        return None
    return max(0.0, (marks.imported - marks.main) / 1e9)


def _distribution(module: str, trace: ImportTrace) -> tuple[str, str | None]:
    owner = (trace.distributions or {}).get(module.partition(".")[0])
    return (owner[0], owner[1]) if owner else (UNATTRIBUTED, None)


def _parents(imports: list[TracedImport]) -> list[str | None]:
    """Each import's importer: -X importtime lists a module after those it imported first, one level
    deeper; a module is the importer of the deeper ones listed since its own level was last seen."""
    parents: list[str | None] = [None] * len(imports)
    waiting: dict[int, list[int]] = {}
    for i, item in enumerate(imports):
        for child in waiting.pop(item.depth + 1, []):
            parents[child] = item.module
        waiting.setdefault(item.depth, []).append(i)
    return parents


def _phase(name: str, imports: list[TracedImport], trace: ImportTrace, policy: ColdPolicy) -> PhaseImports:
    summary = policy.figure(f"{name}_s") if name != "after" else None
    measured = summary.median if summary else None
    total = sum(i.cumulative_s for i in imports if i.depth == 0)
    by_distribution: dict[tuple[str, str | None], list[float]] = {}
    for item in imports:
        by_distribution.setdefault(_distribution(item.module, trace), []).append(item.self_s)
    ranked = sorted(by_distribution.items(), key=lambda pair: -sum(pair[1]))
    rows = [DistributionTime(distribution=d, version=v, self_s=sum(t), modules=len(t)) for (d, v), t in ranked]
    if len(rows) > TOP_DISTRIBUTIONS + 1:  # the rest as one row: the rows still add up to the phase's imports
        rest = rows[TOP_DISTRIBUTIONS:]
        rows = rows[:TOP_DISTRIBUTIONS] + [DistributionTime(distribution=OTHER, version=None,
                                                            self_s=sum(r.self_s for r in rest),
                                                            modules=sum(r.modules for r in rest))]  # fmt: skip
    parents = _parents(imports)
    costly = sorted(range(len(imports)), key=lambda i: -imports[i].cumulative_s)[:TOP_MODULES]
    top = [ModuleTime(module=imports[i].module, distribution=_distribution(imports[i].module, trace)[0],
                      self_s=imports[i].self_s, cumulative_s=imports[i].cumulative_s, imported_by=parents[i])
           for i in costly]  # fmt: skip
    return PhaseImports(phase=name, measured_s=measured, imports_s=total, share=total / measured if measured else None,
                        modules=len(imports), distributions=rows, top_modules=top)  # fmt: skip


IMPORT_SHARE = 0.20  # a distribution whose imports are at least this share of the cold-cache TTFR is advice
MAX_ADVICE = 3


def advice(policies: dict) -> list[Advice]:
    """At most three things this run's evidence says would shorten the cold start, largest first: a
    saving the warm-cache policy measured, programs JAX's default settings would never store, a
    distribution whose imports are a large share of TTFR. Nothing without an explanation."""
    cold, warm = policies.get(COLD_CACHE), policies.get(WARM_CACHE)
    explained = next((p.explanation for p in (cold, warm) if p is not None and present(p.explanation)), None)
    if explained is None:
        return []
    ttfr = cold.figure("ttfr_s") if cold is not None else None
    base = ttfr.median if ttfr and ttfr.median > 0 else None
    found = []
    warm_ttfr = warm.figure("ttfr_s") if warm is not None else None
    interval = [ttfr.median_ci.low - warm_ttfr.median_ci.high, ttfr.median_ci.high - warm_ttfr.median_ci.low] \
        if ttfr and warm_ttfr else None  # fmt: skip
    if interval and interval[0] > 0:  # a saving the runs establish, not one within their spread
        found.append(_advice("warm_cache", f"{COLD_CACHE} -> {WARM_CACHE}", ttfr.median - warm_ttfr.median, base,
                             interval))  # fmt: skip
    source = cold.explanation if cold is not None and present(cold.explanation) else explained
    for program in source.programs or []:
        if program.default_settings_skip:
            found.append(_advice("default_cache_skip", program.name,
                                 program.trace_s + program.lower_s + program.compile_s, base))  # fmt: skip
    imported = next((p for p in source.phases if p.phase == "import"), None)
    for row in imported.distributions if imported else []:
        # (the standard library is no distribution a user can leave out)
        if base and row.distribution not in (UNATTRIBUTED, OTHER, STDLIB) and row.self_s >= IMPORT_SHARE * base:
            name = f"{row.distribution} {row.version}" if row.version else row.distribution
            found.append(_advice("import_share", name, row.self_s, base))
    return sorted(found, key=lambda a: -a.saving_s)[:MAX_ADVICE]


def _advice(kind: str, subject: str, saving_s: float, base: float | None, interval=None) -> Advice:
    return Advice(kind=kind, subject=subject, saving_s=max(0.0, saving_s),
                  share_of_ttfr=saving_s / base if base else None, interval_s=interval)  # fmt: skip
