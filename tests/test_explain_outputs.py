"""--explain through report.md and report.html (issue 38): the fixture suite's result with a JAX case
whose cold-cache policy holds an explanation (flagged: its import ratio beyond ±20%) and whose
warm-cache diagnostic process failed. The section is there only when some case has an explanation;
both pages show the same rows, each cell the typed explanation's figure with its unit; a failed
diagnostic process shows its outcome and reason and no phase."""

from __future__ import annotations

import dataclasses
import html as html_text
import re

import pytest
from conftest import make_case, make_run
from support.fixture_suite import run_fixture_suite

from ttfr.artifacts.reader import load_finished
from ttfr.model.policies import COLD_CACHE, WARM_CACHE
from ttfr.model.run_figures import COLD_METRICS
from ttfr.report import explain_md, html, markdown
from ttfr.report.formatting import fmt_percent, fmt_seconds

CASE = "jax_jit_cpu_matmul_64_f32"
TITLE = explain_md.TITLE
FAILED = "killed after 300 s | the trace <stopped> here"  # a table's bar and markup: escaped, never a new cell


def _summary(value: float) -> dict:
    return {"n": 5, "min": value * 0.9, "max": value * 1.1, "median": value,
            "median_ci": {"low": value * 0.95, "high": value * 1.05, "level": 0.94}, "p95": value * 1.1, "mean": value,
            "std": value * 0.05, "mad": value * 0.03}  # fmt: skip


def _distribution(name, version, self_s, modules) -> dict:
    return {"distribution": name, "version": version, "self_s": self_s, "modules": modules}


def _module(module, distribution, self_s, cumulative_s, imported_by=None) -> dict:
    return {"module": module, "distribution": distribution, "self_s": self_s, "cumulative_s": cumulative_s,
            "imported_by": imported_by}  # fmt: skip


def _phase(phase, measured_s, imports_s, modules, distributions, top_modules) -> dict:
    share = imports_s / measured_s if measured_s else None
    return {"phase": phase, "measured_s": measured_s, "imports_s": imports_s, "share": share, "modules": modules,
            "distributions": distributions, "top_modules": top_modules}  # fmt: skip


# As analyse/explain.py writes a JAX case's (the figures of a real run, unrounded)
IMPORT = _phase("import", 0.389187162, 0.511643, 619, [
    _distribution("jax", "0.10.2", 0.185216, 221), _distribution("python", "3.11.7", 0.062797, 163),
    _distribution("jaxlib", "0.10.2", 0.059861, 59), _distribution("numpy", "2.4.6", 0.048114, 102),
    _distribution("filelock", "4.2.11", 0.005828, 8), _distribution("unattributed", None, 0.136403, 18),
    _distribution("other", None, 0.013424, 48)], [
    _module("jax", "jax", 0.001201, 0.378965), _module("jax._src.cloud_tpu_init", "jax", 0.000227, 0.113821, "jax"),
    _module("jax._src.config", "jax", 0.002101, 0.112894, "jax._src.cloud_tpu_init"),
    _module("jax._src.logging_config", "jax", 0.000226, 0.103647, "jax._src.config"),
    _module("jax._src.lib", "jax", 0.000719, 0.103422, "jax._src.logging_config"),
    _module("jax._src.ad_checkpoint", "jax", 0.002159, 0.091293, "jax"),  # the sixth: not shown
])  # fmt: skip
FIRST_CALL = _phase("first_call", 0.034664272, 0.010272, 6, [_distribution("jaxlib", "0.10.2", 0.010272, 6)], [
    _module("jaxlib.mlir.dialects._mhlo_ops_gen", "jaxlib", 0.008833, 0.008833),
    _module("jaxlib.mlir.dialects._builtin_ops_gen", "jaxlib", 0.00029, 0.00029, "jaxlib.mlir.dialects.builtin"),
])  # fmt: skip
EXPLANATION = {
    "outcome": "ok", "reason": None, "traced_import_s": 0.385534808, "traced_ttfr_s": 0.43, "import_ratio": IMPORT["share"],
    "unattributed_fraction": 0.136403 / 0.511643,
    "phases": [
        _phase("interpreter", 0.00948632, 0.005535, 29, [_distribution("python", "3.11.7", 0.004277, 23),
                                                         _distribution("ttfr", "0.1.3", 0.001258, 6)],
               [_module("site", "python", 0.000845, 0.0025)]),
        IMPORT,
        _phase("setup", 0.001563713, 0.000597, 3, [_distribution("jax", "0.10.2", 0.000312, 1),
                                                   _distribution("ttfr", "0.1.3", 0.000285, 2)],
               [_module("jax.experimental.multihost_utils", "jax", 0.000312, 0.000312)]),
        FIRST_CALL,
        _phase("after", None, 0.000176, 1, [_distribution("ttfr", "0.1.3", 0.000176, 1)],
               [_module("ttfr.child.distributions", "ttfr", 0.000176, 0.000176)]),
    ],
}  # fmt: skip
FAILED_EXPLANATION = {"outcome": "timeout", "reason": FAILED, "phases": [], "traced_import_s": None, "traced_ttfr_s": None,
                      "import_ratio": None, "unattributed_fraction": None}  # fmt: skip
