"""report.md: a readable account of one result directory, rendered from its artifacts only."""

from __future__ import annotations

from ttfr.analyse import contention
from ttfr.measure import catalog, datasets
from ttfr.artifacts.reader import VerifiedResult
from ttfr.model.base import UNSET, present
from ttfr.model.case import CaseResult
from ttfr.model.policy_figures import named
from ttfr.model.run_figures import COMPONENT_LABELS, OPTIONAL_METRICS
from ttfr.model.manifest import Manifest
from ttfr.model.policies import COLD_CACHE, WARM_CACHE, WARM_PROCESS, policy_label, policy_order, precompiled_parts
from ttfr.model.suite import BreakEven, Precision, ScalingRow, SuiteResult
from ttfr.report import commands_md, concurrency_md, conversions_md, explain_md, flag_text, loops_md, precompiled_md
from ttfr.report.formatting import (
    COMPILERS_COLUMN,
    DASH,
    code_block,
    compilers_seen,
    fmt_bytes,
    fmt_percent,
    fmt_seconds,
    fmt_summary,
    one_line,
    stage_split,
    table,
    watched,
)


def cache_check(case: CaseResult) -> str:
    """Each cold policy's cache verdict, as every summary shows it (the precompiled ones': each verdict once,
    how many policies had it)."""
    verdicts = [f"{label}: {policy.cache_verification.verdict}"
                for p, label in ((COLD_CACHE, "cold"), (WARM_CACHE, "warm")) if (policy := case.policies.get(p))]  # fmt: skip
    shipped = [p.cache_verification.verdict for name, p in case.policies.items() if precompiled_parts(name) and p.runs]
    if shipped:
        verdicts.append("precompiled: " + ", ".join(f"{shipped.count(v)} {v}" for v in dict.fromkeys(shipped)))
    return ", ".join(verdicts) or DASH


def cold_policies(cases: list[CaseResult]) -> list[str]:
    """Every cold policy any case ran, in the order of a process's life (the precompiled ones after the
    standard two): a components table and figure each."""
    return sorted({name for case in cases for name, _p in case.policies.cold()}, key=policy_order)


def result_check(case: CaseResult) -> str:
    """The result check's state (`not checked`: nothing to compare with), as every summary shows it."""
    return case.correctness.state.replace("_", " ") if case.correctness else DASH


def _summary_section(cases: list[CaseResult]) -> list[str]:
    rows = []
    for case in cases:
        rows.append([
            f"`{case.case}`",
            case.status + (f": {case.reason}" if case.reason else ""),
            fmt_summary(case.figure(COLD_CACHE, "ttfr_s")),
            fmt_summary(case.figure(WARM_CACHE, "ttfr_s")),
            fmt_summary(case.figure(WARM_PROCESS, "call_s")),
            cache_check(case),
            result_check(case),
        ])  # fmt: skip
    header = ["case", "status", "TTFR, cold cache", "TTFR, warm cache", "warm call", "cache check", "result check"]
    return ["## Summary", "", "Medians with their 95% order-statistic CI (the achieved level is shown when "
            "too few runs allow 95%).", "", *table(header, rows), ""]  # fmt: skip


def _components_section(cases: list[CaseResult], policy: str) -> list[str]:
    # A GPU case times its device's initialisation apart, a user's case its own import (after the runtime
    # stack): a column each when any case has it (null included).
    blocks = [block for c in cases if (block := c.policies.get(policy))]
    present = [m for m in OPTIONAL_METRICS if any(getattr(block.summary, m) is not UNSET for block in blocks)]
    # in the order of a process's life, as COMPONENT_LABELS lists the phases
    phases = [m for m in COMPONENT_LABELS if m not in OPTIONAL_METRICS or m in present]
    components = (*phases, "second_call_s", "ttfr_s", "process_s")
    trees = watched(block.summary for block in blocks)  # a column where any run's process tree was watched
    rows = []
    for case in cases:
        block = case.policies.get(policy)
        if not block or not block.measured or case.command:  # a command: the Commands section
            continue
        # A case whose runs were all set aside (contended) or failed keeps its row, with dashes.
        split = stage_split(block.stages_summary)  # as report.html's components table says it
        rows.append([f"`{case.case}`"] + [fmt_summary(block.figure(m), with_ci=False) for m in components] + [split]
                    + ([compilers_seen(block.summary)] if trees else []))  # fmt: skip
    if not rows:
        return []
    header = ["case", *(COMPONENT_LABELS.get(m, m) for m in components[:-3]), "second call", "TTFR", "process",
              "first call split", *([COMPILERS_COLUMN] if trees else [])]  # fmt: skip
    return [f"## Cold start components ({policy})", "", "Medians over fresh processes (—: no figure; see Flags).", "",
            *table(header, rows), ""]  # fmt: skip


