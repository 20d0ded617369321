"""The HTML report's figures: matplotlib (Agg) drawn to inline SVG, text kept as text.

Every function takes artifact data (case results, suite rows, a comparison document) and
returns a Plot: the SVG and the table of the numbers it draws, so the page can show both
(screen readers, copy-paste). matplotlib is imported here only, when a page is made: the
Markdown report and the command line never load it (tests/test_layers.py).
"""

from __future__ import annotations

import io
import itertools
import math
import re
from dataclasses import dataclass

from ttfr.analyse import suite_figures
from ttfr.measure import catalog
from ttfr.model.base import UNSET, present
from ttfr.model.case import CaseResult
from ttfr.model.flags import FirstRunOutlier
from ttfr.model.policy_figures import named
from ttfr.model.run_figures import COMPONENT_LABELS, RunFigures
from ttfr.model.comparison import Comparison
from ttfr.model.explanation import UNATTRIBUTED
from ttfr.model.loops import CostPoint, LoopRow, TimelineStep
from ttfr.model.policies import COLD_POLICIES, CONCURRENCY_MODES, WARM_PROCESS, policy_words, precompiled_parts
from ttfr.model.suite import BreakEven, ScalingRow
from ttfr.model.summary import Summary
from ttfr.report import icicle
from ttfr.report.formatting import (
    COMPILERS_COLUMN,
    compilers_seen,
    copied_verdict,
    first_call_stages,
    fmt_bytes,
    fmt_copies,
    fmt_percent,
    fmt_rate,
    fmt_seconds,
    fmt_summary,
    stage_split,
    watched,
)

_MAX_CALLS = 10**7  # the amortisation plots' reach
_VERDICT_COLOUR = {"regression": "#c0392b", "improvement": "#1e8449", "equivalent": "#7f8c8d",
                   "inconclusive": "#d4ac0d", "not_compared": "#34495e"}  # fmt: skip
_COMPONENTS = tuple(COMPONENT_LABELS.items())
# One colour per component and stage (none repeats within a bar).
_COLOURS = dict(zip(
    ("interpreter_s", "import_s", "device_init_s", "user_import_s", "setup_s", "artifact_load_s", "first_call_s",
     "wrap_s", "trace_s", "lower_s", "compile_s", "dynamo_s", "aot_autograd_s", "inductor_s", "autotune_s",
     "first_execute_s"),
    ("#7f7f7f", "#1f77b4", "#393b79", "#9467bd", "#17becf", "#843c39", "#bcbd22", "#c5b0d5", "#ff7f0e", "#ffbb78",
     "#d62728", "#2ca02c", "#98df8a", "#e377c2", "#f7b6d2", "#8c564b"),
))  # fmt: skip
# The widest figure, in inches: 691 CSS px (SVG sizes are in pt, 4/3 px each), so an 800 px window
# (752 px of content) shows it unshrunk and its smallest text (8 pt) at 10.7 px. A figure with long
# tick labels (case ids) gives its axes what they leave (_left_for); its legend sits below its axes
# (_legend_below). (Constrained layout would do both, at ~35 ms more a figure: a third layout pass.)
_WIDTH = 7.2
_SMALL_PT = 8  # tick labels and legends: the smallest text


@dataclass
class Plot:
    title: str
    svg: str
    header: list[str]
    rows: list[list[str]]
    note: str = ""


class _Figures:
    """pyplot's `subplots` without pyplot: a Figure of its own, drawn by the SVG backend when
    saved (importing pyplot, which sets up figure managers for a GUI, cost ~0.2 s of every run)."""

    @staticmethod
    def subplots(nrows=1, ncols=1, *, figsize=None, **kwargs):
        from matplotlib.figure import Figure

        fig = Figure(figsize=figsize)
        return fig, fig.subplots(nrows, ncols, **kwargs)


def load_matplotlib() -> None:
    """Import what drawing a page needs (~0.2 s), ahead of drawing it (see pipeline.suite)."""
    import matplotlib.backends.backend_svg  # noqa: F401
    import matplotlib.figure  # noqa: F401


def _figures():
    import matplotlib

    matplotlib.rcParams.update({
        "svg.fonttype": "none",  # text stays text: searchable, smaller, readable by assistive tools
        "svg.hashsalt": "ttfr",  # stable element ids: the same figures give the same page
        "font.size": 9,
        "legend.fontsize": _SMALL_PT,
        "xtick.labelsize": _SMALL_PT,
        "ytick.labelsize": _SMALL_PT,
        "axes.spines.top": False,
        "axes.spines.right": False,
        "figure.dpi": 96,
    })  # fmt: skip
    return _Figures


