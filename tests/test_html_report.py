"""report.html and comparison.html: self-contained pages whose figures have their numbers
beside them; `ttfr report` on a terminal with inline bars; a headless Chromium renders the
page without errors and not blank."""

from __future__ import annotations

import html as html_text
import io
import os
import re
import shutil
import subprocess
import sys

import msgspec
import pytest
from support.fakes import FakeExecutor, run_suite
from rich.console import Console

from conftest import fake_result
from ttfr.measure.executors import Executors
from ttfr.artifacts.reader import load_finished, validate_dir
from ttfr.commands import cli
from ttfr.pipeline import interleaved as ab
from ttfr.pipeline import suite as suite_run
from ttfr.measure.spec import RunRequest, build_spec
from ttfr.model.case import CaseResult
from ttfr.model.policy_figures import ColdSummary
from ttfr.model.run_figures import COLD_METRICS
from ttfr.model.suite import ScalingRow
from ttfr.report import html, terminal

HOSTILE = "<script>alert('x')</script> & \"quoted\" | ## heading"


def _run(tmp_path, executor=None, **kwargs):
    kwargs.setdefault("backends", "numpy,jax_jit_cpu")
    request = RunRequest(workloads="matmul,fused_chain", sizes="64", cold_runs=3, warm_procs=2, seed=2, **kwargs)
    return run_suite(tmp_path / "out", request, executor).result_dir.root


def _figures(page: str) -> list[str]:
    return re.findall(r"<figure class=plot>.*?</figure>", page, flags=re.S)


def _case(case: dict) -> CaseResult:
    """A case result of the fields a figure reads (`case`), the others a valid minimum."""
    config = {"profile": "default", "policies": ["cold-process/cold-cache"], "cold_runs": 4, "warm_procs": 2,
              "warm_samples": 5, "min_sample_s": 0.01, "max_warmup_s": 1.0, "timeout_s": 60.0, "seed": 0, "threads": None,
              "deterministic": True}  # fmt: skip
    status = case.get("status", "ok")
    rest = {"schema": "ttfr.case_result.v2", "backend": "numpy", "workload": "matmul", "size": 64, "dtype": "float32",
            "status": status, "reason": None if status == "ok" else "it failed", "config": config, "sync_policy": "none",
            "dataset": {"id": "none", "sha256": None}, "device": None, "versions": {}, "correctness": None, "policies": {},
            "memory": {}, "flags": [], "unmeasured_runs": [], "limitations": []}  # fmt: skip
    return msgspec.convert({**rest, **case}, CaseResult)


def _run_figures(index: int, outcome: str, metrics: dict, contention: dict | None = None) -> dict:
    """One measured run's fields as a case file has them, the ones no figure reads empty."""
    resources = dict.fromkeys(("peak_rss_bytes", "tree_peak_rss_bytes", "cpu_user_s", "cpu_sys_s", "involuntary_switches"))
    run = {"index": index, "round": 0, "outcome": outcome, "reason": None if outcome == "ok" else "it failed",
           "metrics": {**dict.fromkeys(COLD_METRICS), **metrics}, "stages": {}, "resources": resources,
           "cache": {"verdict": "not_applicable", "flags": [], "entries_before": 0, "entries_after": 0}, "host": None,
           "exit_code": 0 if outcome == "ok" else 1}  # fmt: skip
    return run if contention is None else {**run, "contention": contention}