DISAGREES = {"flag": "explanation_disagrees", "phase": "import", "traced_s": 0.511643, "measured_s": 0.389187162}


def _policy(explanation: dict | None, flags=()) -> dict:
    medians = {"interpreter_s": 0.00948632, "import_s": 0.389187162, "setup_s": 0.001563713, "first_call_s": 0.034664272,
               "second_call_s": 0.0001, "ttfr_s": 0.435, "process_s": 0.5}  # fmt: skip
    summary = {**dict.fromkeys(COLD_METRICS), **{metric: _summary(value) for metric, value in medians.items()}}
    policy = {"runs": [make_run(i, ttfr_s=0.435) for i in range(5)], "summary": summary, "stages_summary": {},
              "flags": list(flags), "cache_verification": {"verdict": "verified", "flags": [], "hits_total": 0,
                                                           "misses_total": 5, "runs_verified": 5, "runs": 5}}  # fmt: skip
    if explanation is not None:
        policy["explanation"] = explanation
    return policy


def explained_case(cold=EXPLANATION, warm=FAILED_EXPLANATION):
    flags = [DISAGREES] if cold is EXPLANATION else []
    return make_case(CASE, policies={COLD_CACHE: _policy(cold, flags), WARM_CACHE: _policy(warm)},
                     flags=[{**flag, "policy": COLD_CACHE} for flag in flags])  # fmt: skip


@pytest.fixture(scope="module")
def verified(tmp_path_factory):
    """The fixture suite's result (no case explained)."""
    monkeypatch = pytest.MonkeyPatch()
    try:
        yield load_finished(run_fixture_suite(tmp_path_factory.mktemp("explain"), monkeypatch).result_dir.root)
    finally:
        monkeypatch.undo()


def _rendered(verified, *cases) -> tuple[str, str]:
    result = dataclasses.replace(verified, cases=[c for c in verified.cases if c.case != CASE] + list(cases))
    return markdown.render(result), html.render(result)


def _markdown_section(text: str) -> str:
    return text.split(f"\n## {TITLE}\n", 1)[1].split("\n## ", 1)[0]


def _html_section(page: str) -> str:
    return page.split(f"<h2>{html_text.escape(TITLE)}</h2>", 1)[1].split("</section>", 1)[0]


def _cells(line: str) -> list[str]:
    return [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]


