"""Terminal output with rich: the summary table, `ttfr list`, comparisons, the self-test, the
report and replication (the live progress of a run: report/progress.py)."""

from __future__ import annotations

import math
import shlex

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from ttfr.analyse import contention
from ttfr.measure import catalog, precompiled
from ttfr.measure.limits import MAX_AB_ROUNDS
from ttfr.model.replication import ReplicationReport
from ttfr.model.selftest import Rate, RoundsForPower, SelfTest
from ttfr.model.base import present
from ttfr.model.case import CaseResult
from ttfr.model.flags import CouldNotMeasureCleanly
from ttfr.model.policy_figures import ColdSummary, named
from ttfr.model.run_figures import COMPONENT_LABELS, OPTIONAL_METRICS
from ttfr.model.comparison import Comparison
from ttfr.model.harness import HarnessCheck, OverheadRatio
from ttfr.model.history import History
from ttfr.model.loops import LoopRow
from ttfr.model.suite import SuiteResult
from ttfr.report import flag_text, precompiled_md
from ttfr.report.formatting import DASH, fmt_seconds, printable
from ttfr.report.markdown import precision_headline, result_check


_STATUS_STYLE = {"ok": "green", "warn": "yellow", "failed": "bold red"}


def print_summary(console: Console, suite: SuiteResult, cases: list[CaseResult], result_path) -> None:
    table = Table(title=f"ttfr {suite.snapshot_id} ({suite.state})", show_lines=False)
    for column in ("case", "status", "TTFR cold cache", "TTFR warm cache", "warm call", "cache check", "result check",
                   "reason"):  # fmt: skip
        table.add_column(column, overflow="fold")
    for case in cases:
        figures = case.headline()
        verdicts = sorted({policy.cache_verification.verdict for _name, policy in case.policies.cold()})
        table.add_row(
            case.case,
            f"[{_STATUS_STYLE[case.status]}]{case.status}[/]",
            fmt_seconds(figures.ttfr_cold_cache_median_s),
            fmt_seconds(figures.ttfr_warm_cache_median_s),
            fmt_seconds(figures.warm_call_median_s),
            ", ".join(verdicts) or "—",
            result_check(case),
            Text(printable(case.reason or "")),  # free text (a program's output): never markup
        )
    progress = suite.pending_runs or []
    for row in progress:  # an interrupted run: what it got to, not an empty table
        table.add_row(row.case, "[yellow]pending[/]", "—", "—", "—", "—", "—",
                      f"{row.runs_done} of {row.runs_planned} runs done; `ttfr run --resume` finishes it")  # fmt: skip
    console.print(table)
    shipped = precompiled_md.tables(cases, mark=str)
    if shipped:  # report.md's Precompiled artifacts rows, the artifact's own column left to it
        artifacts = Table(title="precompiled artifacts (precompiled / standard TTFR; report.md says more)")
        for column in shipped.header[:-1]:
            artifacts.add_column(column, overflow="fold")
        for row in shipped.rows:
            artifacts.add_row(*(Text(printable(cell)) for cell in row[:-1]))
        console.print(artifacts)
    summary = suite.summary
    worst = summary.worst_case
    runs_done = (f" ({sum(r.runs_done for r in progress)} of {sum(r.runs_planned for r in progress)} of their runs done)"
                 if progress else "")  # fmt: skip
    console.print(
        f"{summary.n_ok} ok, {summary.n_warn} warn, {summary.n_failed} failed"
        + (f", {summary.n_pending} pending{runs_done}" if summary.n_pending else "")
        + (f"; worst TTFR {worst.case} {fmt_seconds(worst.ttfr_median_s)}" if worst else "")
    )
    if suite.precision:
        bought = suite.precision
        counts = bought.summary
        style = "green" if 0 < counts.met == counts.statistics else "yellow"
        console.print(precision_headline(bought), style=style, markup=False, highlight=False)
        missed = [s for s in bought.statistics if s.state != "met"]
        for item in missed[:5]:
            width = "no 95% interval" if item.half_width is None else f"±{item.half_width:.1%}"
            console.print(f"  {item.state}: {item.case} {item.policy} {width} from {item.n} runs",
                          markup=False, highlight=False)  # fmt: skip
        if len(missed) > 5:
            console.print(f"  and {len(missed) - 5} more: see Precision in report.md", markup=False, highlight=False)
    for text, style in loop_lines(suite.loops or []):
        console.print(text, style=style, markup=False, highlight=False)
    line = contention.health_line(contention.machine_health(cases))
    if line:
        console.print(line, style="yellow", markup=False, highlight=False)
    console.print(f"results: {result_path}", markup=False, highlight=False)


