"""report.md and report.html say the same things the same way (issue 25, items 10-12): a case's
first-call stages from one model (a nested stage is within the others, never another summand),
the same limitations, every flag as a sentence with rounded numbers; and the figures' tick
labels never overlap."""

from __future__ import annotations

import dataclasses
import html as html_text
import re

import pytest
from conftest import make_case, make_run
from support.fixture_suite import run_fixture_suite

from ttfr.artifacts.reader import load_finished
from ttfr.model.flags import AnyFlag
from ttfr.model.run_figures import COLD_METRICS
from ttfr.model.policies import COLD_CACHE
from ttfr.report import html, markdown

TORCH_CASE = "torch_compile_cpu_mlp_train_step_64_f32"
TORCH_LIMITATION = ("torch.compile stage split (dynamo / AOTAutograd / inductor) is derived from "
                    "torch._dynamo.utils.compile_times, an internal API; the raw table is kept in journal.jsonl.")  # fmt: skip
# A torch.compile first call of 11.4 s whose lazily compiled backward (1.14 s) is inside its
# AOTAutograd and inductor time: listed as one more stage, the stages summed to 12.5 s.
STAGES = {"wrap_s": 0.002, "dynamo_s": 1.6, "aot_autograd_s": 2.2, "inductor_s": 7.1, "backward_compile_s": 1.14,
          "first_execute_s": 0.5}  # fmt: skip
SPLIT = "wrap 2 ms, dynamo 1.6 s, AOTAutograd 2.2 s, inductor 7.1 s, first execute 500 ms (within these: backward compile 1.14 s)"
LONG_TOKEN = "/opt/" + "very_long_directory_name/" * 12 + "program"  # no space to wrap at


def _summary(value: float) -> dict:
    return {"n": 5, "min": value * 0.9, "max": value * 1.1, "median": value,
            "median_ci": {"low": value * 0.95, "high": value * 1.05, "level": 0.94}, "p95": value * 1.1, "mean": value,
            "std": value * 0.05, "mad": value * 0.03}  # fmt: skip


def _flags() -> list[dict]:
    """One flag of every kind, with the unrounded numbers and lists analysis writes."""

    def cold(index, fraction, others=0.6234567, runnable=None):
        return {
            "index": index,
            "contention": {
                "contended": True,
                "waited": runnable is None,
                "others_cores": others,
                "runnable_cores": runnable,
                "wait_fraction": fraction,
            },
        }

    def warm(index, contended, median, others):
        return {
            "index": index,
            "contention": {
                "contended": True,
                "waited": True,
                "others_cores": others,
                "runnable_cores": None,
                "samples_contended": contended,
                "samples_with_evidence": 5,
                "median_wait_fraction": median,
            },
        }

    flags = [
        {"flag": "first_run_outlier", "policy": COLD_CACHE, "metric": "ttfr_s", "value": 3.3312345, "robust_z": 2020.8123},
        {"flag": "contended", "policy": COLD_CACHE, "runs": [0, 2, 4],
         "evidence": [cold(0, 1.4), cold(2, 0.498765), cold(4, None, None, runnable=2)],
         "set_aside": {"contended": 3, "clean": 5, "ok": 8}},
        {"flag": "contended", "policy": "cold-process/warm-cache", "runs": [1], "evidence": [cold(1, 0.498765)]},
        {"flag": "contended", "policy": "warm-process", "processes": [0, 1],
         "evidence": [warm(0, 4, 1.2341234, 1.0234567), warm(1, 5, 0.987654, None)]},
        {"flag": "could_not_measure_cleanly", "policy": "warm-process", "contended": 2, "ok": 2, "unit": "process"},
        {"flag": "compile_count_mismatch", "policy": COLD_CACHE, "runs": [0, 1, 2], "expected": None, "observed": [3, 4]},
        {"flag": "unsynchronised", "policy": "warm-process", "processes": [0, 1]},
        {"flag": "warmup_unstable", "policy": "warm-process", "processes": [2]},
        {"flag": "process_disagreement", "policy": "warm-process", "disagree": True, "p_value": 0.000123456789,
         "max_over_min_median": 1.9438873043831033, "process_medians_s": [0.0010123456, 0.0019678901]},
        {"flag": "tick_quantised", "policy": "warm-process", "processes": [0, 3], "tick_s": 0.004000000001},
        {"flag": "contended_kept", "policy": "cold-process/warm-cache", "runs": [1]},
        {"flag": "conversion_leak", "calls": 10000, "growth_per_call_bytes": 1024.123456},
        {"flag": "conversion_wrong_values", "layouts": ["transposed"]},
        {"flag": "copy_evidence_disagrees", "layouts": ["misaligned", "readonly"]},
        {"flag": "shared_cache_not_whole", "groups": ["cold-shared x4 #0"]},
        {"flag": "warm_shared_compiled", "groups": ["warm-shared x8 #1"]},
        {"flag": "explanation_disagrees", "policy": COLD_CACHE, "phase": "import", "traced_s": 0.51234, "measured_s": 0.40123},
    ]  # fmt: skip
    kinds = {t.__struct_config__.tag for t in AnyFlag.__args__}
    return flags + [{"flag": kind, "policy": COLD_CACHE} for kind in sorted(kinds - {f["flag"] for f in flags})]