def _log_axis(axis, fmt=fmt_seconds) -> None:
    """Label a log axis in plain units (`20 ms`, `1,000` calls) rather than matplotlib's
    mathtext (2×10⁻¹: its parser costs ~0.1 s the first time on every page, and on a narrow range
    every minor tick got such a label, overlapping). Powers of ten always; 2 and 5 within a decade
    or two; on a range with one or no decade mark, the ticks of matplotlib's linear fallback whose
    value the label states exactly. Never two labels closer than they can be read (_spaced)."""
    from matplotlib.ticker import FuncFormatter

    def span() -> float:
        low, high = sorted(axis.get_view_interval())
        return high / low if low > 0 else math.inf

    def major(value, _pos) -> str:
        return fmt(value) if value > 0 else ""

    def minor(value, _pos) -> str:
        ratio = span()
        if ratio >= 100 or value <= 0:
            return ""
        mantissa = round(value / 10 ** math.floor(math.log10(value)), 6)
        return fmt(value) if ratio < 3 or mantissa in (2.0, 5.0) else ""

    class Spaced(FuncFormatter):
        def __init__(self, func, is_major: bool):
            super().__init__(func)
            self.is_major = is_major
            self.shown: list[tuple[float, str]] = []  # a major formatter's labels left, for the minor one

        def format_ticks(self, values):
            labels = super().format_ticks(values)
            if self.is_major:  # (matplotlib formats the major ticks first)
                kept = _spaced(axis, list(values), labels, [])
                labels = [text if i in kept else "" for i, text in enumerate(labels)]
                self.shown = [(v, text) for v, text in zip(values, labels) if text]
                return labels
            # a linear fallback tick at 1.015 ms would read "1.01 ms": only ticks whose label is their value
            exact = [text if text and _exact(v) else "" for v, text in zip(values, labels)]
            if sum(map(bool, exact)) >= 2:
                labels = exact
            kept = _spaced(axis, list(values), labels, getattr(axis.major.formatter, "shown", []))
            return [text if i in kept else "" for i, text in enumerate(labels)]

    axis.set_major_formatter(Spaced(major, True))
    axis.set_minor_formatter(Spaced(minor, False))


def _exact(value: float) -> bool:
    """Whether a tick's 3-significant-digit label (fmt_seconds, _count) is its value."""
    return value > 0 and math.isclose(float(f"{value:.3g}"), value, rel_tol=1e-9)


def _spaced(axis, values: list[float], labels: list[str], taken: list[tuple[float, str]]) -> set[int]:
    """The indices of the labels to show on a log axis, left to right, each only where it clears
    the ones already shown (and `taken`, labels shown by the other formatter) by half a character:
    widths estimated from the tick font (DejaVu Sans digits are 0.64 em), along the axis's length."""
    low, high = sorted(axis.get_view_interval())
    if low <= 0 or high <= low:
        return {i for i, text in enumerate(labels) if text}
    horizontal = axis.axis_name == "x"
    box = axis.axes.bbox
    length = box.width if horizontal else box.height  # display units (px at the figure's dpi)
    em = _SMALL_PT * axis.figure.dpi / 72

    def interval(value: float, text: str) -> tuple[float, float]:
        at = (math.log(value) - math.log(low)) / (math.log(high) - math.log(low)) * length
        half = (0.66 * len(text) if horizontal else 1.3) * em / 2 + em / 4
        return at - half, at + half

    used = [interval(v, text) for v, text in taken if low <= v <= high and text]
    shown = set()
    for i in sorted((i for i, (v, text) in enumerate(zip(values, labels)) if text and low <= v <= high),
                    key=lambda i: values[i]):  # fmt: skip
        start, end = interval(values[i], labels[i])
        if all(end <= a or start >= b for a, b in used):
            used.append((start, end))
            shown.add(i)
    return shown


def _count(value: float) -> str:
    return f"{value:,.0f}" if value >= 1 else f"{value:g}"


_FIGURES = itertools.count(1)
_ID = re.compile(r'(\bid="|url\(#|href="#)([^")]+)')


def _svg(fig) -> str:
    out = io.StringIO()
    fig.savefig(out, format="svg", bbox_inches="tight", metadata={"Date": None, "Creator": "ttfr"})
    text = out.getvalue()
    text = text[text.index("<svg") :]  # inline: no XML declaration or doctype
    # Every figure names its elements figure_1, axes_1, ...: prefixed per figure, so the ids of a
    # page with many inline figures are unique (and each reference finds its own figure's element).
    prefix = f"f{next(_FIGURES)}-"
    return _ID.sub(lambda m: m.group(1) + prefix + m.group(2), text)


def _ci(summary: Summary | None) -> tuple[float, float] | None:
    return (summary.median_ci.low, summary.median_ci.high) if summary else None


def _fmt(summary: Summary | None) -> str:
    """A median with its CI and the CI's level when below 95% (as every table of ttfr says it)."""
    return fmt_summary(summary)


# ------------------------------------------------------------------ amortisation
def amortisation(cases: list[CaseResult], break_even: list[BreakEven]) -> list[Plot]:
    """Cumulative time against calls, one line per backend, per workload/size/dtype: TTFR for
    the first call, then the warm per-call time; bands from both medians' CIs; the break-even
    points of suite.json marked where the slower starter catches up."""
    groups: dict[tuple, list[CaseResult]] = {}
    for case in cases:
        if case.status == "failed" or case.command:
            continue
        if not case.figure(WARM_PROCESS, "call_s"):
            continue
        groups.setdefault((case.workload, case.size, case.dtype, case.dataset.id), []).append(case)
    plots = []
    for (workload, size, dtype, dataset), members in sorted(groups.items()):
        shipped = suite_figures.shipped_policies(members)
        # a precompiled policy's panel: the backends that ship its artifact against the others in its setting
        policies = [p for p in (*COLD_POLICIES, *shipped) if sum(1 for c in members if c.start_figure(p)) >= 2]
        if not policies:  # one backend: nothing catches up with anything
            continue
        plots.append(_amortisation_plot(workload, size, dtype, dataset, members, policies, break_even))
    return plots


