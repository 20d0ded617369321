"""--explain for torch.compile (issue 38): the diagnostic process's compiled frames, graph breaks at the user's
file:line and compiler runs, read from dynamo's metrics, its graph-break log and Inductor's build hook; the
first call split into parts that add up to it, checked against the measured compile stages; advice from a
graph break or a recompile; and a real graph break named where it is."""

from __future__ import annotations

import os
import sys
import textwrap

import msgspec
import pytest
from conftest import fake_record, fake_result, have
from support.fakes import explain_entry

from ttfr.analyse import explain
from ttfr.child import torch_explain
from ttfr.child.job import Job
from ttfr.measure import spawn
from ttfr.model.explanation import ImportTrace
from ttfr.model.policies import COLD_CACHE
from ttfr.report import explain_md, flag_text

# dynamo's graph-break log message as torch 2.13 writes it (its reason shortened)
BREAK_MESSAGE = (
    "Graph break in user code at /home/me/model.py:41\n"
    "Graph Break Reason: Encountered graph break when attempting to trace CALL: a function call, e.g. f(x, y):\n\n"
    "Failed to trace builtin operator\n"
    "  Explanation: Dynamo does not know how to trace builtin operator `print` with argument types ['str']\n"
    "  Hint: Avoid calling builtin `print`.\n"
    "User code traceback:\n  File \"/home/me/model.py\", line 41, in f\n    print('x')\n"
)


def test_a_graph_break_message_gives_the_users_file_line_and_dynamos_reason_verbatim():
    found = torch_explain._graph_break(BREAK_MESSAGE)
    assert (found["file"], found["line"]) == ("/home/me/model.py", 41)
    assert found["reason"].startswith("Encountered graph break") and "Hint: Avoid calling builtin `print`." in found["reason"]
    assert "User code traceback" not in found["reason"]  # the traceback is not the reason
    repeated = BREAK_MESSAGE.replace("Graph break in", "Graph break (user stack suppressed due to duplicate graph break) in")
    assert torch_explain._graph_break(repeated)["line"] == 41
    assert torch_explain._graph_break("Recompiling function f in /x.py:3") is None


