"""The HTML report's figures: matplotlib (Agg) drawn to inline SVG, text kept as text.

Every function takes artifact data (case files, suite rows, a comparison document) and
returns a Plot: the SVG and the table of the numbers it draws, so the page can show both
(screen readers, copy-paste). matplotlib is imported here only, when a page is made: the
Markdown report and the command line never load it (tests/test_layers.py).
"""

from __future__ import annotations

import io
import math
from dataclasses import dataclass

from ttfr.measure.policies import COLD_CACHE, COLD_POLICIES, WARM_CACHE, WARM_PROCESS
from ttfr.report.markdown import fmt_seconds
from ttfr.report.reference import NEXTSTAT_CUDA_FIGURES

_POLICY_LABEL = {COLD_CACHE: "cold cache", WARM_CACHE: "warm cache", WARM_PROCESS: "warm process"}
_VERDICT_COLOUR = {"regression": "#c0392b", "improvement": "#1e8449", "equivalent": "#7f8c8d",
                   "inconclusive": "#d4ac0d", "not_compared": "#34495e"}  # fmt: skip
_COMPONENTS = (("interpreter_s", "interpreter"), ("import_s", "import"), ("user_import_s", "your import"),
               ("setup_s", "setup"), ("first_call_s", "first call"))  # fmt: skip
_STAGES = (("trace_s", "trace"), ("lower_s", "lower"), ("compile_s", "compile"), ("dynamo_s", "dynamo"),
           ("aot_autograd_s", "AOTAutograd"), ("inductor_s", "inductor"), ("first_execute_s", "first execute"))  # fmt: skip


@dataclass
class Plot:
    title: str
    svg: str
    header: list[str]
    rows: list[list[str]]
    note: str = ""


def _pyplot():
    import matplotlib

    matplotlib.use("Agg", force=True)
    matplotlib.rcParams.update({
        "svg.fonttype": "none",  # text stays text: searchable, smaller, readable by assistive tools
        "svg.hashsalt": "ttfr",  # stable element ids: the same figures give the same page
        "font.size": 9,
        "axes.spines.top": False,
        "axes.spines.right": False,
        "figure.dpi": 96,
    })  # fmt: skip
    import matplotlib.pyplot as plt

    return plt


def _svg(fig) -> str:
    plt = _pyplot()
    out = io.StringIO()
    fig.savefig(out, format="svg", bbox_inches="tight", metadata={"Date": None, "Creator": "ttfr"})
    plt.close(fig)
    text = out.getvalue()
    return text[text.index("<svg") :]  # inline: no XML declaration or doctype


def _ci(summary: dict | None) -> tuple[float, float] | None:
    ci = (summary or {}).get("median_ci")
    return (ci["low"], ci["high"]) if ci else None


def _fmt(summary: dict | None) -> str:
    if not summary:
        return "—"
    ci = _ci(summary)
    return fmt_seconds(summary["median"]) + (f" [{fmt_seconds(ci[0])}, {fmt_seconds(ci[1])}]" if ci else "")


def _metric(case: dict, policy: str, name: str) -> dict | None:
    summary = (case["policies"].get(policy) or {}).get("summary") or {}
    return summary.get(name)


# ------------------------------------------------------------------ amortisation
def amortisation(cases: list[dict], break_even: list[dict]) -> list[Plot]:
    """Cumulative time against calls, one line per backend, per workload/size/dtype: TTFR for
    the first call, then the warm per-call time; bands from both medians' CIs; the break-even
    points of suite.json marked where the slower starter catches up."""
    groups: dict[tuple, list[dict]] = {}
    for case in cases:
        if case["status"] == "failed" or case.get("command"):
            continue
        if not _metric(case, WARM_PROCESS, "call_s"):
            continue
        groups.setdefault((case["workload"], case["size"], case["dtype"], case["dataset"]["id"]), []).append(case)
    plots = []
    for (workload, size, dtype, dataset), members in sorted(groups.items()):
        policies = [p for p in COLD_POLICIES if any(_metric(c, p, "ttfr_s") for c in members)]
        if not policies:
            continue
        plots.append(_amortisation_plot(workload, size, dtype, dataset, members, policies, break_even))
    return plots


