"""Many cold starts at once (`--concurrency`, issue 29) through every output: a fake suite whose groups
race on their cache (tests/test_concurrency.py's RacingExecutor: on an empty shared cache every member
compiles, on a warm one every member loads), with one member that fails, one whose output held a cache
warning and a check that finds an unreadable file, rendered by report.md, report.html, the CSV and
OpenMetrics. Each must show, per sharing mode and N, exactly the figures the case result holds (TTFR
p50 / p95 / max, dedup, bytes, cache whole, the fan-out advice), and what went wrong, process by process."""

from __future__ import annotations

import csv
import dataclasses
import html as html_text
import io
import re
import threading
from pathlib import Path

import msgspec
import pytest
from support.fakes import run_suite
from prometheus_client.openmetrics.parser import text_string_to_metric_families
from prometheus_client.parser import text_string_to_metric_families as classic_families
from test_concurrency import RacingExecutor, request

from conftest import fake_result
from ttfr.artifacts.export import csv_long, formats, openmetrics
from ttfr.artifacts.reader import load_finished
from ttfr.measure import cache as cache_dirs
from ttfr.model.policies import COLD_CACHE, COLD_PRIVATE, COLD_SHARED, CONCURRENCY_MODES, WARM_SHARED
from ttfr.model.concurrency import Concurrency, FanOut
from ttfr.report import concurrency_md, html, markdown, plots
from ttfr.report.formatting import DASH, fmt_bytes, fmt_seconds

CASE = "jax_jit_cpu_matmul_64_f32"
FAILED = "killed by SIGSEGV"
WARNING = "W0000 compilation_cache.py: Error writing persistent compilation cache entry for 'jit_fn': No space left"
UNREADABLE = "jax/jit_fn-cache: Input/output error"


class _TroubledExecutor(RacingExecutor):
    """RacingExecutor's groups, with trouble: cold-shared x2's second process dies before its first
    result; warm-shared x2's second process warns about a cache write; every other second process
    takes 100 ms longer to its first result."""

    def __call__(self, job, env, timeout_s, python=None):
        if threading.current_thread().name == "ttfr-group-1":
            jax_dir = Path(env["JAX_COMPILATION_CACHE_DIR"])
            shared = ".member" not in jax_dir.parent.name
            warm = jax_dir.is_dir() and any(jax_dir.iterdir())
            if shared and not warm:  # it takes part in the race (RacingExecutor's barrier), then dies
                raced = super().__call__(job, env, timeout_s, python)
                return fake_result(None, outcome="signal", reason=FAILED, spawn_ns=raced.spawn_ns)
            if shared and warm:
                return dataclasses.replace(_later(super().__call__(job, env, timeout_s, python)), messages=(WARNING,))
            return _later(super().__call__(job, env, timeout_s, python))
        return super().__call__(job, env, timeout_s, python)


def _later(result):
    """The same run spawned 100 ms earlier: 100 ms more to its first result (p50 and p95 of two differ)."""
    return dataclasses.replace(result, spawn_ns=result.spawn_ns - 100_000_000)


def _varied(concurrency: Concurrency) -> Concurrency:
    """The suite's concurrency with every figure told apart (p50 < p95 < max, which a group of two
    cannot give), and some missing: a point without dedup, bytes or blocked time, one whose checks
    could not tell, one oversubscribed; advice with a positive saving and one without figures; a
    check whose fresh process timed out (no verdict on the cache)."""
    points = []
    for i, p in enumerate(concurrency.points):
        points.append(msgspec.structs.replace(
            p, ttfr_p50_s=0.5 + 0.01 * i, ttfr_p95_s=0.75 + 0.01 * i, ttfr_max_s=1.25 + 0.01 * i,
            dedup_ratio=None if i == 0 else 1.5 + i, bytes_written=None if i == 0 else 1000 * i,
            blocked_s=None if i == 1 else 0.002 * i, runq_wait_s=0.003 + 0.001 * i, whole=None if i == 2 else p.whole,
            oversubscribed=p.n == 2, all_results_s=None if i == 3 else 1.3 + 0.01 * i,
        ))  # fmt: skip
    fan_out = [FanOut(n=1, together_s=2.0, warm_up_s=0.6, fan_out_s=0.9, warm_up_first_s=1.5, saving_s=0.5),
               FanOut(n=2, together_s=None, warm_up_s=0.6, fan_out_s=None, warm_up_first_s=None, saving_s=None)]  # fmt: skip
    groups = [g if (g.mode, g.n) != (COLD_SHARED, 1) else msgspec.structs.replace(
        g, check=msgspec.structs.replace(g.check, outcome="timeout", compiles=None, loads=None, whole=None))
        for g in concurrency.groups]  # fmt: skip
    return msgspec.structs.replace(concurrency, usable_cores=1, points=points, fan_out=fan_out, groups=groups)