def test_the_build_hook_is_set_as_its_module_loads_and_each_run_is_told_apart_by_what_asked_for_it(tmp_path, monkeypatch):
    """No module is imported earlier than the run imports it: the hook waits for the import, then
    patches the module, and each compiler run is an ISA probe, the header or a kernel by its caller."""
    (tmp_path / "fake_builder.py").write_text("def _run_compile_cmd(cmd_line, cwd):\n    return cmd_line\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    explainer = torch_explain.CompileExplainer()
    finder = torch_explain._PatchOnLoad({"fake_builder": explainer._hook_builder})
    monkeypatch.setattr(sys, "meta_path", [finder, *sys.meta_path])
    import fake_builder

    def check_build():  # as VecISA.check_build asks
        return fake_builder._run_compile_cmd("g++ probe", "/tmp")

    def _precompile_header():
        return fake_builder._run_compile_cmd("g++ header", "/tmp")

    assert (check_build(), _precompile_header(), fake_builder._run_compile_cmd("g++ kernel", "/tmp")) == (
        "g++ probe", "g++ header", "g++ kernel")  # fmt: skip
    assert [r["kind"] for r in explainer.runs] == ["isa_probe", "header", "kernel"]
    assert "_run_compile_cmd" in fake_builder.__loader__.get_source("fake_builder")  # the module's own loader answers
    sys.modules.pop("fake_builder")


def _frame(compile_id, function, line, compile_s, inductor_s, span, forward=True, recompile_reason=None, fx=(0, 1)):
    return {"compile_id": compile_id, "function": function, "file": "/home/me/model.py" if function else None,
            "line": line, "forward": forward, "compile_s": compile_s, "inductor_s": inductor_s, "graph_ops": 3,
            "guards": 5, "recompile_reason": recompile_reason, "break_reasons": [], "fx_cache_hits": fx[0],
            "fx_cache_misses": fx[1], "autograd_cache_hits": 0, "autograd_cache_misses": 1, "start_us": span[0],
            "end_us": span[1]}  # fmt: skip


def _run(kind, s, start_us):
    return {"kind": kind, "s": s, "start_us": start_us, "end_us": start_us + int(s * 1e6)}


# f compiles for 120 ms (Inductor 90 of them), its rest after the break 30 ms (20), its backward graph 12 ms (10); the ISA
# probe and the header are built inside f's compile, a kernel inside the rest's, and an ISA probe is loaded after.
EVIDENCE = {
    "frames": [_frame("0/0", "f", 38, 0.12, 0.09, (1_000_000, 1_120_000)),
               _frame("1/0", "torch_dynamo_resume_in_f_at_41", 41, 0.03, 0.02, (2_000_000, 2_030_000)),
               _frame("0/0", None, None, 0.012, 0.01, (3_000_000, 3_012_000), forward=False)],
    "graph_breaks": [{"file": "/home/me/model.py", "line": 41, "reason": torch_explain._graph_break(BREAK_MESSAGE)["reason"]}],
    "compiler_runs": [_run("isa_probe", 0.04, 1_010_000), _run("header", 0.005, 1_060_000),
                      _run("kernel", 0.015, 2_000_500), _run("isa_load_probe", 0.005, 5_000_000)],
    "kernels": 2,
    "build_guards_s": 0.004,
}  # fmt: skip


def _entry(evidence, stages=None):
    record = fake_record(stages=stages or {"wrap_s": 0.02})  # its first call: 200 ms
    record["torch_compile"] = evidence
    return explain_entry(record, ImportTrace(imports=[]), case="torch_compile_cpu_mlp_train_step_8_f32")


def _policy(compile_s):
    from conftest import make_run

    from ttfr.analyse.case_result import cold_summaries
    from ttfr.model.base import decode
    from ttfr.model.policy_figures import CacheVerification, ColdPolicy
    from ttfr.model.run_figures import RunFigures

    # each run's whole compile, split as the torch backend splits it
    runs = [decode(make_run(i, stages={"dynamo_s": v * 0.2, "aot_autograd_s": v * 0.1, "inductor_s": v * 0.7}), RunFigures)
            for i, v in enumerate(compile_s)]  # fmt: skip
    summary, stages, _loop = cold_summaries(runs)
    verification = CacheVerification(verdict="verified", flags=[], hits_total=0, misses_total=1, runs_verified=len(runs),
                                     runs=len(runs))  # fmt: skip
    return ColdPolicy(runs=runs, summary=summary, stages_summary=stages, cache_verification=verification, flags=[])


def test_the_first_call_is_split_into_parts_that_add_up_to_it_with_the_compiler_runs_where_they_ran():
    explanation, flags = explain.explain(_entry(EVIDENCE), _policy([0.15, 0.16, 0.17]))
    first = explanation.first_call
    parts = {p.part: p for p in first.parts}
    assert list(parts) == ["torch.compile(fn)", "dynamo and AOTAutograd", "inductor", "compiler: kernel",
                           "compiler: isa_probe", "compiler: header", "compiler: isa_load_probe, after the compile",
                           "unattributed"]  # fmt: skip
    assert sum(p.s for p in first.parts) == pytest.approx(first.traced_s) and first.traced_s == pytest.approx(0.2)
    assert sum(p.share for p in first.parts) == pytest.approx(1.0)  # each part's share, decided here once
    # the frames: 162 ms, of which Inductor 120, of which 60 ms of compiler runs inside their spans
    assert parts["dynamo and AOTAutograd"].s == pytest.approx(0.042) and parts["inductor"].s == pytest.approx(0.06)
    assert parts["compiler: isa_probe"].runs == 1 and parts["unattributed"].s == pytest.approx(0.013)
    assert first.attributed_fraction == pytest.approx(0.935) and first.kernels == 2
    assert (first.guards, first.build_guards_s) == (15, 0.004)  # three graphs of five guards, built inside dynamo's part
    assert "; dynamo built 15 guards in 4 ms. Its " in explain_md.first_call_intro(explanation)
    assert (first.stage, first.stage_traced_s, first.stage_measured_s) == (explain.TORCH_STAGE, pytest.approx(0.162),
                                                                          pytest.approx(0.16))  # fmt: skip
    assert flags == []  # within the measured runs' range
    frames = explanation.frames
    assert [(f.file, f.line) for f in frames] == [("/home/me/model.py", 38), ("/home/me/model.py", 41), (None, None)]
    assert frames[2].compile_s == pytest.approx(0.012) and not frames[2].forward
    assert {f.fx_graph_cache for f in frames} == {"miss"}
    (brk,) = explanation.graph_breaks
    assert (brk.file, brk.line) == ("/home/me/model.py", 41) and brk.summary.startswith("Dynamo does not know how to")


def test_on_a_cache_hit_the_runs_inside_a_frame_come_out_of_dynamos_share_and_overlapping_kernels_count_once():
    """A hit loads the graph without Inductor's timer (its inductor_s is null), and its ISA probes are loaded inside
    the frame: they are part of the frame's compile, not added to it. Two kernels built at once cover their span."""
    hit = _frame("0/0", "f", 38, 0.10, None, (1_000_000, 1_100_000), fx=(1, 0))
    runs = [_run("isa_load_probe", 0.03, 1_010_000), _run("kernel", 0.02, 1_050_000), _run("kernel", 0.02, 1_060_000)]
    explanation, _ = explain.explain(_entry({"frames": [hit], "graph_breaks": [], "compiler_runs": runs, "kernels": 1}),
                                     _policy([0.1]))  # fmt: skip
    parts = {p.part: p.s for p in explanation.first_call.parts}
    assert parts["compiler: kernel"] == pytest.approx(0.03)  # 1.050-1.070 and 1.060-1.080: 30 ms of wall time
    assert parts["dynamo and AOTAutograd"] == pytest.approx(0.04) and parts["inductor"] == 0.0
    assert sum(parts.values()) == pytest.approx(explanation.first_call.traced_s)
    assert explanation.frames[0].fx_graph_cache == "hit"


def test_a_compile_outside_the_measured_range_is_flagged():
    _, flags = explain.explain(_entry(EVIDENCE), _policy([0.5, 0.55, 0.6]))
    (flag,) = flags
    assert (flag.phase, flag.traced_s, flag.measured_s) == (explain.TORCH_STAGE, pytest.approx(0.162), pytest.approx(0.55))
    assert flag_text.sentence(flag).startswith(f"--explain's diagnostic process's compile by the runtime's counters "
                                               f"({explain.TORCH_STAGE}) took 162 ms, outside")  # fmt: skip


def test_a_graph_break_and_a_recompile_are_advice_sized_by_the_graphs_they_added():
    recompiled = _frame("0/1", "f", 38, 0.07, 0.05, (4_000_000, 4_070_000), recompile_reason="tensor 'x' size mismatch")
    evidence = {**EVIDENCE, "frames": [*EVIDENCE["frames"], recompiled]}
    explanation, _ = explain.explain(_entry(evidence), _policy([0.15, 0.16]))
    policy = msgspec.structs.replace(_policy([0.15, 0.16]), explanation=explanation)
    found = explain.advice({COLD_CACHE: policy})
    by_kind = {a.kind: a for a in found}
    assert by_kind["recompile"].saving_s == pytest.approx(0.07) and "size mismatch" in by_kind["recompile"].subject
    assert by_kind["graph_break"].saving_s == pytest.approx(0.03)  # the graph resumed after line 41
    assert by_kind["graph_break"].location == "/home/me/model.py:41"
    assert by_kind["graph_break"].subject.startswith("Dynamo does not know")
    sentence = explain_md.advice_item(by_kind["graph_break"])
    assert "`/home/me/model.py:41`" in sentence and "30 ms" in sentence and "at most" in sentence


def test_a_break_logged_again_is_advice_once_and_a_recompiled_resume_is_not_charged_to_the_break():
    again = {**EVIDENCE["graph_breaks"][0]}
    recompiled_rest = _frame("1/1", "torch_dynamo_resume_in_f_at_41", 41, 0.05, 0.04, (6_000_000, 6_050_000),
                             recompile_reason="tensor 'y' size mismatch")  # fmt: skip
    evidence = {**EVIDENCE, "graph_breaks": [*EVIDENCE["graph_breaks"], again],
                "frames": [*EVIDENCE["frames"], recompiled_rest]}  # fmt: skip
    explanation, _ = explain.explain(_entry(evidence), _policy([0.2]))
    policy = msgspec.structs.replace(_policy([0.2]), explanation=explanation)
    kinds = [(a.kind, round(a.saving_s, 3)) for a in explain.advice({COLD_CACHE: policy})]
    assert sorted(kinds) == [("graph_break", 0.03), ("recompile", 0.05)]


def _case_with(explanation):
    """A torch.compile case whose cold cache holds `explanation`."""
    from conftest import make_case

    case = make_case("torch_compile_cpu_mlp_train_step_8_f32", cold_runs=[])
    policy = msgspec.structs.replace(case.policies.get(COLD_CACHE), explanation=explanation)
    return msgspec.structs.replace(case, policies=msgspec.structs.replace(case.policies, cold_cache=policy))


def test_the_report_shows_the_first_call_the_frames_and_the_breaks_from_the_explanation(tmp_path):
    explanation, _ = explain.explain(_entry(EVIDENCE), _policy([0.15, 0.16, 0.17]))
    text = "\n".join(explain_md.section([_case_with(explanation)]))
    assert "first call, 200 ms, by the runtime's own counters: 94% named" in text
    assert "| compiler: isa_probe | 40 ms | 20% | 1 |" in text
    assert "| /home/me/model.py:41 | Dynamo does not know how to trace builtin operator" in text
    assert "| 0/0 | backward graph |" in text


@pytest.mark.integration
@pytest.mark.torch_compile
@pytest.mark.contention_safe  # a record's evidence, no figure
@pytest.mark.skipif(not have("torch"), reason="torch not installed")
def test_a_real_graph_break_is_named_at_its_line_and_the_compiler_runs_are_told_apart(tmp_path):
    case_file = tmp_path / "breaking.py"
    case_file.write_text(
        textwrap.dedent("""\
        import numpy as np
        from ttfr.cases import Case

        case = Case("breaking_sum", sizes=(8,), dtypes=("float32",))


        @case.inputs
        def inputs(size, dtype, seed):
            return [np.arange(size, dtype=dtype)]


        @case.reference
        def reference(x):
            return [np.array((np.sin(x.astype(np.float64)) * 2 + 1).sum())]


        @case.torch
        def build(torch, compile, device):
            def f(x):
                y = torch.sin(x) * 2
                print("a graph break")
                return (y + 1).sum()

            return compile(f)
        """)
    )
    line = case_file.read_text().splitlines().index('        print("a graph break")') + 1
    job = Job(mode="cold", adapter="torch_backend", device="cpu", compile=True, workload="user_case", size=8,
              dtype="float32", seed=1, explain=True, case_source=str(case_file), case_name="breaking_sum")  # fmt: skip
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "inductor"))
    result = spawn.run_worker(job, env, 300.0, python=sys.executable)
    assert result.outcome == "ok", result.output_tail
    evidence = result.record.torch_compile
    (brk,) = evidence.graph_breaks
    assert (brk.file, brk.line) == (str(case_file), line) and "print" in brk.reason
    assert [f.function for f in evidence.frames if f.forward] == ["f", f"torch_dynamo_resume_in_f_at_{line}"]
    kinds = {r.kind for r in evidence.compiler_runs}
    assert {"kernel", "isa_probe", "header"} <= kinds  # an empty cache: the ISA probes are built too
    assert evidence.kernels and evidence.kernels >= 1
    assert evidence.build_guards_s is not None and evidence.build_guards_s >= 0  # dynamo's compile_times row, read
    # the hooks imported nothing themselves: Inductor's builder is charged to where torch.compile imports it (the
    # case's setup calls torch.compile), never to the runtime's import phase where the hooks were set
    phases = {i.module: i.phase for i in result.imports.imports}
    assert phases["torch._inductor.cpp_builder"] == "setup" and phases["torch"] == "import"