def torch_compile_case(**fields):
    """A torch.compile case (cold cache): its first call split into stages, the backward compile
    among them; the backend's declared limitation; and a flag of every kind."""
    medians = {"interpreter_s": 0.02, "import_s": 1.9, "setup_s": 0.05, "first_call_s": 11.4, "ttfr_s": 13.4}
    summary = {**dict.fromkeys(COLD_METRICS), **{metric: _summary(value) for metric, value in medians.items()}}
    policy = {"runs": [make_run(i, ttfr_s=13.4, stages=STAGES) for i in range(5)], "summary": summary,
              "stages_summary": {name: _summary(value) for name, value in STAGES.items()}, "flags": [],
              "cache_verification": {"verdict": "verified", "flags": [], "hits_total": 0, "misses_total": 5,
                                     "runs_verified": 5, "runs": 5}}  # fmt: skip
    return make_case(TORCH_CASE, policies={COLD_CACHE: policy}, limitations=[TORCH_LIMITATION], flags=_flags(),
                     **fields)  # fmt: skip


def rich_result(tmp_path, monkeypatch):
    """The fixture suite's result, with the torch.compile case and a failed case whose reason
    is one long unbreakable token added to its cases (both renderers read only `cases`)."""
    verified = load_finished(run_fixture_suite(tmp_path, monkeypatch).result_dir.root)
    failed = make_case("numpy_matmul_4096_f64", status="failed", reason=f"could not start {LONG_TOKEN}")
    return dataclasses.replace(verified, cases=[*verified.cases, torch_compile_case(), failed])


@pytest.fixture
def rendered(tmp_path, monkeypatch):
    result = rich_result(tmp_path, monkeypatch)
    return markdown.render(result), html.render(result)


def _text(cell: str) -> str:
    return html_text.unescape(re.sub(r"<[^>]+>", "", cell))


def _markdown_section(text: str, title: str) -> str:
    return text.split(f"\n## {title}", 1)[1].split("\n## ", 1)[0]


def _html_section(page: str, title: str) -> str:
    return page.split(f"<h2>{title}</h2>", 1)[1].split("</section>", 1)[0]


def _html_figure(page: str, caption: str) -> str:
    return page.split(f"<figcaption>{caption}</figcaption>", 1)[1].split("</figure>", 1)[0]


def test_both_reports_split_the_first_call_from_one_stage_model(rendered):
    text, page = rendered
    # report.md: the Cold start components table, its last column
    section = _markdown_section(text, f"Cold start components ({COLD_CACHE})")
    header = next(line for line in section.splitlines() if line.startswith("| case"))
    (row,) = [line for line in section.splitlines() if line.startswith(f"| `{TORCH_CASE}`")]
    md = dict(zip([c.strip() for c in header.strip("|").split("|")], [c.strip() for c in row.strip("|").split("|")]))
    # report.html: the components figure's table
    figure = _html_figure(page, "Cold-start components (cold cache)")
    names = [_text(c) for c in re.findall(r"<th[^>]*>(.*?)</th>", figure)]
    (cells,) = [[_text(c) for c in re.findall(r"<td[^>]*>(.*?)</td>", r)] for r in re.findall(r"<tr>(.*?)</tr>", figure)
                if _text(r).startswith(TORCH_CASE)]  # fmt: skip
    shown = dict(zip(names, cells))
    assert md["first call split"] == shown["first call split"] == SPLIT
    # the nested stage is said to be within the others, after them, never one of the summands
    own = SPLIT.split(" (within these:")[0]
    assert "backward compile" not in own
    assert "backward compile" not in shown["components (medians)"] and "first call 11.4 s" in shown["components (medians)"]