def _markdown_parts(section: str) -> dict[str, dict]:
    """Each `### title`'s headline and tables (header -> rows of cells)."""
    parts = {}
    for chunk in section.split("\n### ")[1:]:
        title, _, body = chunk.partition("\n")
        lines = [line for line in body.splitlines() if line.strip()]
        tables, header = {}, None
        for line in lines:
            if not line.startswith("|"):
                header = None
                continue
            if line.startswith("|---"):
                continue
            if header is None:
                header = tuple(_cells(line))
                tables[header] = []
            else:
                tables[header].append(_cells(line))
        parts[title.replace("`", "")] = {"headline": lines[0], "tables": tables}
    return parts


def _text(cell: str) -> str:
    return html_text.unescape(re.sub(r"<[^>]+>", "", cell))


def _html_parts(section: str) -> dict[str, dict]:
    parts = {}
    for chunk in section.split("<h3>")[1:]:
        title, _, body = chunk.partition("</h3>")
        headline = _text(re.search(r"<p>(.*?)</p>", body)[1])
        tables = {}
        for table in re.findall(r"<table>.*?</table>", body):
            header = tuple(_text(h) for h in re.findall(r"<th[^>]*>(.*?)</th>", table))
            rows = [[_text(c) for c in re.findall(r"<td[^>]*>(.*?)</td>", row)] for row in re.findall(r"<tr>(.*?)</tr>", table)]
            tables[header] = [row for row in rows if row]
        parts[_text(title)] = {"headline": headline, "tables": tables}
    return parts


PHASES = tuple(explain_md.PHASE_HEADER)
MODULES = tuple(explain_md.MODULE_HEADER)


def test_no_section_without_an_explanation(verified):
    text, page = _rendered(verified, explained_case(cold=None, warm=None))
    assert f"## {TITLE}" not in text and TITLE not in page
    text, page = _rendered(verified, explained_case())
    assert f"\n## {TITLE}\n" in text and f"<h2>{html_text.escape(TITLE)}</h2>" in page
    # after every measured figure, right before the Flags that hold its explanation_disagrees
    assert text.index(f"## {TITLE}") < text.index("## Flags")
    assert page.index(html_text.escape(TITLE)) < page.index("<h2>Flags</h2>")


def test_each_phase_shows_the_explanations_figures_with_units(verified):
    text, _ = _rendered(verified, explained_case())
    part = _markdown_parts(_markdown_section(text))[f"{CASE} (cold-cache)"]
    rows = part["tables"][PHASES]
    assert [row[0] for row in rows] == ["interpreter", "import", "setup", "first call", "after"]
    by_phase = {row[0]: row for row in rows}
    assert by_phase["import"] == ["import", "389 ms", "512 ms", "131%", "619",
                                  "jax 0.10.2: 185 ms, python 3.11.7: 62.8 ms, jaxlib 0.10.2: 59.9 ms (+4 more)"]  # fmt: skip
    assert by_phase["after"][1:4] == ["—", "176 µs", "—"]  # no measured median: outside every timed phase
    for phase, row in zip(EXPLANATION["phases"], rows):
        assert row[1:5] == [fmt_seconds(phase["measured_s"]), fmt_seconds(phase["imports_s"]),
                            fmt_percent(phase["share"]), str(phase["modules"])]  # fmt: skip
    seconds = re.compile(r"\d+(\.\d+)? (s|ms|µs|ns)")
    for row in rows:
        assert all(seconds.fullmatch(cell) or cell == "—" for cell in row[1:3]), row
        assert re.fullmatch(r"\d+(\.\d+)?%|—", row[3]), row
        for shown in row[5].removesuffix(" (+4 more)").split(", "):
            assert seconds.fullmatch(shown.rpartition(": ")[2]), row
    modules = part["tables"][MODULES]
    assert [(r[0], r[1]) for r in modules] == [
        *(("import", m["module"]) for m in IMPORT["top_modules"][:5]),
        *(("first call", m["module"]) for m in FIRST_CALL["top_modules"]),
    ]  # the five costliest of the import and first-call phases, none of the others'
    assert modules[0] == ["import", "jax", "jax", "379 ms", "top level"]
    assert modules[-1] == ["first call", "jaxlib.mlir.dialects._builtin_ops_gen", "jaxlib", "290 µs",
                           "jaxlib.mlir.dialects.builtin"]  # fmt: skip
    assert all(seconds.fullmatch(r[3]) for r in modules)
    assert part["headline"].startswith("Import ratio 1.31 (⚠ beyond ±20%: flagged `explanation_disagrees`")
    assert "unattributed 27% of the import phase's imports" in part["headline"]
    assert "own import phase took 386 ms and its first result came 430 ms after its spawn" in part["headline"]
    # no raw float of the model anywhere in the section
    assert not re.search(r"\d\.\d{4,}", _markdown_section(text))