def _amortisation_plot(workload, size, dtype, dataset, members, policies, break_even) -> Plot:
    figures = _figures()
    key = (workload, size, dtype, dataset)
    rows_here = [r for r in break_even if (r.workload, r.size, r.dtype, r.dataset) == key]
    # far enough to see every break-even (and its CI range); without one, far enough to see the lines part
    reach = max([10_000] + [3 * max(r.calls, *(c for c in r.calls_range if c)) for r in rows_here if r.calls])
    reach = min(reach, _MAX_CALLS)
    fig, axes = figures.subplots(1, len(policies), figsize=(_WIDTH / 2 * len(policies), 3.4), squeeze=False)
    table = []
    n = _call_grid(reach)
    # Each drawn break-even gets a number, on the plot and in its table row (text beside the
    # circles would overlap when several backends cross close together).
    drawn = [r for r in rows_here if r.calls and r.calls <= reach and r.cold_policy in policies]
    number = {id(r): i for i, r in enumerate(drawn, 1)}
    for ax, policy in zip(axes[0], policies):
        for index, case in enumerate(sorted(members, key=lambda c: c.backend)):
            start, warm = case.start_figure(policy), case.figure(WARM_PROCESS, "call_s")
            if not start:
                continue
            used, cold = start
            label = f"{case.backend} (its artifact)" if precompiled_parts(used) else case.backend
            colour = f"C{index % 10}"
            ax.plot(n, [cold.median + (k - 1) * warm.median for k in n], color=colour, label=label)
            low, high = _ci(cold), _ci(warm)
            if low and high:
                ax.fill_between(n, [low[0] + (k - 1) * high[0] for k in n], [low[1] + (k - 1) * high[1] for k in n],
                                color=colour, alpha=0.15, linewidth=0)  # fmt: skip
            table.append([case.backend, policy_words(used), _fmt(cold), _fmt(warm)])
        for row in (r for r in rows_here if r.cold_policy == policy and r.calls and r.calls <= reach):
            calls = row.calls  # (one beyond the plotted range is said in the table, not drawn off it)
            y = row.slow_start_ttfr_s + (calls - 1) * row.slow_start_call_s
            ax.plot([calls], [y], marker="o", markersize=7, markerfacecolor="none", markeredgecolor="black")
            ax.annotate(str(number[id(row)]), (calls, y), textcoords="offset points", xytext=(-4, 6), ha="right",
                        fontsize=8, fontweight="bold")  # fmt: skip
        ax.set_xscale("log")
        ax.set_yscale("log")
        _log_axis(ax.xaxis, _count)
        _log_axis(ax.yaxis)
        ax.set_xlabel("calls")
        ax.set_ylabel("cumulative seconds (from start)")
        ax.set_title(policy_words(policy))
        ax.legend(frameon=False)
    notes = []
    for row in rows_here:
        span = row.calls_range
        shown = "never" if row.calls is None else f"{row.calls:,}"
        rng = "" if row.calls is None else f" (CI range {_calls(span[0])}–{_calls(span[1])})"
        if row.calls and row.calls > reach:
            rng += f"; beyond the plotted {reach:,} calls"
        marked = f" — circle {number[id(row)]}" if id(row) in number else ""
        notes.append([f"{row.slow_start} vs {row.fast_start}{marked}", policy_words(row.cold_policy), "break-even",
                      shown + rng])  # fmt: skip
    note = "Lines: TTFR + (calls − 1) × warm call; bands: both medians' CIs; numbered circles: the break-even rows."
    return Plot(f"Amortisation: {workload} {size} {dtype}", _svg(fig), ["backend", "policy", "TTFR [CI]", "warm call [CI]"],
                table + notes, note)  # fmt: skip


def _calls(value) -> str:
    return "never" if value is None else f"{value:,}"


def _call_grid(reach: int) -> list[int]:
    points = sorted({int(round(10 ** (i / 20))) for i in range(0, int(20 * math.log10(reach)) + 1)} | {1, reach})
    return [p for p in points if 1 <= p <= reach]