def _count(row: LoopRow) -> str:
    if row.compiles is None:
        return "no compile count" if row.expected_compiles is None else "compile counts that differ between runs"
    return f"{row.compiles} compiles"


def loop_lines(rows: list[LoopRow]) -> list[tuple[str, str | None]]:
    """Per loop, backend, size and cold policy: the strategy with the lowest total against
    naive's; and every compile count off its strategy's expectation (yellow)."""
    groups: dict[tuple, list[LoopRow]] = {}
    for row in rows:
        groups.setdefault((row.loop, row.size, row.backend, row.dtype, row.policy), []).append(row)
    lines = []
    for (loop, size, backend, dtype, policy), members in groups.items():
        naive = next((r for r in members if r.strategy == "naive"), None)
        others = [r for r in members if r.strategy != "naive"]
        if not others:
            continue
        head = f"loop {loop} {size} on {backend} {dtype}, {policy}: "
        compared = [r for r in others if r.vs_naive is not None] if naive else []
        if not compared:  # naive's or every strategy's total missing: failed, or runs set aside as contended
            lines.append((head + "no totals to compare (see Loops in report.md)", "yellow"))
            continue
        best = min(compared, key=lambda r: r.vs_naive)
        lines.append((head + f"best {best.strategy} at {best.vs_naive:.2f}× naive's total "
                      f"({_count(best)} against {_count(naive)})", None))  # fmt: skip
    for row in rows:
        if row.expected_compiles is not None and row.compiles != row.expected_compiles:
            lines.append((f"compile count off: {row.case} {row.policy}: {_count(row)}, "
                          f"{row.strategy} expects {row.expected_compiles}", "yellow"))  # fmt: skip
    return lines