@pytest.mark.figures
def test_every_run_writes_a_self_contained_page_whose_figures_have_their_tables(tmp_path):
    root = _run(tmp_path)
    page = (root / "report.html").read_text()
    assert validate_dir(root) == []  # the page is beside the artifacts, not one of their problems
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    # nothing fetched: no script, no stylesheet link, no external source of any kind
    assert not re.search(r"<script|<link|<iframe|src=\"?https?:|url\(https?:|@import", page)
    figures = _figures(page)
    titles = [re.search(r"<figcaption>(.*?)</figcaption>", f).group(1) for f in figures]
    assert any(t.startswith("Amortisation: matmul 64") for t in titles)
    assert any(t.startswith("Cold-start components") for t in titles) and any(t.startswith("Run distributions") for t in titles)
    for figure in figures:  # each drawing with the table of what it draws
        assert "<svg" in figure and "<table>" in figure and "<td>" in figure
    amortisation = next(f for f in figures if "Amortisation: matmul" in f)
    assert "numpy" in amortisation and "jax_jit_cpu" in amortisation and "break-even" in amortisation


def test_text_from_a_run_is_escaped_never_markup(tmp_path):
    def hostile(call):
        if call["case"].startswith("numpy_fused"):
            return fake_result(None, outcome="error", reason=HOSTILE)
        return None

    root = _run(tmp_path, FakeExecutor(decide=hostile))
    page = (root / "report.html").read_text()
    assert "<script>alert" not in page and "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in page


def test_report_html_flag_rewrites_the_page_and_a_terminal_gets_bars(tmp_path, capsys, monkeypatch):
    root = _run(tmp_path)
    (root / "report.html").unlink()
    assert cli.main(["report", str(root), "--html"]) == 0
    assert (root / "report.html").is_file() and "wrote" in capsys.readouterr().err
    console = Console(file=io.StringIO(), force_terminal=True, width=150, color_system=None)
    terminal.print_report(console, load_finished(root))
    text = console.file.getvalue()
    assert "components (bar:" in text and "█" in text and "numpy_matmul_64_f32" in text
    bars = {line.split("│")[1].strip(): line.count("█") for line in text.splitlines() if "_64_f32" in line and "│" in line}
    assert max(bars.values()) == 32  # the slowest start fills the bar; the others are to scale


def test_a_bar_is_its_components_to_scale():
    def median(value):
        return {"n": 1, "min": value, "max": value, "median": value, "median_ci": {"low": value, "high": value, "level": 0.5},
                "p95": value, "mean": value, "std": 0.0, "mad": 0.0}  # fmt: skip

    medians = {"interpreter_s": 0.1, "import_s": 0.5, "setup_s": 0.001, "first_call_s": 0.4}
    summary = msgspec.convert({**dict.fromkeys(COLD_METRICS), **{k: median(v) for k, v in medians.items()}}, ColdSummary)
    bar = terminal.component_bar(summary, 2.0, width=20)
    assert bar.plain == "█" * 10  # 1.0 s of 2.0 s: half the width, the 1 ms setup too small to show
    assert [span.style for span in bar.spans] == ["grey50", "blue", "yellow"]


def test_ab_writes_a_comparison_page_with_a_forest_plot(tmp_path):
    from test_ab import SlowerB, ab_spec

    outcome = ab.execute(ab_spec(rounds=4), tmp_path, executors=Executors(worker=SlowerB(factor=1.3, noise=0.01)))
    page = (outcome.root / "comparison.html").read_text()
    (figure,) = _figures(page)
    assert "B against A" in figure and "<svg" in figure
    rows = re.findall(r"<tr><td>(numpy_[a-z_]+_64_f32)</td>", figure.replace("<wbr>", ""))  # (where an id may wrap)
    assert sorted(set(rows)) == ["numpy_fused_chain_64_f32", "numpy_matmul_64_f32"]
    assert (outcome.root / "A" / "report.html").is_file() and (outcome.root / "B" / "report.html").is_file()