def _warm_section(cases: list[CaseResult]) -> list[str]:
    rows = []
    for case in cases:
        summary = case.figure(WARM_PROCESS, "call_s")
        if not summary:
            continue
        procs = [p for p in case.policies.warm_process.procs if p.outcome == "ok"]
        sync_notes = sorted({problem for p in procs for problem in p.sync_check.problems})
        rows.append([
            f"`{case.case}`",
            fmt_summary(summary),
            str(summary.n),
            f"{min(p.inner_loops for p in procs)}–{max(p.inner_loops for p in procs)}",
            "; ".join(sync_notes) or "ok",
            case.sync_policy,
        ])  # fmt: skip
    if not rows:
        return []
    header = ["case", "per call (median of process medians)", "processes", "inner loop", "sync check", "sync policy"]
    return ["## Warm throughput (warm-process)", "", *table(header, rows), ""]


def _share(value) -> str:
    """A share of a step: `none` where the step never left its runtime, 2 significant digits below 10%."""
    if value is None or value is UNSET:
        return DASH
    return "none" if value == 0 else fmt_percent(value)


def _device_peaks(memory) -> str:
    """A GPU case's device peak per phase: each its own where the runtime resets its peak (torch),
    else running totals (XLA keeps one peak), as the cell says."""
    peaks = named(memory, "device_peaks")
    if peaks is None:
        return DASH
    cells = f"setup {fmt_bytes(peaks.setup)} · first call {fmt_bytes(peaks.first_call)} · steady {fmt_bytes(peaks.steady)}"
    return cells if memory.device_peaks_reset is True else cells + " (cumulative: the runtime keeps one peak)"


def _memory_section(cases: list[CaseResult]) -> list[str]:
    rows = []
    for case in cases:
        memory = case.memory
        rss = memory.peak_rss_bytes
        compiled = memory.compiled or {}
        if not rss and not compiled and memory.device_peak_bytes is UNSET:
            continue
        rows.append([
            f"`{case.case}`",
            fmt_bytes(rss.median) if rss else DASH,
            ", ".join(f"{k.replace('_size_in_bytes', '')} {fmt_bytes(v)}" for k, v in sorted(compiled.items()) if v)
            or DASH,
            fmt_bytes(named(memory, "device_peak_bytes")),  # 0 B is a figure, absent is a dash
            _device_peaks(memory),
        ])  # fmt: skip
    if not rows:
        return []
    header = ["case", "peak RSS (worker, median)", "compiled executable (JAX memory_analysis)", "device peak",
              "device peak by phase"]  # fmt: skip
    if not any(named(case.memory, "device_peaks") for case in cases):  # no GPU case: no column of dashes
        header, rows = header[:-1], [row[:-1] for row in rows]
    return ["## Memory", "", *table(header, rows), ""]


def _calls(value) -> str:
    return "never" if value is None else f"{value:,}"


SHIPPED_ROWS = (
    " A precompiled policy's rows (`mechanism/setting`) pair a backend that starts from its artifact "
    "(*with its artifact*) with the others as they start in that setting."
)


def _break_even_section(rows: list[BreakEven]) -> list[str]:
    if not rows:
        return ["## Break-even", "", "No workload has two backends with both cold and warm figures.", ""]
    lines = [
        "## Break-even",
        "",
        "After how many calls in one process the backend that starts slower has caught up: the total "
        "`TTFR + (n - 1) × warm call` of both is equal. The range uses the CI ends "
        "(best and worst case for the slow starter)."
        + (SHIPPED_ROWS if any(precompiled_parts(r.cold_policy) for r in rows) else ""),
        "",
    ]
    body = []
    for row in rows:
        low, high = row.calls_range
        body.append([
            f"{row.workload} {_size_label(row.size, row.dataset)} {row.dtype}",
            policy_label(row.cold_policy),
            f"`{row.fast_start}`{_shipped(row.fast_start_policy)} ({fmt_seconds(row.fast_start_ttfr_s)}, "
            f"{fmt_seconds(row.fast_start_call_s)}/call)",
            f"`{row.slow_start}`{_shipped(row.slow_start_policy)} ({fmt_seconds(row.slow_start_ttfr_s)}, "
            f"{fmt_seconds(row.slow_start_call_s)}/call)",
            _calls(row.calls),
            f"{_calls(low)} – {_calls(high)}",
        ])  # fmt: skip
    header = ["workload", "cache", "starts first", "starts later", "break-even calls", "range"]
    return lines + table(header, body) + [""]


