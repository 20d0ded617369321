"""Conversion routes (issue 28) through every output: a fake suite whose checking processes record
conversion evidence (a zero-copy route, a copying route below half of memcpy and one above, a
refused layout, wrong values on a layout, a leaking route, a route without a copy verdict, and a
route the library refuses outright), rendered by report.md, report.html, the CSV and OpenMetrics.
Each must show, per case, exactly the copy verdict, rate and share of memcpy its case result
holds, and a dash (or nothing) where it holds none."""

from __future__ import annotations

import csv
import html as html_text
import re

import pytest
from support.fakes import FakeExecutor, run_suite
from prometheus_client.openmetrics.parser import text_string_to_metric_families

from conftest import fake_result
from ttfr.artifacts.export import formats
from ttfr.artifacts.reader import load_finished
from ttfr.child.conversion_routes import ROUTES as CATALOGUED
from ttfr.child.job import WARM
from ttfr.measure.spec import RunRequest
from ttfr.model.base import present
from ttfr.model.policies import COLD_CACHE
from ttfr.report import html
from ttfr.report.formatting import DASH, copied_verdict, fmt_percent, fmt_rate, fmt_seconds

SIZES = (65536, 4194304)
REFUSED = "refused: BufferError: the fake library will not export this array"
ROUTES = ("numpy_copy,numpy_to_torch_from_numpy,numpy_to_jax_asarray,numpy_to_jax_dlpack,numpy_to_torch_tensor,"
          "torch_to_numpy_dlpack,numpy_to_torch_dlpack")  # fmt: skip


def _layout(layout: str, copied: bool | None, **changes) -> dict:
    row = {"layout": layout, "outcome": "ok", "reason": None, "copied": copied,
           "shares_memory": None if copied is None else not copied, "write_through": None if copied is None else not copied,
           "values_ok": True, "call_s": 1e-5, "source_offset_64": 0}  # fmt: skip
    return {**row, **changes}


def _layouts(copied: bool | None, **special) -> list[dict]:
    return [special.get(name) or _layout(name, copied) for name in ("contiguous", "transposed", "misaligned", "readonly")]


def _refused(layout: str, reason: str) -> dict:
    return {**_layout(layout, None), "outcome": "refused", "reason": reason, "values_ok": None, "call_s": None}


# Each route's evidence as its checking process would record it (fake_warm's calls take ~1 ms, so a
# memcpy of 0.1 ms is ~10% of the route's warm call, one of 0.9 ms ~88%).
GROWS = {"calls": 2048, "rss_samples": [100 << 20, 103 << 20], "growth_per_call_bytes": 1228.8, "grows": True}
READONLY_REFUSED = _refused("readonly", "BufferError: Cannot export readonly array")
DISAGREE = _layout("contiguous", None, shares_memory=True, write_through=False)  # shared addresses, no write-through
EVIDENCE = {
    "numpy_copy": {"copied": True, "memcpy_s": 9e-4, "layouts": _layouts(True)},
    "numpy_to_torch_from_numpy": {"copied": False, "memcpy_s": 9e-4, "layouts": _layouts(False)},
    "numpy_to_jax_asarray": {"copied": True, "memcpy_s": 1e-4,
                             "layouts": _layouts(True, transposed=_layout("transposed", True, values_ok=False))},
    "numpy_to_jax_dlpack": {"copied": False, "memcpy_s": 9e-4,
                            "layouts": _layouts(False, readonly=READONLY_REFUSED)},
    "numpy_to_torch_tensor": {"copied": True, "memcpy_s": 6e-4, "layouts": _layouts(True), "leak": GROWS},
    "torch_to_numpy_dlpack": {"copied": None, "memcpy_s": 9e-4, "layouts": _layouts(True, contiguous=DISAGREE)},
}  # fmt: skip


def evidence(route: str, size: int) -> dict:
    catalogued = CATALOGUED[route]
    data = {"route": route, "source": catalogued.source, "destination": catalogued.destination, "api": catalogued.api,
            "bytes": size, "source_offset_64": 0, "memcpy_fresh_s": 2e-3,
            "leak": {"calls": 2048, "rss_samples": [100 << 20] * 11, "growth_per_call_bytes": 0.0, "grows": False}}  # fmt: skip
    return {**data, **EVIDENCE[route]}