def test_a_page_that_cannot_be_drawn_is_a_warning_not_a_lost_run(tmp_path, monkeypatch, capsys):
    def broken(_result):
        raise ValueError("no figure today")

    monkeypatch.setattr(html, "render", broken)
    root = _run(tmp_path)
    assert "report.html could not be rendered (ValueError: no figure today)" in capsys.readouterr().err
    assert validate_dir(root) == [] and (root / "report.md").is_file() and not (root / "report.html").exists()


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def _chromium(page, tmp_path, name):
    """A headless Chromium's screenshot of `page` and its console messages."""
    shot = tmp_path / f"{name}.png"
    argv = [CHROMIUM, "--headless", "--disable-gpu", "--enable-logging=stderr", "--v=0", f"--screenshot={shot}",
            "--window-size=1280,1800", "--hide-scrollbars", f"file://{page}"]  # fmt: skip
    if os.geteuid() == 0:
        argv.insert(1, "--no-sandbox")  # Chromium refuses to sandbox as root
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, env={**os.environ, "HOME": str(tmp_path)})
    console = [line for line in done.stderr.splitlines() if ":CONSOLE" in line]
    return shot, console


def _ink(png) -> tuple[float, int]:
    """The share of pixels that are not the background, and how many colours the image has."""
    from PIL import Image

    image = Image.open(png).convert("RGB")
    pixels = list(getattr(image, "get_flattened_data", image.getdata)())
    background = max(set(pixels[:5000]), key=pixels[:5000].count)
    return sum(p != background for p in pixels) / len(pixels), len(set(pixels))


@pytest.mark.figures
@pytest.mark.integration  # a browser: seconds to start
@pytest.mark.skipif(CHROMIUM is None, reason="no chromium on PATH (`make test` installs Debian's package)")
def test_headless_chromium_renders_the_page_without_errors_and_not_blank(tmp_path):
    root = _run(tmp_path)
    shot, console = _chromium(root / "report.html", tmp_path, "report")
    assert shot.is_file() and console == [], console
    ink, colours = _ink(shot)
    assert ink > 0.05 and colours > 50, (ink, colours)  # text, tables and coloured figures
    # the checks can fail: a page with a script error, and an empty page
    (tmp_path / "broken.html").write_text("<!DOCTYPE html><html><body><script>undefinedFn()</script></body></html>")
    _shot, console = _chromium(tmp_path / "broken.html", tmp_path, "broken")
    assert any("undefinedFn" in line for line in console)
    assert _ink(_shot)[0] < 0.001


# Injected into a copy of the page (report.html itself has no script): what a reader at this window
# width would have to scroll sideways, the smallest text of the figures as drawn on screen (its
# font size times the scale its SVG is shown at: a figure shrunk to fit shrinks its text), text
# outside its figure (a legend cut off), and tick labels that overlap their neighbours.
_MEASURE = """<pre id=measured></pre><script>
addEventListener("load", () => {
  const out = {overflow: [], smallest: [], outside: [], overlap: [], texts: 0};
  const root = document.documentElement;
  if (root.scrollWidth > root.clientWidth) out.overflow.push(`page ${root.scrollWidth} > ${root.clientWidth}`);
  for (const el of document.querySelectorAll("body, section, figure, figure > div, ul, p")) {
    if (el.scrollWidth > el.clientWidth + 1)
      out.overflow.push(`${el.tagName}.${el.className} ${el.scrollWidth} > ${el.clientWidth}`);
  }
  for (const table of document.querySelectorAll("table")) {
    const inside = table.parentElement.getBoundingClientRect(), box = table.getBoundingClientRect();
    if (box.right > inside.right + 1) out.overflow.push(`table ${box.right} > ${inside.right}`);
  }
  for (const svg of document.querySelectorAll("figure.plot svg")) {
    const frame = svg.getBoundingClientRect();
    for (const text of svg.querySelectorAll("text")) {
      if (!text.textContent.trim()) continue;
      const m = text.getScreenCTM();
      const px = parseFloat(getComputedStyle(text).fontSize) * Math.sqrt(Math.abs(m.a * m.d - m.b * m.c));
      out.texts += 1;
      out.smallest.push([px, text.textContent]);
      const r = text.getBoundingClientRect();
      if (r.left < frame.left - 1 || r.right > frame.right + 1 || r.top < frame.top - 1 || r.bottom > frame.bottom + 1)
        out.outside.push(text.textContent);
    }
    for (const axis of svg.querySelectorAll("g[id*='matplotlib.axis_']")) {
      const boxes = [...axis.querySelectorAll("g[id*='tick_'] text")].map(t => [t.getBoundingClientRect(), t.textContent]);
      boxes.forEach(([a, at], i) => boxes.slice(i + 1).forEach(([b, bt]) => {
        if (a.left < b.right - 1 && b.left < a.right - 1 && a.top < b.bottom - 1 && b.top < a.bottom - 1)
          out.overlap.push([at, bt]);
      }));
    }
  }
  out.smallest = out.smallest.sort((a, b) => a[0] - b[0]).slice(0, 3);
  document.getElementById("measured").textContent = JSON.stringify(out);
});
</script>"""


