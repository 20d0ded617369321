"""One truth, six renderings: the fixture suite (ok, withheld, failed, unavailable, flagged and
unchecked cases: tests/support/fixture_suite.py) through the terminal summary, report.md, report.html,
the CSV, OpenMetrics and the NextStat export. Every output must give each case the status its
case result decided, and each headline figure exactly when the case result has it (the same
median), never a figure it withheld."""

from __future__ import annotations

import csv
import html as html_text
import io
import json
import re
import statistics

import pytest
from support.fixture_suite import run_fixture_suite
from rich.console import Console

from ttfr.artifacts.export import formats, nextstat
from ttfr.artifacts.reader import load_finished
from ttfr.model.policies import COLD_CACHE, WARM_CACHE, WARM_PROCESS
from ttfr.report import terminal
from ttfr.report.formatting import DASH, fmt_seconds

HEADLINES = ((COLD_CACHE, "ttfr_s"), (WARM_CACHE, "ttfr_s"), (WARM_PROCESS, "call_s"))


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    monkeypatch = pytest.MonkeyPatch()
    tmp = tmp_path_factory.mktemp("agree")
    try:
        root = run_fixture_suite(tmp, monkeypatch).result_dir.root
        verified = load_finished(root)
        console = Console(file=io.StringIO(), width=400, color_system=None)
        terminal.print_summary(console, verified.suite, verified.cases, root)
        exports = tmp / "exports"
        exports.mkdir()
        (csv_path,) = formats.export("csv", root, exports / "runs.csv", COLD_CACHE)
        (om_path,) = formats.export("openmetrics", root, exports / "ttfr.prom", COLD_CACHE)
        nextstat.export(root, exports / "nextstat")
        yield {
            "cases": {c.case: c for c in verified.cases},
            "terminal": console.file.getvalue(),
            "markdown": (root / "report.md").read_text(),
            "html": (root / "report.html").read_text(),
            "csv": list(csv.DictReader(csv_path.open())),
            "openmetrics": om_path.read_text(),
            "nextstat": {p.stem: json.loads(p.read_text()) for p in (exports / "nextstat").glob("*_f*.json")},
        }
    finally:
        monkeypatch.undo()


def _cells(line: str, separator: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip(separator).split(separator)]


def _terminal_rows(text: str) -> dict[str, list[str]]:
    rows = [_cells(line, "│") for line in text.splitlines() if line.startswith("│")]
    return {row[0]: row for row in rows if row[0]}


def _markdown_rows(text: str) -> dict[str, list[str]]:
    summary = text.split("## Summary", 1)[1].split("\n## ", 1)[0]
    rows = [_cells(line, "|") for line in summary.splitlines() if line.startswith("| `")]
    return {row[0].strip("`"): row for row in rows}


def _html_rows(page: str) -> dict[str, list[str]]:
    summary = page.split("<h2>Summary</h2>", 1)[1].split("</table>", 1)[0]
    rows = [[html_text.unescape(re.sub(r"<[^>]+>", "", c)) for c in re.findall(r"<td[^>]*>(.*?)</td>", row)]
            for row in re.findall(r"<tr>(.*?)</tr>", summary)]  # fmt: skip
    return {row[0]: row for row in rows if row}


def _shown(summary) -> str:
    """How a table cell starts for a figure (its median) or for none."""
    return DASH if summary is None else fmt_seconds(summary.median)


def test_the_fixture_suite_has_every_verdict_to_agree_on(rendered):
    cases = rendered["cases"]
    assert {c.status for c in cases.values()} == {"ok", "warn", "failed"}
    assert cases["numpy_fused_chain_64_f32"].policies.get(COLD_CACHE).withheld()  # a withheld figure
    assert cases["jax_jit_cpu_fused_chain_64_f32"].correctness.state == "not_checked"
    assert any(c.flags for c in cases.values() if c.status == "ok")  # a flagged ok case


def test_the_tables_give_each_case_its_status_and_its_figures_or_none(rendered):
    tables = {"terminal": _terminal_rows(rendered["terminal"]), "report.md": _markdown_rows(rendered["markdown"]),
              "report.html": _html_rows(rendered["html"])}  # fmt: skip
    for name, case in rendered["cases"].items():
        for output, rows in tables.items():
            row = rows[name]
            assert row[1].split(":")[0] == case.status, (output, name, row)
            for column, (policy, metric) in enumerate(HEADLINES, start=2):
                assert row[column].startswith(_shown(case.figure(policy, metric))), (output, name, policy, row)
            check = case.correctness.state.replace("_", " ") if case.correctness else DASH
            assert check in row, (output, name, row)


def test_the_csv_marks_exactly_the_runs_a_figure_comes_from(rendered):
    rows = rendered["csv"]
    for name, case in rendered["cases"].items():
        mine = [r for r in rows if r["case"] == name]
        assert {r["case_status"] for r in mine} <= {case.status}
        for policy, metric in HEADLINES:
            kind = "warm_process" if policy == WARM_PROCESS else "cold_run"
            used = [float(r["value"]) for r in mine if r["policy"] == policy and r["kind"] == kind and r["metric"] == metric
                    and r["in_figures"] == "true"]  # fmt: skip
            figure = case.figure(policy, metric)
            if figure is None:
                assert used == [], (name, policy)
            else:
                assert len(used) == figure.n and statistics.median(used) == pytest.approx(figure.median), (name, policy)


def _metric(text: str, family: str, labels: dict) -> float | None:
    for line in text.splitlines():
        if line.startswith(family + "{") and all(f'{k}="{v}"' in line for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    return None


def test_openmetrics_has_the_status_and_only_the_figures_the_case_gives(rendered):
    text = rendered["openmetrics"]
    for name, case in rendered["cases"].items():
        assert _metric(text, "ttfr_case_status", {"case": name, "ttfr_case_status": case.status}) == 1.0
        for policy, metric in HEADLINES:
            figure = case.figure(policy, metric)
            if policy == WARM_PROCESS:
                value = _metric(text, "ttfr_warm_call_seconds", {"case": name, "quantile": "0.5"})
            else:
                value = _metric(text, "ttfr_ttfr_seconds", {"case": name, "policy": policy, "quantile": "0.5"})
            assert value == (None if figure is None else pytest.approx(figure.median)), (name, policy)


def test_the_nextstat_export_publishes_no_figure_ttfr_withheld(rendered):
    for name, case in rendered["cases"].items():
        record = rendered["nextstat"][name]
        assert record["status"] == case.status and (record["reason"] or "").startswith(case.reason or ""), name
        cold, warm = record["timing"]["cold"], record["timing"]["warm"]
        ttfr = case.figure(COLD_CACHE, "ttfr_s")
        if ttfr is None:
            assert "ttfr_s" not in cold and cold["runs"] == [], name
        else:  # the same runs (NextStat's meaning of ttfr_s: in-process, import + first call; README)
            from statistics import median

            user = [r.metrics.user_import_s or 0.0 for r in case.policies.get(COLD_CACHE).figure_runs()]
            mapped = [r.metrics.import_s + u + r.metrics.setup_s + r.metrics.first_call_s  # NextStat's ttfr_s, in-process
                      for r, u in zip(case.policies.get(COLD_CACHE).figure_runs(), user)]  # fmt: skip
            assert cold["ttfr_s"]["median"] == pytest.approx(median(mapped)) and cold["n_runs"] == ttfr.n, name
        if case.figure(WARM_PROCESS, "call_s") is None:  # NextStat pools every sample: only its absence compares
            assert "call_s" not in warm, name