# ------------------------------------------------------------------ cold-start components
def components(cases: list[CaseResult], policy: str) -> Plot | None:
    """Median cold-start components stacked per case, the first call split into its stages when
    known (formatting.first_call_stages: a stage nested in others is no segment of its own, and
    the table says it as every output does, stage_split)."""
    # warn cases with figures too (some runs failed); failed ones have none; commands are not split
    chosen = [c for c in cases if not c.command and c.figure(policy, "ttfr_s")]
    if not chosen:
        return None
    figures = _figures()
    fig, ax = figures.subplots(figsize=(_WIDTH, 0.45 * len(chosen) + 1.2))
    table = []
    labels = []
    trees = watched(c.policies.get(policy).summary for c in chosen)
    for row_index, case in enumerate(chosen):
        block = case.policies.get(policy)
        summary, stages = block.summary, block.stages_summary
        own = first_call_stages(stages).own
        left = 0.0
        parts = []
        for key, label in _COMPONENTS:
            figure = named(summary, key)
            if figure is None:
                continue
            value = figure.median
            parts.append(f"{label} {fmt_seconds(value)}")
            if key == "first_call_s" and own:
                start = left
                for stage in own:
                    ax.barh(row_index, stage.seconds, left=left, color=_COLOURS[stage.name], hatch="//",
                            edgecolor="white", label=f"first call: {stage.label}")  # fmt: skip
                    left += stage.seconds
                rest = value - (left - start)  # dispatch: the part no stage accounts for
                if rest > 0:
                    ax.barh(row_index, rest, left=left, color=_COLOURS[key], label="first call: other")
                    left += rest
                continue
            ax.barh(row_index, value, left=left, color=_COLOURS[key], label=label)
            left += value
        labels.append(case.case)
        table.append([case.case, _fmt(summary.ttfr_s), ", ".join(parts), stage_split(stages),
                      *([compilers_seen(summary)] if trees else [])])  # fmt: skip
    ax.set_yticks(range(len(chosen)), labels)
    ax.invert_yaxis()
    ax.set_xlabel("seconds (medians over fresh processes)")
    _left_for(fig, labels)
    _legend_below(fig, ax)
    return Plot(f"Cold-start components ({policy_words(policy)})", _svg(fig),
                ["case", "TTFR [CI]", "components (medians)", "first call split", *([COMPILERS_COLUMN] if trees else [])],
                table,
                "Medians do not add up exactly to the TTFR median: each is the median of its own component.")  # fmt: skip


def _left_for(fig, labels: list[str]) -> None:
    """Make room left of the axes (of a figure _WIDTH wide) for its y tick labels (estimated: 0.6
    em a character), so the saved figure (bbox_inches="tight") stays about _WIDTH wide however
    long the case ids are; the right edge keeps room for half an x tick label."""
    needed = 0.6 * _SMALL_PT / 72 * max((len(label) for label in labels), default=0) + 0.15
    fig.subplots_adjust(left=min(needed / _WIDTH, 0.6), right=0.96)


def _legend_below(fig, ax) -> None:
    """The axes' legend (each label once) in three columns under the axes, below the x label,
    inside the figure's width (a legend beside the axes widened the figure past the page's)."""
    from matplotlib.transforms import ScaledTranslation

    handles, names = ax.get_legend_handles_labels()
    unique = dict(zip(names, handles))
    if not unique:
        return
    below = ax.transAxes + ScaledTranslation(0, -0.45, fig.dpi_scale_trans)  # tick labels and x label: ~0.4 in
    ax.legend(unique.values(), unique.keys(), frameon=False, ncols=3, loc="upper center", bbox_to_anchor=(0.5, 0),
              bbox_transform=below)  # fmt: skip


# ------------------------------------------------------------------ run distributions
def distributions(cases: list[CaseResult], policy: str) -> Plot | None:
    """Every fresh process's TTFR (or every warm process's median call), the median and its CI;
    runs set aside from the figures (contended, or all of a policy that could not measure
    cleanly) drawn as crosses, a flagged first-run outlier ringed. A failed case (no figures)
    and a case without runs under the policy are left out; nothing is drawn on a log axis
    without a positive value."""

    metric = "call_s" if policy == WARM_PROCESS else "ttfr_s"

    def value(run: RunFigures) -> float | None:
        if policy == WARM_PROCESS:
            return None if run.median_s is UNSET else run.median_s
        return run.metrics.ttfr_s

    def measured(case: CaseResult) -> list[RunFigures]:
        block = case.policies.get(policy)
        return block.measured if block else []

    chosen = [c for c in cases if c.status != "failed" and any(
        r.outcome == "ok" and (value(r) or 0) > 0 for r in measured(c))]  # fmt: skip
    if not chosen:
        return None
    figures = _figures()
    fig, ax = figures.subplots(figsize=(_WIDTH, 0.45 * len(chosen) + 1.2))
    table = []
    for row_index, case in enumerate(chosen):
        block = case.policies.get(policy)
        runs = block.measured
        ok = [r for r in runs if r.outcome == "ok" and (value(r) or 0) > 0]
        headline = {id(r) for r in block.figure_runs()}
        used = [value(r) for r in ok if id(r) in headline]
        aside = [value(r) for r in ok if id(r) not in headline]
        offsets = [0.0] if len(used) == 1 else [0.3 * (i / (len(used) - 1) - 0.5) for i in range(len(used))]
        if used:
            ax.scatter(used, [row_index + o for o in offsets], s=12, color="C0", alpha=0.7, label="run")
        if aside:
            ax.scatter(aside, [row_index] * len(aside), s=24, color="C3", marker="x", label="set aside (contended)")
        summary = block.figure(metric)
        if summary:
            ax.plot([summary.median], [row_index], marker="|", markersize=16, color="black", label="median")
            ci = _ci(summary)
            if ci and summary.n > 1:
                ax.plot(ci, [row_index, row_index], color="black", linewidth=1, label="median's CI")
        outlier = next((f for f in block.flags if isinstance(f, FirstRunOutlier)), None)
        if outlier and outlier.value > 0:  # flagged, never removed: ringed where it lies
            ax.scatter([outlier.value], [row_index], s=70, facecolors="none", edgecolors="C1", label="first-run outlier")
        shown = [fmt_seconds(value(r)) + ("" if id(r) in headline else "*") for r in ok]
        table.append([case.case, _fmt(summary), str(len(used)), str(len(aside)), str(len(runs) - len(ok)),
                      ", ".join(shown)])  # fmt: skip
    ax.set_yticks(range(len(chosen)), [c.case for c in chosen])
    ax.invert_yaxis()
    ax.set_xscale("log")
    _log_axis(ax.xaxis)
    ax.set_xlabel("seconds per call (process medians)" if policy == WARM_PROCESS else "TTFR seconds (each fresh process)")
    _left_for(fig, [c.case for c in chosen])
    _legend_below(fig, ax)
    return Plot(f"Run distributions ({policy_words(policy)})", _svg(fig),
                ["case", "median [CI]", "used", "set aside", "failed", "values (*: set aside)"], table,
                "Failed runs have no figure and are counted only.")  # fmt: skip


