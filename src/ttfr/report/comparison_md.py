"""comparison.md: a verdict table that reads well as a pull-request comment."""

from __future__ import annotations

from ttfr.analyse import comparison_stats as comparison
from ttfr.report.formatting import code, fmt_seconds

_ICON = {"regression": "🔴", "improvement": "🟢", "equivalent": "⚪", "inconclusive": "🟡", "not_compared": "⚫"}


def _pct(value) -> str:
    return "—" if value is None else f"{value:+.1%}"


def row(record: dict) -> list[str]:
    effect = record.get("effect") or {}
    base = comparison.base_verdict(record)
    ci = effect.get("ci")
    a, b = record.get("a") or {}, record.get("b") or {}
    return [
        f"`{record['case']}`",
        record["policy"],
        fmt_seconds(a.get("median")),
        fmt_seconds(b.get("median")),
        _pct(effect["ratio"] - 1) if effect.get("ratio") else "—",
        f"[{_pct(ci[0] - 1)}, {_pct(ci[1] - 1)}]" if ci else "—",
        f"{effect['p_gate']:.3g}" if effect.get("p_gate") is not None else "—",
        f"{_ICON.get(base, '')} {record['verdict']}",
        record["explanation"],
    ]


def render(document: dict) -> str:
    summary = document["summary"]
    counts = ", ".join(f"{n} {name}" for name, n in sorted(summary["counts"].items()))
    arms = document["arms"]
    lines = [f"## ttfr comparison: B vs A — gate **{summary['gate'].upper()}**", ""]
    if document.get("warning"):
        lines += [f"> **Warning:** {document['warning']}", ""]
    lines += [
        f"- {name}: {code(arm.get('command') or arm['python'])}"
        + "".join(f" {code(f'{k}={v}')}" for k, v in arm["env"].items())
        + (f" (PATH first: {code(arm['path_first'])})" if arm.get("path_first") else "")
        for name, arm in zip("AB", arms)
    ]
    lines += [
        f"- {'Paired rounds, interleaved in one session' if document['paired'] else 'Unpaired (separate sessions)'}; "
        f"correction: {document['correction']}; verdicts: {counts or 'none'}",
    ]
    rounds = document.get("rounds")
    if rounds:
        stopped = f"stopped by {rounds['stopped_by']}"
        lines.append(f"- Rounds: {rounds['completed']} (min {rounds['min']}, max {rounds['max']}; {stopped})")
    noise = document["host_noise"]
    if noise.get("noisy"):
        lines.append(f"- **Noisy machine:** {'; '.join(noise['why'])}")
    header = ["case", "policy", "A median", "B median", "B/A", "95% CI", "p (gate)", "verdict", "why"]
    lines += ["", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row(r)) + " |" for r in document["comparisons"]]
    flagged = [
        f"- `{r['case']}` {r['policy']} arm {side.upper()}: {name}"
        for r in document["comparisons"]
        for side in ("a", "b")
        for name, diag in ((r.get("diagnostics") or {}).get(side) or {}).items()
        if diag and (diag.get("bimodal") or diag.get("drifting") or name == "first_run_outlier")
    ]
    if flagged:
        lines += ["", "Diagnostics:", *flagged]
    lines += ["", "δ per comparison: max(3% warm / 5% cold, 2× the A/A noise floor); B/A is the Hodges–Lehmann ratio."]
    return "\n".join(lines) + "\n"