def print_catalog(console: Console, known: catalog.Catalog = catalog.BUILTIN, view=None) -> None:
    """The catalogue, or the part of it `view` (measure.selection.CatalogueView) selects."""
    shown_backends = view.backends if view else tuple(catalog.BACKENDS)
    shown_workloads = view.workloads if view else tuple(known.workloads)
    backends = Table(title="backends")
    for column in ("backend", "available", "description"):
        backends.add_column(column)
    reasons = {name: catalog.availability(backend) for name, backend in catalog.BACKENDS.items()}
    for name in shown_backends:
        backend = catalog.BACKENDS[name]
        label = name + (" (diagnostic)" if backend.diagnostic else "")
        backends.add_row(label, "yes" if reasons[name] is None else f"[yellow]warn: {reasons[name]}[/]", backend.description)
    console.print(backends)

    workloads = Table(title="workloads")
    for column in ("workload", "sizes", "size means", "dtypes", "description"):
        workloads.add_column(column)
    presets = ", ".join(f"{name}={n}" for name, n in catalog.HF_PRESET_SIZES.items())
    for workload in (known.workloads[name] for name in shown_workloads):
        low, high = workload.size_range
        if workload.name in catalog.HF_WORKLOADS:
            sizes = f"presets {presets}; or --workspace FILE"
        else:
            sizes = ", ".join(map(str, sorted(workload.sizes))) + f" (any of {low}..{high})"
            if workload.sizes[0] != min(workload.sizes):  # the quick profile's is the first catalogued
                sizes += f"; quick: {workload.sizes[0]}"
        kind = " (yours)" if workload.source else (" (diagnostic)" if workload.diagnostic else "")
        workloads.add_row(
            workload.name + kind + ("" if workload.default or workload.source else " (opt-in)"),
            sizes,
            workload.size_meaning,
            ", ".join(catalog.DTYPE_SHORT[d] for d in workload.dtypes),
            escape(workload.description),  # a user's case describes itself: text, not markup
        )
    console.print(workloads)

    if not (view and view.selected):  # the families are a way to select: shown with the whole catalogue
        families = Table(title="workload families (--workloads FAMILY: every workload of it)")
        for column in ("family", "workloads"):
            families.add_column(column)
        for family, members in catalog.LOOP_FAMILIES.items():
            families.add_row(family, ", ".join(members))
        console.print(families)

    opt_in = "--cache-policy precompiled[/MECHANISM[/cold-cache|warm-cache]]"
    mechanisms = Table(title=escape(f"precompiled artifacts (opt-in: {opt_in})"))
    for column in ("mechanism", "backends", "claims to skip"):
        mechanisms.add_column(column)
    for mechanism in precompiled.MECHANISMS.values():
        offered = [name for name in shown_backends if mechanism.name in catalog.BACKENDS[name].precompiled]
        if offered:
            mechanisms.add_row(mechanism.name, ", ".join(offered), escape(mechanism.claims))
    if mechanisms.row_count:
        console.print(mechanisms)

    cases = Table(title="catalogued case ids")
    cases.add_column("case")
    cases.add_column("available here")
    for case in view.cases if view else known.catalogued_cases():
        cases.add_row(case.id, _available(case, reasons[case.backend]))
    console.print(cases)


def _available(case: catalog.Case, backend_reason: str | None) -> str:
    """A case's availability here, as `ttfr list` shows it (its backend's reason, else its workload's)."""
    reason = backend_reason or catalog.availability(case.backend_info, case.workload)
    return "yes" if reason is None else f"[yellow]warn: {reason}[/]"


def print_user_cases(console: Console, known: catalog.Catalog, files: set[str], view=None) -> None:
    """The cases of the case files `files` (an installed package's are listed with ttfr's own), those
    `view` selects where a selection was given."""
    table = Table(title="your cases (--case-file)")
    for column in ("case", "available here", "description"):
        table.add_column(column)
    for case in view.cases if view and view.selected else known.catalogued_cases():
        if case.workload_info.source in files:
            table.add_row(case.id, _available(case, catalog.availability(case.backend_info)),
                          escape(case.workload_info.description))  # the user's text, not markup  # fmt: skip
    console.print(table)


_VERDICT_STYLE = {"regression": "bold red", "improvement": "green", "equivalent": "dim", "inconclusive": "yellow"}


def print_comparison(console: Console, document: Comparison) -> None:
    from ttfr.report.comparison_md import CONCURRENCY_NOTE, row

    if document.warning:
        console.print(f"[bold red]{escape(document.warning)}[/]")
    table = Table(title=f"B vs A: gate {document.summary.gate}")
    for column in ("case", "policy", "A median", "B median", "B/A", "95% CI", "p (gate)", "verdict", "why"):
        table.add_column(column, overflow="fold")
    for record in document.comparisons:
        cells = row(record)
        style = _VERDICT_STYLE.get(record.base_verdict, "")
        cells[7] = f"[{style}]{record.verdict}[/]" if style else record.verdict
        table.add_row(*[escape(c.strip("`")) for c in cells[:7]], cells[7], escape(cells[8]))
    console.print(table)
    if any(r.point != r.policy for r in document.comparisons):  # a concurrency point
        console.print(f"[dim]{escape(CONCURRENCY_NOTE.replace('`', ''))}[/]")
    if document.host_noise.noisy:
        console.print(f"[yellow]noisy machine: {'; '.join(document.host_noise.why)}[/]")