def _outputs(verified, tmp: Path) -> dict:
    """Every output of a verified result, rendered here (report.md, report.html, CSV, both expositions)."""
    (case,) = verified.cases
    return {
        "case": case,
        "verified": verified,
        "markdown": markdown.render(verified),
        "html": html.render(verified),
        "csv": list(csv.DictReader(io.StringIO(csv_long.render(verified)))),
        "openmetrics": openmetrics.render(verified, "openmetrics").decode(),
        "prometheus": openmetrics.render(verified, "prometheus").decode(),
    }


@pytest.fixture(scope="module")
def outputs(tmp_path_factory):
    """`suite`: what the fake run wrote and `ttfr export` writes; `varied`: the same result with its
    case's concurrency told apart figure by figure (_varied), rendered by the same functions."""
    tmp = tmp_path_factory.mktemp("concurrency")
    monkeypatch = pytest.MonkeyPatch()
    real = cache_dirs.CacheDirs.unreadable
    # a private group's check (reading each member's directory) finds a file it cannot read in the first one's
    monkeypatch.setattr(cache_dirs.CacheDirs, "unreadable",
                        lambda self: ([UNREADABLE] if self.root.name.endswith(".member0") else []) + real(self))  # fmt: skip
    try:
        outcome = run_suite(tmp, request(backends="jax_jit_cpu", cold_runs=1), _TroubledExecutor())
    finally:
        monkeypatch.undo()
    root = outcome.result_dir.root
    (csv_path,) = formats.export("csv", root, tmp / "runs.csv", COLD_CACHE)
    (om_path,) = formats.export("openmetrics", root, tmp / "ttfr.prom", COLD_CACHE)
    (prom_path,) = formats.export("prometheus", root, tmp / "classic.prom", COLD_CACHE)
    verified = load_finished(root)
    (case,) = verified.cases
    suite = {
        "case": case,
        "verified": verified,
        "markdown": (root / "report.md").read_text(),
        "html": (root / "report.html").read_text(),
        "csv": list(csv.DictReader(csv_path.open())),
        "openmetrics": om_path.read_text(),
        "prometheus": prom_path.read_text(),
    }
    varied = dataclasses.replace(verified, cases=[msgspec.structs.replace(case, concurrency=_varied(case.concurrency))])
    return {"suite": suite, "varied": _outputs(varied, tmp)}


VARIANTS = pytest.mark.parametrize("variant", ["suite", "varied"])


@pytest.fixture
def rendered(outputs, variant):
    return outputs[variant]


@pytest.fixture
def suite(outputs):
    return outputs["suite"]