def test_the_exports_carry_the_first_calls_parts_as_the_case_holds_them(tmp_path):
    """A JAX case's diagnostic process with a program: the CSV's explain_first_call rows and the OpenMetrics
    series are the case result's parts (trace, lower, compile, unattributed), adding up to its first call."""
    import csv

    from support.fakes import FakeExecutor, explained_programs, run_suite

    from ttfr.artifacts.export import formats
    from ttfr.artifacts.reader import load_finished
    from ttfr.measure.spec import RunRequest

    request = RunRequest(cases="jax_jit_cpu_matmul_64_f32", cold_runs=2, warm_procs=1, warm_samples=3, deterministic=True,
                         explain=True, policies="cold-cache")  # fmt: skip
    root = run_suite(tmp_path, request, FakeExecutor(decide=explained_programs(0.1))).result_dir.root
    (case,) = load_finished(root).cases
    first = case.policies.get(COLD_CACHE).explanation.first_call
    assert [p.part for p in first.parts] == ["trace", "lower", "compile", "unattributed"]
    assert sum(p.s for p in first.parts) == pytest.approx(first.traced_s)
    (csv_path,) = formats.export("csv", root, tmp_path / "x.csv", COLD_CACHE)
    rows = {r["metric"]: float(r["value"]) for r in csv.DictReader(csv_path.open()) if r["kind"] == "explain_first_call"}
    assert rows == pytest.approx({p.part: p.s for p in first.parts})
    (metrics,) = formats.export("openmetrics", root, tmp_path / "x.om.prom", COLD_CACHE)
    series = [line for line in metrics.read_text().splitlines() if line.startswith("ttfr_explain_first_call_seconds{")]
    assert len(series) == len(first.parts) and any('part="compile"' in s and s.endswith(" 0.1") for s in series)


