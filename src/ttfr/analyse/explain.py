"""--explain: a cold policy's diagnostic process's import trace -> where the cold start's imports
went (`Explanation`), checked against the policy's measured medians.

Each phase's imports are the top-level imports' cumulative times summed (their modules' self
times add up to the same); a module's time goes to the distribution of its top-level package
(`python` for the standard library), and a module no distribution owns is `unattributed`, never
spread over the others. The explanation is a measurement of another process: its import phase is
compared with the policy's `import_s` median and flagged beyond ±20%.
"""

from __future__ import annotations

import re
import statistics
from typing import NamedTuple

from ttfr.analyse import runs
from ttfr.model.base import UNSET, UnsetType, present
from ttfr.model.flags import ExplanationDisagrees
from ttfr.model.explanation import (
    TritonKernelBuilt,
    PHASES,
    Advice,
    CompiledFrame,
    CompiledProgram,
    FirstCallExplained,
    FirstCallPart,
    GraphBreak,
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
from ttfr.model.policy_figures import ColdPolicy, named
from ttfr.model.record import JAX_CACHE_MISSES
from ttfr.model.torch_compile_evidence import COMPILER_RUN_KINDS, TorchCompileEvidence, TorchFrame, TorchGraphBreak

JAX_DEFAULT_MIN_COMPILE_S = 1.0  # jax_persistent_cache_min_compile_time_secs' default: faster programs are never stored
STDLIB = "python"  # child/distributions.py's name for the standard library
AGREEMENT = 0.20  # the traced import phase within ±20% of the measured median
RANGE_WIDENING = 0.25  # the diagnostic process's TTFR within the measured runs' range widened by 25%
TOP_DISTRIBUTIONS = 6
TOP_MODULES = 8
OTHER = "other"
NO_TRACE = "the diagnostic process returned no import trace"
NO_PYTHON_IMPORTS = ("imports n/a: the program printed no import line (not a Python program, or one that does not read "
                     "PYTHONPROFILEIMPORTTIME)")  # fmt: skip


def explain(entry: JournalEntry | None, policy: ColdPolicy) -> tuple[Explanation | UnsetType, list]:
    """The policy's explanation and the flag it raises (UNSET, none: no diagnostic process ran)."""
    if entry is None:
        return UNSET, []
    if entry.outcome != "ok" or entry.imports is UNSET:
        outcome, reason = entry.outcome, entry.reason
        if outcome == "ok":  # it ran, and reported no import: a --command that is no Python program has none
            command = entry.record is not None and present(entry.record.first_result)
            outcome, reason = ("not_applicable", NO_PYTHON_IMPORTS) if command else ("error", NO_TRACE)
        return Explanation(outcome=outcome, reason=reason or NO_TRACE, phases=[],
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
    spans = runs.run_metrics(entry.spawn_ns, entry.reaped_ns, entry.record)  # the diagnostic process's own phases
    traced_ttfr = spans.ttfr_s
    programs = _programs(entry)
    torch = entry.record.torch_compile if entry.record and present(entry.record.torch_compile) else None
    first_imports = next((p.imports_s for p in phases if p.phase == "first_call"), 0.0)
    first_call = _first_call(entry, spans.first_call_s, programs, torch, first_imports, policy)
    explanation = Explanation(outcome="ok", reason=None, phases=phases, traced_import_s=spans.import_s,
                              traced_ttfr_s=traced_ttfr, import_ratio=ratio, unattributed_fraction=unattributed,
                              programs=programs, first_call=first_call,
                              frames=[_frame(f) for f in torch.frames] if torch else UNSET,
                              graph_breaks=[_graph_break(b) for b in torch.graph_breaks] if torch else UNSET,
                              unavailable=torch.unavailable if torch and torch.unavailable else UNSET,
                              cache_bypasses=torch.cache_bypasses if torch and torch.cache_bypasses else UNSET,
                              cache_log=entry.record.cache_log if entry.record and entry.record.cache_log else UNSET)  # fmt: skip
    flags = []
    if ratio is not None and abs(ratio - 1.0) > AGREEMENT:
        flags.append(ExplanationDisagrees(phase="import", traced_s=imported.imports_s, measured_s=imported.measured_s))
    ttfr = policy.figure("ttfr_s")
    if traced_ttfr is not None and ttfr and not _within_range(traced_ttfr, ttfr.min, ttfr.max):
        flags.append(ExplanationDisagrees(phase="ttfr", traced_s=traced_ttfr, measured_s=ttfr.median))
    measured = _stage_runs(policy, first_call.stage) if present(first_call) and first_call.stage else []
    if measured and not _within_range(first_call.stage_traced_s, min(measured), max(measured)):
        flags.append(ExplanationDisagrees(phase=first_call.stage, traced_s=first_call.stage_traced_s,
                                          measured_s=first_call.stage_measured_s))  # fmt: skip
    return explanation, flags


JAX_STAGE = "compile_s"  # XLA's compile of the first call: its programs' compile seconds
TORCH_STAGE = "dynamo_s+aot_autograd_s+inductor_s"  # the whole compile, forward and backward: the frames' compile_s


def _stage_runs(policy: ColdPolicy, stage: str) -> list[float]:
    """Each headline run's seconds for `stage` (stage names joined by `+`: their sum); a run without one is left out."""
    names = stage.split("+")
    values = []
    for run in policy.figure_runs():
        parts = [named(run.stages, name) for name in names]
        if all(isinstance(part, (int, float)) for part in parts):
            values.append(float(sum(parts)))
    return values


def _within_range(traced_s: float, low: float, high: float) -> bool:
    """Inside the measured runs' range [low, high] widened by 25%."""
    return (1 - RANGE_WIDENING) * low <= traced_s <= (1 + RANGE_WIDENING) * high


def _cache_outcome(hits: int | None, misses: int | None) -> str | None:
    if not hits and not misses:
        return None
    return "hit" if not misses else "miss" if not hits else "partial"


def _graph_break(found: TorchGraphBreak) -> GraphBreak:
    return GraphBreak(file=found.file, line=found.line, summary=_break_summary(found.reason), reason=found.reason)


def _frame(frame: TorchFrame) -> CompiledFrame:
    return CompiledFrame(compile_id=frame.compile_id, function=frame.function,
                         file=frame.file, line=frame.line,
                         forward=frame.forward,
                         compile_s=frame.compile_s, inductor_s=frame.inductor_s,
                         fx_graph_cache=_cache_outcome(frame.fx_cache_hits, frame.fx_cache_misses),
                         autograd_cache=_cache_outcome(frame.autograd_cache_hits, frame.autograd_cache_misses),
                         recompile_reason=frame.recompile_reason)  # fmt: skip


class _Part(NamedTuple):
    """A first-call part while its share is not yet known."""

    part: str
    s: float
    runs: int | None


def _first_call(entry: JournalEntry, traced: float | None, programs, torch: TorchCompileEvidence | None, imports_s: float,
                policy: ColdPolicy) -> FirstCallExplained | UnsetType:  # fmt: skip
    """The diagnostic process's first call split by the runtime's counters: JAX's programs (trace, lower, compile),
    torch.compile's wrap, dynamo and AOTAutograd, Inductor, and each kind of compiler run inside Inductor; the rest
    unattributed. Nothing compiled (NumPy, eager torch), or no first call marked (`traced` None): UNSET."""
    if traced is None:
        return UNSET
    if torch is not None and torch.frames:
        parts, stage_traced = _torch_parts(entry, torch)
        traced_imports = entry.imports.imports if present(entry.imports) else []
        if any(i.span for i in traced_imports):  # the trace marks torch.compile's spans: the rest is the execution's
            outside = sum(i.cumulative_s for i in traced_imports
                          if i.phase == "first_call" and i.depth == 0 and i.span is None)  # fmt: skip
            parts.append(_Part(part="imports, first execution", s=outside, runs=None))
        stage, kernels = TORCH_STAGE, torch.kernels
        counted = [f.guards for f in torch.frames if f.guards is not None]
        guards, build_guards_s = (sum(counted) if counted else None), torch.build_guards_s
        triton, triton_s = _triton_kernels(torch)
    elif present(programs) and programs:
        parts = _jax_parts(entry, programs)
        stage, stage_traced, kernels = JAX_STAGE, next(p.s for p in parts if p.part == "compile"), None
        guards = build_guards_s = triton_s = None
        triton = []
    else:
        return UNSET
    named_s = sum(p.s for p in parts)
    parts.append(_Part(part=UNATTRIBUTED, s=max(0.0, traced - named_s), runs=None))
    measured = _stage_runs(policy, stage)
    shown = [FirstCallPart(part=p.part, s=p.s, share=min(1.0, p.s / traced) if traced > 0 else 0.0, runs=p.runs)
             for p in parts]  # fmt: skip
    return FirstCallExplained(traced_s=traced, parts=shown,
                              attributed_fraction=min(1.0, named_s / traced) if traced > 0 else 0.0,
                              imports_s=imports_s, kernels=kernels, guards=guards, build_guards_s=build_guards_s,
                              stage=stage if measured else None,
                              stage_traced_s=stage_traced,
                              stage_measured_s=statistics.median(measured) if measured else None,
                              triton_kernels=triton, triton_compile_s=triton_s)  # fmt: skip


def _jax_parts(entry: JournalEntry, programs) -> list[_Part]:
    """JAX's first call: `jax.jit(fn)` (the wrap stage), its programs' trace, lower and compile seconds (JAX's
    events), and the first execution (the execute stage, less any program compiled while it ran: those are in
    the programs' seconds already)."""
    stages = entry.record.stages_s if present(entry.record.stages_s) else {}
    parts = [_Part(part="jax.jit(fn)", s=stages["wrap_s"], runs=None)] if "wrap_s" in stages else []
    parts += [_Part(part=name, s=sum(getattr(p, f"{name}_s") for p in programs), runs=None)
              for name in ("trace", "lower", "compile")]  # fmt: skip
    if "first_execute_s" in stages:
        staged = sum(stages.get(name, 0.0) for name in ("trace_s", "lower_s", "compile_s"))
        during = max(0.0, sum(p.s for p in parts[-3:]) - staged)  # compiled inside the execution
        parts.append(_Part(part="first execution", s=max(0.0, stages["first_execute_s"] - during), runs=None))
    return parts


def _torch_parts(entry: JournalEntry, torch: TorchCompileEvidence) -> tuple[list[_Part], float]:
    """torch.compile's first call: `torch.compile(fn)` (the wrap stage), dynamo and AOTAutograd (the frames' compile
    less Inductor's), Inductor's own seconds (less the compiler runs made inside its frame's span), each kind of
    compiler run made inside a frame's span, and each kind made after the compile. Runs are wall time: where they
    overlap (kernels build on parallel threads), the time counts once, for the first kind in COMPILER_RUN_KINDS.
    Runs inside a frame beyond its Inductor seconds (a cache hit loads its graph without Inductor's timer) are
    taken from that frame's dynamo and AOTAutograd share. With the frames' compile seconds (the stage checked)."""
    stages = entry.record.stages_s if present(entry.record.stages_s) else {}
    runs = torch.compiler_runs
    owners = [_owner(run, torch.frames) for run in runs]
    dynamo_aot = inductor = 0.0
    for frame in torch.frames:
        covered = sum(_by_kind([r for r, o in zip(runs, owners) if o is frame]).values())
        own_inductor = frame.inductor_s or 0.0
        inductor += max(0.0, own_inductor - covered)
        dynamo_aot += max(0.0, (frame.compile_s or 0.0) - own_inductor - max(0.0, covered - own_inductor))
    parts = [_Part(part="torch.compile(fn)", s=stages["wrap_s"], runs=None)] if "wrap_s" in stages else []
    parts += [_Part(part="dynamo and AOTAutograd", s=dynamo_aot, runs=None),
              _Part(part="inductor", s=inductor, runs=None)]  # fmt: skip
    for inside, suffix in ((True, ""), (False, ", after the compile")):
        mine = [r for r, o in zip(runs, owners) if (o is not None) == inside]
        for kind, seconds in _by_kind(mine).items():
            count = sum(1 for r in mine if r.kind == kind)
            parts.append(_Part(part=f"compiler: {kind}{suffix}", s=seconds, runs=count))
    return parts, sum(f.compile_s or 0.0 for f in torch.frames)


TOP_TRITON_KERNELS = 10


def _triton_kernels(torch: TorchCompileEvidence) -> tuple[list[TritonKernelBuilt], float | None]:
    """Each Triton kernel name with the ptxas runs that built it (a run names the kernel its PTX defines), costliest
    first, the rest as one `other` row; and all their compile seconds. Inductor numbers kernels per graph, so a
    forward and a backward graph (or a graph after a break) can each have a `triton_poi_fused_add_0`: one row per
    name, counting its kernels, so no run is charged twice."""
    ptxas: dict[str, list[float]] = {}
    for run in torch.compiler_runs:
        if run.kind == "ptxas" and run.built:
            ptxas.setdefault(run.built.partition(" (")[0], []).append(run.s)
    named: dict[str, list] = {}
    for kernel in torch.triton_kernels:
        named.setdefault(kernel.name, []).append(kernel.compile_s)
    rows = [TritonKernelBuilt(kernel=name, kernels=len(figures), compile_s=_sum_known(figures),
                              ptxas_s=_sum_known(ptxas.get(name, ())), ptxas_runs=len(ptxas.get(name, ())))
            for name, figures in named.items()]  # fmt: skip
    rows.sort(key=lambda r: -(r.compile_s or 0.0))
    if len(rows) > TOP_TRITON_KERNELS + 1:
        rest = rows[TOP_TRITON_KERNELS:]
        rows = rows[:TOP_TRITON_KERNELS] + [TritonKernelBuilt(
            kernel=OTHER, kernels=sum(r.kernels for r in rest), compile_s=_sum_known([r.compile_s for r in rest]),
            ptxas_s=_sum_known([r.ptxas_s for r in rest]), ptxas_runs=sum(r.ptxas_runs for r in rest))]  # fmt: skip
    return rows, _sum_known([k.compile_s for k in torch.triton_kernels])


def _sum_known(values) -> float | None:
    """The sum of the figures there are; None where there is none (never a 0 standing for no figure)."""
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def _owner(run, frames):
    """The frame whose compile span the run started in (None: after the compile, or no span to tell)."""
    if run.start_us is None:
        return None
    return next((f for f in frames if f.start_us is not None and f.end_us is not None
                 and f.start_us <= run.start_us <= f.end_us), None)  # fmt: skip


def _by_kind(runs) -> dict[str, float]:
    """Each kind's seconds of wall time, in COMPILER_RUN_KINDS order (kinds that ran only): a moment covered by runs
    of several kinds counts once, for the first; a run without a span counts its own seconds."""
    seconds = {kind: sum(r.s for r in runs if r.kind == kind and r.start_us is None) for kind in COMPILER_RUN_KINDS}
    spanned = [r for r in runs if r.start_us is not None and r.end_us is not None]
    edges = sorted({t for r in spanned for t in (r.start_us, r.end_us)})
    for low, high in zip(edges, edges[1:]):  # each elementary piece of time, to the first kind running in it
        running = {r.kind for r in spanned if r.start_us <= low and high <= r.end_us}
        kind = next((k for k in COMPILER_RUN_KINDS if k in running), None)
        if kind:
            seconds[kind] += (high - low) / 1e6
    return {kind: value for kind, value in seconds.items() if any(r.kind == kind for r in runs)}


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
                      self_s=imports[i].self_s, cumulative_s=imports[i].cumulative_s, imported_by=parents[i],
                      span=imports[i].span)
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
    found += _compile_advice(source, base)
    imported = next((p for p in source.phases if p.phase == "import"), None)
    for row in imported.distributions if imported else []:
        # (the standard library is no distribution a user can leave out)
        if base and row.distribution not in (UNATTRIBUTED, OTHER, STDLIB) and row.self_s >= IMPORT_SHARE * base:
            name = f"{row.distribution} {row.version}" if row.version else row.distribution
            found.append(_advice("import_share", name, row.self_s, base))
    return sorted(found, key=lambda a: -a.saving_s)[:MAX_ADVICE]


_RESUMED = re.compile(r"torch_dynamo_resume_in_(?P<function>.+)_at_(?P<line>\d+)$")


def _compile_advice(explanation: Explanation, base: float | None) -> list[Advice]:
    """torch.compile's own evidence: each graph-break location once (sized by the first compile of the graph resumed
    after it: what not breaking there could save at most, as its ops are then compiled in the graph before) and
    each recompile (sized by its compile), as dynamo named them."""
    found = []
    frames = explanation.frames if present(explanation.frames) else []
    seen = set()
    for brk in explanation.graph_breaks if present(explanation.graph_breaks) else []:
        if (brk.file, brk.line) in seen:  # dynamo logs a break again each time it meets it
            continue
        seen.add((brk.file, brk.line))
        resumed = [f for f in frames if f.function and f.file == brk.file and not f.recompile_reason
                   and (m := _RESUMED.match(f.function)) and int(m["line"]) == brk.line]  # fmt: skip
        if resumed:
            found.append(_advice("graph_break", brk.summary, sum(f.compile_s or 0.0 for f in resumed), base,
                                 location=f"{brk.file}:{brk.line}"))  # fmt: skip
    for frame in frames:
        if frame.recompile_reason and frame.compile_s:
            name = frame.function or "a backward graph"
            where = f"{frame.file}:{frame.line}" if frame.file and frame.line is not None else None
            found.append(_advice("recompile", f"{name} ({frame.recompile_reason[:160]})", frame.compile_s, base,
                                 location=where))  # fmt: skip
    return found


def _break_summary(reason: str) -> str:
    """A graph break's reason in one line: dynamo's `Explanation:` line where it gives one, else its first line that
    is more than its preamble."""
    lines = [line.strip() for line in reason.splitlines() if line.strip()]
    said = next((line.removeprefix("Explanation:").strip() for line in lines if line.startswith("Explanation:")), None)
    said = said or next((line for line in lines if not line.startswith("Encountered graph break")), None)
    return (said or (lines[0] if lines else "no reason given"))[:200]


def _advice(kind: str, subject: str, saving_s: float, base: float | None, interval=None, location=None) -> Advice:
    return Advice(kind=kind, subject=subject, saving_s=max(0.0, saving_s),
                  share_of_ttfr=saving_s / base if base else None, interval_s=interval, location=location)  # fmt: skip