def format_rate(entry: Rate) -> str:
    """A selftest rate: value (count/total; 95% CI low-high)."""
    if entry.rate is None or entry.ci95 is None:
        return f"{DASH} ({entry.count}/{entry.total})"
    low, high = entry.ci95
    return f"{entry.rate:.1%} ({entry.count}/{entry.total}; 95% CI {low:.1%}-{high:.1%})"


def print_selftest(console: Console, result: SelfTest) -> None:
    table = Table(title=f"ttfr selftest ({result.rounds} paired rounds per comparison, alpha {result.alpha})")
    for column in ("test", "result"):
        table.add_column(column)
    for regime, aa in result.aa.items():
        detectable = aa.median_smallest_detectable if present(aa.median_smallest_detectable) else None
        table.add_row(
            f"A/A {regime}",
            f"gate false alarms {format_rate(aa.false_alarm)}\n"
            f"significant either way {format_rate(aa.significant_either_way)}\n"
            f"noise floor (p95 |B/A-1|) {aa.noise_floor_p95:.1%}"
            + (f"; smallest detectable effect ≈ {detectable:.1%}" if detectable is not None else ""),
        )
    for level in result.injected:
        table.add_row(
            f"+{level.nominal:.0%} warm (measured {level.measured_ratio - 1:+.1%})",
            f"detected {format_rate(level.detected)}\nCI covers the measured effect {format_rate(level.coverage)}",
        )
    for regime, need in (result.rounds_for_power or {}).items():
        table.add_row(f"ttfr ab, {regime}: +{need.effect:.0%} at {need.power:.0%} power", _rounds_text(need))
    console.print(table)


_GATE_STYLE = {"pass": "green", "warn": "yellow", "fail": "bold red", "unmeasured": "bold red"}


def _median_text(ratio: OverheadRatio) -> str:
    def shown(value):
        if value is None:
            return DASH
        return f"{value * 1e9:.1f} ns" if ratio.unit_s == "call" else fmt_seconds(value)

    return f"{shown(ratio.measured_median_s)} vs {shown(ratio.baseline_median_s)}"


def print_harness(console: Console, check: HarnessCheck) -> None:
    """The harness's own figures: each ratio, its interval and the gate's verdict, then the
    agreement with hyperfine and the fast tier's time."""
    table = Table(title=f"ttfr on itself ({check.rounds} paired rounds, gate: the interval above {check.limit:g}× fails)")
    for column in ("figure", "ttfr vs bare (medians)", "ratio [95% CI]", "gate"):
        table.add_column(column)
    for ratio in check.ratios:
        table.add_row(Text(f"{ratio.name}\n{ratio.measured}\nvs {ratio.baseline}"), _median_text(ratio), ratio.ratio_text(),
                      Text(ratio.verdict if ratio.reason is None else f"{ratio.verdict}: {ratio.reason}",
                           style=_GATE_STYLE[ratio.verdict]))  # fmt: skip
    agreement = check.hyperfine
    if agreement:
        table.add_row(Text(f"hyperfine\n{shlex.join(agreement.command)}"),
                      f"{fmt_seconds(agreement.ttfr_median_s)} vs {fmt_seconds(agreement.hyperfine_median_s)}",
                      f"{agreement.ratio:.3f}× ({agreement.rounds} rounds of {agreement.runs_per_round})",
                      Text("agree (±5%)" if agreement.agrees else "disagree (beyond ±5%)",
                           style="green" if agreement.agrees else "yellow"))  # fmt: skip
    elif check.hyperfine_note:
        table.add_row("hyperfine", DASH, DASH, Text(check.hyperfine_note))
    if check.fast_tier_s is not None or check.fast_tier_note:
        table.add_row("fast test tier", fmt_seconds(check.fast_tier_s) if check.fast_tier_s is not None else DASH, DASH,
                      Text(check.fast_tier_note or "make test-fast"))  # fmt: skip
    console.print(table)