@pytest.mark.figures
@pytest.mark.integration  # a browser: seconds to start
@pytest.mark.skipif(CHROMIUM is None, reason="no chromium on PATH (`make test` installs Debian's package)")
def test_the_page_reads_at_a_laptop_and_a_narrow_window_width(tmp_path, monkeypatch):
    """Issue 25, item 12: at 1400 px the figures' text was ~7 px (each figure shrunk into a
    column), a legend was cut off, tick labels overlapped and tables scrolled sideways."""
    import json

    import dataclasses

    from test_explain_outputs import CASE, _icicle_case
    from test_report_rendering import LONG_TOKEN, rich_result

    result = rich_result(tmp_path, monkeypatch)
    # with --explain's picture of a cold start (issue 38): its labels fit their boxes, its text reads at 800 px
    page = html.render(dataclasses.replace(result, cases=[*(c for c in result.cases if c.case != CASE), _icicle_case()]))
    assert "Where the cold start of" in page
    assert LONG_TOKEN in page.replace("<wbr>", "")  # a cell that cannot wrap at a space
    probe = tmp_path / "probe.html"
    probe.write_text(page.replace("</body>", _MEASURE + "</body>"))
    for width in (1400, 800):
        argv = [CHROMIUM, "--headless", "--disable-gpu", "--hide-scrollbars", f"--window-size={width},900",
                "--virtual-time-budget=5000", "--dump-dom", f"file://{probe}"]  # fmt: skip
        if os.geteuid() == 0:
            argv.insert(1, "--no-sandbox")
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60, env={**os.environ, "HOME": str(tmp_path)})
        found = re.search(r"<pre id=\"measured\">(.*?)</pre>", done.stdout, flags=re.S)
        assert found and found.group(1), (width, done.stderr[-2000:])
        measured = json.loads(html_text.unescape(found.group(1)))
        assert measured["texts"] > 100, measured  # the figures were drawn and measured
        assert measured["overflow"] == [], (width, measured["overflow"])
        assert measured["smallest"][0][0] >= 9, (width, measured["smallest"])
        assert measured["outside"] == [], (width, measured["outside"])
        assert measured["overlap"] == [], (width, measured["overlap"])


def test_matplotlib_is_not_loaded_by_the_markdown_report():
    code = "import sys, ttfr.report.markdown, ttfr.report.html; print('matplotlib' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert done.stdout.strip() == "False"  # report/plots.py loads it when a page is made


@pytest.mark.figures
def test_loop_runs_get_timelines_and_cost_curves(tmp_path):
    from test_loops import LoopExecutor
    from test_loops import _run as loop_run

    outcome = loop_run(tmp_path, LoopExecutor(), backends="jax_jit_cpu")
    page = (outcome.result_dir.root / "report.html").read_text()
    (cold, *_others) = [f for f in _figures(page) if "Loop sweep_mlp: jax_jit_cpu float32 (cold cache)" in f]
    cells = (re.findall(r"<td>(.*?)</td>", row) for row in re.findall(r"<tr>(.*?)</tr>", cold))
    rows = {row[0]: row for row in cells if row}
    assert set(rows) == {"naive", "bucketed", "vmapped", "dynamic", "aot"}
    assert rows["aot"][6] == "3" and rows["naive"][3] == "4"  # overtakes naive at k = 3; naive compiled 4 times
    assert "per iteration (▲: compiled)" in cold and "total cost" in cold
    assert rows["vmapped"][7].startswith("4: ")  # batched: one call for all 4 configurations, drawn at k = 4
    assert rows["aot"][8].startswith("0: ")  # its ahead-of-time phase at iteration 0, its iterations from 1


