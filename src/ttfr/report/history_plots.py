"""history.html's figures: one trend per case and figure, each of its series (a policy on a machine)
a line over the results in order, a gap left open, each step marked where it starts, each point a
link to its result (the plots' conventions: report/plots.py)."""

from __future__ import annotations

from ttfr.model.history import History, Series
from ttfr.report.formatting import fmt_seconds
from ttfr.report.history_md import ci_text, ratio_text
from ttfr.report import plots


def _groups(history: History) -> dict[tuple[str, str], list[Series]]:
    groups: dict[tuple[str, str], list[Series]] = {}
    for series in history.series:
        groups.setdefault((series.case, series.figure), []).append(series)
    return groups


def _legend_under_labels(fig, ax, longest: int) -> None:
    """The legend under the x tick labels, which run at 30 degrees: their height grows with the longest."""
    from matplotlib.transforms import ScaledTranslation

    handles, names = ax.get_legend_handles_labels()
    if not handles:
        return
    drop = 0.25 + 0.5 * longest * plots._SMALL_PT / 72 * 0.6  # sin(30°) x the label's width in inches
    below = ax.transAxes + ScaledTranslation(0, -drop, fig.dpi_scale_trans)
    ax.legend(handles, names, frameon=False, ncols=2, loc="upper center", bbox_to_anchor=(0.5, 0), bbox_transform=below)


def trends(history: History, links: dict[str, str]) -> list[plots.Plot]:
    """A plot per (case, figure); `links` maps a source id to the address its points open."""
    position = {s.id: i for i, s in enumerate(history.sources)}
    # a date to the second (its zone crowds the axis); a version as it is
    labels = [s.label[:19].replace("T", " ") if history.order_by == "date" else s.label for s in history.sources]
    drawn = []
    for (case, figure), group in _groups(history).items():
        fig, ax = plots._figures().subplots(figsize=(plots._WIDTH, 3.2))
        rows = []
        for series in group:
            xs = [position[p.source] for p in series.points]
            ys = [p.median_s for p in series.points]  # None: a gap, drawn as a break in the line
            name = f"{series.policy} · {series.machine}"
            line = ax.plot(xs, [float("nan") if y is None else y for y in ys], marker="o", markersize=4, label=name)[0]
            shown = [(x, y, p.source) for x, y, p in zip(xs, ys, series.points) if y is not None]
            if shown:
                dots = ax.scatter([x for x, _, _ in shown], [y for _, y, _ in shown], s=14, color=line.get_color(), zorder=3)
                dots.set_urls([links.get(source) for _, _, source in shown])
            for step in series.steps:
                x = position[series.points[step.at].source] - 0.5
                ax.axvline(x, color=line.get_color(), linestyle="--", linewidth=1)
                ax.annotate(ratio_text(step.ratio), (x, step.after_s), xytext=(3, 3), textcoords="offset points",
                            fontsize=8, color=line.get_color())  # fmt: skip
                rows.append([series.policy, series.machine, step.label, f"{fmt_seconds(step.before_s)} → "
                             f"{fmt_seconds(step.after_s)}", ratio_text(step.ratio), ci_text(step)])  # fmt: skip
            if not series.steps:
                rows.append([series.policy, series.machine, "no step" if series.status == "detected" else "too few points",
                             "", "", ""])  # fmt: skip
        ax.set_yscale("log")
        plots._log_axis(ax.yaxis)
        ax.set_xticks(range(len(labels)), labels, rotation=30, ha="right")
        ax.set_ylabel(figure)
        _legend_under_labels(fig, ax, max(len(label) for label in labels))
        header = ["policy", "machine", "step at", "level", "change", "95% CI"]
        drawn.append(plots.Plot(f"{case}: {figure}", plots._svg(fig), header, rows))
    return drawn