class _ConversionExecutor(FakeExecutor):
    """The checking (warm) process of a conversion case records its evidence; one route is refused
    outright, as a library refusing the timed conversion makes it."""

    def __init__(self):
        super().__init__(decide=self._refuse)

    @staticmethod
    def _refuse(call):
        if call["job"].strategy == "numpy_to_torch_dlpack":
            return fake_result(None, outcome="unavailable", reason=REFUSED)
        return None

    def answer(self, job, call, entries, jax_dir):
        record, process_ns = super().answer(job, call, entries, jax_dir)
        if job.mode == WARM and job.check and job.strategy in EVIDENCE:
            record["conversion"] = evidence(job.strategy, job.size)
        return record, process_ns


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("conversions")
    request = RunRequest(backends="interop", workloads=ROUTES, sizes=",".join(map(str, SIZES)),
                         policies="cold-cache,warm-process", cold_runs=2, warm_procs=2, warm_samples=5, seed=1)  # fmt: skip
    outcome = run_suite(tmp, request, _ConversionExecutor())
    root = outcome.result_dir.root
    (csv_path,) = formats.export("csv", root, tmp / "runs.csv", COLD_CACHE)
    (om_path,) = formats.export("openmetrics", root, tmp / "ttfr.prom", COLD_CACHE)
    (prom_path,) = formats.export("prometheus", root, tmp / "classic.prom", COLD_CACHE)
    return {
        "root": root,
        "cases": {c.case: c for c in load_finished(root).cases},
        "markdown": (root / "report.md").read_text(),
        "html": (root / "report.html").read_text(),
        "csv": list(csv.DictReader(csv_path.open())),
        "openmetrics": om_path.read_text(),
        "prometheus": prom_path.read_text(),
    }


def _conversions(rendered):
    return {name: c for name, c in rendered["cases"].items() if c.workload in ROUTES.split(",")}


def test_the_suite_has_every_conversion_verdict_to_agree_on(rendered):
    cases = _conversions(rendered)
    assert len(cases) == 7 * len(SIZES)
    held = [c.conversion for c in cases.values() if present(c.conversion)]
    assert {c.evidence.copied for c in held} == {True, False, None}
    assert {c.below_half_memcpy for c in held} == {True, False, None}
    assert any(r.outcome == "refused" for c in held for r in c.evidence.layouts)
    flags = {f.name for c in cases.values() for f in c.flags}
    assert {"conversion_leak", "conversion_wrong_values", "copy_evidence_disagrees"} <= flags
    refused = [c for c in cases.values() if not present(c.conversion)]
    assert len(refused) == len(SIZES) and all(c.status == "warn" and c.reason == REFUSED for c in refused)


def _expected_row(case) -> dict[str, str]:
    """The matrix cells a case's result gives (the dashes of a case without evidence)."""
    if not present(case.conversion):
        return {"copied": f"{case.status}: {case.reason}", "first": DASH, "warm": DASH, "rate": DASH, "share": DASH}
    conversion = case.conversion
    offset = conversion.evidence.source_offset_64  # where the timed source sat: the verdict can depend on it
    return {"copied": copied_verdict(conversion.evidence.copied) + f" (+{offset} B)",
            "first": fmt_seconds(conversion.first_call_s), "warm": fmt_seconds(conversion.call_s),
            "rate": fmt_rate(conversion.bytes_per_s),
            "share": fmt_percent(conversion.memcpy_fraction)}  # fmt: skip


def _number(cell: str) -> float:
    return float(re.match(r"[0-9.]+", cell).group(0))


def _check_matrix(output: str, tables: dict, rendered) -> None:
    for name, case in _conversions(rendered).items():
        matrix, _layouts = tables[(case.size, case.dtype)]
        row = matrix[case.workload]
        shown = dict(zip(("copied", "first", "warm", "rate", "share"), row[3:8]))
        assert shown == _expected_row(case), (output, name, row)
        if present(case.conversion) and case.conversion.bytes_per_s is not None:  # the figure itself, to its digits
            assert _number(shown["rate"]) * 1e9 == pytest.approx(case.conversion.bytes_per_s, rel=5e-3), (output, name)
            assert _number(shown["share"]) == pytest.approx(100 * case.conversion.memcpy_fraction, abs=0.5), (output, name)
        if not present(case.conversion):
            assert row[8:] == [DASH, DASH], (output, name, row)


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def _markdown_tables(text: str) -> dict:
    section = text.split("\n## Conversions\n", 1)[1].split("\n## ", 1)[0]
    tables = {}
    for group in section.split("\n### ")[1:]:
        title, body = group.split("\n", 1)
        size, dtype = re.search(r"\(([0-9,]+) bytes\), (\w+)$", title).groups()
        matrix_text, _, layout_text = body.partition("Layouts of the source:")
        rows = [[_cells(line) for line in part.splitlines() if line.startswith("| `")] for part in (matrix_text, layout_text)]
        tables[(int(size.replace(",", "")), dtype)] = tuple({row[0].strip("`"): row for row in part} for part in rows)
    return tables


