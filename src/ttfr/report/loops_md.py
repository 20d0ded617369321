"""The report's Loops section: strategies compared per loop, and the per-iteration timeline
where recompiles show as spikes."""

from __future__ import annotations

from ttfr.model.case import CaseResult
from ttfr.model.loops import LoopRow, LoopSummary
from ttfr.report.formatting import fmt_bytes, fmt_copies, fmt_seconds, fmt_summary, table

_COMPILE_MARK = "⟳"


def _share(value) -> str:
    return "n/a" if value is None else f"{100 * value:.0f}%"


def _compiles(row: LoopRow) -> str:
    got, expected = row.compiles, row.expected_compiles
    if got is None:
        return "n/a" if expected is None else f"? (expected {expected})"
    if expected is None:
        return str(got)
    return f"{got} (expected {expected})" + ("" if got == expected else " **mismatch**")


def _rate(value) -> str:
    return "n/a" if value is None else f"{100 * value:.0f}%"


def _overtakes(row: LoopRow) -> str:
    if row.strategy == "naive":
        return "—"
    if row.overtakes_naive_at_k:
        return str(row.overtakes_naive_at_k)
    return "never" if row.vs_naive is not None else "n/a (no naive figure)"


def _strategy_table(rows: list[LoopRow]) -> list[str]:
    body = []
    for row in rows:
        compile_s = fmt_summary(row.compile_s, with_ci=False)
        body.append([
            f"`{row.strategy}`", str(row.size), fmt_summary(row.total_s), fmt_summary(row.loop_s, with_ci=False),
            f"{compile_s} ({_share(row.compile_share)})", fmt_copies(row.transfer_s, row.transfer_share),
            _share(row.cold_start_share), _compiles(row),
            _rate(row.iteration_hit_rate),
            _rate(row.persistent_hit_rate) + (f" ({row.loaded} loaded ahead)" if row.loaded else ""),
            fmt_bytes(row.peak_rss_bytes), "—" if row.vs_naive is None else f"{row.vs_naive:.2f}×",
            _overtakes(row),
        ])  # fmt: skip
    header = ["strategy", "size", "total (TTFR)", "loop", "compile (share of loop)",
              "host↔device copies (share of loop)", "cold-start share", "compiles",
              "iterations without compile", "persistent-cache hits", "peak RSS", "total vs naive",
              "no dearer than naive from k"]  # fmt: skip
    return table(header, body)


def _loop_summary(cases_by_id: dict[str, CaseResult], row: LoopRow) -> LoopSummary | None:
    """The loop summary of the row's case and cold policy (None: its runs gave none)."""
    return cases_by_id[row.case].policies.get(row.policy).loop_summary or None


def _timeline(cases_by_id: dict[str, CaseResult], rows: list[LoopRow]) -> list[str]:
    """Iterations (rows) by strategy (columns) at the largest K: median seconds, ⟳N where N compiles."""
    size = max(row.size for row in rows)
    at_size = [row for row in rows if row.size == size]
    summaries = {row.strategy: _loop_summary(cases_by_id, row) for row in at_size}
    sequential = {s: loop.timeline for s, loop in summaries.items() if len(loop.timeline if loop else []) > 1 or size == 1}
    batched = {s: loop.timeline for s, loop in summaries.items() if s not in sequential and loop and loop.timeline}
    if not sequential:
        return []
    names = list(sequential)
    labels = ["ahead of time"] if any(e.ahead for t in sequential.values() for e in t) else []
    for timeline in sequential.values():
        for entry in timeline:
            key = "ahead of time" if entry.ahead else entry.label
            if key not in labels:
                labels.append(key)

    def cell(timeline, label):
        for entry in timeline:
            if ("ahead of time" if entry.ahead else entry.label) == label:
                text = fmt_seconds(entry.s.median if entry.s else None)
                if entry.compiles:
                    text += f" {_COMPILE_MARK}{entry.compiles}"
                return text
        return ""

    first = 0 if labels[0] == "ahead of time" else 1  # the ahead-of-time phase is row 0
    body = [[str(i + first), label, *(cell(sequential[n], label) for n in names)] for i, label in enumerate(labels)]
    lines = [f"Timeline at size {size} (median seconds per iteration; {_COMPILE_MARK}N: N compiles in that iteration):", ""]
    lines += table(["#", "iteration", *(f"`{n}`" for n in names)], body)
    for name, timeline in batched.items():
        entry = timeline[0]
        compiled = f", {entry.compiles} compile(s)" if entry.compiles is not None else ""
        lines.append(f"- `{name}`: one iteration for all {size} configurations, "
                     f"{fmt_seconds(entry.s.median if entry.s else None)}{compiled}")  # fmt: skip
    return lines + [""]