def _amortisation_plot(workload, size, dtype, dataset, members, policies, break_even) -> Plot:
    plt = _pyplot()
    key = (workload, size, dtype, dataset)
    rows_here = [r for r in break_even if (r["workload"], r["size"], r["dtype"], r["dataset"]) == key]
    # far enough to see every break-even (and its CI range); without one, far enough to see the lines part
    reach = max([10_000] + [3 * max(r["calls"], *(c for c in r["calls_range"] if c)) for r in rows_here if r["calls"]])
    reach = min(reach, 10**7)
    fig, axes = plt.subplots(1, len(policies), figsize=(4.6 * len(policies), 3.2), squeeze=False)
    table = []
    n = _call_grid(reach)
    for ax, policy in zip(axes[0], policies):
        for index, case in enumerate(sorted(members, key=lambda c: c["backend"])):
            cold, warm = _metric(case, policy, "ttfr_s"), _metric(case, WARM_PROCESS, "call_s")
            if not cold:
                continue
            colour = f"C{index % 10}"
            ax.plot(n, [cold["median"] + (k - 1) * warm["median"] for k in n], color=colour, label=case["backend"])
            low, high = _ci(cold), _ci(warm)
            if low and high:
                ax.fill_between(n, [low[0] + (k - 1) * high[0] for k in n], [low[1] + (k - 1) * high[1] for k in n],
                                color=colour, alpha=0.15, linewidth=0)  # fmt: skip
            table.append([case["backend"], _POLICY_LABEL[policy], _fmt(cold), _fmt(warm)])
        for row in (r for r in rows_here if r["cold_policy"] == policy and r["calls"]):
            calls = row["calls"]
            y = row["slow_start_ttfr_s"] + (calls - 1) * row["slow_start_call_s"]
            ax.plot([calls], [y], marker="o", markersize=7, markerfacecolor="none", markeredgecolor="black")
            ax.annotate(f"{row['slow_start']} catches up\nat call {calls:,}", (calls, y), textcoords="offset points",
                        xytext=(6, -18), fontsize=7)  # fmt: skip
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("calls")
        ax.set_ylabel("cumulative seconds (from process start)")
        ax.set_title(_POLICY_LABEL[policy])
        ax.legend(fontsize=7, frameon=False)
    notes = []
    for row in rows_here:
        span = row["calls_range"]
        shown = "never" if row["calls"] is None else f"{row['calls']:,}"
        rng = "" if row["calls"] is None else f" (CI range {_calls(span[0])}–{_calls(span[1])})"
        notes.append([f"{row['slow_start']} vs {row['fast_start']}", _POLICY_LABEL[row["cold_policy"]], "break-even",
                      shown + rng])  # fmt: skip
    note = "Lines: TTFR + (calls − 1) × warm call; bands: both medians' 95% CIs; circles: break-even."
    return Plot(f"Amortisation: {workload} {size} {dtype}", _svg(fig), ["backend", "policy", "TTFR [CI]", "warm call [CI]"],
                table + notes, note)  # fmt: skip


def _calls(value) -> str:
    return "never" if value is None else f"{value:,}"


def _call_grid(reach: int) -> list[int]:
    points = sorted({int(round(10 ** (i / 20))) for i in range(0, int(20 * math.log10(reach)) + 1)} | {1, reach})
    return [p for p in points if 1 <= p <= reach]


