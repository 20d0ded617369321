"""--explain for torch.compile on a GPU (issue 38): each Triton kernel's compile as Inductor counts it, and each
run of ptxas timed one by one by the wrapper Inductor's worker processes run (child/ptxas_timing.py): what it
built, its span on the wall clock, its exit status passed through. The first call's parts still add up, and the
report renders the kernels the explanation holds. The real GPU run is marked `gpu`."""

from __future__ import annotations

import os
import subprocess
import sys
import types

import pytest
from conftest import machine_has_gpu
from test_explain_torch import _case_with, _entry, _frame, _policy, _run

from ttfr.analyse import explain
from ttfr.child import ptxas_timing, torch_explain
from ttfr.report import explain_md

# what a ptxas does for the wrapper's sake: its version line, the -o file written, a failure's exit status
FAKE_PTXAS = """#!/bin/bash
if [ "$1" = --version ]; then echo "Cuda compilation tools, release 13.0, V13.0.88"; exit 0; fi
out=
while [ $# -gt 0 ]; do
  case $1 in -o) out=$2; shift ;; *.ptx) src=$1 ;; esac
  shift
done
grep -q BROKEN "$src" && { echo "ptxas fatal: broken" >&2; exit 3; }
echo cubin > "$out"
"""
PTX = ".version 8.7\n.target sm_90a\n.address_size 64\n\n.visible .entry triton_poi_fused_add_0(\n\t.param .u64 p0\n)\n{\n}\n"


@pytest.fixture
def fake_ptxas(tmp_path, monkeypatch):
    """A ptxas the user named in TRITON_PTXAS_PATH, and the wrapper set up in its place (the variables restored
    after the test)."""
    real = tmp_path / "ptxas"
    real.write_text(FAKE_PTXAS)
    real.chmod(0o755)
    monkeypatch.setenv("TRITON_PTXAS_PATH", str(real))
    monkeypatch.setenv("TRITON_PTXAS_BLACKWELL_PATH", str(real))
    # (setenv, not delenv: monkeypatch restores only what it saw set, and install sets it)
    monkeypatch.setenv("TRITON_PTXAS-BLACKWELL_PATH", str(real))
    timer = ptxas_timing.PtxasTimer()
    timer.install()
    yield timer, real


def test_the_wrapper_runs_the_real_ptxas_and_logs_each_run_with_the_kernel_it_built(fake_ptxas, tmp_path):
    timer, real = fake_ptxas
    assert timer.unavailable is None and timer.wrapped == {v: str(real) for v in ("TRITON_PTXAS_PATH",
                                                                                 "TRITON_PTXAS_BLACKWELL_PATH")}  # fmt: skip
    # Triton 3.3-3.5 read the Blackwell one by its binary's name, with a hyphen
    assert os.environ["TRITON_PTXAS-BLACKWELL_PATH"] == os.environ["TRITON_PTXAS_BLACKWELL_PATH"]
    wrapper = os.environ["TRITON_PTXAS_PATH"]
    assert wrapper != str(real) and os.access(wrapper, os.X_OK)  # Inductor's workers inherit the wrapper
    version = subprocess.run([wrapper, "--version"], capture_output=True, text=True)
    assert version.returncode == 0 and "release 13.0" in version.stdout  # Triton reads the version through it
    ptx = tmp_path / "k.ptx"
    ptx.write_text(PTX)
    before_us = _now_us()
    # the arguments as Triton's make_cubin gives them
    built = subprocess.run([wrapper, "-lineinfo", "-v", "--gpu-name=sm_90a", str(ptx), "-o", f"{ptx}.o"])
    assert built.returncode == 0 and (tmp_path / "k.ptx.o").read_text() == "cubin\n"
    ptx.write_text(PTX + "BROKEN\n")
    broken = subprocess.run([wrapper, "-v", "--gpu-name=sm_90a", str(ptx), "-o", f"{ptx}.o"], capture_output=True, text=True)
    assert broken.returncode == 3 and "ptxas fatal: broken" in broken.stderr  # its status and words reach Triton
    runs = timer.runs(since_us=None)
    assert [(r["kind"], r["built"], r["failed"]) for r in runs] == [
        ("ptxas_version", None, False),
        ("ptxas", "triton_poi_fused_add_0 (sm_90a)", False),
        ("ptxas", "triton_poi_fused_add_0 (sm_90a)", True),
    ]
    assert all(r["end_us"] >= r["start_us"] and r["s"] == (r["end_us"] - r["start_us"]) / 1e6 for r in runs)
    assert runs[1]["start_us"] >= before_us  # the wall clock dynamo stamps its frames with
    assert [r["kind"] for r in timer.runs(since_us=before_us)] == ["ptxas", "ptxas"]  # the first call's only