def test_report_md_shows_each_cases_verdict_rate_and_share_of_memcpy(rendered):
    text = rendered["markdown"]
    tables = _markdown_tables(text)
    assert set(tables) == {(size, "float32") for size in SIZES}
    _check_matrix("report.md", tables, rendered)
    for case in _conversions(rendered).values():
        _matrix, layouts = tables[(case.size, case.dtype)]
        if not present(case.conversion):
            assert case.workload not in layouts
            continue
        row = layouts[case.workload]
        for column, layout in enumerate(case.conversion.evidence.layouts, start=1):
            cell = row[column]
            if layout.outcome == "refused":
                assert cell == f"refused: {layout.reason}"
            elif layout.values_ok is False:
                assert cell.endswith("**⚠ WRONG VALUES**"), row
            else:
                assert cell in ("✓ view", "✗ copy", "? no verdict") and "WRONG" not in cell
    leak = tables[(SIZES[0], "float32")][0]["numpy_to_torch_tensor"][9]
    assert leak == "grows 1.2 KiB/call" and tables[(SIZES[0], "float32")][0]["numpy_copy"][9] == "steady (2,048 calls)"
    assert "Bytes are counted once" in text and "np.copyto" in text and "first-touch" in text
    for size in SIZES:  # the one copying route below half of memcpy, named under its size
        group = text.split(f"({size:,} bytes), float32", 1)[1].split("\n### ", 1)[0]
        case = rendered["cases"][f"interop_numpy_to_jax_asarray_{size}_f32"]
        share = fmt_percent(case.conversion.memcpy_fraction)
        assert f"Copying routes below 50% of memcpy: `numpy_to_jax_asarray` ({share})." in group


def _html_rows(table: str) -> dict[str, list[str]]:
    rows = [[html_text.unescape(re.sub(r"<[^>]+>", "", c)) for c in re.findall(r"<td[^>]*>(.*?)</td>", row)]
            for row in re.findall(r"<tr>(.*?)</tr>", table)]  # fmt: skip
    return {row[0]: row for row in rows if row}


def _html_tables(page: str) -> dict:
    section = page.split("<h2>Conversions</h2>", 1)[1].split("</section>", 1)[0]
    tables = {}
    for group in section.split("<h3>")[1:]:
        title = html_text.unescape(group.split("</h3>", 1)[0])
        size, dtype = re.search(r"\(([0-9,]+) bytes\), (\w+)$", title).groups()
        matrix, layouts = re.findall(r"<table>.*?</table>", group.split("<figure", 1)[0])
        tables[(int(size.replace(",", "")), dtype)] = (_html_rows(matrix), _html_rows(layouts))
    return tables


def test_report_html_shows_the_same_tables(rendered):
    page = rendered["html"]
    html_tables, md_tables = _html_tables(page), _markdown_tables(rendered["markdown"])
    _check_matrix("report.html", html_tables, rendered)
    for key, (matrix, layouts) in md_tables.items():  # the same cells, without Markdown's marks
        plain = {name: [c.replace("`", "").replace("**", "") for c in row] for name, row in matrix.items()}
        assert html_tables[key][0] == plain
        assert html_tables[key][1] == {n: [c.replace("`", "").replace("**", "") for c in r] for n, r in layouts.items()}
    assert "⚠ WRONG VALUES" in page


@pytest.mark.figures
def test_report_html_draws_warm_call_against_size_per_route_family(rendered):
    page = html.render(load_finished(rendered["root"]))
    figures = re.findall(r"<figure class=plot>.*?</figure>", page.split("<h2>Conversions</h2>", 1)[1], flags=re.S)
    titles = [re.search(r"<figcaption>(.*?)</figcaption>", f).group(1) for f in figures]
    assert titles == [f"Conversions {pair}: warm call against size" for pair in
                      ("numpy → jax", "numpy → numpy", "numpy → torch", "torch → numpy")]  # fmt: skip
    torch_family = figures[2]
    assert "<path" in torch_family and "data-stub" not in torch_family  # drawn
    rows = [row for row in re.findall(r"<tr>(.*?)</tr>", torch_family)]
    table = [[html_text.unescape(re.sub(r"<[^>]+>", "", c)) for c in re.findall(r"<td[^>]*>(.*?)</td>", r)] for r in rows]
    table = [r for r in table if r]
    assert [(r[0], r[3]) for r in table] == [(route, f"{size:,}") for route in ("numpy_to_torch_from_numpy",
                                             "numpy_to_torch_tensor") for size in SIZES]  # fmt: skip
    for row in table:
        case = rendered["cases"][f"interop_{row[0]}_{row[3].replace(',', '')}_f32"]
        assert row[4:] == [fmt_seconds(case.conversion.call_s), copied_verdict(case.conversion.evidence.copied),
                           fmt_rate(case.conversion.bytes_per_s), fmt_percent(case.conversion.memcpy_fraction)]  # fmt: skip