@pytest.mark.figures
def test_histfactory_figures_mark_the_published_points_as_measured_elsewhere():
    from ttfr.report import plots

    def row(engine, parameters, call):
        figures = {"workload": "hf_nll_grad", "engine": engine, "parameters": parameters, "warm_call_s": call,
                   "warm_call_ci_low_s": call * 0.9, "warm_call_ci_high_s": call * 1.1, "ttfr_cold_cache_s": 2.0}  # fmt: skip
        unread = {**dict.fromkeys(ScalingRow.__struct_fields__), "dataset": "hf_fixture", "status": "ok"}
        return msgspec.convert({**unread, **figures}, ScalingRow)

    (plot,) = plots.scaling([row("jax_jit_cpu", 8, 1e-4), row("jax_jit_cpu", 184, 2e-3), row("nextstat", 8, 5e-5)])
    assert "NextStat CUDA (measured elsewhere)" in plot.svg
    elsewhere = [r for r in plot.rows if r[-1] == "measured elsewhere"]
    assert [r[1] for r in elsewhere] == ["8", "184"] and len(plot.rows) == 5
    check = {"reference": "pyhf", "max_normalised_error": 0.0, "tolerance": 1e-6, "passed": True}
    case = _case({"case": "jax_jit_cpu_hf_train_loop_8_f64", "dtype": "float64",
                  "correctness": {**check, "train_loop": {"steps": 3, "kde": {"losses": [-1.0, -1.5, -1.8]}}}})  # fmt: skip
    losses = plots.training_losses([case, _case({"case": "numpy_matmul_64_f32", "correctness": None})])
    assert losses.rows == [["jax_jit_cpu_hf_train_loop_8_f64", "3", "-1", "-1.8", "-1, -1.5, -1.8"]] and "<svg" in losses.svg


@pytest.mark.figures
def test_the_distribution_rings_a_flagged_first_run_and_crosses_contended_ones():
    from ttfr.report import plots

    def run(index, value, contended=False):
        contention = {"contended": contended, "waited": None, "others_cores": None, "runnable_cores": None}
        return _run_figures(index, "ok", {"ttfr_s": value}, contention)

    runs = [run(0, 5.0), run(1, 1.0), run(2, 1.1, contended=True), run(3, 0.9), _run_figures(4, "error", {})]
    summary = {"median": 1.0, "median_ci": {"low": 0.9, "high": 1.1, "level": 0.9}, "n": 3, "min": 0.9, "max": 5.0,
               "p95": 5.0, "mean": 2.0, "std": 2.0, "mad": 0.1}  # fmt: skip
    verification = {"verdict": "not_applicable", "flags": [], "hits_total": None, "misses_total": None, "runs_verified": 0,
                    "runs": 4}  # fmt: skip
    outlier = {"flag": "first_run_outlier", "metric": "ttfr_s", "value": 5.0, "robust_z": 9.0}
    case = {"case": "numpy_matmul_64_f32", "status": "ok",
            "policies": {"cold-process/cold-cache": {"runs": runs, "summary": {**dict.fromkeys(COLD_METRICS), "ttfr_s": summary},
                                                     "stages_summary": {}, "cache_verification": verification,
                                                     "flags": [outlier]}}}  # fmt: skip
    plot = plots.distributions([_case(case)], "cold-process/cold-cache")
    (row,) = plot.rows
    assert row[2:5] == ["3", "1", "1"]  # used, set aside (contended), failed
    assert row[5] == "5 s, 1 s, 1.1 s*, 900 ms"
    assert "first-run outlier" in plot.svg and "set aside (contended)" in plot.svg
    # every run of a policy contended: none used, all drawn set aside; a failed case is left out
    for one in runs[:4]:
        one["contention"]["contended"] = True
    failed = _case({**case, "case": "x_1_f64", "status": "failed"})
    (row,) = plots.distributions([_case(case), failed], "cold-process/cold-cache").rows
    assert row[2:4] == ["0", "4"]
    assert plots.distributions([_case({**case, "status": "failed"})], "cold-process/cold-cache") is None