def test_report_html_shows_the_same_rows(verified):
    text, page = _rendered(verified, explained_case())
    md_parts, html_parts = _markdown_parts(_markdown_section(text)), _html_parts(_html_section(page))
    assert list(md_parts) == list(html_parts) == [f"{CASE} (cold-cache)", f"{CASE} (warm-cache)"]
    for title, md in md_parts.items():
        shown = html_parts[title]
        assert shown["headline"] == md["headline"].replace("`", ""), title
        assert shown["tables"] == md["tables"], title
    assert md_parts[f"{CASE} (cold-cache)"]["tables"][PHASES]  # the comparison compared something
    assert not re.search(r"\d\.\d{4,}", _html_section(page))


def test_a_failed_diagnostic_process_shows_its_reason_and_no_phase(verified):
    text, page = _rendered(verified, explained_case())
    part = _markdown_parts(_markdown_section(text))[f"{CASE} (warm-cache)"]
    assert part["tables"] == {}
    assert part["headline"] == f"The diagnostic process ended `timeout`: {FAILED}; no phase is explained."
    shown = _html_parts(_html_section(page))[f"{CASE} (warm-cache)"]
    assert shown["tables"] == {} and shown["headline"] == part["headline"].replace("`", "")
    assert "&lt;stopped&gt;" in _html_section(page) and "<stopped>" not in page  # the reason is escaped


def test_an_explanation_within_20_percent_is_not_said_to_disagree(verified):
    agreeing = {**EXPLANATION, "import_ratio": 0.98}
    text, page = _rendered(verified, explained_case(cold=agreeing, warm=None))
    (part,) = _markdown_parts(_markdown_section(text)).values()
    assert part["headline"].startswith("Import ratio 0.98; unattributed 27%")
    assert "explanation_disagrees" not in _markdown_section(text).split("### ", 1)[1]
    assert "⚠" not in _html_section(page)


def test_a_ttfr_disagreement_is_not_said_to_be_the_import_ratios(verified):
    """Only the import phase's flag puts the ⚠ on the import ratio: a TTFR (or compile stage) flag is said under Flags."""
    agreeing = {**EXPLANATION, "import_ratio": 0.98}
    ttfr_flag = {"flag": "explanation_disagrees", "phase": "ttfr", "traced_s": 0.9, "measured_s": 0.435}
    case = make_case(CASE, policies={COLD_CACHE: _policy(agreeing, [ttfr_flag]), WARM_CACHE: _policy(None)},
                     flags=[{**ttfr_flag, "policy": COLD_CACHE}])  # fmt: skip
    text, _page = _rendered(verified, case)
    (part,) = _markdown_parts(_markdown_section(text)).values()
    assert part["headline"].startswith("Import ratio 0.98; unattributed")
    assert "reached its first result in 900 ms" in text  # the flag's own sentence, under Flags


# ------------------------------------------------------------------ report.html's picture of the whole cold start
FIRST_CALL_PARTS = {"traced_s": 0.04, "attributed_fraction": 0.9, "imports_s": 0.010272, "kernels": None,
                    "stage": "compile_s", "stage_traced_s": 0.02, "stage_measured_s": 0.021, "parts": [
                        {"part": "trace", "s": 0.004, "share": 0.1, "runs": None},
                        {"part": "compile", "s": 0.02, "share": 0.5, "runs": None},
                        {"part": "first execution", "s": 0.012, "share": 0.3, "runs": None},
                        {"part": "unattributed", "s": 0.004, "share": 0.1, "runs": None}]}  # fmt: skip