SPANNED_TRACE = """ttfr-phase main
ttfr-phase imported
ttfr-phase setup
ttfr-span wrap+
import time:     30000 |      50000 |   torch._dynamo.backends
import time:     10000 |      60000 | torch._dynamo
ttfr-span wrap-
ttfr-span compile+
import time:     20000 |      20000 | torch._inductor.codecache
ttfr-span compile-
import time:      5000 |       7000 |   torch.utils.hooks
import time:      3000 |      10000 | torch.autograd.graph
ttfr-span compile+
ttfr-span compile-
ttfr-phase first
"""


def test_the_trace_charges_each_first_call_import_to_torch_compile_its_compile_or_the_first_execution():
    from ttfr.measure import import_trace

    trace = import_trace.parse(SPANNED_TRACE)
    assert [(i.module, i.phase, i.span) for i in trace.imports] == [
        ("torch._dynamo.backends", "first_call", "wrap"), ("torch._dynamo", "first_call", "wrap"),
        ("torch._inductor.codecache", "first_call", "compile"), ("torch.utils.hooks", "first_call", None),
        ("torch.autograd.graph", "first_call", None)]  # fmt: skip
    entry = msgspec.structs.replace(_entry(EVIDENCE), imports=trace)
    explanation, _ = explain.explain(entry, _policy([0.15, 0.16, 0.17]))
    parts = {p.part: p.s for p in explanation.first_call.parts}
    assert parts["imports, first execution"] == pytest.approx(0.010)  # the top-level import outside both spans
    assert sum(parts.values()) == pytest.approx(explanation.first_call.traced_s)
    rows = explain_md.module_rows(explanation)
    assert rows[0][:2] == ["first call: torch.compile(fn)", "torch._dynamo"]
    assert ["first call: execution", "torch.autograd.graph"] in [r[:2] for r in rows]