# ------------------------------------------------------------------ cold-start components
def components(cases: list[dict], policy: str) -> Plot | None:
    """Median cold-start components stacked per case (the first call split by stage when known)."""
    chosen = [c for c in cases if not c.get("command") and c["status"] != "warn" and _metric(c, policy, "ttfr_s")]
    if not chosen:
        return None
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 0.45 * len(chosen) + 1.2))
    table = []
    labels = []
    for row_index, case in enumerate(chosen):
        summary = case["policies"][policy].get("summary") or {}
        stages = case["policies"][policy].get("stages_summary") or {}
        left = 0.0
        parts = []
        for index, (key, label) in enumerate(_COMPONENTS):
            value = (summary.get(key) or {}).get("median")
            if value is None:
                continue
            if key == "first_call_s" and stages:
                for s_index, (stage, stage_label) in enumerate(_STAGES):
                    if stage in stages:
                        width = stages[stage]["median"]
                        ax.barh(row_index, width, left=left, color=f"C{(5 + s_index) % 10}", hatch="//", edgecolor="white",
                                label=f"first call: {stage_label}")  # fmt: skip
                        left += width
                        parts.append(f"{stage_label} {fmt_seconds(width)}")
                continue
            ax.barh(row_index, value, left=left, color=f"C{index}", label=label)
            left += value
            parts.append(f"{label} {fmt_seconds(value)}")
        labels.append(case["case"])
        table.append([case["case"], _fmt(summary.get("ttfr_s")), ", ".join(parts)])
    ax.set_yticks(range(len(chosen)), labels, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("seconds (medians over fresh processes)")
    handles, names = ax.get_legend_handles_labels()
    unique = dict(zip(names, handles))
    ax.legend(unique.values(), unique.keys(), fontsize=7, frameon=False, loc="lower right")
    return Plot(f"Cold-start components ({_POLICY_LABEL[policy]})", _svg(fig), ["case", "TTFR [CI]", "components (medians)"],
                table, "Medians do not add up exactly to the TTFR median: each is the median of its own component.")  # fmt: skip


# ------------------------------------------------------------------ run distributions
def distributions(cases: list[dict], policy: str) -> Plot | None:
    """Every fresh process's TTFR (or every warm process's median call), the median and its CI;
    contended runs (set aside from the figures) drawn as crosses, a flagged first-run outlier ringed."""
    metric = "call_s" if policy == WARM_PROCESS else "ttfr_s"
    chosen = [c for c in cases if c["status"] != "warn" and (c["policies"].get(policy) or {})]
    if not chosen:
        return None
    from ttfr.analyse import contention  # pure Python, no numpy

    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 0.45 * len(chosen) + 1.2))
    table = []
    for row_index, case in enumerate(chosen):
        block = case["policies"][policy]
        runs = block.get("procs" if policy == WARM_PROCESS else "runs", [])
        ok = [r for r in runs if r["outcome"] == "ok"]
        values = [(r.get("median_s") if policy == WARM_PROCESS else r["metrics"].get("ttfr_s"), contention.is_contended(r))
                  for r in ok]  # fmt: skip
        clean = [v for v, contended in values if v is not None and not contended]
        busy = [v for v, contended in values if v is not None and contended]
        jitter = [row_index + 0.25 * ((i % 5) - 2) / 2 for i in range(len(clean))]
        ax.scatter(clean, jitter, s=12, color="C0", alpha=0.7, label="run")
        ax.scatter(busy, [row_index] * len(busy), s=24, color="C3", marker="x", label="contended (set aside)")
        summary = (block.get("summary") or {}).get(metric)
        if summary:
            ax.plot([summary["median"]], [row_index], marker="|", markersize=16, color="black", label="median")
            ci = _ci(summary)
            if ci:
                ax.plot(ci, [row_index, row_index], color="black", linewidth=1, label="95% CI")
        outlier = next((f for f in block.get("flags", []) if f["flag"] == "first_run_outlier"), None)
        if outlier:  # flagged, never removed: ringed where it lies
            ax.scatter([outlier["value"]], [row_index], s=70, facecolors="none", edgecolors="C1", label="first-run outlier")
        failed = len(runs) - len(ok)
        table.append([case["case"], _fmt(summary), str(len(clean)), str(len(busy)), str(failed),
                      ", ".join(fmt_seconds(v) for v, _ in values if v is not None)])  # fmt: skip
    ax.set_yticks(range(len(chosen)), [c["case"] for c in chosen], fontsize=7)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlabel("seconds per call (process medians)" if policy == WARM_PROCESS else "TTFR seconds (each fresh process)")
    handles, names = ax.get_legend_handles_labels()
    unique = dict(zip(names, handles))
    ax.legend(unique.values(), unique.keys(), fontsize=7, frameon=False, loc="best")
    return Plot(f"Run distributions ({_POLICY_LABEL[policy]})", _svg(fig),
                ["case", "median [CI]", "clean", "contended", "failed", "values"], table)  # fmt: skip