# ------------------------------------------------------------------ HistFactory
def scaling(rows: list[ScalingRow]) -> list[Plot]:
    """Warm cost against parameter count (log-log) per engine and workload, with NextStat's
    published CUDA figures as hollow markers (measured elsewhere, other hardware)."""
    plots = []
    figures = _figures()
    for workload in sorted({r.workload for r in rows}):
        mine = [r for r in rows if r.workload == workload and r.warm_call_s is not None]
        if not mine:
            continue
        fig, ax = figures.subplots(figsize=(6, 3.6))
        table = []
        for index, engine in enumerate(sorted({r.engine for r in mine})):
            points = sorted((r for r in mine if r.engine == engine), key=lambda r: r.parameters)
            xs = [r.parameters for r in points]
            ys = [r.warm_call_s for r in points]
            low = [r.warm_call_s - (r.warm_call_ci_low_s or r.warm_call_s) for r in points]
            high = [(r.warm_call_ci_high_s or r.warm_call_s) - r.warm_call_s for r in points]
            ax.errorbar(xs, ys, yerr=[low, high], marker="o", color=f"C{index % 10}", label=engine, capsize=2)
            table += [[engine, str(r.parameters), fmt_seconds(r.warm_call_s), fmt_seconds(r.ttfr_cold_cache_s),
                       "ours"] for r in points]  # fmt: skip
        reference = [f for f in catalog.WORKLOADS[workload].published if f.unit == "s"]
        if reference:
            ax.scatter([f.parameters for f in reference], [f.value for f in reference], s=60, facecolors="none",
                       edgecolors="black", label=f"{catalog.PUBLISHED_NAME} (measured elsewhere)")  # fmt: skip
            table += [[catalog.PUBLISHED_NAME, str(f.parameters), fmt_seconds(f.value), "—", "measured elsewhere"]
                      for f in reference]  # fmt: skip
        ax.set_xscale("log")
        ax.set_yscale("log")
        _log_axis(ax.xaxis, _count)
        _log_axis(ax.yaxis)
        ax.set_xlabel("parameters")
        ax.set_ylabel("seconds per call (warm)")
        ax.set_title(workload)
        ax.legend(frameon=False)
        plots.append(Plot(f"HistFactory cost against parameters: {workload}", _svg(fig),
                          ["engine", "parameters", "warm call", "TTFR cold cache", "source"], table))  # fmt: skip
    return plots


def training_losses(cases: list[CaseResult]) -> Plot | None:
    """The checked 20-step training loop's loss per step, per engine and workspace."""
    series = []
    for case in cases:
        train_loop = case.correctness.train_loop if case.correctness else None
        kde = train_loop.kde if train_loop else None
        if kde and kde.losses:
            series.append((case.case, kde.losses))
    if not series:
        return None
    figures = _figures()
    fig, ax = figures.subplots(figsize=(6, 3.4))
    for index, (name, losses) in enumerate(series):
        ax.plot(range(1, len(losses) + 1), losses, marker=".", color=f"C{index % 10}", label=name)
    ax.set_xlabel("training step")
    ax.set_ylabel("loss (−Z₀)")
    ax.legend(frameon=False)
    table = [[name, str(len(losses)), f"{losses[0]:.6g}", f"{losses[-1]:.6g}", ", ".join(f"{v:.4g}" for v in losses)]
             for name, losses in series]  # fmt: skip
    return Plot("Training-loss trajectories (the checked 20-step loop)", _svg(fig),
                ["case", "steps", "first", "last", "every step"], table)  # fmt: skip


# ------------------------------------------------------------------ loops
def _timeline(case: CaseResult | None, policy: str) -> list[TimelineStep]:
    """The case's loop timeline under the policy a loop row names ([]: no such case, policy or loop summary)."""
    block = case.policies.get(policy) if case else None
    summary = named(block, "loop_summary") if block else None  # (a warm process has none)
    return summary.timeline if summary else []