def test_both_reports_list_the_same_limitations(rendered):
    text, page = rendered
    md = [line[2:] for line in _markdown_section(text, "Limitations").splitlines() if line.startswith("- ")]
    shown = [_text(item) for item in re.findall(r"<li>(.*?)</li>", _html_section(page, "Limitations"))]
    assert TORCH_LIMITATION in md and md == shown


def _significant_digits(number: str) -> int:
    digits = number.replace(",", "")
    if "." not in digits:
        digits = digits.rstrip("0") or "0"
    return len(digits.replace(".", "").lstrip("0"))


def test_every_flag_is_a_sentence_with_rounded_numbers_the_same_in_both_reports(rendered):
    text, page = rendered
    md = [line for line in _markdown_section(text, "Flags").splitlines() if line.startswith(f"- `{TORCH_CASE}`")]
    shown = [_text(item) for item in re.findall(r"<li>(.*?)</li>", _html_section(page, "Flags"))
             if TORCH_CASE in item]  # fmt: skip
    assert len(md) == len(shown) == len(_flags())
    sentences = []
    for line, item in zip(md, shown):
        sentence = line.split("**: ", 1)[1]
        assert item.split(": ", 2)[2] == sentence  # one function's sentence, in both
        sentences.append(sentence)
        assert not re.search(r"[\[\]{}]", sentence), sentence  # no list or dict repr
        assert not re.search(r"\b[a-z]+_[a-z_]+\b", sentence), sentence  # no field name (max_over_min_median, ...)
        for number in re.findall(r"\d[\d,]*(?:\.\d+)?", sentence):
            assert _significant_digits(number) <= 3 or "." not in number and len(number) <= 4, (number, sentence)
    by_kind = dict(zip([line.split("**")[1] for line in md], sentences))  # (the last of a kind)
    assert "1.94x" in by_kind["process_disagreement"] and "2,020 robust σ" in sentences[0]
    assert "runs 0, 1 and 2 compiled 3 or 4 times" in by_kind["compile_count_mismatch"]
    assert "ticks" in by_kind["tick_quantised"] and " 4 ms " in by_kind["tick_quantised"]
    # a wait above 100% of the time is explained where it appears, and only there
    over = [s for s in sentences if "several threads can wait" in s.lower()]
    assert len(over) == 2 and "140% of the process time" in over[0] and "median 123%" in over[1]
    assert "49.9%" in sentences[2] and "several threads" not in sentences[2].lower()


@pytest.mark.figures
def test_log_axis_labels_never_overlap_and_say_their_tick_exactly():
    """Narrow ranges (a warm cache's runs within a few %) fall back on matplotlib's linear ticks,
    up to ten of them: each was labelled, overlapping, some rounded to their neighbour's text."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from ttfr.report import plots

    plots._figures()  # the figures' fonts
    for low, high in [(0.332, 0.338), (0.368, 0.381), (1.13, 1.45), (0.00101, 0.00104), (0.6, 1.5), (1e-6, 10.0)]:
        fig, ax = plots._Figures.subplots(figsize=(plots._WIDTH, 2.0))
        ax.set_yticks([0], ["torch_eager_cpu_fused_chain_64_f32"])  # the distributions' wide case labels
        ax.plot([low, high], [0, 0])
        ax.set_xscale("log")
        ax.set_xlim(low, high)
        plots._log_axis(ax.xaxis)
        canvas = FigureCanvasAgg(fig)
        canvas.draw()
        renderer = canvas.get_renderer()
        shown = []
        for minor in (False, True):
            for at, label in zip(ax.xaxis.get_minorticklocs() if minor else ax.xaxis.get_majorticklocs(),
                                 ax.get_xticklabels(minor=minor)):  # fmt: skip
                if label.get_text() and low <= at <= high:
                    shown.append((label.get_window_extent(renderer), label.get_text(), at))
        shown.sort(key=lambda s: s[0].x0)
        assert len(shown) >= 2, (low, high, shown)
        for (left, *_), (right, *_) in zip(shown, shown[1:]):
            assert left.x1 < right.x0, (low, high, [s[1] for s in shown])
        texts = [s[1] for s in shown]
        assert len(set(texts)) == len(texts), texts  # never two ticks read the same
        for _box, text, at in shown:
            value, unit = text.split()
            assert float(value) * {"s": 1, "ms": 1e-3, "µs": 1e-6}[unit] == pytest.approx(at, rel=1e-9), (text, at)