def test_the_suite_has_every_kind_of_group_to_agree_on(suite):
    case = suite["case"]
    together = case.concurrency
    assert case.case == CASE
    assert {(p.mode, p.n) for p in together.points} == {(m, n) for m in CONCURRENCY_MODES for n in (1, 2)}
    groups = {(g.mode, g.n): g for g in together.groups}
    failed = groups[(COLD_SHARED, 2)].members[1]
    assert (failed.outcome, failed.reason, failed.ttfr_s) == ("signal", FAILED, None)
    assert groups[(WARM_SHARED, 2)].members[1].messages == [WARNING]
    assert {g.check.whole for g in together.groups if g.mode == COLD_PRIVATE} == {False}
    assert {g.check.whole for g in together.groups if g.mode != COLD_PRIVATE} == {True}
    assert {p.dedup_ratio for p in together.points} == {0.0, 1.0, 2.0}
    assert [a.n for a in together.fan_out] == [2]  # N=1 has nobody to fan out to
    assert "shared_cache_not_whole" in {f.name for f in case.flags}
    two = [p for p in together.points if p.n == 2 and p.processes == 2]
    assert two and all(p.ttfr_p50_s < p.ttfr_p95_s == p.ttfr_max_s for p in two)  # nearest rank of two: the larger


def test_the_varied_result_tells_every_figure_apart(outputs):
    together = outputs["varied"]["case"].concurrency
    assert all(p.ttfr_p50_s < p.ttfr_p95_s < p.ttfr_max_s for p in together.points)
    for field in ("dedup_ratio", "bytes_written", "blocked_s", "all_results_s", "whole"):
        assert None in {getattr(p, field) for p in together.points}, field
    assert {p.oversubscribed for p in together.points} == {True, False}
    assert {a.saving_s is None for a in together.fan_out} == {True, False}


def _expected_points(case) -> dict[tuple[str, str], list[str]]:
    """The cells each (mode, N) row must show: every figure of the point, formatted once."""
    together = case.concurrency
    rows = {}
    for p in together.points:
        mode = p.mode if p.measured_as is None else f"{p.mode} (= {p.measured_as} x{p.n})"
        whole = (
            "— (one writer each)" if p.whole is None and p.mode == COLD_PRIVATE else {True: "✓", False: "✗", None: "?"}[p.whole]
        )
        rows[(mode, str(p.n))] = [
            mode, str(p.n), str(p.groups), str(p.processes), fmt_seconds(p.ttfr_p50_s), fmt_seconds(p.ttfr_p95_s),
            fmt_seconds(p.ttfr_max_s), fmt_seconds(p.all_results_s),
            DASH if p.dedup_ratio is None else f"{p.dedup_ratio:.3g}", fmt_bytes(p.bytes_written),
            fmt_seconds(p.blocked_s), fmt_seconds(p.runq_wait_s), whole,
            "? usable cores unknown" if together.usable_cores is None else "⚠ N > cores" if p.oversubscribed
            else "N ≤ cores",
        ]  # fmt: skip
    return rows


def _expected_advice(case) -> dict[str, list[str]]:
    return {str(a.n): [str(a.n), fmt_seconds(a.together_s), fmt_seconds(a.warm_up_s), fmt_seconds(a.fan_out_s),
                       fmt_seconds(a.warm_up_first_s), fmt_seconds(a.saving_s)] for a in case.concurrency.fan_out}  # fmt: skip


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def _markdown_section(text: str) -> str:
    return text.split("\n## Concurrency\n", 1)[1].split("\n## ", 1)[0]


def _markdown_tables(section: str) -> tuple[dict, dict]:
    part = section.split(f"\n### `{CASE}`", 1)[1]
    points_text, _, advice_text = part.partition("Fan-out advice:\n")
    points = [_cells(line) for line in points_text.splitlines() if line.startswith("| ") and not line.startswith("| mode")]
    advice = [_cells(line) for line in advice_text.splitlines() if re.match(r"\| \d", line)]
    return {(row[0], row[1]): row for row in points}, {row[0]: row for row in advice}