def _rounds_text(need: RoundsForPower) -> str:

    if need.rounds is None:
        text = f"not detectable as a regression: {need.reason}"
    elif need.rounds > MAX_AB_ROUNDS:
        text = f"≈ {need.rounds} paired rounds: above ttfr ab's limit of {MAX_AB_ROUNDS} (quieten the machine)"
    else:
        # --rounds is the cap --precision stops under: headroom for a noisier hour than this one
        cap = min(MAX_AB_ROUNDS, max(20, math.ceil(1.5 * need.rounds)))
        text = (f"≈ {need.rounds} paired rounds (δ {need.delta:.1%}, alpha {need.alpha:g}): "
                f"ttfr ab --precision {need.precision:.3f} --rounds {cap}")  # fmt: skip
    text += f"\n{need.measured_at_rounds} rounds give {need.power_at_measured_rounds:.0%} power"
    check = need.check if present(need.check) else None
    if check:
        text += (f"; model check at +{check.injected_effect:.1%}: modelled {check.modelled_power:.0%}, "
                 f"measured {format_rate(check.measured)}")  # fmt: skip
    return text


_BAR_COLOURS = {"interpreter_s": "grey50", "import_s": "blue", "device_init_s": "green", "user_import_s": "magenta",
                "setup_s": "cyan", "artifact_load_s": "bright_red", "first_call_s": "yellow"}  # fmt: skip
_BAR_PARTS = tuple((key, label, _BAR_COLOURS[key]) for key, label in COMPONENT_LABELS.items())
_BAR_WIDTH = 32


def component_bar(summary: ColdSummary, scale_s: float, width: int = _BAR_WIDTH) -> Text:
    """One line of coloured blocks: the medians of a case's cold-start components, `scale_s`
    seconds to the full width (so the bars of a table compare)."""
    bar = Text()
    if scale_s <= 0:
        return bar
    total = used = 0
    for key, _label, colour in _BAR_PARTS:  # cumulative rounding: the bar's length is the sum's
        figure = named(summary, key)
        value = figure.median if figure else None
        if not value:
            continue
        total += value
        cells = min(round(width * total / scale_s), width) - used
        if cells > 0:
            bar.append("█" * cells, style=colour)
            used += cells
    return bar


def print_report(console: Console, result) -> None:
    """`ttfr report DIR` on a terminal: the summary with an inline bar of the cold-start
    components per case and cold policy (report.md has the full account). Every case has a row:
    one without cold figures shows its warm call, and why it has no more."""
    from ttfr.model.policies import WARM_PROCESS, policy_label

    suite, cases = result.suite, result.cases
    rows = []
    for case in cases:
        for policy, block in case.policies.cold():  # the precompiled ones too: a row each
            if block.summary.ttfr_s:
                rows.append((case, policy, block.summary))
    scale = max((s.ttfr_s.median for _c, _p, s in rows), default=0.0)
    # the bar never wraps: its cells shrink with the terminal (the other columns need ~90)
    width = max(8, min(_BAR_WIDTH, console.width - 92))
    table = Table(title=f"ttfr {suite.snapshot_id} ({suite.state})")
    for column in ("case", "status", "policy", "TTFR", "warm call"):
        table.add_column(column, overflow="fold")
    table.add_column(f"components (bar: {fmt_seconds(scale)})" if scale else "components", no_wrap=True, min_width=width)
    for case in cases:
        warm = case.figure(WARM_PROCESS, "call_s")
        warm_text = fmt_seconds(warm.median) if warm else "—"
        status = Text(case.status, style=_STATUS_STYLE[case.status])
        mine = [r for r in rows if r[0] is case]
        for _case, policy, summary in mine:
            table.add_row(case.case, status, policy_label(policy), fmt_seconds(summary.ttfr_s.median), warm_text,
                          component_bar(summary, scale, width))  # fmt: skip
        if not mine:
            # the case's reason, else why its figures were withheld, as every output says it (the flag's sentence)
            why = case.reason or next((flag_text.sentence(f) for f in case.flags if isinstance(f, CouldNotMeasureCleanly)), None)
            table.add_row(case.case, status, "—", "—", warm_text, Text(printable(why or "no cold-start figures")))
    console.print(table)
    legend = Text("components: ")
    # the optional phases (device init, your import) only where some bar has them
    drawn = {key for key in OPTIONAL_METRICS if any(named(s, key) is not None for _c, _p, s in rows)}
    for key, label, colour in _BAR_PARTS:
        if key not in OPTIONAL_METRICS or key in drawn:
            legend.append("█", style=colour).append(f" {label}  ")
    console.print(legend)
    console.print(f"full report: {result.result_dir.root / 'report.md'}", markup=False, highlight=False)