def test_runs_of_two_kinds_at_once_count_once_and_a_run_in_no_frames_span_is_after_the_compile():
    """A header built while a kernel builds on another thread: their 20 ms of overlap counts once (for the kernel),
    so the parts still add up; a frame without a span owns no run, and a run outside every span is after it."""
    frame = _frame("0/0", "f", 38, 0.10, 0.09, (1_000_000, 1_100_000))
    unstamped = {**_frame("1/0", "g", 50, 0.02, 0.01, (None, None))}
    runs = [_run("kernel", 0.05, 1_010_000), _run("header", 0.03, 1_040_000), _run("isa_load_probe", 0.01, 2_000_000)]
    explanation, _ = explain.explain(
        _entry({"frames": [frame, unstamped], "graph_breaks": [], "compiler_runs": runs, "kernels": 1}), _policy([0.12])
    )
    parts = {p.part: p for p in explanation.first_call.parts}
    assert parts["compiler: kernel"].s == pytest.approx(0.05) and parts["compiler: header"].s == pytest.approx(0.01)
    assert parts["compiler: isa_load_probe, after the compile"].runs == 1
    assert parts["inductor"].s == pytest.approx(0.03 + 0.01)  # f's 90 ms less 60 ms covered, and g's own 10 ms
    assert sum(p.s for p in parts.values()) == pytest.approx(explanation.first_call.traced_s)