# ------------------------------------------------------------------ HistFactory
def scaling(rows: list[dict]) -> list[Plot]:
    """Warm cost against parameter count (log-log) per engine and workload, with NextStat's
    published CUDA figures as hollow markers (measured elsewhere, other hardware)."""
    plots = []
    plt = _pyplot()
    for workload in sorted({r["workload"] for r in rows}):
        mine = [r for r in rows if r["workload"] == workload and r["warm_call_s"] is not None]
        if not mine:
            continue
        fig, ax = plt.subplots(figsize=(6, 3.6))
        table = []
        for index, engine in enumerate(sorted({r["engine"] for r in mine})):
            points = sorted((r for r in mine if r["engine"] == engine), key=lambda r: r["parameters"])
            xs = [r["parameters"] for r in points]
            ys = [r["warm_call_s"] for r in points]
            low = [r["warm_call_s"] - (r["warm_call_ci_low_s"] or r["warm_call_s"]) for r in points]
            high = [(r["warm_call_ci_high_s"] or r["warm_call_s"]) - r["warm_call_s"] for r in points]
            ax.errorbar(xs, ys, yerr=[low, high], marker="o", color=f"C{index % 10}", label=engine, capsize=2)
            table += [[engine, str(r["parameters"]), fmt_seconds(r["warm_call_s"]), fmt_seconds(r["ttfr_cold_cache_s"]),
                       "ours"] for r in points]  # fmt: skip
        reference = [f for f in NEXTSTAT_CUDA_FIGURES if f[1] == workload and f[4] == "s"]
        if reference:
            ax.scatter([f[2] for f in reference], [f[3] for f in reference], s=60, facecolors="none", edgecolors="black",
                       label="NextStat CUDA (measured elsewhere)")  # fmt: skip
            table += [["NextStat CUDA", str(f[2]), fmt_seconds(f[3]), "—", "measured elsewhere"] for f in reference]
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("parameters")
        ax.set_ylabel("seconds per call (warm)")
        ax.set_title(workload)
        ax.legend(fontsize=7, frameon=False)
        plots.append(Plot(f"HistFactory cost against parameters: {workload}", _svg(fig),
                          ["engine", "parameters", "warm call", "TTFR cold cache", "source"], table))  # fmt: skip
    return plots


def training_losses(cases: list[dict]) -> Plot | None:
    """The checked 20-step training loop's loss per step, per engine and workspace."""
    series = []
    for case in cases:
        losses = (((case.get("correctness") or {}).get("train_loop") or {}).get("kde") or {}).get("losses")
        if losses:
            series.append((case["case"], losses))
    if not series:
        return None
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 3.4))
    for index, (name, losses) in enumerate(series):
        ax.plot(range(1, len(losses) + 1), losses, marker=".", color=f"C{index % 10}", label=name)
    ax.set_xlabel("training step")
    ax.set_ylabel("loss (−Z₀)")
    ax.legend(fontsize=6, frameon=False)
    table = [[name, str(len(losses)), f"{losses[0]:.6g}", f"{losses[-1]:.6g}"] for name, losses in series]
    return Plot("Training-loss trajectories (the checked 20-step loop)", _svg(fig), ["case", "steps", "first", "last"], table)


