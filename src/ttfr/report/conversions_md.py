"""The report's Conversions section (issue 28): per size and dtype, each conversion route's copy
verdict, its first and warm conversion, its rate against this machine's memcpy and its leak probe;
then each route on every layout of its source. Every cell is a field of the case's `conversion`
(analyse/conversions.py decided them once); report.md and report.html render the same rows."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ttfr.child.conversion_routes import ROUTES
from ttfr.model.base import present
from ttfr.model.case import CaseResult, Conversion
from ttfr.model.conversion_evidence import ConversionLayout
from ttfr.report.formatting import DASH, code, copied_verdict, fmt_bytes, fmt_percent, fmt_rate, fmt_seconds, one_line, table

TITLE = "Conversions"
INTRO = (
    "One row per conversion route (its case). Copied: whether the timed call on the contiguous source copied it "
    "(✓ zero-copy: the result shares the source's memory; ✗ copied; ? no verdict: the buffers' address ranges and "
    "a write through the source disagree, or could not be read), for the source the timed calls converted, whose "
    "address modulo 64 follows (`+16 B`): whether a route copies can depend on it (XLA:CPU aliases only 64-byte "
    "aligned buffers). First conversion: the median of the first "
    "conversion in a fresh process (cold cache); warm call: the median of the warm processes' medians. "
    "Bytes are counted once (the source's bytes, as copy tools count a copy; STREAM counts its read and its write): "
    "GB/s = bytes / warm call, 1 GB = 10⁹ bytes, given where the route copied. memcpy is `np.copyto` of the same "
    "bytes into an already-touched destination, measured in the same process as the route's evidence; first-touch "
    "is the same copy into a fresh destination, its page faults included. % of memcpy: memcpy's time / the route's "
    "warm call (100%: as fast as memcpy), where the route copied. Leak: the process's RSS over repeated "
    "conversions; it grows where it still grew over the probe's second half."
)
LAYOUT_INTRO = (
    "Under each matrix, each route on every layout of its source (the timed calls use the contiguous one): ✓ view "
    "(the result shares the source's memory), ✗ copy, ? no verdict, refused (the library's words), n/a (the source "
    "has no such layout)."
)


@dataclass
class Group:
    """One size and dtype: its title, the matrix, the layout table, the routes below half of memcpy."""

    title: str
    header: list[str]
    rows: list[list[str]]
    layout_header: list[str]
    layout_rows: list[list[str]]
    below_half: str


def is_conversion(case: CaseResult) -> bool:
    """A conversion route's case: with its evidence, or without (refused, too large, failed)."""
    return present(case.conversion) or case.workload in ROUTES


def leak_verdict(conversion: Conversion) -> str:
    leak = conversion.evidence.leak
    if leak.grows:
        per_call = leak.growth_per_call_bytes
        return "grows" if per_call is None else f"grows {fmt_bytes(per_call)}/call"
    return f"{'steady' if leak.grows is False else '? no verdict'} ({leak.calls:,} calls)"


def memcpy_cell(conversion: Conversion) -> str:
    evidence = conversion.evidence
    return (f"{fmt_rate(conversion.memcpy_bytes_per_s)} ({fmt_seconds(evidence.memcpy_s)}; first-touch "
            f"{fmt_seconds(evidence.memcpy_fresh_s)})")  # fmt: skip


def layout_cell(row: ConversionLayout | None, loud: Callable[[str], str]) -> str:
    if row is None:
        return DASH
    if row.outcome in ("refused", "unusable"):
        return f"{row.outcome}: {one_line(row.reason or '')}"
    if row.outcome == "not_applicable":
        return "n/a"
    text = "? no verdict" if row.copied is None else "✗ copy" if row.copied else "✓ view"
    return text + (" " + loud("⚠ WRONG VALUES") if row.values_ok is False else "")


def _route(case: CaseResult) -> tuple[str, str]:
    """(source → destination, API): the evidence's, else the route's as catalogued."""
    if present(case.conversion):
        evidence = case.conversion.evidence
        return f"{evidence.source} → {evidence.destination}", evidence.api
    route = ROUTES.get(case.workload)
    return (f"{route.source} → {route.destination}", route.api) if route else (DASH, DASH)


def _order(case: CaseResult) -> tuple:
    names = list(ROUTES)
    return (names.index(case.workload) if case.workload in ROUTES else len(names), case.workload)


