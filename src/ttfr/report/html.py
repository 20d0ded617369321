"""report.html (and comparison.html): a self-contained page of a result directory, rendered
from its verified artifacts only — CSS inline, figures as inline SVG (report/plots.py), no
script and nothing fetched from the network. Every figure has the table of its numbers beside
it. Every text that comes from a run (case ids, commands, reasons) is escaped."""

from __future__ import annotations

import html
import re
import shlex


from ttfr.artifacts.reader import VerifiedResult
from ttfr.model.base import UNSET
from ttfr.model.case import CaseResult
from ttfr.model.comparison import Comparison
from ttfr.model.history import History
from ttfr.measure import catalog
from ttfr.model.policies import COLD_POLICIES, WARM_PROCESS
from ttfr.report import commands_md, concurrency_md, conversions_md, explain_md, flag_text, markdown, precompiled_md
from ttfr.report.formatting import COMPILERS_COLUMN, fmt_bytes, fmt_summary

# Readable from 1400 px down to a phone: each figure (at most 691 px wide, plots._WIDTH) is shown
# at its own size where it fits, so its text stays >= 10 px; its table beside it where the whole
# table fits, else below; a cell wraps (_cell) rather than push the page, or a scrolled box, wider
# than the window.
_CSS = """
:root { color-scheme: light; --fg: #1b2631; --muted: #5d6d7e; --line: #d5d8dc; --ok: #1e8449; --warn: #b7950b;
        --failed: #c0392b; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--fg); margin: 0 auto;
       max-width: 1280px; padding: 1.5rem; background: #fff; overflow-wrap: anywhere; }
h1 { font-size: 1.5rem; margin: 0 0 .3rem; } h2 { font-size: 1.2rem; margin-top: 2rem; border-bottom: 1px solid var(--line); }
.meta { color: var(--muted); margin: 0 0 1rem; }
table { border-collapse: collapse; font-size: 13px; margin: .4rem 0; max-width: 100%; }
th, td { border: 1px solid var(--line); padding: 2px 5px; text-align: left; vertical-align: top; overflow-wrap: normal; }
th { background: #f4f6f7; }
td.long { overflow-wrap: anywhere; }  /* a path or command that no window holds: broken anywhere */
code { font-size: 13px; }
.status-ok { color: var(--ok); } .status-warn { color: var(--warn); } .status-failed { color: var(--failed); font-weight: 600; }
figure.plot { display: flex; flex-wrap: wrap; gap: 1rem; margin: 1rem 0 2rem; align-items: flex-start; }
figure.plot figcaption { flex: 1 0 100%; font-weight: 600; }
figure.plot .svg { flex: 0 1 auto; min-width: 0; max-width: 100%; }
figure.plot svg { display: block; max-width: 100%; height: auto; }
figure.plot .data { flex: 1 1 auto; min-width: 0; }  /* beside the figure when it fits whole, else below */
.note { color: var(--muted); font-size: 12px; }
@media (max-width: 900px) { table, code { font-size: 12px; } }
@media (max-width: 700px) { body { padding: .75rem; } td { overflow-wrap: anywhere; } }
"""


def _e(value) -> str:
    return html.escape("" if value is None else str(value), quote=True)


_IDENTIFIER = re.compile(r"[\w./-]{21,}")


def _cell(text) -> str:
    # Breaking every cell anywhere let one long token's column squeeze the others' words ("passe d"):
    # a long identifier (a case id) may break after its underscores where its column is too narrow,
    # and only a cell with a token longer than an id (a path, a command) breaks anywhere.
    cell = _IDENTIFIER.sub(lambda m: m[0].replace("_", "_<wbr>"), _e(text))
    long = any(len(word) > 48 for word in str(text).split())
    return f"<td class=long>{cell}</td>" if long else f"<td>{cell}</td>"