def test_a_hook_that_cannot_be_set_is_unavailable_not_a_failed_import(tmp_path, monkeypatch):
    """Another torch without the function a hook wraps: the module still imports, and the evidence says why that
    part is missing; runs from before the first call are not its runs."""
    import types

    (tmp_path / "old_builder.py").write_text("VALUE = 1\n")  # no _run_compile_cmd
    monkeypatch.syspath_prepend(str(tmp_path))
    # dynamo's metrics without importing torch in the fast tier: no frame
    monkeypatch.setitem(sys.modules, "torch._dynamo.utils", types.SimpleNamespace(get_compilation_metrics=lambda: []))
    explainer = torch_explain.CompileExplainer()
    finder = torch_explain._PatchOnLoad({"old_builder": explainer._guarded("old_builder", explainer._hook_builder)})
    monkeypatch.setattr(sys, "meta_path", [finder, *sys.meta_path])
    import old_builder

    assert old_builder.VALUE == 1
    with explainer._timed("isa_probe"):  # a run in setup, before the first call
        pass
    explainer.first_call_starts()
    with explainer._timed("kernel"):
        pass
    evidence = explainer.evidence(on_gpu=False)
    assert evidence["unavailable"]["old_builder"].startswith("its hook could not be set (AttributeError")
    assert [r["kind"] for r in evidence["compiler_runs"]] == ["kernel"]
    sys.modules.pop("old_builder")
    # torch 2.11 (an H200's image) has no VecISA._probe_load: a CPU case says so, a CUDA case never probes the CPU ISA
    isa = types.SimpleNamespace(VecISA=type("VecISA", (), {}))
    explainer._guarded(torch_explain._VEC_ISA, explainer._hook_isa)(isa)
    assert explainer.evidence(on_gpu=False)["unavailable"][torch_explain._VEC_ISA].startswith("its hook could not be set")
    on_gpu = explainer.evidence(on_gpu=True)["unavailable"]
    assert torch_explain._VEC_ISA not in on_gpu and on_gpu["ptxas_runs"] == "not set up"


def test_compare_lists_what_changed_between_two_explained_runs_beyond_its_stated_threshold(tmp_path):
    """A's diagnostic process compiled `matmul` in 300 ms, B's in 100 ms; their imports are the same fake trace.
    The comparison lists the program and the first call's compile and unattributed parts (nothing imported), json,
    md and html alike."""
    import json

    from support.fakes import FakeExecutor, explained_programs, run_suite

    from ttfr.analyse import explain_changes
    from ttfr.artifacts.reader import load_finished
    from ttfr.measure.spec import RunRequest
    from ttfr.model.comparison import RecordedArm
    from ttfr.pipeline.comparison import write_comparison

    request = RunRequest(cases="numpy_matmul_64_f32,jax_jit_cpu_matmul_64_f32", cold_runs=2, warm_procs=1,
                         warm_samples=3, deterministic=True, explain=True, policies="cold-cache")  # fmt: skip
    arms = [load_finished(run_suite(tmp_path / name, request, FakeExecutor(decide=explained_programs(s))).result_dir.root)
            for name, s in (("a", 0.3), ("b", 0.1))]  # fmt: skip
    found = explain_changes.changes(arms[0].cases, arms[1].cases)
    # the fake's first call is 200 ms either way: what the compile no longer takes is unattributed in B
    assert [(c.kind, c.name) for c in found] == [
        ("program", "matmul"), ("first_call_part", "compile"), ("first_call_part", "unattributed")]  # fmt: skip
    assert {c.case for c in found} == {"jax_jit_cpu_matmul_64_f32"}
    program = next(c for c in found if c.kind == "program")
    assert (program.a_s, program.b_s, program.change_s) == (pytest.approx(0.317), pytest.approx(0.117), pytest.approx(-0.2))
    assert explain_changes.changes(arms[0].cases, []) is None  # nothing explained in both arms: no section at all
    out = tmp_path / "cmp"
    out.mkdir()
    recorded = [RecordedArm(name=n, python=sys.executable, env={}) for n in "AB"]
    write_comparison(out, arms[0].cases, arms[1].cases, paired=True, arms=recorded, session="s", correction="holm",
                     fail_on="regression")  # fmt: skip
    document = json.loads((out / "comparison.json").read_text())
    assert [(c["kind"], c["name"]) for c in document["explained"]] == [
        ("program", "matmul"), ("first_call_part", "compile"), ("first_call_part", "unattributed")]  # fmt: skip
    text = (out / "comparison.md").read_text()
    assert "| `jax_jit_cpu_matmul_64_f32` | cold-cache | JAX program | — | `matmul` | 317 ms | 117 ms | −200 ms |" in text
    assert explain_changes.EXPLAIN_THRESHOLD in text
    page = (out / "comparison.html").read_text()  # the same rows in the page
    assert "<td>matmul</td><td>317 ms</td><td>117 ms</td><td>−200 ms</td>" in page.replace("\n", "")