def loop_timelines(cases: list[CaseResult], rows: list[LoopRow]) -> list[Plot]:
    """Per loop family, backend, dtype and policy: each strategy's per-iteration median time
    (recompiles marked ▲), and its total cost against loop length k."""
    by_id = {c.case: c for c in cases}
    groups: dict[tuple, list[LoopRow]] = {}
    for row in rows:
        groups.setdefault((row.loop, row.backend, row.dtype, row.policy), []).append(row)
    plots = []
    figures = _figures()
    for (loop, backend, dtype, policy), members in sorted(groups.items()):
        fig, (timeline_ax, cost_ax) = figures.subplots(1, 2, figsize=(_WIDTH, 3.6))
        table = []
        for index, row in enumerate(members):
            colour = f"C{index % 10}"
            label = f"{row.strategy} (size {row.size})"
            # x: the iteration's own number (an ahead-of-time phase at 0, an entry without a time skipped
            # without shifting the others)
            points, k = [], 0
            for entry in _timeline(by_id.get(row.case), policy):
                x = 0 if entry.ahead else k + 1
                k += 0 if entry.ahead else 1
                if entry.s and entry.s.median > 0:
                    points.append((x, entry.s.median, bool(entry.compiles)))
            if points:
                timeline_ax.plot([p[0] for p in points], [p[1] for p in points], color=colour, label=label, linewidth=1)
                compiled = [(x, y) for x, y, c in points if c]
                if compiled:
                    timeline_ax.scatter(*zip(*compiled), marker="^", color=colour, s=18)
            curve = row.cost_curve or []
            if len(curve) == 1 and row.size > 1:  # a batched loop: one call for all K, a point at k = K
                curve = [CostPoint(k=row.size, s=curve[0].s)]
            if curve:
                marker = "o" if len(curve) == 1 else None
                cost_ax.plot([p.k for p in curve], [p.s for p in curve], color=colour, label=label, marker=marker)
            total = row.total_s
            copies = fmt_copies(row.transfer_s, row.transfer_share)  # the strategy's own copies, the rest compute
            table.append([row.strategy, str(row.size), _fmt(total), str(row.compiles), copies,
                          "—" if row.vs_naive is None else f"{row.vs_naive:.2f}×",
                          _calls(row.overtakes_naive_at_k) if row.strategy != "naive" else "—",
                          ", ".join(f"{p.k}: {fmt_seconds(p.s)}" for p in curve) or "—",
                          ", ".join(f"{x}: {fmt_seconds(y)}{' ▲' if c else ''}" for x, y, c in points) or "—"])  # fmt: skip
        timeline_ax.set_yscale("log")
        _log_axis(timeline_ax.yaxis)
        timeline_ax.set_xlabel("iteration (0: ahead of the loop)")
        timeline_ax.set_ylabel("seconds (median over runs)")
        timeline_ax.set_title("per iteration (▲: compiled)")
        cost_ax.set_xlabel("loop length k")
        cost_ax.set_ylabel("seconds from process start")
        cost_ax.set_title("total cost")
        cost_ax.legend(frameon=False)
        plots.append(Plot(f"Loop {loop}: {backend} {dtype} ({policy_words(policy)})", _svg(fig),
                          ["strategy", "size", "total [CI]", "compiles", "host↔device copies (share of loop)",
                           "vs naive", "overtakes naive at k",
                           "total cost at k", "iteration medians (▲: compiled)"], table))  # fmt: skip
    return plots


# ------------------------------------------------------------------ conversions
def conversions(cases: list[CaseResult]) -> list[Plot]:
    """Per route family (a source and a destination): each route's warm call against its size in
    bytes (log-log), one line per route (and dtype, where there are several), from the cases'
    conversion figures; a route without a warm-call figure at a size has no point there."""
    measured = [c for c in cases if present(c.conversion)]
    families: dict[tuple[str, str], list[CaseResult]] = {}
    for case in measured:
        evidence = case.conversion.evidence
        families.setdefault((evidence.source, evidence.destination), []).append(case)
    plots = []
    figures = None
    for (source, destination), members in sorted(families.items()):
        drawn = [c for c in members if c.conversion.call_s is not None and c.conversion.call_s > 0]
        if not drawn:
            continue
        figures = figures or _figures()
        fig, ax = figures.subplots(figsize=(6, 3.6))
        several = len({c.dtype for c in drawn}) > 1
        lines: dict[tuple[str, str], list[CaseResult]] = {}
        for case in sorted(drawn, key=lambda c: (c.workload, c.dtype, c.conversion.evidence.bytes)):
            lines.setdefault((case.workload, case.dtype), []).append(case)
        table = []
        for index, ((route, dtype), points) in enumerate(lines.items()):
            label = f"{route} ({dtype})" if several else route
            ax.plot([c.conversion.evidence.bytes for c in points], [c.conversion.call_s for c in points], marker="o",
                    color=f"C{index % 10}", label=label)  # fmt: skip
            for case in points:
                conversion = case.conversion
                table.append([route, case.conversion.evidence.api, dtype, f"{conversion.evidence.bytes:,}",
                              fmt_seconds(conversion.call_s), copied_verdict(conversion.evidence.copied),
                              fmt_rate(conversion.bytes_per_s), fmt_percent(conversion.memcpy_fraction)])  # fmt: skip
        from matplotlib.ticker import NullLocator

        sizes = sorted({c.conversion.evidence.bytes for c in drawn})  # powers of two: each labelled, no others
        ax.set_xscale("log", base=2)
        ax.set_xticks(sizes, [fmt_bytes(size) for size in sizes])
        ax.xaxis.set_minor_locator(NullLocator())
        ax.set_yscale("log")
        _log_axis(ax.yaxis)
        ax.set_xlabel("size (bytes of the source)")
        ax.set_ylabel("seconds per conversion (warm)")
        ax.set_title(f"{source} → {destination}")
        _legend_below(fig, ax)
        plots.append(Plot(f"Conversions {source} → {destination}: warm call against size", _svg(fig),
                          ["route", "API", "dtype", "bytes", "warm call", "copied", "GB/s", "% of memcpy"], table,
                          "Bytes counted once; % of memcpy: np.copyto of the same bytes in the same process, where "
                          "the route copied.",))  # fmt: skip
    return plots


