"""How every rendering writes a number, a duration, a figure with its interval, and free
text (Markdown-safe): report.md's sections, the terminal, report.html and the plots share it."""

from __future__ import annotations

import re
from typing import NamedTuple

from ttfr.model.base import UNSET, present
from ttfr.model.policy_figures import named
from ttfr.model.run_figures import NESTED_STAGES, STAGE_LABELS
from ttfr.model.summary import Summary

DASH = "—"


def fmt_seconds(value: float | None) -> str:
    if value is None:
        return DASH
    magnitude = abs(value)
    for scale, unit in ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs")):
        if magnitude >= scale:
            return f"{value / scale:.3g} {unit}"
    return f"{value / 1e-9:.3g} ns"


def fmt_bytes(value: int | float | None) -> str:
    if value is None:
        return DASH
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if value >= scale:
            return f"{value / scale:.3g} {unit}"
    return f"{int(value)} B"


def fmt_rate(bytes_per_s: float | None) -> str:
    """A rate in decimal gigabytes a second (bytes counted once: a copy's source)."""
    return DASH if bytes_per_s is None else f"{bytes_per_s / 1e9:.3g} GB/s"


def fmt_percent(fraction: float | None) -> str:
    """A fraction as a percentage: whole percents from 10%, two figures below (`0.52%`)."""
    if fraction is None:
        return DASH
    percent = 100 * fraction
    return f"{percent:.0f}%" if percent >= 10 else f"{percent:.2g}%"


def fmt_copies(transfer_s, share) -> str:
    """A loop's host<->device copies: their median seconds and share of the loop ("—": none timed)."""
    if not present(transfer_s):
        return DASH
    return f"{fmt_summary(transfer_s, with_ci=False)} ({'n/a' if not present(share) else f'{100 * share:.0f}%'})"


def copied_verdict(copied: bool | None) -> str:
    """A conversion's copy verdict, as every output words it."""
    return "? no verdict" if copied is None else "✗ copied" if copied else "✓ zero-copy"


def fmt_summary(summary: Summary | None, with_ci: bool = True) -> str:
    if not summary:
        return DASH
    text = fmt_seconds(summary.median)
    ci = summary.median_ci
    if with_ci and summary.n > 1:
        text += f" [{fmt_seconds(ci.low)}, {fmt_seconds(ci.high)}]"
        if ci.level < 0.95:
            text += f" ({ci.level:.0%})"
    return text


class Stage(NamedTuple):
    name: str  # as artifacts name it (`inductor_s`)
    label: str  # as every output labels it (STAGE_LABELS)
    seconds: float  # its median


class FirstCallStages(NamedTuple):
    own: list[Stage]  # the stages that divide the first call, in its order
    nested: list[Stage]  # stages whose time is already inside the others (NESTED_STAGES): never a summand


def first_call_stages(stages) -> FirstCallStages:
    """The first call's recorded stages (a StagesSummary) as the model orders and nests them:
    the one reading that report.md, report.html and the figures render."""
    own, nested = [], []
    for name, label in STAGE_LABELS.items():
        if summary := named(stages, name):
            (nested if name in NESTED_STAGES else own).append(Stage(name, label, summary.median))
    return FirstCallStages(own, nested)


COMPILERS_COLUMN = "compiler runs before the first result (process tree)"


def compilers_seen(summary) -> str:
    """A cold policy's compiler runs before the first result, as every output says it (`8 (seen 9.8 s)`): medians
    over its headline runs; a dash where none was watched or none is a figure."""
    runs, seen = named(summary, "compiler_runs"), named(summary, "compiler_seen_s")
    if runs is None:
        return DASH
    return "none" if runs.median == 0 else f"{runs.median:g} (seen {fmt_seconds(seen.median if seen else None)})"


def watched(summaries) -> bool:
    """Whether any of these cold summaries holds what a process tree showed (its column is drawn then)."""
    return any(present(getattr(s, "compiler_runs", UNSET)) for s in summaries)


def stage_split(stages) -> str:
    """The first call's stages as one text (`dynamo 1.2 s, inductor 8 s (within these: backward
    compile 1.14 s)`), the same in every output; a dash when none was recorded."""
    own, nested = first_call_stages(stages)
    text = ", ".join(f"{s.label} {fmt_seconds(s.seconds)}" for s in own)
    if nested:
        inside = ", ".join(f"{s.label} {fmt_seconds(s.seconds)}" for s in nested)
        text = f"{text} (within these: {inside})" if own else f"within the first call: {inside}"
    return text or DASH


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """Free text without control characters (escape sequences that would move a terminal's
    cursor, retitle its window or hide what follows), its lines and tabs kept."""
    return _CONTROL.sub("", text)


def one_line(text) -> str:
    """Free text (a reason, a program's output) as one line of Markdown: control characters
    (terminal escapes) dropped, line breaks folded, so it cannot break a table or add a heading."""
    return " ".join(_CONTROL.sub("", str(text)).split())


def code(text) -> str:
    """`text` as one inline code span, whatever backticks it holds."""
    text = one_line(text)
    fence = "`" * (max((len(run) for run in re.findall(r"`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def code_block(text) -> list[str]:
    """Free text of several lines (a traceback) as a fenced Markdown block, whatever backticks it
    holds, without control characters."""
    text = printable(str(text)).rstrip()
    fence = "`" * max(3, max((len(run) for run in re.findall(r"`+", text)), default=0) + 1)
    return [fence, text, fence]


def table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(one_line(cell).replace("|", "\\|") for cell in row) + " |" for row in rows]
    return lines