PROGRAMS = [{"name": name, "traces": 1, "executables": 1, "trace_s": 0.001, "lower_s": 0.001, "compile_s": seconds,
             "persistent_cache": "written", "default_settings_skip": True}
            for name, seconds in (("step", 0.015), ("loss", 0.005))]  # fmt: skip


def _icicle_case():
    return explained_case(cold={**EXPLANATION, "first_call": FIRST_CALL_PARTS, "programs": PROGRAMS})


def test_the_picture_of_a_cold_start_fills_each_measured_phase_with_what_the_explanation_found():
    from ttfr.report import icicle

    block = _icicle_case().policies.get(COLD_CACHE)
    found = icicle.boxes(block, block.explanation)
    phases = [b for b in found if b.row == 0]
    # the top row is the measured medians, end to end
    assert [(b.label, b.seconds) for b in phases] == [("interpreter", 0.00948632), ("import", 0.389187162),
                                                      ("setup", 0.001563713), ("first call", 0.034664272)]  # fmt: skip
    assert all(abs(a.start + a.width - b.start) < 1e-12 for a, b in zip(phases, phases[1:]))
    for parent in [b for b in found if b.row < 2]:
        children = [b for b in found if b.row == parent.row + 1 and b.parent == parent.label]
        if children:  # a row fills its parent exactly, in the order the explanation lists the parts
            assert abs(sum(c.width for c in children) - parent.width) < 1e-12, parent.label
            assert abs(sum(c.share for c in children) - 1.0) < 1e-12  # the table's shares, the drawing's widths
            assert children[0].start == parent.start
    imports = {b.label: b.seconds for b in found if b.parent == "import"}
    # the distributions at their traced seconds, then the import phase's time spent not importing
    assert imports["jax 0.10.2"] == 0.185216 and imports["unattributed"] == 0.136403 and "not importing" not in imports
    assert [b.label for b in found if b.parent == "first call"] == ["trace", "compile", "first execution", "unattributed"]
    assert [(b.label, b.seconds) for b in found if b.parent == "compile"] == [("step", 0.015), ("loss", 0.005)]
    # past `most` parts under one parent: the largest, then one `other` holding the rest
    capped = [b for b in icicle.boxes(block, block.explanation, most=3) if b.parent == "import"]
    assert [b.label for b in capped] == ["jax 0.10.2", "unattributed", "other"]
    assert abs(sum(b.seconds for b in capped) - IMPORT["imports_s"]) < 1e-9


def test_report_html_draws_each_explained_case_once_with_every_box_in_its_table(verified):
    _md, page = _rendered(verified, _icicle_case())
    section = _html_section(page)
    assert section.count("<figcaption>Where the cold start of") == 1  # one explained case, its two panels in one figure
    figure = section.split(f"<figcaption>Where the cold start of {CASE} goes</figcaption>", 1)[1].split("</figure>", 1)[0]
    assert "<svg" in figure
    rows = [[_text(c) for c in re.findall(r"<td[^>]*>(.*?)</td>", row)]
            for row in re.findall(r"<tr>(.*?)</tr>", figure.split("<tbody>", 1)[1])]  # fmt: skip
    # phases, import's parts, the first call's parts, the programs under compile; the warm cache's process failed
    assert len(rows) == 4 + 7 + 4 + 2 and {row[0] for row in rows} == {"cold cache"}
    assert rows[-2] == ["cold cache", "programs, graphs", "compile", "step", "15 ms", "75%"]
    _md, plain = _rendered(verified)
    assert "Where the cold start of" not in plain  # no explanation, no picture