@VARIANTS
def test_report_md_shows_each_points_figures_and_the_advice(rendered):
    case = rendered["case"]
    section = _markdown_section(rendered["markdown"])
    points, advice = _markdown_tables(section)
    assert points == _expected_points(case)
    assert advice == _expected_advice(case)
    cold2 = case.concurrency.points[[(p.mode, p.n) for p in case.concurrency.points].index((COLD_SHARED, 2))]
    assert points[(COLD_SHARED, "2")][4] == fmt_seconds(cold2.ttfr_p50_s) != DASH  # a figure, not a dash
    assert "nearest rank" in section and "− its time on a CPU − its run-queue wait" in section
    assert f"### `{CASE}` ({case.concurrency.usable_cores} usable cores)" in section
    oversubscribed = any(p.oversubscribed for p in case.concurrency.points)
    assert (concurrency_md.OVERSUBSCRIBED in section) is oversubscribed


@VARIANTS
def test_report_md_says_what_went_wrong_process_by_process(rendered):
    section = _markdown_section(rendered["markdown"])
    problems = [line[2:] for line in section.split("What went wrong:\n", 1)[1].splitlines() if line.startswith("- ")]
    assert f"cold-shared x2 #0, process 1: signal: {FAILED}" in problems
    assert f"warm-shared x2 #0, process 1 said: {WARNING}" in problems
    private = [line for line in problems if line.startswith("cold-private")]
    assert [line.split(":", 1)[0] for line in private] == ["cold-private x2 #0"]  # x1 is cold-shared x1's run
    # the check of private directories reads every member's files (no process runs on them)
    assert all("✗ cache not whole afterwards: 1 of its " in line and line.endswith(f"unreadable (member 0/{UNREADABLE})")
               for line in private), private  # fmt: skip
    unsure = [line for line in problems if line.startswith("cold-shared x1 #0")]
    if any(g.check.whole is None for g in rendered["case"].concurrency.groups):  # varied
        assert unsure == ["cold-shared x1 #0: ? no verdict on the cache afterwards: its 1 file(s) (10 B) all readable; "
                          "the fresh process after it: timeout, no cache counters"]  # fmt: skip
    assert len(problems) == 3 + len(unsure)  # nothing about the groups where nothing went wrong
    assert concurrency_md.NOTHING_WRONG not in section


def _html_rows(table: str) -> list[list[str]]:
    rows = [[html_text.unescape(re.sub(r"<[^>]+>", "", c)) for c in re.findall(r"<td[^>]*>(.*?)</td>", row)]
            for row in re.findall(r"<tr>(.*?)</tr>", table)]  # fmt: skip
    return [row for row in rows if row]


def _html_section(page: str) -> str:
    return page.split("<h2>Concurrency</h2>", 1)[1].split("</section>", 1)[0]


@VARIANTS
def test_report_html_shows_the_same_tables_and_problems(rendered):
    case = rendered["case"]
    section = _html_section(rendered["html"])
    before_figure = section.split("<figure", 1)[0]
    points_table, advice_table = re.findall(r"<table>.*?</table>", before_figure)
    assert {(row[0], row[1]): row for row in _html_rows(points_table)} == _expected_points(case)
    assert {row[0]: row for row in _html_rows(advice_table)} == _expected_advice(case)
    text = html_text.unescape(re.sub(r"<[^>]+>", "", section))
    assert f"cold-shared x2 #0, process 1: signal: {FAILED}" in text
    assert f"warm-shared x2 #0, process 1 said: {WARNING}" in text and UNREADABLE in text