def _csv_value(text: str) -> float | None:
    return None if text == "" else float(text)


def test_the_csv_holds_each_cases_conversion_figures_and_every_layout(rendered):
    rows = rendered["csv"]
    for name, case in _conversions(rendered).items():
        mine = {r["metric"]: r for r in rows if r["case"] == name and r["kind"] == "conversion"}
        layouts = {r["metric"]: r for r in rows if r["case"] == name and r["kind"] == "conversion_layout"}
        if not present(case.conversion):
            assert mine == {} and layouts == {}, name
            continue
        conversion = case.conversion
        bit = {True: 1.0, False: 0.0, None: None}
        expected = {"copied": bit[conversion.evidence.copied], "first_call_s": conversion.first_call_s,
                    "call_s": conversion.call_s, "bytes_per_s": conversion.bytes_per_s,
                    "memcpy_bytes_per_s": conversion.memcpy_bytes_per_s, "memcpy_fraction": conversion.memcpy_fraction,
                    "leak_growth_per_call_bytes": conversion.evidence.leak.growth_per_call_bytes,
                    "leak_grows": bit[conversion.evidence.leak.grows]}  # fmt: skip
        for metric, value in expected.items():
            assert _csv_value(mine[metric]["value"]) == value, (name, metric)  # exactly: no figure is recomputed
        assert {r["case_status"] for r in mine.values()} == {case.status}
        for layout in conversion.evidence.layouts:
            copied = layouts[f"layout_{layout.layout}_copied"]
            refused = layouts[f"layout_{layout.layout}_refused"]
            assert copied["outcome"] == refused["outcome"] == layout.outcome
            assert _csv_value(refused["value"]) == (1.0 if layout.outcome == "refused" else 0.0)
            assert _csv_value(copied["value"]) == (bit[layout.copied] if layout.outcome == "ok" else None)


def _metric(text: str, family: str, case: str) -> float | None:
    for line in text.splitlines():
        if line.startswith(family + "{") and f'case="{case}"' in line:
            return float(line.rsplit(" ", 1)[1])
    return None


def test_openmetrics_has_each_conversion_figure_the_case_holds_and_no_other(rendered):
    text = rendered["openmetrics"]
    list(text_string_to_metric_families(text))  # a valid exposition
    for name, case in _conversions(rendered).items():
        conversion = case.conversion if present(case.conversion) else None
        figures = {
            "ttfr_conversion_copied": None if not conversion or conversion.evidence.copied is None
            else float(conversion.evidence.copied),
            "ttfr_conversion_call_seconds": conversion and conversion.call_s,
            "ttfr_conversion_first_call_seconds": conversion and conversion.first_call_s,
            "ttfr_conversion_bytes_per_second": conversion and conversion.bytes_per_s,
            "ttfr_conversion_memcpy_bytes_per_second": conversion and conversion.memcpy_bytes_per_s,
            "ttfr_conversion_memcpy_ratio": conversion and conversion.memcpy_fraction,
            "ttfr_conversion_leak_bytes_per_call": conversion and conversion.evidence.leak.growth_per_call_bytes,
        }  # fmt: skip
        for family, value in figures.items():
            assert _metric(text, family, name) == value, (name, family)  # absent where the case holds none
            assert _metric(rendered["prometheus"], family, name) == value, (name, family)


def test_an_edited_conversion_figure_is_found_by_every_reader_even_rehashed(tmp_path):
    """A forged rate (or verdict) in a case file: its evidence and its policies give another."""
    from support.forgery import edit_case

    from ttfr.artifacts.reader import validate_dir

    request = RunRequest(backends="interop", workloads="numpy_to_jax_asarray", sizes=str(SIZES[-1]),
                         policies="cold-cache,warm-process", cold_runs=2, warm_procs=2, warm_samples=5, seed=1)  # fmt: skip
    outcome = run_suite(tmp_path, request, _ConversionExecutor())
    root = outcome.result_dir.root
    assert validate_dir(root) == []
    (case,) = outcome.cases
    assert case.conversion.memcpy_fraction is not None

    def forge(data):
        data["conversion"]["memcpy_fraction"] = 0.99
        data["conversion"]["below_half_memcpy"] = False

    edit_case(root, case.case, forge)
    assert any("conversion: its figures are not what its evidence and policies give" in p for p in validate_dir(root))