def _engines_table(loop: str, rows: list[LoopRow], cases_by_id: dict[str, CaseResult]) -> list[str]:
    """A loop with one strategy (the HistFactory training loop): engines side by side, the
    first iteration (where the compiling happens) apart from the median of the others."""
    body = []
    for row in sorted(rows, key=lambda r: (r.size, r.policy, r.total_s.median if r.total_s else 1e300)):
        summary = _loop_summary(cases_by_id, row)
        timeline = summary.timeline if summary else []
        medians = [e.s.median for e in timeline if e.s and not e.ahead]
        later = sorted(medians[1:])
        body.append([
            f"`{row.backend}`", str(row.size), row.policy, fmt_summary(row.total_s),
            fmt_seconds(medians[0] if medians else None), fmt_seconds(later[len(later) // 2] if later else None),
            _share(row.compile_share), _share(row.cold_start_share), _compiles(row), fmt_bytes(row.peak_rss_bytes),
        ])  # fmt: skip
    header = ["engine", "size", "cache policy", "total (TTFR + loop)", "iteration 1", "later iterations (median)",
              "compile share of loop", "cold-start share", "compiles", "peak RSS"]  # fmt: skip
    return [f"### `{loop}`: the loop end to end, per engine", "", *table(header, body), ""]


def section(rows: list[LoopRow], cases: list[CaseResult]) -> list[str]:
    if not rows:
        return []
    lines = [
        "## Loops: compilation in the loop",
        "",
        "One timed unit is the whole loop in a fresh process: total = process start to the loop's last result. "
        "Compiles are the runtime's own counters (JAX: executables built for the loop's functions, compiled or "
        "loaded from the persistent cache; torch: graphs dynamo compiled), checked against each strategy's "
        "expectation (naive: one per distinct shape); a mismatch is flagged. Host↔device copies: the seconds each "
        "strategy's own timing of its copies gives (its inputs to the device, its losses back, each waited for; "
        "every iteration's result finished before its time ends); the rest of the loop is compute. "
        "Under cold-process/warm-cache, naive "
        "is the persistent-cache strategy. Cold-start share: 1 − the run's second loop / its total, what a process "
        'that had already run the loop would not pay again. "No dearer than naive from k": the smallest loop '
        "length from which the strategy's total (from the iterations' medians) is at most naive's at every longer "
        "length measured.",
        "",
    ]
    cases_by_id = {case.case: case for case in cases}
    families: dict[str, set] = {}
    for row in rows:
        families.setdefault(row.loop, set()).add(row.strategy)
    groups: dict[tuple, list[LoopRow]] = {}
    for row in rows:
        if families[row.loop] != {"naive"}:
            groups.setdefault((row.loop, row.backend, row.dtype, row.policy), []).append(row)
    for loop in sorted(f for f, strategies in families.items() if strategies == {"naive"}):
        lines += _engines_table(loop, [r for r in rows if r.loop == loop], cases_by_id)
    for (loop, backend, dtype, policy), members in groups.items():
        lines += [f"### `{loop}` on `{backend}` ({dtype}, {policy})", ""]
        lines += _strategy_table(members) + [""]
        lines += _timeline(cases_by_id, members)
    return lines