# ------------------------------------------------------------------ concurrency
_MODE_COLOUR = dict(zip(CONCURRENCY_MODES, ("#1f77b4", "#2ca02c", "#d62728")))  # cold-shared, warm-shared, cold-private


def concurrency(case: CaseResult) -> Plot | None:
    """A case's TTFR against the group size N (`--concurrency`): per sharing mode its p50 (solid) and
    its nearest-rank p95 (dashed), one colour per mode, from the case's concurrency points; a dotted
    line at the usable cores where a larger N ran. None: no point has a TTFR."""
    if not present(case.concurrency):
        return None
    together = case.concurrency
    if not any(p.ttfr_p50_s is not None for p in together.points):
        return None
    fig, ax = _figures().subplots(figsize=(6, 3.6))
    table = []
    for mode in CONCURRENCY_MODES:
        points = sorted((p for p in together.points if p.mode == mode), key=lambda p: p.n)
        colour = _MODE_COLOUR[mode]
        for name, style, marker, value in (("p50", "-", "o", lambda p: p.ttfr_p50_s),
                                           ("p95", "--", "^", lambda p: p.ttfr_p95_s)):  # fmt: skip
            drawn = [(p.n, value(p)) for p in points if value(p) is not None]
            if drawn:
                ax.plot([n for n, _ in drawn], [y for _, y in drawn], color=colour, linestyle=style, marker=marker,
                        markersize=4, label=f"{mode} {name}")  # fmt: skip
        table += [[mode, str(p.n), str(p.processes), fmt_seconds(p.ttfr_p50_s), fmt_seconds(p.ttfr_p95_s),
                   fmt_seconds(p.ttfr_max_s)] for p in points]  # fmt: skip
    from matplotlib.ticker import NullLocator

    sizes = sorted({p.n for p in together.points})
    cores = together.usable_cores
    if cores is not None and any(p.oversubscribed for p in together.points):
        ax.axvline(cores, color="grey", linestyle=":", linewidth=1, label=f"usable cores ({cores})")
    ax.set_xscale("log", base=2)
    ax.set_xticks(sizes, [str(n) for n in sizes])
    ax.xaxis.set_minor_locator(NullLocator())
    if len(sizes) == 1:  # one N: an axis around it, not a degenerate one
        ax.set_xlim(sizes[0] / 2, sizes[0] * 2)
    ax.set_ylim(bottom=0)
    ax.yaxis.set_major_formatter(_seconds_formatter())
    ax.set_xlabel("processes started at once (N)")
    ax.set_ylabel("TTFR (each process)")
    _legend_below(fig, ax)
    return Plot(f"TTFR against N: {case.case}", _svg(fig), ["mode", "N", "processes", "TTFR p50", "TTFR p95", "TTFR max"],
                table, "Solid: p50; dashed: p95 (nearest rank), over the ok processes of each mode's groups.")  # fmt: skip


def _seconds_formatter():
    from matplotlib.ticker import FuncFormatter

    return FuncFormatter(lambda value, _pos: "0" if value == 0 else fmt_seconds(value))


# ------------------------------------------------------------------ comparisons
def forest(document: Comparison) -> Plot | None:
    """B/A ratio with its CI per case and policy against the ±δ band, coloured by verdict."""
    records = [r for r in document.comparisons if r.effect is not UNSET and r.effect.ratio]
    if not records:
        return None
    figures = _figures()
    fig, ax = figures.subplots(figsize=(_WIDTH, 0.4 * len(records) + 1.3))
    ax.axvline(1.0, color="black", linewidth=0.8)
    table = []
    for index, record in enumerate(records):
        effect = record.effect
        verdict = record.base_verdict
        colour = _VERDICT_COLOUR.get(verdict, "black")
        delta = effect.delta
        if delta:  # each comparison's own ±δ (it differs by regime)
            ax.fill_betweenx([index - 0.4, index + 0.4], 1 - delta, 1 + delta, color="#d5dbdb", alpha=0.8, linewidth=0,
                             label="±δ (equivalence band)")  # fmt: skip
        ci = effect.ci
        if ci:
            ax.plot(ci, [index, index], color=colour, linewidth=2)
        ax.plot([effect.ratio], [index], marker="D", color=colour, label=verdict)
        level = f" ({effect.ci_level:.0%})" if ci and effect.ci_level is not None else ""
        table.append([record.case, record.point, f"{effect.ratio:.3f}",
                      f"[{ci[0]:.3f}, {ci[1]:.3f}]{level}" if ci else "—", "—" if not delta else f"±{delta:.1%}",
                      record.verdict])  # fmt: skip
    labels = [
        f"{r.case} ({r.point if r.policy in CONCURRENCY_MODES else policy_words(r.policy)})" for r in records
    ]  # a concurrency point: "cold-shared x8"
    ax.set_yticks(range(len(records)), labels)
    ax.invert_yaxis()
    ax.set_xlabel("B / A (median ratio and its CI; levels in the table)")
    _left_for(fig, labels)
    _legend_below(fig, ax)
    return Plot("B against A", _svg(fig), ["case", "policy", "B/A", "CI (level)", "δ", "verdict"], table)


