"""The --explain picture's boxes (report.html's icicle chart): a cold policy's whole cold start, top
down. Row 0: the measured phases (medians, seconds on the axis). Row 1: under the import phase, the
distributions its imports went to (and the phase's time spent not importing); under the first call,
its parts (torch.compile(fn), trace, compile, the compiler runs, imports, unattributed). Row 2: under
JAX's compile part, the programs it compiled; under torch's Inductor part, the graphs.

A row's boxes are the diagnostic process's own seconds drawn as shares of their parent box: the
explanation is a measurement of another process, so its parts fill the measured phase in the
proportions it found, and every label gives the part's own seconds. Pure: the typed explanation in,
boxes out (plots.py draws them; the tests check that children fill their parents).
"""

from __future__ import annotations

from typing import NamedTuple

from ttfr.model.base import present
from ttfr.model.explanation import UNATTRIBUTED, Explanation
from ttfr.model.policy_figures import ColdPolicy, named
from ttfr.model.run_figures import COMPONENT_LABELS

NOT_IMPORTING = "not importing"  # the import phase's time outside any import (the worker's own clock reads)
OTHER = "other"


class Box(NamedTuple):
    row: int
    parent: str | None  # the label of the box above it (None: a phase)
    label: str
    start: float  # seconds on the axis
    width: float  # seconds on the axis
    seconds: float  # the part's own seconds (the measured median for a phase, else the diagnostic process's)
    share: float | None  # its share of the parent box (None: a phase), decided here once: its width and its table cell


def boxes(block: ColdPolicy, explanation: Explanation, most: int = 8) -> list[Box]:
    """Every box of one policy's picture; a row's parts past `most` under one parent are one `other` box."""
    phases, left = [], 0.0
    for key, label in COMPONENT_LABELS.items():
        figure = named(block.summary, key)
        if figure is None or figure.median is None or figure.median <= 0:
            continue
        phases.append(Box(0, None, label, left, figure.median, figure.median, None))
        left += figure.median
    out = list(phases)
    for phase in phases:
        parts = _parts(phase.label, explanation)
        children = _fill(1, phase, _capped(parts, most))
        out += children
        for child in children:
            out += _fill(2, child, _capped(_details(child.label, explanation), most))
    return out


def _parts(phase: str, explanation: Explanation) -> list[tuple[str, float]]:
    if phase == COMPONENT_LABELS["import_s"]:
        traced = next((p for p in explanation.phases if p.phase == "import"), None)
        if traced is None:
            return []
        parts = [(_distribution(d.distribution, d.version), d.self_s) for d in traced.distributions]
        rest = (explanation.traced_import_s or 0.0) - traced.imports_s
        return parts + ([(NOT_IMPORTING, rest)] if rest > 0 else [])
    if phase == COMPONENT_LABELS["first_call_s"] and present(explanation.first_call):
        return [(part.part, part.s) for part in explanation.first_call.parts]
    return []


def _details(part: str, explanation: Explanation) -> list[tuple[str, float]]:
    """A first-call part's own pieces: JAX's programs under its compile, torch's graphs under Inductor."""
    if part == "compile" and present(explanation.programs):
        return [(program.name, program.compile_s) for program in explanation.programs]
    if part == "inductor" and present(explanation.frames):
        return [(f"graph {frame.compile_id or '?'} {frame.function or ''}".strip(), frame.inductor_s)
                for frame in explanation.frames if frame.inductor_s]  # fmt: skip
    return []


def _distribution(name: str, version: str | None) -> str:
    return name if name in (UNATTRIBUTED, OTHER) or not version else f"{name} {version}"


def _capped(parts: list[tuple[str, float]], most: int) -> list[tuple[str, float]]:
    """The largest `most - 1` parts and one `other` for the rest (an `other` already there joins it)."""
    parts = [(label, seconds) for label, seconds in parts if seconds and seconds > 0]
    if len(parts) <= most:
        return parts
    ranked = sorted(parts, key=lambda p: -p[1])
    kept = [p for p in ranked[: most - 1] if p[0] != OTHER]
    rest = sum(seconds for label, seconds in parts if (label, seconds) not in kept)
    return [p for p in parts if p in kept] + [(OTHER, rest)]


def _fill(row: int, parent: Box, parts: list[tuple[str, float]]) -> list[Box]:
    """The parts as shares of the parent's width, in their order: they fill it exactly (none: no seconds)."""
    total = sum(seconds for _label, seconds in parts)
    if total <= 0:
        return []
    out, left = [], parent.start
    for label, seconds in parts:
        share = seconds / total
        out.append(Box(row, parent.label, label, left, parent.width * share, seconds, share))
        left += parent.width * share
    return out