def _now_us():
    import time

    return time.time_ns() // 1000


def test_a_line_the_wrapper_did_not_write_is_not_a_run():
    assert ptxas_timing.parse_line("1700000000.250000\t1700000000.500000\t0\tkernel\tk\tsm_90a\n")["s"] == 0.25
    assert ptxas_timing.parse_line("1700000000,250000\t1700000000,500000\t0\tkernel\tk\t\n")["built"] == "k"  # a locale's mark
    assert ptxas_timing.parse_line("1700000000.123456789\t1700000001.0\t0\tkernel\tk\t\n")["start_us"] == 1700000000123456
    for bad in (
        "garbage\n",
        "1\t2\t0\tkernel\tk\n",
        "x\t2\t0\tkernel\tk\t\n",
        "5.0\t4.0\t0\tkernel\tk\t\n",
        "1\u00b2.5\t3.0\t0\tkernel\tk\t\n",
    ):  # "²" is a digit to str.isdigit, not to int()
        assert ptxas_timing.parse_line(bad) is None, bad


TORCH_SOURCES = {
    "parents2": 'def _set_triton_ptxas_path() -> None:\n    ptxas = Path(__file__).absolute().parents[2] / "bin" / "ptxas"\n',
    "parents1": 'def _set_triton_ptxas_path() -> None:\n    ptxas = Path(__file__).absolute().parents[1] / "bin" / "ptxas"\n',
    "unknown": "def _set_triton_ptxas_path() -> None:\n    ptxas = find_it()\n",
}


