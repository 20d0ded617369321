"""How every rendering writes a number, a duration, a figure with its interval, and free
text (Markdown-safe): report.md's sections, the terminal, report.html and the plots share it."""

from __future__ import annotations

import re

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


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


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


def table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(one_line(cell).replace("|", "\\|") for cell in row) + " |" for row in rows]
    return lines