def test_a_run_whose_every_case_failed_still_gets_its_page(tmp_path, capsys):
    def fail(_call):
        return fake_result(None, outcome="error", reason="boom")

    root = _run(tmp_path, FakeExecutor(decide=fail), backends="numpy")
    page = (root / "report.html").read_text()
    assert "could not be rendered" not in capsys.readouterr().err
    assert "boom" in page and "status-failed" in page


def test_the_terminal_report_has_a_row_for_every_case(tmp_path):
    spec = build_spec(RunRequest(backends="numpy", workloads="matmul", sizes="64", policies="warm", warm_procs=2, seed=2))
    result_dir = suite_run.start(spec, tmp_path / "out", ["ttfr", "run"])
    suite_run.execute(result_dir, spec, Executors(worker=FakeExecutor()))
    console = Console(file=io.StringIO(), force_terminal=True, width=120, color_system=None)
    terminal.print_report(console, load_finished(result_dir.root))
    text = console.file.getvalue()
    (line,) = [line for line in text.splitlines() if "numpy_matmul_64_f32" in line]
    assert "1.02 ms" in line and "no cold-start figures" in line  # its warm call, though it has no cold start


def _tick_labels(low: float, high: float, fmt=None) -> list[str]:
    """The labels matplotlib draws on a log axis spanning [low, high] after plots._log_axis."""
    from matplotlib.figure import Figure

    from ttfr.report import plots

    fig = Figure()
    ax = fig.subplots()
    ax.plot([low, high], [0, 1])
    ax.set_xscale("log")
    ax.set_xlim(low, high)
    plots._log_axis(ax.xaxis, *([fmt] if fmt else []))
    fig.canvas.draw()
    ticks = [*zip(ax.xaxis.get_majorticklocs(), ax.get_xticklabels()),
             *zip(ax.xaxis.get_minorticklocs(), ax.get_xticklabels(minor=True))]  # fmt: skip
    return [label.get_text() for at, label in ticks if low <= at <= high and label.get_text()]


@pytest.mark.figures
def test_log_axes_are_labelled_in_plain_units_without_mathtext_or_crowding(monkeypatch):
    import matplotlib.mathtext

    def no_mathtext(*_args, **_kwargs):
        raise AssertionError("a tick label went through mathtext")

    monkeypatch.setattr(matplotlib.mathtext.MathTextParser, "parse", no_mathtext)
    labels = _tick_labels(0.07, 0.6)  # one decade: 1, 2 and 5 steps
    assert {"100 ms", "200 ms", "500 ms"} <= set(labels) and "300 ms" not in labels
    narrow = _tick_labels(0.368, 0.381)  # no decade mark inside: matplotlib's linear fallback, every tick labelled
    assert len(narrow) >= 2 and all(label.endswith(" ms") for label in narrow)
    wide = _tick_labels(1e-6, 10.0)  # seven decades: powers of ten only, never 2 or 5
    assert "1 µs" in wide and "1 s" in wide and not any(label.startswith(("2 ", "5 ")) for label in wide)
    from ttfr.report import plots

    assert "1,000" in _tick_labels(1, 1e5, plots._count)