def _table(header: list[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th scope=col>{_e(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(_cell(cell) for cell in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _figure(plot) -> str:
    note = f"<p class=note>{_e(plot.note)}</p>" if plot.note else ""
    return (f"<figure class=plot><figcaption>{_e(plot.title)}</figcaption><div class=svg role=img "
            f"aria-label=\"{_e(plot.title)}\">{plot.svg}</div><div class=data>{_table(plot.header, plot.rows)}{note}"
            "</div></figure>")  # fmt: skip


def _page(title: str, meta: list[str], sections: list[str]) -> str:
    lines = "".join(f"<p class=meta>{_e(m)}</p>" for m in meta)
    return (f"<!DOCTYPE html><html lang=en><head><meta charset=utf-8><meta name=viewport "
            f"content=\"width=device-width, initial-scale=1\"><title>{_e(title)}</title><style>{_CSS}</style></head>"
            f"<body><h1>{_e(title)}</h1>{lines}{''.join(sections)}</body></html>\n")  # fmt: skip


def _list(items: list[str]) -> str:
    return "<ul>" + "".join(f"<li>{_e(item)}</li>" for item in items) + "</ul>"


def _section(title: str, parts: list[str], intro: str = "") -> str:
    parts = [p for p in parts if p]
    if not parts:
        return ""
    text = f"<p>{_e(intro)}</p>" if intro else ""
    return f"<section><h2>{_e(title)}</h2>{text}{''.join(parts)}</section>"


def _summary(cases: list[CaseResult]) -> str:
    rows = []
    for case in cases:
        rows.append([case.case, case.status + (f": {case.reason}" if case.reason else ""),
                     fmt_summary(case.figure(COLD_POLICIES[0], "ttfr_s")),
                     fmt_summary(case.figure(COLD_POLICIES[1], "ttfr_s")),
                     fmt_summary(case.figure(WARM_PROCESS, "call_s")),
                     markdown.cache_check(case), markdown.result_check(case)])  # fmt: skip
    table = _table(["case", "status", "TTFR, cold cache", "TTFR, warm cache", "warm call", "cache check", "result check"], rows)

    # colour the status cells: the text is escaped, the class is ours
    def coloured(m: re.Match) -> str:
        return f'<td class="status-{m[2]} long">{m[2]}' if m[1] else f"<td class=status-{m[2]}>{m[2]}"

    return re.sub(r"<td( class=long)?>(ok|warn|failed)", coloured, table)


def _commands(cases: list[CaseResult]) -> str:
    commands = [c for c in cases if c.command]
    trees = commands_md.any_watched(commands)  # report.md's compiler column, where any run was watched
    rows = [[c.case, shlex.join(c.command.argv), fmt_summary(c.figure(COLD_POLICIES[0], "ttfr_s")),
             *([commands_md.compilers(c)] if trees else [])] for c in commands]  # fmt: skip
    header = ["case", "command", "TTFR, cold cache", *([COMPILERS_COLUMN] if trees else [])]
    return _table(header, rows) if rows else ""


def _flags(cases: list[CaseResult]) -> str:
    """Each flag as report.md lists it: a list, since its sentence is most of it (in a table the
    sentence's column squeezed the others)."""
    items = [f"<li><code>{_e(case.case)}</code> ({_e(flag.policy or 'case')}): <strong>{_e(flag.name)}</strong>: "
             f"{_e(flag_text.sentence(flag))}</li>" for case in cases for flag in case.flags]  # fmt: skip
    return f"<ul class=flags>{''.join(items)}</ul>" if items else "<p>None.</p>"


def _precompiled(cases: list[CaseResult]) -> list[str]:
    """report.md's Precompiled artifacts table and lists (the same rows, without Markdown's marks)."""
    found = precompiled_md.tables(cases, mark=str)
    if found is None:
        return []
    return [_table(found.header, found.rows), "<p>What each mechanism claims:</p>", _list(found.claims),
            "<p>What each artifact is bound to:</p>", _list(found.bound)]  # fmt: skip


def _conversions(cases: list[CaseResult], plots) -> list[str]:
    """report.md's Conversions tables (the same rows, without Markdown's marks), then a figure per
    route family; nothing when no case has conversion evidence."""
    parts = []
    for group in conversions_md.groups(cases, mark=str, loud=str):
        parts.append(f"<h3>{_e(group.title)}</h3>{_table(group.header, group.rows)}")
        if group.layout_rows:
            parts.append(f"<p>Layouts of the source:</p>{_table(group.layout_header, group.layout_rows)}")
        parts.append(f"<p>{_e(group.below_half)}</p>")
    if not parts:
        return []
    return [f"<p>{_e(conversions_md.LAYOUT_INTRO)}</p>", *parts, *(_figure(p) for p in plots.conversions(cases))]


def _concurrency(cases: list[CaseResult], plots) -> list[str]:
    """report.md's Concurrency tables and lines (the same rows, without Markdown's marks), then each
    case's TTFR against N; nothing when no case has concurrency."""
    by_id = {case.case: case for case in cases}
    parts = []
    for part in concurrency_md.case_tables(cases, mark=str):
        parts.append(f"<h3>{_e(part.title)}</h3>{_table(part.header, part.rows)}")
        if part.oversubscribed:
            parts.append(f"<p>⚠ {_e(concurrency_md.OVERSUBSCRIBED)}.</p>")
        if part.fan_out_rows:
            parts.append(f"<p>Fan-out advice:</p>{_table(part.fan_out_header, part.fan_out_rows)}")
        else:
            parts.append("<p>Fan-out advice: no group size ran both cold-shared and warm-shared.</p>")
        parts.append(f"<p>What went wrong:</p>{_list(part.problems)}" if part.problems
                     else f"<p>{_e(concurrency_md.NOTHING_WRONG)}</p>")  # fmt: skip
        plot = plots.concurrency(by_id[part.case])
        if plot:
            parts.append(_figure(plot))
    if not parts:
        return []
    return [f"<p>{_e(concurrency_md.FAN_OUT_INTRO)}</p>", *parts]


def _explain(cases: list[CaseResult], plots) -> list[str]:
    """Each explained case's picture of its whole cold start (plots.cold_start), then report.md's --explain
    tables and advice (the same rows, without Markdown's marks), per case and cold policy; nothing when no
    case has an explanation."""
    parts = [_figure(plot) for plot in plots.cold_start(cases)]
    for part in explain_md.policy_tables(cases, mark=str):
        parts.append(f"<h3>{_e(part.title)}</h3><p>{_e(part.headline)}</p>")
        for item in part.tables:
            parts.append((f"<p>{_e(item.intro)}</p>" if item.intro else "") + _table(item.header, item.rows))
        if part.items:
            parts.append("<ul>" + "".join(f"<li>{_e(text)}</li>" for text in part.items) + "</ul>")
    return parts


def _health(cases: list[CaseResult]) -> str:
    """How many measured runs were contended (report.md's Machine health says more)."""
    from ttfr.analyse import contention

    views = [v for c in cases for v in c.policies.all_runs() if v.outcome == "ok"]
    busy = sum(contention.is_contended(v) for v in views)
    return (f"Machine health: {busy} of {len(views)} measured runs and warm processes were contended "
            "(set aside from the figures when enough clean ones remain; see report.md)")  # fmt: skip


def render(result: VerifiedResult) -> str:
    from ttfr.report import plots  # matplotlib: only when a page is made

    suite, manifest, cases = result.suite, result.manifest, result.cases
    cpu = manifest.cpu
    machine = f"{cpu.model}, {cpu.usable_cores} usable cores, {fmt_bytes(manifest.memory.total_bytes)}; {manifest.os.platform}"
    counts = suite.summary
    pending = (f", {counts.n_pending} pending — finish with `ttfr run --resume {result.result_dir.root}`"
               if counts.n_pending else "")  # fmt: skip
    meta = [f"State: {suite.state}; {counts.n_ok} ok, {counts.n_warn} warn, {counts.n_failed} failed"
            f"{pending}; profile {suite.profile}, seed {suite.seed}; ttfr {suite.ttfr_version}; "
            f"created {suite.created_at}", f"Machine: {machine}", _health(cases)]  # fmt: skip
    sections = [
        _section("Summary", [_summary(cases)], "Medians with their 95% order-statistic CI."),
        _section(
            "Amortisation: after how many calls does the slower starter catch up?",
            [_figure(p) for p in plots.amortisation(cases, suite.break_even)],
        ),  # fmt: skip
        _section(
            "Cold-start components",
            [_figure(p) for p in (plots.components(cases, pol) for pol in markdown.cold_policies(cases)) if p],
        ),
        _section(
            "Run distributions",
            [
                _figure(p)
                for p in (plots.distributions(cases, pol) for pol in (*markdown.cold_policies(cases), WARM_PROCESS))
                if p
            ],
        ),
        _section(precompiled_md.TITLE, _precompiled(cases), precompiled_md.INTRO),
        _section(
            catalog.WORKSPACE_FAMILY,
            [_figure(p) for p in plots.scaling(suite.scaling)] + [_figure(p) for p in [plots.training_losses(cases)] if p],
        ),  # fmt: skip
        _section("Loops", [_figure(p) for p in plots.loop_timelines(cases, suite.loops or [])]),
        _section(conversions_md.TITLE, _conversions(cases, plots), conversions_md.INTRO.replace("`", "")),
        _section(concurrency_md.TITLE, _concurrency(cases, plots), concurrency_md.INTRO),
        _section("Commands", [_commands(cases)]),
        # as in report.md: after every measured figure, just before the Flags that hold explanation_disagrees
        _section(explain_md.TITLE, _explain(cases, plots), explain_md.INTRO.replace("`", "")),
        _section("Flags", [_flags(cases)]),
        _section("Limitations", [_list(markdown.limitations(manifest, cases))]),
    ]
    return _page(f"ttfr snapshot {suite.snapshot_id}", meta, sections)


def render_comparison(document: Comparison) -> str:
    from ttfr.report import comparison_md, plots

    summary = document.summary
    plot = plots.forest(document)
    rows = [comparison_md.row(r) for r in document.comparisons]
    meta = [
        line.lstrip("- ").replace("`", "")
        for line in comparison_md.render(document).splitlines()
        if line.startswith(("- ", "> "))
    ]  # comparison.md's header: arms, pairing, rounds, noise, warnings
    meta.insert(0, f"gate {summary.gate}")
    header = ["case", "policy", "A median", "B median", "B/A", "95% CI", "p (gate)", "verdict", "why"]
    sections = [
        _section("B against A", [_figure(plot) if plot else "", _table(header, [[c.strip("`") for c in r] for r in rows])]),
    ]
    if document.explained is not UNSET:  # both arms ran --explain: the same rows as comparison.md
        changed = [[c.strip("`") for c in r] for r in comparison_md.explained_rows(document)]
        body = _table(comparison_md.EXPLAINED_HEADER, changed) if changed else f"<p>{_e(comparison_md.EXPLAINED_NONE)}</p>"
        sections.append(_section(comparison_md.EXPLAINED_TITLE, [body], comparison_md.EXPLAINED_INTRO))
    return _page("ttfr comparison: B vs A", meta, sections)


def render_history(history: History, links: dict[str, str]) -> str:
    """history.html: history.md's tables, and a trend per case and figure whose points open their results."""
    from ttfr.report import history_md, history_plots

    head = history_md.render(history).split("\n## ", 1)[0]  # history.md's lines above its first section
    meta = [line.lstrip("- ").replace("`", "") for line in head.splitlines() if line.startswith("- ")]
    steps = history_md.step_rows(history)
    step_table = _table(history_md.STEP_HEADER, [[c.replace("`", "") for c in r] for r in steps]) if steps else ""
    sources = [[str(i), s.id, s.kind, s.label, s.machine, history_md.changed_text(s) if i else "—", s.path]
               for i, s in enumerate(history.sources)]  # fmt: skip
    detail = [line.replace("`", "") for line in history_md.changed_lines(history)]
    changed = (
        "<ul>"
        + "".join(
            f"<li>{_e(line.removeprefix('- '))}</li>"
            if line.startswith("- ")
            else f"<ul><li>{_e(line.strip().removeprefix('- '))}</li></ul>"
            for line in detail
        )
        + "</ul>"
    )
    sections = [
        _section("Steps", [step_table or f"<p>{_e(history_md.NO_STEP)}</p>",
                           f"<h3>{_e(history_md.CHANGED_TITLE.lstrip('# '))}</h3>{changed}" if detail else ""]),
        _section("Trends", [_figure(plot) for plot in history_plots.trends(history, links)],
                 "Each line is a series (a cache policy on a machine); an open stretch is a gap (its reason is in "
                 "history.md and history.csv); a dashed line marks a step where its new level starts; each point "
                 "opens its result."),
        _section("Results", [_table(["#", "id", "kind", "label", "machine", "changed since the previous", "path"],
                                    sources)]),
        _section("Left out", [_list([f"{item.path}: {item.reason}" for item in history.left_out])]),
    ]  # fmt: skip
    return _page("ttfr history", meta, sections)


def render_fragment(result: VerifiedResult, cases: list[CaseResult] | None = None) -> str:
    """A result (or some of its cases) for a notebook's output: the summary table and the cold-start components
    chart of each cold policy, inline SVG with the page's style scoped to it (no server, works offline)."""
    from ttfr.report import plots

    cases = result.cases if cases is None else cases
    scoped = "\n".join(f".ttfr-result {rule}" if rule.strip() and not rule.lstrip().startswith(("@", ":root", "body"))
                       else "" for rule in _CSS.splitlines())  # fmt: skip
    charts = [_figure(p) for p in (plots.components(cases, pol) for pol in markdown.cold_policies(cases)) if p]
    counts = result.suite.summary
    head = (f"<p class=meta>{_e(result.result_dir.root.name)}: {counts.n_ok} ok, {counts.n_warn} warn, "
            f"{counts.n_failed} failed; profile {result.suite.profile}</p>")  # fmt: skip
    return f"<div class=ttfr-result><style>{scoped}</style>{head}{_summary(cases)}{''.join(charts)}</div>"