@pytest.mark.parametrize("torch_says", sorted(TORCH_SOURCES))
def test_a_ptxas_is_wrapped_only_where_triton_here_and_torchs_workers_run_the_same_one(tmp_path, monkeypatch, torch_says):
    """torch's workers run the ptxas its own `_set_triton_ptxas_path` names (its source, read: versions differ),
    Triton here its bundled one: one wrapper for both would change which ptxas one of them runs."""
    for folder in (tmp_path / "torch/bin", tmp_path / "torch/_inductor/runtime", tmp_path / "triton/backends/nvidia/bin"):
        folder.mkdir(parents=True)
    for path in (tmp_path / "torch/bin/ptxas", tmp_path / "triton/backends/nvidia/bin/ptxas"):
        path.write_text("#!/bin/sh\n")
        path.chmod(0o755)
    (tmp_path / "torch/_inductor/runtime/compile_tasks.py").write_text(TORCH_SOURCES[torch_says])
    specs = {name: types.SimpleNamespace(submodule_search_locations=[str(tmp_path / name)]) for name in ("torch", "triton")}
    monkeypatch.setattr(ptxas_timing.importlib.util, "find_spec", specs.get)
    for variable in ("TRITON_PTXAS_PATH", "TRITON_PTXAS_BLACKWELL_PATH", "TRITON_PTXAS-BLACKWELL_PATH"):
        monkeypatch.setenv(variable, "")  # restored after the test whatever install sets
        monkeypatch.delenv(variable)
    bundled = str(tmp_path / "triton/backends/nvidia/bin/ptxas")
    if torch_says == "parents1":  # torch/_inductor/bin/ptxas: none there, so its workers use Triton's too
        assert ptxas_timing.real_ptxas(("TRITON_PTXAS_PATH",), "ptxas", True) == bundled
    else:
        with pytest.raises(LookupError, match="one wrapper would change" if torch_says == "parents2" else "does not read"):
            ptxas_timing.real_ptxas(("TRITON_PTXAS_PATH",), "ptxas", True)
    assert ptxas_timing.real_ptxas(("X",), "ptxas", False) == bundled  # Blackwell's: torch names none
    monkeypatch.setenv("TRITON_PTXAS_PATH", bundled)  # the user's own, where both run it
    assert ptxas_timing.real_ptxas(("TRITON_PTXAS_PATH",), "ptxas", True) == bundled
    monkeypatch.setenv("TRITON_PTXAS_PATH", str(tmp_path / "missing"))  # Triton falls back: wrapping would hide it
    with pytest.raises(LookupError, match="no executable file"):
        ptxas_timing.real_ptxas(("TRITON_PTXAS_PATH",), "ptxas", True)
    monkeypatch.setattr(ptxas_timing.importlib.util, "find_spec", lambda name: None)
    monkeypatch.delenv("TRITON_PTXAS_PATH")
    with pytest.raises(LookupError, match="no ptxas in Triton's package"):
        ptxas_timing.real_ptxas(("TRITON_PTXAS_PATH",), "ptxas", True)
    timer = ptxas_timing.PtxasTimer()
    timer.install()
    assert timer.unavailable and timer.unavailable.startswith("ptxas not wrapped: no ptxas in Triton"), timer.wrapped
    assert "TRITON_PTXAS_PATH" not in os.environ  # nothing wrapped: the run's own ptxas, untouched