# ------------------------------------------------------------------ --explain: the whole cold start
_ICICLE_ROWS = ("measured phases", "where they went", "programs, graphs")
_ICICLE_GREY = {icicle.NOT_IMPORTING: "#d9d9d9", icicle.OTHER: "#bdbdbd", UNATTRIBUTED: "#969696"}
_ICICLE_LABELLED = 10  # labelled boxes a row at most (the largest): the rest are in the table
_ICICLE_AXES_PT = 0.84 * _WIDTH * 72  # the axes' width in points (subplots_adjust below)
_ICICLE_CHAR_PT = 0.6 * 7  # a 7 pt character's width, about


def cold_start(cases: list[CaseResult]) -> list[Plot]:
    """One icicle chart per explained case (report/icicle.py: which boxes; here: how they look), a panel per
    cold policy with an explanation: the measured phases on top, where the diagnostic process found they went
    below, each part a share of its phase. Labels fit their box (cut with … or left off; at most ten a row);
    the table under the figure holds every box."""
    plots, figures = [], None
    for case in cases:
        panels = [(policy, block) for policy, block in case.policies.cold()
                  if present(block.explanation) and block.explanation.outcome == "ok"]  # fmt: skip
        drawn = [(policy, block, icicle.boxes(block, block.explanation)) for policy, block in panels]
        drawn = [(policy, block, found) for policy, block, found in drawn if found]
        if not drawn:
            continue
        figures = figures or _figures()
        fig, axes = figures.subplots(len(drawn), 1, figsize=(_WIDTH, 1.55 * len(drawn) + 0.4), squeeze=False)
        fig.subplots_adjust(left=0.14, right=0.98, hspace=0.75)
        table = []
        for ax, (policy, block, found) in zip([row[0] for row in axes], drawn):
            _icicle_panel(ax, found, policy_words(policy), named(block.summary, "ttfr_s"))
            table += [[policy_words(policy), _ICICLE_ROWS[box.row], box.parent or "—", box.label, fmt_seconds(box.seconds),
                       fmt_percent(box.share) if box.share is not None else "—"] for box in found]  # fmt: skip
        plots.append(Plot(f"Where the cold start of {case.case} goes", _svg(fig),
                          ["policy", "row", "part of", "box", "seconds", "share of its parent"], table,
                          "Top row: the measured medians. Below: the diagnostic process's own seconds (--explain), "
                          "drawn as shares of the phase above them, so each row fills its parent."))  # fmt: skip
    return plots


def _icicle_panel(ax, found: list, title: str, ttfr: Summary | None) -> None:
    end = max(box.start + box.width for box in found)
    phase_colour = {label: _COLOURS[key] for key, label in COMPONENT_LABELS.items() if key in _COLOURS}
    for row in range(len(_ICICLE_ROWS)):
        boxes = [b for b in found if b.row == row]
        labelled = sorted(boxes, key=lambda b: -b.width)[:_ICICLE_LABELLED]
        siblings: dict[str | None, int] = {}
        for box in boxes:
            index = siblings[box.parent] = siblings.get(box.parent, -1) + 1
            colour = (phase_colour.get(box.label, "#7f7f7f") if row == 0
                      else _ICICLE_GREY.get(box.label, f"C{(index + row) % 10}"))  # fmt: skip
            ax.barh(row, box.width, left=box.start, height=0.92, color=colour, edgecolor="white", linewidth=0.6)
            if box in labelled:
                text = _fit(box.label, fmt_seconds(box.seconds), box.width / end * _ICICLE_AXES_PT)
                if text:
                    ax.text(box.start + box.width / 2, row, text, ha="center", va="center", fontsize=7, clip_on=True,
                            color="white" if row == 0 else "black")  # fmt: skip
    ax.set_xlim(0, end)
    ax.set_ylim(len(_ICICLE_ROWS) - 0.5, -0.5)
    ax.set_yticks(range(len(_ICICLE_ROWS)), _ICICLE_ROWS)
    ax.set_title(f"{title}: TTFR {_fmt(ttfr)} (median)", fontsize=9)
    ax.set_xlabel("seconds", fontsize=_SMALL_PT)


def _fit(label: str, seconds: str, box_pt: float) -> str:
    """A box's label as a box `box_pt` wide holds it: with its seconds, else the label alone, else the label cut
    (…); empty below four characters."""
    room = int(box_pt / _ICICLE_CHAR_PT) - 1
    if room < 4:
        return ""
    for text in (f"{label} {seconds}", label):
        if len(text) <= room:
            return text
    return label[: room - 1] + "…"