@VARIANTS
@pytest.mark.figures
def test_report_html_draws_ttfr_against_n_per_case_with_its_table(rendered, monkeypatch):
    drawn = []
    real_svg = plots._svg
    monkeypatch.setattr(plots, "_svg", lambda fig: drawn.append(fig) or real_svg(fig))
    page = html.render(rendered["verified"])
    together = rendered["case"].concurrency
    (fig,) = [f for f in drawn if any(line.get_label().endswith(" p50") for line in f.axes[0].get_lines())]
    lines = {line.get_label(): line for line in fig.axes[0].get_lines()}
    colours = set()
    for mode in CONCURRENCY_MODES:  # each line is the points' figures, p50 solid and p95 dashed, a colour per mode
        points = sorted((p for p in together.points if p.mode == mode), key=lambda p: p.n)
        p50, p95 = lines[f"{mode} p50"], lines[f"{mode} p95"]
        assert list(p50.get_xdata()) == [p.n for p in points] == list(p95.get_xdata())
        assert list(p50.get_ydata()) == [p.ttfr_p50_s for p in points]
        assert list(p95.get_ydata()) == [p.ttfr_p95_s for p in points]
        assert (p50.get_linestyle(), p95.get_linestyle()) == ("-", "--") and p50.get_color() == p95.get_color()
        colours.add(p50.get_color())
    assert len(colours) == len(CONCURRENCY_MODES)
    (figure,) = re.findall(r"<figure class=plot>.*?</figure>", _html_section(page), flags=re.S)
    assert re.search(r"<figcaption>(.*?)</figcaption>", figure).group(1) == f"TTFR against N: {CASE}"
    assert "<path" in figure
    svg = figure.split("<div class=data>", 1)[0]
    for mode in CONCURRENCY_MODES:  # a legend entry per series: p50 and p95 of each mode
        assert f"{mode} p50" in svg and f"{mode} p95" in svg
    table = _html_rows(figure.split("<div class=data>", 1)[1])
    expected = {(p.mode, str(p.n)): [p.mode, str(p.n), str(p.processes), fmt_seconds(p.ttfr_p50_s),
                                     fmt_seconds(p.ttfr_p95_s), fmt_seconds(p.ttfr_max_s)]
                for p in rendered["case"].concurrency.points}  # fmt: skip
    assert {(row[0], row[1]): row for row in table} == expected


def _measured(together) -> list:
    """The points measured as their own mode (not cold-private x1, which is cold-shared x1's run)."""
    return [p for p in together.points if p.measured_as is None]


def _csv_value(text: str) -> float | None:
    return None if text == "" else float(text)


@VARIANTS
def test_the_csv_holds_each_point_the_advice_and_each_member(rendered):
    case, rows = rendered["case"], rendered["csv"]
    together = case.concurrency
    bit = {True: 1.0, False: 0.0, None: None}
    points = {}
    for row in (r for r in rows if r["kind"] == "concurrency"):
        points.setdefault(row["policy"], {})[row["metric"]] = _csv_value(row["value"])
    # cold-private x1 is cold-shared x1's run: a row of its own would count that process twice
    assert set(points) == {f"{p.mode} x{p.n}" for p in _measured(together)} and "cold-private x1" not in points
    for p in _measured(together):
        mine = points[f"{p.mode} x{p.n}"]
        assert mine == {"groups": p.groups, "processes": p.processes, "ttfr_p50_s": p.ttfr_p50_s,
                        "ttfr_p95_s": p.ttfr_p95_s, "ttfr_max_s": p.ttfr_max_s, "all_results_s": p.all_results_s,
                        "dedup_ratio": p.dedup_ratio, "bytes_written": p.bytes_written, "blocked_s": p.blocked_s,
                        "runq_wait_s": p.runq_wait_s, "whole": bit[p.whole],
                        "oversubscribed": bit[p.oversubscribed]}, p  # fmt: skip
    advice = {}
    for row in (r for r in rows if r["kind"] == "concurrency_fan_out"):
        advice.setdefault(row["policy"], {})[row["metric"]] = _csv_value(row["value"])
    assert advice == {f"fan-out x{a.n}": {"together_s": a.together_s, "warm_up_s": a.warm_up_s, "fan_out_s": a.fan_out_s,
                                          "warm_up_first_s": a.warm_up_first_s, "saving_s": a.saving_s}
                      for a in together.fan_out}  # fmt: skip
    members = {}
    for row in (r for r in rows if r["kind"] == "concurrency_member"):
        key = (row["policy"], row["round"], row["run"])
        members.setdefault(key, {"outcome": row["outcome"]})[row["metric"]] = _csv_value(row["value"])
    for group in together.groups:
        for m in group.members:
            mine = members.pop((f"{group.mode} x{group.n}", str(group.index), str(m.member)))
            uses = {f"cache_use_{use}": float(use == m.cache_use) for use in ("compiled", "loaded", "mixed", "unknown")}
            assert mine == {"outcome": m.outcome, "ttfr_s": m.ttfr_s, "result_after_release_s": m.result_after_release_s,
                            "start_skew_s": m.start_skew_s, "compiles": m.compiles, "loads": m.loads,
                            "blocked_s": m.blocked_s, "runq_wait_s": m.runq_wait_s, **uses}, (group.mode, group.n, m)  # fmt: skip
    assert members == {}
    failed = [r for r in rows if r["kind"] == "concurrency_member" and r["outcome"] == "signal"]
    assert {r["metric"]: r["value"] for r in failed}["ttfr_s"] == ""  # no figure: empty, never 0
    checks = {}
    for row in (r for r in rows if r["kind"] == "concurrency_check"):
        checks.setdefault((row["policy"], row["round"]), {"outcome": row["outcome"]})[row["metric"]] = _csv_value(row["value"])
    assert checks == {(f"{g.mode} x{g.n}", str(g.index)): {
        "outcome": g.check.outcome, "files": g.check.files, "bytes": g.check.bytes,
        "unreadable_files": len(g.check.unreadable), "compiles": g.check.compiles, "loads": g.check.loads,
        "whole": bit[g.check.whole]} for g in together.groups}  # fmt: skip