def print_replication(console: Console, document: ReplicationReport) -> None:
    """`ttfr replicate`: the verdict, what did not replicate, and what differs."""
    summary = document.summary
    style = "green" if summary.replicated else "bold red"
    unequal = summary.datasets_unequal
    console.print(Text(f"{'replicated' if summary.replicated else 'NOT replicated'}: "
                       f"{summary.required_replicated} of {summary.required_gates} required gates; "
                       f"schema {'valid' if document.schema_valid else 'INVALID'}; "
                       f"datasets {'DIFFER: ' + ', '.join(unequal) if unequal else 'equal'}", style=style))  # fmt: skip
    if summary.snapshot_failed_gates:
        console.print(Text(f"  note: the snapshot itself has {summary.snapshot_failed_gates} failed gate(s) "
                           "(see its validation.json): what replicated includes failures", style="yellow"))  # fmt: skip
    for line in summary.not_replicated:
        console.print(Text(f"  not replicated: {printable(line)}", style="red"))
    for kind in ("hardware", "runtimes", "harness"):
        for item in getattr(document.differences, kind):
            console.print(Text(f"  {kind} differs: {item.what}: {item.snapshot} -> {item.replica}", style="yellow"))
    weak = document.timing.comparisons
    if weak:
        console.print(Text("timings (cross-session, weak): " + "; ".join(
            f"{c.case} {c.policy.split('/')[-1]}: {c.verdict}" for c in weak[:6])
            + (f"; +{len(weak) - 6} more" if len(weak) > 6 else "")))  # fmt: skip


def show_history(console: Console, document: History, out) -> None:
    """The steps found (or that there are none), what was left out, the gate, and where the history is."""
    from ttfr.report import history_md

    sources, series = document.sources, document.series
    console.print(f"{len(sources)} result(s), {len(series)} series on {len(document.machines)} machine(s), ordered by "
                  f"{document.order_by}", markup=False, highlight=False)  # fmt: skip
    rows = history_md.step_rows(document)
    if rows:
        table = Table(title="Steps")
        for column in history_md.STEP_HEADER:
            table.add_column(column, overflow="fold")
        for cells in rows:
            table.add_row(*[escape(c.replace("`", "")) for c in cells])
        console.print(table)
    else:
        console.print(history_md.NO_STEP, markup=False, highlight=False)
    for item in document.left_out:
        console.print(f"[yellow]left out {escape(item.path)}: {escape(item.reason)}[/]")
    gate = document.gate
    if gate.fail_above is not None:
        verdict = f"[bold red]fails[/]: {escape(', '.join(gate.failing))}" if gate.failing else "[green]passes[/]"
        console.print(f"gate (--fail-above {gate.fail_above:.0%}): {verdict}")
    console.print(f"history: {escape(str(out))}/history.md, history.html, history.csv, history.json", highlight=False)