def _shipped(policy) -> str:
    """A break-even side that starts from its artifact says so (a precompiled policy's row)."""
    return " with its artifact" if present(policy) and precompiled_parts(policy) else ""


def _size_label(size, dataset: str | None) -> str:
    """`8`, or `custom 8` for the user's --workspace file of that size."""
    return f"custom {size}" if datasets.is_users_workspace(dataset) else str(size)


def _sci(value) -> str:
    return DASH if value is None else f"{value:.2g}"


def _histfactory_section(rows: list[ScalingRow]) -> list[str]:
    # Engines with no figure (no GPU, unsupported) are listed under "Warnings and failures".
    rows = [r for r in rows if r.status == "ok" or r.ttfr_cold_cache_s is not None or r.warm_call_s is not None]
    if not rows:
        return []
    lines = [f"## {catalog.WORKSPACE_FAMILY} workloads", ""]
    sizes = sorted({(r.parameters, _size_label(r.parameters, r.dataset)) for r in rows})
    by_key = {(r.workload, r.engine, _size_label(r.parameters, r.dataset)): r for r in rows}
    for workload in sorted({r.workload for r in rows}):
        engines = sorted({r.engine for r in rows if r.workload == workload})
        header = ["engine"] + [f"{label}p: TTFR cold / warm cache / warm call" for _n, label in sizes]
        body = []
        for engine in engines:
            cells = [f"`{engine}`"]
            for _n, label in sizes:
                row = by_key.get((workload, engine, label))
                cells.append(
                    " / ".join(fmt_seconds(s) for s in (row.ttfr_cold_cache_s, row.ttfr_warm_cache_s, row.warm_call_s))
                    if row else DASH
                )  # fmt: skip
            body.append(cells)
        lines += [f"### {workload}: cost against parameter count", "", *table(header, body), ""]
    correctness = [
        [f"`{r.engine}`", r.workload, _size_label(r.parameters, r.dataset), _sci(r.nll_parity_rel),
         _sci(r.q0_parity_abs),
         _sci(r.fd_max_abs_error), _sci(r.fd_max_rel_error)]
        for r in rows
    ]  # fmt: skip
    lines += [
        "### Correctness gates",
        "",
        "Parity with pyhf's NumPy backend (NLL relative, gate 1e-8; q0 absolute, gate 1e-4) and the signal "
        "gradient against central finite differences (gate: error / max(1, |FD|) <= 1e-6 for the NLL, 1e-3 for q0).",
        "",
        *table(["engine", "workload", "params", "NLL rel diff", "q0 abs diff", "FD max abs err", "FD max rel err"], correctness),
        "",
    ]
    loops = [r for r in rows if r.train_step_s is not None]
    if loops:
        body = [
            [f"`{r.engine}`", str(r.parameters), fmt_seconds(r.train_first_step_s), fmt_seconds(r.train_step_s),
             _share(r.train_conversion_share), f"{r.train_loss_first:.4f} -> {r.train_loss_last:.4f}"]
            for r in loops
        ]  # fmt: skip
        lines += [
            "### 20-step training loop (KDE soft histogram; the sigmoid variant is in each case file)",
            "",
            "Run in each case's gate process after the timed runs: the first step includes compiling the loop's own step. "
            "Conversions: the median step's seconds moving arrays between runtimes (each crossing timed as it happens; "
            "NextStat's torch layer: its time outside the Rust call), as a share of the median step.",
            "",
            *table(["engine", "params", "first step", "per step (median)", "conversions", "loss -Z0, first -> last"], body),
            "",
        ]
    lines += [
        "### Reference rows (measured elsewhere)",
        "",
        f"{catalog.PUBLISHED_SOURCE}. Ours: warm medians on this machine, same workload and parameter count.",
        "",
        *table(["metric", "workspace", catalog.PUBLISHED_COLUMN, "this run (CPU)"], _published_rows(rows)),
        "",
        "Plot-ready figures: `scaling.csv` (also `scaling` in suite.json).",
        "",
    ]
    return lines