def _samples(text: str, family: str, parse=text_string_to_metric_families) -> dict[tuple, float]:
    """{(mode, n, quantile): value} of one family's samples for the case (labels it lacks: None)."""
    found = {}
    for metric in parse(text):
        for sample in metric.samples:
            if sample.name == family and sample.labels.get("case") == CASE:
                labels = sample.labels
                found[(labels.get("mode"), labels.get("n"), labels.get("quantile"))] = sample.value
    return found


@VARIANTS
@pytest.mark.parametrize("output, parse", [("openmetrics", text_string_to_metric_families),
                                           ("prometheus", classic_families)])  # fmt: skip
def test_openmetrics_has_each_points_figures_and_the_advice_and_no_other(rendered, output, parse):
    together, text = rendered["case"].concurrency, rendered[output]
    quantiles = _samples(text, "ttfr_concurrency_ttfr_seconds", parse)
    assert quantiles == {(p.mode, str(p.n), q): v for p in _measured(together)
                         for q, v in (("0.5", p.ttfr_p50_s), ("0.95", p.ttfr_p95_s), ("1", p.ttfr_max_s))
                         if v is not None}  # fmt: skip
    for family, field in (("ttfr_concurrency_dedup_ratio", "dedup_ratio"),
                          ("ttfr_concurrency_all_results_seconds", "all_results_s"),
                          ("ttfr_concurrency_written_bytes", "bytes_written"),
                          ("ttfr_concurrency_blocked_seconds", "blocked_s"),
                          ("ttfr_concurrency_runq_wait_seconds", "runq_wait_s"),
                          ("ttfr_concurrency_processes", "processes")):  # fmt: skip
        expected = {(p.mode, str(p.n), None): getattr(p, field) for p in _measured(together) if getattr(p, field) is not None}
        assert _samples(text, family, parse) == expected, family
    whole = _samples(text, "ttfr_concurrency_cache_whole", parse)
    assert whole == {(p.mode, str(p.n), None): float(p.whole) for p in _measured(together) if p.whole is not None}
    assert set(whole.values()) == {0.0, 1.0}
    for family, field in (("ttfr_concurrency_advice_together_seconds", "together_s"),
                          ("ttfr_concurrency_advice_warm_up_first_seconds", "warm_up_first_s"),
                          ("ttfr_concurrency_advice_saving_seconds", "saving_s")):  # fmt: skip
        expected = {(None, str(a.n), None): getattr(a, field) for a in together.fan_out if getattr(a, field) is not None}
        assert _samples(text, family, parse) == expected, family
    assert any(a.together_s is None for a in together.fan_out)  # the failed member's group: left out, not 0