# ------------------------------------------------------------------ loops
def loop_timelines(cases: list[dict], rows: list[dict]) -> list[Plot]:
    """Per loop family, backend, dtype and policy: each strategy's per-iteration median time
    (recompiles marked ▲), and its total cost against loop length k."""
    by_id = {c["case"]: c for c in cases}
    groups: dict[tuple, list[dict]] = {}
    for row in rows:
        groups.setdefault((row["loop"], row["backend"], row["dtype"], row["policy"]), []).append(row)
    plots = []
    plt = _pyplot()
    for (loop, backend, dtype, policy), members in sorted(groups.items()):
        fig, (timeline_ax, cost_ax) = plt.subplots(1, 2, figsize=(9.5, 3.4))
        table = []
        for index, row in enumerate(members):
            summary = ((by_id.get(row["case"]) or {}).get("policies", {}).get(policy) or {}).get("loop_summary") or {}
            colour = f"C{index % 10}"
            label = f"{row['strategy']} (size {row['size']})"
            entries = [e for e in summary.get("timeline", []) if e.get("s")]
            xs = list(range(1, len(entries) + 1))
            timeline_ax.plot(xs, [e["s"]["median"] for e in entries], color=colour, label=label, linewidth=1)
            compiled = [(x, e["s"]["median"]) for x, e in zip(xs, entries) if e.get("compiles")]
            if compiled:
                timeline_ax.scatter(*zip(*compiled), marker="^", color=colour, s=18)
            curve = row.get("cost_curve") or []
            if curve:
                marker = "." if len(curve) == 1 else None  # a batched loop: one point, at K
                cost_ax.plot([p["k"] for p in curve], [p["s"] for p in curve], color=colour, label=label, marker=marker)
            total = row["total_s"]
            table.append([row["strategy"], str(row["size"]), _fmt(total), str(row["compiles"]),
                          "—" if row["vs_naive"] is None else f"{row['vs_naive']:.2f}×",
                          _calls(row["overtakes_naive_at_k"]) if row["strategy"] != "naive" else "—"])  # fmt: skip
        timeline_ax.set_yscale("log")
        timeline_ax.set_xlabel("iteration")
        timeline_ax.set_ylabel("seconds (median over runs)")
        timeline_ax.set_title("per iteration (▲: compiled)")
        cost_ax.set_xlabel("loop length k")
        cost_ax.set_ylabel("seconds from process start")
        cost_ax.set_title("total cost")
        cost_ax.legend(fontsize=7, frameon=False)
        fig.suptitle(f"{loop}, {backend}, {dtype}, {_POLICY_LABEL.get(policy, policy)}", fontsize=10)
        plots.append(Plot(f"Loop {loop}: {backend} {dtype} ({_POLICY_LABEL.get(policy, policy)})", _svg(fig),
                          ["strategy", "size", "total [CI]", "compiles", "vs naive", "overtakes naive at k"], table))  # fmt: skip
    return plots


# ------------------------------------------------------------------ comparisons
def forest(document: dict) -> Plot | None:
    """B/A ratio with its CI per case and policy against the ±δ band, coloured by verdict."""
    records = [r for r in document["comparisons"] if (r.get("effect") or {}).get("ratio")]
    if not records:
        return None
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 0.4 * len(records) + 1.3))
    deltas = {(r.get("effect") or {}).get("delta") for r in records} - {None}
    delta = max(deltas) if deltas else None
    if delta:
        ax.axvspan(1 - delta, 1 + delta, color="#d5dbdb", alpha=0.6, label=f"±δ ({delta:.0%})")
    ax.axvline(1.0, color="black", linewidth=0.8)
    table = []
    from ttfr.analyse import comparison_stats

    for index, record in enumerate(records):
        effect = record["effect"]
        verdict = comparison_stats.base_verdict(record)
        colour = _VERDICT_COLOUR.get(verdict, "black")
        ci = effect.get("ci")
        if ci:
            ax.plot(ci, [index, index], color=colour, linewidth=2)
        ax.plot([effect["ratio"]], [index], marker="D", color=colour, label=verdict)
        table.append([record["case"], record["policy"], f"{effect['ratio']:.3f}",
                      f"[{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "—", record["verdict"]])  # fmt: skip
    ax.set_yticks(range(len(records)), [f"{r['case']} ({_POLICY_LABEL.get(r['policy'], r['policy'])})" for r in records],
                  fontsize=7)  # fmt: skip
    ax.invert_yaxis()
    ax.set_xlabel("B / A (median ratio, 95% CI)")
    handles, names = ax.get_legend_handles_labels()
    unique = dict(zip(names, handles))
    ax.legend(unique.values(), unique.keys(), fontsize=7, frameon=False, loc="best")
    return Plot("B against A", _svg(fig), ["case", "policy", "B/A", "CI", "verdict"], table)
