"""history.md (and the terminal's lines): the steps found, with their size, interval and what
changed; every series in brief; the results read and those left out; how steps are found."""

from __future__ import annotations

from ttfr.model.base import UNSET
from ttfr.model.history import History, Series, Source, Step
from ttfr.report.formatting import DASH, code, fmt_percent, fmt_seconds, table

NO_STEP = "No step in any series: every series' points lie within its noise."


def ratio_text(ratio: float) -> str:
    """+22% / -8% (a ratio as a change)."""
    change = ratio - 1
    return f"{'+' if change >= 0 else '−'}{fmt_percent(abs(change))}"


def ci_text(step: Step) -> str:
    return f"{ratio_text(step.ci[0])} .. {ratio_text(step.ci[1])}"


def changed_text(item: Step | Source, limit: int = 4) -> str:
    """What changed at a step (or since the previous result), its first few keys (`runtime.jax 0.9.0 → 0.10.2`)."""
    if not item.changed:
        return "nothing recorded changed"
    parts = [f"{c.key} {c.before or DASH} → {c.after or DASH}" for c in item.changed[:limit]]
    more = len(item.changed) - limit
    return "; ".join(parts) + (f"; and {more} more" if more > 0 else "")


def moved_lines(step: Step, limit: int = 5) -> list[str]:
    """--explain on both sides of a step: what moved between their diagnostic processes, largest first."""
    if not step.explained:
        return [] if step.explained is UNSET else ["  - --explain: nothing moved beyond its threshold"]
    return [f"  - moved ({row.kind}{f', {row.phase}' if row.phase else ''}): {code(row.name)} "
            f"{fmt_seconds(row.a_s)} → {fmt_seconds(row.b_s)} ({'+' if row.change_s >= 0 else '−'}"
            f"{fmt_seconds(abs(row.change_s))})" for row in step.explained[:limit]]  # fmt: skip


CHANGED_TITLE = "### What changed at each step"


def changed_lines(history: History) -> list[str]:
    """Every step's manifest difference and, where both sides ran --explain, what moved (a nested list)."""
    lines = []
    for s in history.series:
        for step in s.steps:
            if not (step.changed or step.explained):
                continue
            lines.append(f"- {series_name(s)} at {code(step.source)}:")
            lines += [f"  - `{c.key}`: {code(c.before) if c.before else DASH} → {code(c.after) if c.after else DASH}"
                      for c in step.changed]  # fmt: skip
            lines += moved_lines(step)
    return lines


def series_name(series: Series) -> str:
    return f"{series.case} · {series.policy} · {series.figure}"


def step_rows(history: History) -> list[list[str]]:
    rows = []
    for series in history.series:
        for step in series.steps:
            rows.append([code(series.case), series.policy, series.figure, code(series.machine),
                         f"{code(step.source)} ({step.label})", f"{fmt_seconds(step.before_s)} → {fmt_seconds(step.after_s)}",
                         ratio_text(step.ratio), ci_text(step), changed_text(step)])  # fmt: skip
    return rows


STEP_HEADER = ["case", "policy", "figure", "machine", "first result after", "level", "change", "95% CI", "what changed"]


def _series_rows(history: History) -> list[list[str]]:
    rows = []
    for s in history.series:
        figures = [p for p in s.points if p.median_s is not None]
        latest = fmt_seconds(figures[-1].median_s) if figures else DASH
        gaps = len(s.points) - len(figures)
        scatter = fmt_percent(s.noise.between_rel) if s.noise.between_rel is not None else DASH
        within = fmt_percent(s.noise.within_rel) if s.noise.within_rel is not None else DASH
        steps = ", ".join(ratio_text(step.ratio) for step in s.steps) or ("too few points" if s.status == "too_short" else "none")
        rows.append([code(s.case), s.policy, s.figure, code(s.machine), str(len(figures)), str(gaps), latest, within,
                     scatter, steps + (" (fails the gate)" if s.newest.fails else "")])  # fmt: skip
    return rows


def render(history: History) -> str:
    sources = history.sources
    machines = len(history.machines)
    order = "date" if history.order_by == "date" else f"{history.order_by}'s version"
    lines = ["# ttfr history", "",
             f"- {len(sources)} result(s) in order of {order}, {len(history.series)} series on {machines} machine(s); "
             "series never mix machines, and a withheld or missing figure is a gap, not a value.",
             f"- Steps: {history.method.library}, {history.method.search}; penalty {history.method.penalty_rule}; "
             f"at least {history.method.min_points} points; {history.method.ci_level:.0%} intervals from "
             f"{history.method.bootstrap} bootstrap resamples."]  # fmt: skip
    gate = history.gate
    if gate.fail_above is not None:
        verdict = f"fails: {', '.join(gate.failing)}" if gate.failing else "passes"
        lines.append(f"- Gate (--fail-above {gate.fail_above:.0%}, on TTFR and the warm call): {verdict}.")
    if history.left_out:
        lines.append(f"- {len(history.left_out)} path(s) left out (they do not verify): see *Left out*.")
    lines += ["", "## Steps", ""]
    rows = step_rows(history)
    lines += table(STEP_HEADER, rows) if rows else [NO_STEP]
    detail = changed_lines(history)
    if detail:
        lines += ["", CHANGED_TITLE, "", *detail]
    lines += ["", "## Series", ""]
    lines += table(["case", "policy", "figure", "machine", "points", "gaps", "latest", "within", "between sessions",
                    "steps"], _series_rows(history))  # fmt: skip
    lines += ["", "## Results", ""]
    lines += table(["#", "id", "kind", "when", "label", "machine", "changed since the previous", "path"],
                   [[str(i), code(s.id), s.kind, s.created_at, s.label, code(s.machine),
                     changed_text(s) if i else DASH, code(s.path)] for i, s in enumerate(sources)])  # fmt: skip
    lines += ["", "## Machines", ""]
    lines += table(["machine", "CPU", "cores (usable)", "GPU", "OS"],
                   [[code(k), m.cpu or DASH, f"{m.logical_cores or DASH} ({m.usable_cores or DASH})",
                     ", ".join(m.gpu) or DASH, m.os] for k, m in history.machines.items()])  # fmt: skip
    if history.left_out:
        lines += ["", "## Left out", ""] + [f"- {code(item.path)}: {item.reason}" for item in history.left_out]
    return "\n".join(lines) + "\n"