def _published_rows(rows: list[ScalingRow]) -> list[list[str]]:
    """Each figure the catalogue's workloads declare as published elsewhere, beside ours."""
    fd_checked = {name for name, w in catalog.WORKLOADS.items() if w.records_fd_error}
    reference = []
    for workload, info in catalog.WORKLOADS.items():
        for figure in info.published:
            n = figure.parameters
            if figure.unit == "abs":  # every case whose check records the FD error, not only this workload's
                checked = {r.engine: r for r in rows if r.parameters == n and r.fd_max_abs_error is not None
                           and r.workload in fd_checked}  # fmt: skip
                shown = f"{figure.value:.3g}"
                best = ", ".join(f"`{e}` {_sci(r.fd_max_abs_error)}" for e, r in sorted(checked.items()))
            else:
                ours = [(r, getattr(r, figure.ours)) for r in rows if r.workload == workload and r.parameters == n]
                shown = fmt_seconds(figure.value)
                best = ", ".join(f"`{r.engine}` {fmt_seconds(s)}" for r, s in sorted(ours, key=lambda pair: pair[1] or 1e9))
            reference.append([figure.metric, f"{n}p", shown, best or "not measured in this run"])
    return reference


def _machine_health_section(cases: list[CaseResult]) -> list[str]:
    health = contention.machine_health(cases)
    lines = ["## Machine health", ""]
    if not health.runs:
        return lines + ["No run recorded contention evidence.", ""]
    lines.append(
        f"{health.contended} of {health.runs} measured runs and warm processes were `contended`: they waited "
        "for a CPU while other work used one (run-queue wait > 5% and neighbours >= 0.5 cores; the evidence of each "
        "is under Flags and in its case file)."
    )
    if health.contended:
        worst = health.max_others_cores
        lines += ["", f"- Cases: {', '.join(f'`{c}`' for c in health.cases)}"]
        if worst is not None:
            lines.append(f"- Other work used up to {worst:.2f} cores during a contended run.")
        lines += [f"- Advice: {text}." for text in health.advice]
    return lines + [""]


_STOPPED_BY = {
    "target_met": "every statistic met the target",
    "budget": "the budget was spent",
    "cannot_improve": "no statistic left could still be improved (the rest are unreachable, busy, failing, or their "
    "case stopped)",
    "process_limit": "the worker-process limit of one run was reached",
    "interrupted": "the run was interrupted (`ttfr run --resume DIR` continues it)",
}
_STATE_MEANS = {
    "met": "its 95% interval is within the target",
    "short": "more runs would have narrowed it; none were left to spend",
    "unreachable": "projected to need over twice the per-stream run limit",
    "busy": "most of its runs were contended: rerun on a quieter machine",
    "failing": "most of its runs failed",
}


def precision_headline(bought: Precision) -> str:
    """One line: the target, how many statistics met it, why adding runs stopped."""
    summary = bought.summary
    spent = f" in {fmt_seconds(bought.elapsed_s)}" if bought.elapsed_s is not None else ""
    budget = f" of a {fmt_seconds(bought.budget_s)} budget" if bought.budget_s else ""
    return (f"precision ±{bought.target:.1%} at 95%: {summary.met} of {summary.statistics} statistics met it; "
            f"{summary.added_runs} runs added{spent}{budget}; stopped: {_STOPPED_BY[bought.stopped_by]}")  # fmt: skip


def _precision_section(suite: SuiteResult) -> list[str]:
    bought = suite.precision
    if not bought:
        return []
    rows = [
        [f"`{s.case}`", s.policy, s.metric, fmt_seconds(s.median),
         "—" if s.half_width is None else f"±{s.half_width:.1%}", str(s.n),
         "—" if s.needed_runs is None else str(s.needed_runs), fmt_seconds(s.cost_s),
         f"**{s.state}**" if s.state != "met" else "met"]
        for s in bought.statistics
    ]  # fmt: skip
    headline = precision_headline(bought)
    return [
        "## Precision",
        "",
        headline[0].upper() + headline[1:] + ".",
        "",
        "Runs were added after the profile's where they bought the most precision per second: statistics with fewer "
        "than 6 runs (no 95% interval yet) first, cheapest first; then the largest projected (1/√n) shrink of an "
        "interval still wider than the target, per second of one of that statistic's runs. Half-width: "
        "(high − low) / 2 of the order-statistic interval, relative to the median; needed: runs projected to meet "
        "the target.",
        "",
        *table(
            ["case", "policy", "statistic", "median", "half-width", "runs used", "needed", "cost per run", "state"], rows
        ),  # fmt: skip
        "",
        *(
            f"- {state}: {means}" for state, means in _STATE_MEANS.items() if any(s.state == state for s in bought.statistics)
        ),  # fmt: skip
        "",
    ]


def _flags_section(cases: list[CaseResult]) -> list[str]:
    items = [f"- `{case.case}` ({flag.policy or 'case'}): **{flag.name}**: {one_line(flag_text.sentence(flag))}"
             for case in cases for flag in case.flags]  # fmt: skip
    return ["## Flags", "", *(items or ["None."]), ""]