def test_each_triton_kernel_is_counted_as_inductor_counts_it_and_its_record_still_reaches_inductor(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch._dynamo.utils", types.SimpleNamespace(get_compilation_metrics=lambda: []))
    kept = {}
    module = types.SimpleNamespace(_add_triton_kernel_info=lambda name, info: kept.setdefault(name, info))
    explainer = torch_explain.CompileExplainer(on_gpu=True)
    explainer._hook_triton_kernels(module)
    module._add_triton_kernel_info("triton_poi_warmup_0", {"compile_time_us": 5})  # before the first call
    explainer.first_call_us = explainer.triton_kernels[0]["at_us"] + 1  # its start, after that (no clock race)
    module._add_triton_kernel_info("triton_poi_fused_add_0", {"compile_time_us": 250_000, "autotune": "x"})
    module._add_triton_kernel_info("triton_red_fused_sum_1", {})
    assert kept["triton_poi_fused_add_0"] == {"compile_time_us": 250_000, "autotune": "x"}  # Inductor keeps its record
    evidence = explainer.evidence(on_gpu=True)
    assert evidence["triton_kernels"] == [{"name": "triton_poi_fused_add_0", "compile_s": 0.25},
                                          {"name": "triton_red_fused_sum_1", "compile_s": None}]  # fmt: skip
    # no wrapper was set up here: never a zero taken for ptxas's time
    assert evidence["unavailable"]["ptxas_runs"] == "not set up"


def test_kernels_compiled_with_no_ptxas_run_seen_say_why_ptxas_is_missing(fake_ptxas, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch._dynamo.utils", types.SimpleNamespace(get_compilation_metrics=lambda: []))
    timer, _real = fake_ptxas
    explainer = torch_explain.CompileExplainer(on_gpu=True)
    explainer.ptxas = timer
    explainer.first_call_starts()
    explainer.triton_kernels.append({"name": "triton_poi_fused_add_0", "compile_s": 0.2, "at_us": _now_us()})
    missing = explainer.evidence(on_gpu=True)["unavailable"]["ptxas_runs"]
    assert "no ptxas run reached the wrapper at TRITON_PTXAS_PATH" in missing and "1 kernels" in missing


# one frame of 100 ms (Inductor 80 ms); three Triton kernels compiled in two workers: two ptxas runs overlap, and
# Triton asked ptxas its version once, all inside the frame's span
TRITON_EVIDENCE = {
    "frames": [_frame("0/0", "f", 10, 0.1, 0.08, (1_000_000, 1_100_000))],
    "graph_breaks": [],
    "compiler_runs": [
        _run("ptxas_version", 0.001, 1_010_000),
        {**_run("ptxas", 0.005, 1_020_000), "built": "triton_poi_fused_add_0 (sm_90a)"},
        {**_run("ptxas", 0.005, 1_023_000), "built": "triton_red_fused_sum_1 (sm_90a)"},
        {**_run("ptxas", 0.002, 1_040_000), "built": "triton_poi_fused_add_0 (sm_90a)"},  # autotuning's second config
    ],
    "triton_kernels": [{"name": "triton_poi_fused_add_0", "compile_s": 0.03}, {"name": "triton_red_fused_sum_1",
                                                                                "compile_s": 0.04},
                       {"name": "triton_poi_fused_mul_2", "compile_s": 0.01}],
    "kernels": 3,
}  # fmt: skip


def test_ptxas_runs_are_a_part_of_the_compile_and_each_kernel_has_its_own_ptxas_seconds():
    explanation, _ = explain.explain(_entry(TRITON_EVIDENCE), _policy([0.1]))
    first = explanation.first_call
    parts = {p.part: p for p in first.parts}
    # the two overlapping runs cover 8 ms of wall time, the third 2: 10 ms, taken out of Inductor's 80
    assert parts["compiler: ptxas"].s == pytest.approx(0.01) and parts["compiler: ptxas"].runs == 3
    assert parts["compiler: ptxas_version"].s == pytest.approx(0.001) and parts["inductor"].s == pytest.approx(0.069)
    assert sum(p.s for p in first.parts) == pytest.approx(first.traced_s)
    rows = [(k.kernel, k.compile_s, k.ptxas_s, k.ptxas_runs) for k in first.triton_kernels]
    assert rows == [
        ("triton_red_fused_sum_1", 0.04, pytest.approx(0.005), 1),
        ("triton_poi_fused_add_0", 0.03, pytest.approx(0.007), 2),
        ("triton_poi_fused_mul_2", 0.01, None, 0),
    ]  # fmt: skip  (from Triton's cache: no ptxas)
    assert first.triton_compile_s == pytest.approx(0.08)
    text = "\n".join(explain_md.section([_case_with(explanation)]))
    assert "Triton kernels the first call compiled in Inductor's worker processes, 80 ms of worker time" in text
    assert "| triton_poi_fused_add_0 | 1 | 30 ms | 7 ms | 2 |" in text
    assert "| triton_poi_fused_mul_2 | 1 | 10 ms | — | 0 |" in text
    assert "| compiler: ptxas | 10 ms |" in text


def test_kernels_of_one_name_in_two_graphs_are_one_row_and_no_ptxas_run_counts_twice():
    """Inductor numbers kernels per graph: the forward's and the backward's `triton_poi_fused_add_0` are two."""
    kernels = [{"name": "triton_poi_fused_add_0", "compile_s": 0.03}, {"name": "triton_poi_fused_add_0", "compile_s": 0.02}]
    runs = [{**_run("ptxas", 0.004, 1_020_000 + i * 10_000), "built": "triton_poi_fused_add_0 (sm_90a)"} for i in (0, 1)]
    first = explain.explain(_entry({**TRITON_EVIDENCE, "triton_kernels": kernels, "compiler_runs": runs}),
                            _policy([0.1]))[0].first_call  # fmt: skip
    ((name, count, compiled, ptxas_s, ptxas_runs),) = [(k.kernel, k.kernels, k.compile_s, k.ptxas_s, k.ptxas_runs)
                                                       for k in first.triton_kernels]  # fmt: skip
    assert (name, count, ptxas_runs) == ("triton_poi_fused_add_0", 2, 2)
    assert compiled == pytest.approx(0.05) and ptxas_s == pytest.approx(0.008) and first.triton_compile_s == pytest.approx(0.05)


def test_ptxas_runs_past_the_kept_are_said_not_dropped_silently(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch._dynamo.utils", types.SimpleNamespace(get_compilation_metrics=lambda: []))
    explainer = torch_explain.CompileExplainer(on_gpu=True)
    explainer.ptxas = types.SimpleNamespace(unavailable=None, wrapped={"TRITON_PTXAS_PATH": "/p"},
                                            runs=lambda since: [_run("ptxas", 0.001, 10 + i) for i in range(250)])  # fmt: skip
    evidence = explainer.evidence(on_gpu=True)
    assert len(evidence["compiler_runs"]) == torch_explain.MAX_ROWS
    assert evidence["unavailable"]["ptxas_runs"] == f"only the first {torch_explain.MAX_ROWS} runs are kept: 50 more ran"
    explainer.ptxas = types.SimpleNamespace(unavailable=None, wrapped={}, runs=lambda since: (_ for _ in ()).throw(
        PermissionError("denied")))  # fmt: skip
    assert "could not be read (PermissionError: denied)" in explainer.evidence(on_gpu=True)["unavailable"]["ptxas_runs"]


def test_kernels_past_the_costliest_are_one_other_row_that_keeps_their_sums():
    kernels = [{"name": f"triton_poi_fused_{i}", "compile_s": 0.01 * (i + 1)} for i in range(13)]
    runs = [{**_run("ptxas", 0.001, 1_100_000 + i * 10_000), "built": f"triton_poi_fused_{i} (sm_90a)"} for i in range(13)]
    evidence = {**TRITON_EVIDENCE, "triton_kernels": kernels, "compiler_runs": runs}
    first = explain.explain(_entry(evidence), _policy([0.1]))[0].first_call
    assert len(first.triton_kernels) == explain.TOP_TRITON_KERNELS + 1
    other = first.triton_kernels[-1]
    assert (other.kernel, other.kernels, other.ptxas_runs) == ("other", 3, 3)
    assert other.compile_s == pytest.approx(0.01 + 0.02 + 0.03) and other.ptxas_s == pytest.approx(0.003)
    assert sum(k.compile_s for k in first.triton_kernels) == pytest.approx(first.triton_compile_s)


@pytest.mark.integration
@pytest.mark.gpu
@pytest.mark.skipif(not machine_has_gpu(), reason="needs a real GPU")
def test_on_the_gpu_each_triton_kernel_and_each_ptxas_run_that_built_it_is_named(tmp_path):
    """A cold Triton cache: Inductor compiles the fused chain's kernels in its workers, each through ptxas."""
    from ttfr.child.job import Job
    from ttfr.measure import spawn

    job = Job(mode="cold", adapter="torch_backend", device="gpu", compile=True, workload="fused_chain", size=4096,
              dtype="float32", seed=1, explain=True)  # fmt: skip
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "inductor"), TRITON_CACHE_DIR=str(tmp_path / "triton"))
    result = spawn.run_worker(job, env, 300.0, python=sys.executable)
    assert result.outcome == "ok", result.output_tail
    evidence = result.record.torch_compile
    names = {k.name for k in evidence.triton_kernels}
    assert names and all(k.compile_s and k.compile_s > 0 for k in evidence.triton_kernels), evidence.triton_kernels
    ptxas = [r for r in evidence.compiler_runs if r.kind == "ptxas"]
    assert ptxas and not any(r.failed for r in ptxas), evidence.unavailable
    assert {r.built.partition(" (")[0] for r in ptxas} <= names  # each run built one of Inductor's kernels
    assert "ptxas_runs" not in (evidence.unavailable or {})
