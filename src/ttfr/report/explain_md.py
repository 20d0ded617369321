"""The report's `--explain` section (issue 38): per case and cold policy, where its diagnostic
process's imports went, phase by phase (the phase's measured median beside the imports traced in
it, their share, how many modules, the top distributions), the costliest modules of the import and
first-call phases with their importer, the import ratio and the unattributed share; its first call split by
the runtime's counters (JAX's programs; torch.compile's frames, graph breaks and compiler runs),
the rest unattributed; for a diagnostic process that failed, its outcome and reason. Every cell is a field of the policy's
`explanation` (analyse/explain.py decided them once); report.md and report.html render the same
rows."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ttfr.model.base import present
from ttfr.model.case import CaseResult
from ttfr.model.flags import ExplanationDisagrees
from ttfr.model.explanation import Advice, DistributionTime, Explanation, PhaseImports
from ttfr.model.policy_figures import ColdPolicy
from ttfr.model.run_figures import COMPONENT_LABELS
from ttfr.model.policies import policy_label
from ttfr.report.formatting import DASH, code, fmt_percent, fmt_seconds, one_line, table

TITLE = "Where the cold start goes (--explain)"
INTRO = (
    "After each case's measured runs, `--explain` ran one more process per cold policy, unmeasured, on that "
    "policy's cache under `python -X importtime`: every module it first imported, phase by phase, against the "
    "phase's measured median (the components above; `-X importtime` itself costs a few percent). Imports traced: "
    "the seconds the diagnostic process spent importing in the phase; share: imports traced / measured median "
    "(above 100%: the traced process was slower). Top distributions: the phase's imports by installed "
    "distribution, self times (`python`: the standard library; `unattributed`: modules no distribution owns; "
    "`other`: the rest beyond the six largest), the three largest shown here. `after`: imports after the "
    "second call (the worker's own result check and bookkeeping), outside every timed phase. Costliest modules "
    "of the import and first-call phases: cumulative time (the module with every module it imported first); "
    "imported by: the module whose import first imported it (top level: the phase's own code). Import ratio: "
    "the import phase's traced imports / its measured median (1.00: all of it explained), flagged "
    "`explanation_disagrees` beyond ±20%; unattributed: the share of the import phase's traced imports no "
    "distribution owns."
)
PHASE_HEADER = ["phase", "measured median", "imports traced", "share", "modules", "top distributions"]
MODULE_HEADER = ["phase", "module", "distribution", "cumulative", "imported by"]
SHOWN_DISTRIBUTIONS = 3  # per phase, in the table (the case file keeps the top six and `other`)
MODULE_PHASES = ("import", "first_call")  # the phases whose costliest modules are listed
SHOWN_MODULES = 5  # per listed phase (the case file keeps eight)
TOP_LEVEL = "top level"


@dataclass
class Table:
    intro: str  # a line before it ("" for none)
    header: list[str]
    rows: list[list[str]]


@dataclass
class ExplainPart:
    """One case and cold policy's part of the section (or a case's advice): its title, the headline,
    its tables (none for a diagnostic process that failed, whose headline says so) and items."""

    title: str
    headline: str
    tables: list[Table]
    items: list[str]


def phase_label(phase: str) -> str:
    """A phase as the components table labels it (`first call`), `after` as it is."""
    return COMPONENT_LABELS.get(f"{phase}_s", phase.replace("_", " "))


def distribution_label(row: DistributionTime) -> str:
    return row.distribution if row.version is None else f"{row.distribution} {row.version}"


def distributions_cell(phase: PhaseImports) -> str:
    """The phase's largest distributions (`jax 0.10.2: 185 ms, python 3.11.7: 62.8 ms, ...`), then how
    many rows are left out."""
    shown = phase.distributions[:SHOWN_DISTRIBUTIONS]
    text = ", ".join(f"{distribution_label(d)}: {fmt_seconds(d.self_s)}" for d in shown) or DASH
    rest = len(phase.distributions) - len(shown)
    return text + (f" (+{rest} more)" if rest else "")


def phase_row(phase: PhaseImports) -> list[str]:
    return [phase_label(phase.phase), fmt_seconds(phase.measured_s), fmt_seconds(phase.imports_s),
            fmt_percent(phase.share), f"{phase.modules:,}", distributions_cell(phase)]  # fmt: skip


SPAN_LABELS = {"wrap": "torch.compile(fn)", "compile": "compile"}


def _phase_and_span(phase: str, span: str | None, traced_spans: bool) -> str:
    """The phase, and inside a torch.compile first call the span: `first call: compile`, `first call: execution`."""
    if not traced_spans or phase != "first_call":
        return phase_label(phase)
    return f"{phase_label(phase)}: {SPAN_LABELS.get(span, 'execution')}"


def module_rows(explanation: Explanation) -> list[list[str]]:
    traced_spans = present(explanation.frames)  # torch.compile's process marks its spans
    return [[_phase_and_span(phase.phase, module.span, traced_spans), module.module, module.distribution,
             fmt_seconds(module.cumulative_s), module.imported_by or TOP_LEVEL]
            for phase in explanation.phases if phase.phase in MODULE_PHASES
            for module in phase.top_modules[:SHOWN_MODULES]]  # fmt: skip


def fmt_ratio(value: float | None) -> str:
    return DASH if value is None else f"{value:.2f}"


def headline(explanation: Explanation, block: ColdPolicy, mark: Callable[[str], str] = code) -> str:
    """One line: the import ratio (flagged or not), the unattributed share and the traced process's own
    import phase; or how the diagnostic process failed."""
    if explanation.outcome == "not_applicable":
        return f"No import is explained: {one_line(explanation.reason or '')}"
    if explanation.outcome != "ok":
        reason = f": {one_line(explanation.reason)}" if explanation.reason else ""
        return f"The diagnostic process ended {mark(explanation.outcome)}{reason}; no phase is explained."
    # the import phase's own flag (the TTFR and compile-stage checks raise theirs, said under Flags)
    flagged = any(isinstance(f, ExplanationDisagrees) and f.phase == "import" for f in block.flags)
    ratio = f"Import ratio {fmt_ratio(explanation.import_ratio)}"
    if flagged:
        ratio += f" (⚠ beyond ±20%: flagged {mark('explanation_disagrees')}, see Flags)"
    return (f"{ratio}; unattributed {fmt_percent(explanation.unattributed_fraction)} of the import phase's imports; "
            f"the diagnostic process's own import phase took {fmt_seconds(explanation.traced_import_s)} and its first "
            f"result came {fmt_seconds(explanation.traced_ttfr_s)} after its spawn.")  # fmt: skip


PROGRAM_HEADER = ["program", "traces", "executables", "trace", "lower", "compile", "persistent cache",
                  "JAX's defaults would store it"]  # fmt: skip
PROGRAMS_INTRO = "Programs the first call compiled (costliest first):"
ADVICE_HEADLINE = "What this run's own evidence says would shorten the cold start (largest first):"
_CACHE_WORDS = {"hit": "hit (loaded)", "written": "written", "not_written": "not written",
                "miss": "miss (written or not: unnamed)"}  # fmt: skip


def program_rows(explanation: Explanation) -> list[list[str]]:
    return [[p.name, str(p.traces), str(p.executables), fmt_seconds(p.trace_s), fmt_seconds(p.lower_s),
             fmt_seconds(p.compile_s), _CACHE_WORDS[p.persistent_cache],
             DASH if p.default_settings_skip is None else "no: compiled in < 1 s" if p.default_settings_skip else "yes"]
            for p in explanation.programs or []]  # fmt: skip


FIRST_CALL_HEADER = ["part", "seconds", "share", "runs"]
FRAME_HEADER = ["compile id", "frame", "at", "compile", "inductor", "FX graph cache", "AOTAutograd cache",
                "recompiled because"]  # fmt: skip
BREAK_HEADER = ["graph break at", "dynamo's reason"]
TRITON_HEADER = ["Triton kernel", "kernels", "compile (worker)", "ptxas", "ptxas runs"]
FRAMES_INTRO = "Graphs torch.compile compiled in the first call (a backward graph: at the first backward pass):"
BREAKS_INTRO = "Graph breaks (dynamo's own words; the full reason is in the case file):"
BACKWARD = "backward graph"


def first_call_intro(explanation: Explanation) -> str:
    """The line before the first-call table: its traced seconds, the share the named parts explain, and the stage
    they are checked against."""
    first = explanation.first_call
    line = (f"The diagnostic process's first call, {fmt_seconds(first.traced_s)}, by the runtime's own counters: "
            f"{fmt_percent(first.attributed_fraction)} named, the rest unattributed; {fmt_seconds(first.imports_s)} "
            "of imports happened inside it")  # fmt: skip
    if first.kernels is not None:
        line += f"; Inductor generated {first.kernels} kernel{'s' if first.kernels != 1 else ''}"
    if first.guards is not None:
        built = f" in {fmt_seconds(first.build_guards_s)}" if first.build_guards_s is not None else ""
        line += f"; dynamo built {first.guards} guard{'s' if first.guards != 1 else ''}{built}"
    if first.stage and first.stage_measured_s is not None:
        line += (f". Its {first.stage} by the counters: {fmt_seconds(first.stage_traced_s)}, against a measured "
                 f"median of {fmt_seconds(first.stage_measured_s)}")  # fmt: skip
    return line + ":"


def first_call_rows(explanation: Explanation) -> list[list[str]]:
    return [[part.part, fmt_seconds(part.s), fmt_percent(part.share), DASH if part.runs is None else str(part.runs)]
            for part in explanation.first_call.parts]  # fmt: skip


def frame_rows(explanation: Explanation) -> list[list[str]]:
    return [[f.compile_id or DASH, f.function or BACKWARD, f"{f.file}:{f.line}" if f.file else DASH,
             fmt_seconds(f.compile_s),
             fmt_seconds(f.inductor_s), f.fx_graph_cache or DASH, f.autograd_cache or DASH,
             one_line(f.recompile_reason) if f.recompile_reason else DASH]
            for f in explanation.frames or []]  # fmt: skip


def triton_intro(explanation: Explanation) -> str:
    first = explanation.first_call
    total = f", {fmt_seconds(first.triton_compile_s)} of worker time in all" if first.triton_compile_s else ""
    return (f"Triton kernels the first call compiled in Inductor's worker processes{total} (workers run in parallel, "
            "inside the frames' Inductor time; ptxas: each run timed, part of the kernel's compile):")  # fmt: skip


def triton_rows(explanation: Explanation) -> list[list[str]]:
    return [[k.kernel, str(k.kernels), fmt_seconds(k.compile_s), fmt_seconds(k.ptxas_s), str(k.ptxas_runs)]
            for k in explanation.first_call.triton_kernels]  # fmt: skip


def break_rows(explanation: Explanation) -> list[list[str]]:
    return [[f"{b.file}:{b.line}", b.summary] for b in explanation.graph_breaks or []]


def advice_item(advice: Advice, mark: Callable[[str], str] = code) -> str:
    """One piece of advice as a sentence, with its size and share of TTFR."""
    share = f", {fmt_percent(advice.share_of_ttfr)} of the cold-cache TTFR" if advice.share_of_ttfr is not None else ""
    size = f"{fmt_seconds(advice.saving_s)}{share}"
    if advice.kind == "warm_cache":
        low, high = advice.interval_s
        return (f"A warm compilation cache saved {size} ({fmt_seconds(low)} to {fmt_seconds(high)}): keep the cache "
                "directory between processes.")  # fmt: skip
    if advice.kind == "default_cache_skip":
        return (f"{mark(advice.subject)} compiled in under a second ({size}): with JAX's default "
                f"{mark('jax_persistent_cache_min_compile_time_secs')} (1.0 s) it is never stored, and every new "
                "process compiles it again.")  # fmt: skip
    if advice.kind == "graph_break":
        return (f"A graph break at {mark(advice.location)} ({one_line(advice.subject)}) made torch.compile compile "
                f"the rest of the function as another graph: {size}, at most what not breaking there would save.")  # fmt: skip
    if advice.kind == "recompile":
        where = f" at {mark(advice.location)}" if advice.location else ""
        return f"torch.compile compiled {one_line(advice.subject)}{where} again in the first call: {size}."
    return f"Importing {mark(advice.subject)} took {size}."


def policy_tables(cases: list[CaseResult], mark: Callable[[str], str] = code) -> list[ExplainPart]:
    """The section's parts, per case: each cold policy with an explanation, then its advice ([]: none)."""
    parts = []
    for case in cases:
        first = True
        for policy, block in case.policies.cold():
            if not present(block.explanation):
                continue
            explanation = block.explanation
            tables = [Table("", PHASE_HEADER, [phase_row(phase) for phase in explanation.phases])]
            if first:  # the costliest modules once a case: the policies import the same
                tables.append(Table(MODULES_INTRO, MODULE_HEADER, module_rows(explanation)))
            tables.append(Table(PROGRAMS_INTRO, PROGRAM_HEADER, program_rows(explanation)))
            if present(explanation.first_call):
                tables.append(Table(first_call_intro(explanation), FIRST_CALL_HEADER, first_call_rows(explanation)))
                tables.append(Table(triton_intro(explanation), TRITON_HEADER, triton_rows(explanation)))
            tables.append(Table(FRAMES_INTRO, FRAME_HEADER, frame_rows(explanation)))
            tables.append(Table(BREAKS_INTRO, BREAK_HEADER, break_rows(explanation)))
            if present(explanation.cache_bypasses):
                tables.append(Table("Why torch.compile's caches were bypassed (torch's words):", ["message"],
                                    [[one_line(m)] for m in explanation.cache_bypasses]))  # fmt: skip
            if present(explanation.cache_log):
                tables.append(Table(CACHE_LOG_INTRO, ["message"], [[one_line(m)] for m in explanation.cache_log]))
            if present(explanation.unavailable):
                tables.append(Table("Not available here:", ["part", "why"],
                                    [[k, one_line(v)] for k, v in explanation.unavailable.items()]))  # fmt: skip
            first = False
            parts.append(ExplainPart(title=f"{mark(case.case)} ({policy_label(policy)})",
                                     headline=headline(explanation, block, mark),
                                     tables=[t for t in tables if t.rows], items=[]))  # fmt: skip
        if present(case.advice) and case.advice:
            parts.append(ExplainPart(title=f"{mark(case.case)}: advice", headline=ADVICE_HEADLINE, tables=[],
                                     items=[advice_item(a, mark) for a in case.advice]))  # fmt: skip
    return parts


CACHE_LOG_INTRO = (
    "What JAX said of its caches in the first call (`jax_explain_cache_misses`, verbatim; the case file "
    "keeps each message whole):"
)
MODULES_INTRO = "Costliest modules (import and first call, the five largest each; the warm cache imports the same):"


def section(cases: list[CaseResult]) -> list[str]:
    parts = policy_tables(cases)
    if not parts:
        return []
    lines = [f"## {TITLE}", "", INTRO, ""]
    for part in parts:
        lines += [f"### {part.title}", "", part.headline, ""]
        for item in part.tables:
            lines += [*([item.intro, ""] if item.intro else []), *table(item.header, item.rows), ""]
        if part.items:
            lines += [*(f"- {item}" for item in part.items), ""]
    return lines