def _users_failures_section(cases: list[CaseResult]) -> list[str]:
    """Where a case file's code failed: the first failed run of each such case, its traceback
    with the user's frames only (the worker keeps no ttfr frame in it)."""
    items = []
    for case in cases:
        run, policy = next(((r, name) for name, block in case.policies.items() for r in block.measured
                            if r.outcome != "ok" and r.traceback), (None, None))  # fmt: skip
        if run is not None:
            items += [f"### `{case.case}` ({policy}, run {run.index})", "", *code_block(run.traceback), ""]
    return ["## Your code's failures", "", *items] if items else []


def _header(suite: SuiteResult, manifest: Manifest) -> list[str]:
    cpu, gpu, runtimes = manifest.cpu, manifest.gpu, manifest.runtimes
    git = manifest.ttfr.git
    gpu_text = "none"
    if gpu.devices:
        gpu_text = ", ".join(d.name for d in gpu.devices) + f" (driver {gpu.driver_version}, CUDA {gpu.cuda_version})"
    if gpu.ptxas:
        gpu_text += f"; ptxas {gpu.ptxas.version} ({gpu.ptxas.source})"
    if gpu.devices and present(gpu.jax_cuda_dir):  # older manifests have none
        gpu_text += f"; JAX's CUDA directory {gpu.jax_cuda_dir.path or 'none'} ({gpu.jax_cuda_dir.source})"
    versions = ", ".join(f"{k} {v}" for k, v in runtimes.items() if v)
    summary = suite.summary
    worst = summary.worst_case
    lines = [
        f"# ttfr snapshot `{suite.snapshot_id}`",
        "",
        f"- State: **{suite.state}**"
        + (f" ({summary.n_pending} case(s) pending: finish with `ttfr run --resume DIR`)" if suite.pending else ""),
        f"- Cases: {summary.n_cases} ({summary.n_ok} ok, {summary.n_warn} warn, {summary.n_failed} failed)",
        f"- Worst TTFR: `{worst.case}` {fmt_seconds(worst.ttfr_median_s)} ({worst.policy})" if worst else "- Worst TTFR: —",
        f"- Profile `{suite.profile}`, seed {suite.seed}, deterministic: {suite.deterministic}, "
        f"policies: {', '.join(suite.policies)}",
        f"- ttfr {suite.ttfr_version}" + (f" ({git.commit[:12]}{', dirty' if git.dirty else ''})" if git.commit else ""),
        f"- Machine: {cpu.model}, {cpu.usable_cores} usable cores, {fmt_bytes(manifest.memory.total_bytes)}; "
        f"{manifest.os.platform}; Python {manifest.python.version}",
        f"- GPU: {gpu_text}",
        f"- Runtimes: {versions}",
        "",
    ]
    return lines


def render(result: VerifiedResult) -> str:
    suite, manifest, cases = result.suite, result.manifest, result.cases
    lines = _header(suite, manifest)
    lines += _summary_section(cases)
    for policy in cold_policies(cases):
        lines += _components_section(cases, policy)
    lines += commands_md.section(cases)
    lines += _warm_section(cases)
    lines += precompiled_md.section(cases)
    lines += _memory_section(cases)
    lines += _histfactory_section(suite.scaling)
    lines += _break_even_section(suite.break_even)
    lines += loops_md.section(suite.loops or [], cases)
    lines += conversions_md.section(cases)
    lines += concurrency_md.section(cases)
    lines += _precision_section(suite)
    # An unmeasured diagnostic process's account, per case and cold policy: after every measured figure
    # (it can be long), just before the Flags that hold its explanation_disagrees.
    lines += explain_md.section(cases)
    lines += _flags_section(cases)
    lines += _machine_health_section(cases)
    problems = summary_problems(suite)
    lines += ["## Warnings and failures", "", *(problems or ["None."]), ""]
    lines += _users_failures_section(cases)
    lines += ["## Limitations", "", *(f"- {text}" for text in limitations(manifest, cases)), ""]
    return "\n".join(lines).rstrip() + "\n"


def limitations(manifest: dict, cases: list[CaseResult]) -> list[str]:
    """What the run could not control (the manifest's), then what its cases declared (torch.compile's
    internal-API split, ...), each once: the list report.md and report.html both give."""
    declared = list(manifest.limitations)
    return declared + sorted({text for case in cases for text in case.limitations} - set(declared))


def summary_problems(suite: SuiteResult) -> list[str]:
    summary = suite.summary
    items = [f"- failed `{x.case}`: {one_line(x.reason)}" for x in summary.failed]
    items += [f"- warn `{x.case}`: {one_line(x.reason)}" for x in summary.warned]
    items += [f"- pending `{case}`" for case in suite.pending]
    return items