def test_a_jax_first_call_names_its_wrap_programs_and_execution_and_never_counts_a_program_twice():
    """JAX's stage split of the diagnostic process's own first call (wrap, trace, lower, compile, execute) with its
    programs' events: a program compiled while the first execution ran is in the programs' seconds, not again in
    the execution's."""
    from ttfr.model.record import ProgramCounts

    programs = [explain.CompiledProgram(name="f", traces=1, executables=1, trace_s=0.01, lower_s=0.02, compile_s=0.05,
                                        persistent_cache="written", default_settings_skip=True),
                explain.CompiledProgram(name="inner", traces=1, executables=1, trace_s=0.0, lower_s=0.0, compile_s=0.03,
                                        persistent_cache="written", default_settings_skip=True)]  # fmt: skip
    stages = {"wrap_s": 0.001, "trace_s": 0.01, "lower_s": 0.02, "compile_s": 0.05, "first_execute_s": 0.1}
    record = fake_record(stages=stages)
    record["cache"] = {"first": {"programs": {p.name: msgspec.structs.asdict(ProgramCounts(
        traces=1, compiles=1, trace_s=p.trace_s, lower_s=p.lower_s, backend_s=p.compile_s)) for p in programs}},
        "end": None}  # fmt: skip
    entry = msgspec.structs.replace(_entry(EVIDENCE), record=fake_result(record).record)
    parts = {p.part: p.s for p in explain.explain(entry, _policy([0.1]))[0].first_call.parts}
    assert list(parts) == ["jax.jit(fn)", "trace", "lower", "compile", "first execution", "unattributed"]
    assert parts["compile"] == pytest.approx(0.08) and parts["first execution"] == pytest.approx(0.07)  # 0.1 less 0.03
    assert sum(parts.values()) == pytest.approx(0.2)  # the fake's first call


def test_why_a_cache_was_bypassed_is_kept_in_torchs_words_and_shown():
    import logging

    logs = torch_explain._Logs()
    for name in torch_explain.CACHE_LOGGERS:
        logs.handle(logging.LogRecord(name, logging.INFO, __file__, 1, "AOTAutograd cache miss for key %s", ("k",), None))
    logs.handle(
        logging.LogRecord(
            torch_explain.CACHE_LOGGERS[0],
            logging.INFO,
            __file__,
            1,
            "Bypassing FX Graph Cache because '%s'",
            ("Can't cache HigherOrderOperators",),
            None,
        )
    )
    assert logs.bypasses == ["Bypassing FX Graph Cache because 'Can't cache HigherOrderOperators'"]
    explanation, _flags = explain.explain(_entry({**EVIDENCE, "cache_bypasses": logs.bypasses}), _policy([0.16]))
    assert explanation.cache_bypasses == logs.bypasses
    (table,) = [t for part in explain_md.policy_tables([_case_with(explanation)]) for t in part.tables
                if t.intro.startswith("Why torch.compile's caches were bypassed")]  # fmt: skip
    assert table.rows == [["Bypassing FX Graph Cache because 'Can't cache HigherOrderOperators'"]]
