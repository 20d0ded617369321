"""comparison.md: a verdict table that reads well as a pull-request comment."""

from __future__ import annotations

from ttfr.analyse.explain_changes import EXPLAIN_THRESHOLD
from ttfr.model.base import UNSET
from ttfr.model.comparison import Comparison, Record
from ttfr.model.policies import policy_label
from ttfr.report.formatting import code, fmt_seconds, table

CONCURRENCY_NOTE = (
    "A policy written `<mode> xN` (`--concurrency`) is N fresh processes started at once, sharing one cache directory "
    "that starts empty (cold-shared) or holds the case's compiled programs (warm-shared), or each on an empty one of "
    "its own (cold-private); its medians are the time from the group's first start until all N had a result, one "
    "group per round, judged as a cold figure."
)
_ICON = {"regression": "🔴", "improvement": "🟢", "equivalent": "⚪", "inconclusive": "🟡", "not_compared": "⚫"}


def _pct(value) -> str:
    return "—" if value is None else f"{value:+.1%}"


def _median(summary) -> float | None:
    return summary.median if summary not in (None, UNSET) else None


def _level(level) -> str:
    """The interval's achieved level where it is not the column's 95% (few runs allow no more)."""
    return "" if level is None or round(level, 3) >= 0.95 else f" ({level:.0%} CI: too few runs for 95%)"


def row(record: Record) -> list[str]:
    effect = record.effect if record.effect is not UNSET else None
    ci = effect.ci if effect else None
    return [
        f"`{record.case}`",
        record.point,  # a policy, or a concurrency point: "cold-shared x8"
        fmt_seconds(_median(record.a)),
        fmt_seconds(_median(record.b)),
        _pct(effect.ratio - 1) if effect and effect.ratio else "—",
        f"[{_pct(ci[0] - 1)}, {_pct(ci[1] - 1)}]" + _level(effect.ci_level) if ci else "—",
        f"{effect.p_gate:.3g}" if effect else "—",
        f"{_ICON.get(record.base_verdict, '')} {record.verdict}",
        record.explanation,
    ]


def render(document: Comparison) -> str:
    summary = document.summary
    counts = ", ".join(f"{n} {name}" for name, n in sorted(summary.counts.items()))
    lines = [f"## ttfr comparison: B vs A — gate **{summary.gate.upper()}**", ""]
    if document.warning:
        lines += [f"> **Warning:** {document.warning}", ""]
    lines += [
        f"- {name}: {code(arm.command or arm.python)}"
        + "".join(f" {code(f'{k}={v}')}" for k, v in arm.env.items())
        + (f" (PATH first: {code(arm.path_first)})" if arm.path_first else "")
        for name, arm in zip("AB", document.arms)
    ]
    lines += [
        f"- {'Paired rounds, interleaved in one session' if document.paired else 'Unpaired (separate sessions)'}; "
        f"correction: {document.correction}; verdicts: {counts or 'none'}",
    ]
    rounds = document.rounds
    if rounds:
        lines.append(f"- Rounds: {rounds.completed} (min {rounds.min}, max {rounds.max}; stopped by {rounds.stopped_by})")
    if document.host_noise.noisy:
        lines.append(f"- **Noisy machine:** {'; '.join(document.host_noise.why)}")
    header = ["case", "policy", "A median", "B median", "B/A", "95% CI", "p (gate)", "verdict", "why"]
    lines += ["", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row(r)) + " |" for r in document.comparisons]
    flagged = [
        f"- `{r.case}` {r.point} arm {side.upper()}: {name}"
        for r in document.comparisons
        if r.diagnostics is not UNSET
        for side, series in (("a", r.diagnostics.a), ("b", r.diagnostics.b))
        for name in series.flagged()
    ]
    if flagged:
        lines += ["", "Diagnostics:", *flagged]
    lines += ["", "δ per comparison: max(3% warm / 5% cold, 2× the A/A noise floor); B/A is the Hodges–Lehmann ratio."]
    lines += explained_section(document)
    if any(r.concurrency is not UNSET for r in document.comparisons):
        lines += ["", CONCURRENCY_NOTE]
    return "\n".join(lines) + "\n"


EXPLAINED_HEADER = ["case", "policy", "what", "phase", "name", "A", "B", "B - A"]
_KIND_WORDS = {"distribution": "imports of", "module": "module", "program": "JAX program", "frame": "compiled frame",
               "first_call_part": "first-call part"}  # fmt: skip


EXPLAINED_TITLE = "What changed in the explained cold starts (--explain)"
EXPLAINED_INTRO = (f"One diagnostic process per arm, case and cold policy, so no interval: a row is shown where "
                   f"{EXPLAIN_THRESHOLD} (at most ten per case and policy, largest first).")  # fmt: skip
EXPLAINED_NONE = "Nothing changed beyond it."


def explained_rows(document: Comparison) -> list[list[str]]:
    """The rows as the comparison holds them (both reports render these)."""
    return [[code(c.case), policy_label(c.policy), _KIND_WORDS[c.kind], c.phase or "—", code(c.name),
             fmt_seconds(c.a_s), fmt_seconds(c.b_s), ("+" if c.change_s >= 0 else "−") + fmt_seconds(abs(c.change_s))]
            for c in document.explained or []]  # fmt: skip


def explained_section(document: Comparison) -> list[str]:
    """Both arms ran --explain: what changed most between their diagnostic processes, under the stated threshold."""
    if document.explained is UNSET:
        return []
    lines = ["", f"### {EXPLAINED_TITLE}", "", EXPLAINED_INTRO]
    if not document.explained:
        return [*lines, "", EXPLAINED_NONE]
    return [*lines, "", *table(EXPLAINED_HEADER, explained_rows(document))]