MATRIX_HEADER = ["route", "source → destination", "API", "copied", "first conversion (cold)", "warm call", "GB/s",
                 "% of memcpy", "memcpy GB/s (touched; first-touch)", "leak"]  # fmt: skip


def copied_cell(evidence) -> str:
    """The copy verdict and where its source sat (its address modulo 64)."""
    offset = evidence.source_offset_64
    return copied_verdict(evidence.copied) + ("" if offset is None else f" (+{offset} B)")


def matrix_row(case: CaseResult, mark: Callable[[str], str] = code) -> list[str]:
    """The case's row of its matrix; a case without evidence: its status and reason, then dashes."""
    direction, api = _route(case)
    if not present(case.conversion):
        verdict = case.status + (f": {case.reason}" if case.reason else "")
        return [mark(case.workload), direction, mark(api), verdict, *[DASH] * (len(MATRIX_HEADER) - 4)]
    conversion = case.conversion
    return [
        mark(case.workload), direction, mark(api), copied_cell(conversion.evidence),
        fmt_seconds(conversion.first_call_s), fmt_seconds(conversion.call_s), fmt_rate(conversion.bytes_per_s),
        fmt_percent(conversion.memcpy_fraction), memcpy_cell(conversion), leak_verdict(conversion),
    ]  # fmt: skip


def groups(cases: list[CaseResult], mark: Callable[[str], str] = code,
           loud: Callable[[str], str] = lambda text: f"**{text}**") -> list[Group]:  # fmt: skip
    """The section's tables, one group per size and dtype ([]: no case has conversion evidence)."""
    chosen = [case for case in cases if is_conversion(case)]
    if not any(present(case.conversion) for case in chosen):
        return []
    by_group: dict[tuple, list[CaseResult]] = {}
    for case in sorted(chosen, key=_order):
        by_group.setdefault((case.size, case.dtype), []).append(case)
    result = []
    for (size, dtype), members in sorted(by_group.items()):
        measured = [case for case in members if present(case.conversion)]
        layouts: list[str] = []
        for case in measured:
            layouts += [row.layout for row in case.conversion.evidence.layouts if row.layout not in layouts]
        layout_rows = []
        for case in measured:
            by_layout = {row.layout: row for row in case.conversion.evidence.layouts}
            layout_rows.append([mark(case.workload), *(layout_cell(by_layout.get(name), loud) for name in layouts)])
        result.append(Group(
            title=f"{fmt_bytes(size)} ({size:,} bytes), {dtype}",
            header=MATRIX_HEADER,
            rows=[matrix_row(case, mark) for case in members],
            layout_header=["route", *layouts],
            layout_rows=layout_rows,
            below_half=below_half_sentence(measured, mark),
        ))  # fmt: skip
    return result


def below_half_sentence(cases: list[CaseResult], mark: Callable[[str], str] = code) -> str:
    """The copying routes below half of memcpy's rate (`below_half_memcpy`), and those that copied
    without a rate to set against it (no warm-call figure)."""
    slow = [case for case in cases if case.conversion.below_half_memcpy is True]
    unrated = [case for case in cases if case.conversion.evidence.copied is True and case.conversion.below_half_memcpy is None]
    if slow:
        named = ", ".join(f"{mark(c.workload)} ({fmt_percent(c.conversion.memcpy_fraction)})" for c in slow)
        text = f"Copying routes below 50% of memcpy: {named}."
    elif any(case.conversion.below_half_memcpy is False for case in cases):
        text = "No copying route with a rate is below 50% of memcpy."
    else:
        text = "No route here has a rate to set against memcpy."
    if unrated:
        text += f" Copied without a rate (no warm-call figure): {', '.join(mark(c.workload) for c in unrated)}."
    return text


def section(cases: list[CaseResult]) -> list[str]:
    parts = groups(cases)
    if not parts:
        return []
    lines = [f"## {TITLE}", "", INTRO, "", LAYOUT_INTRO, ""]
    for group in parts:
        lines += [f"### {group.title}", "", *table(group.header, group.rows), ""]
        if group.layout_rows:
            lines += ["Layouts of the source:", "", *table(group.layout_header, group.layout_rows), ""]
        lines += [group.below_half, ""]
    return lines
