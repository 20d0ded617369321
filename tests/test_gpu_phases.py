"""A GPU case's start-up and memory, attributed phase by phase (issue 27, items 7-9), tested with
stand-ins on a CPU machine: a fake GPU adapter in the real worker, fake `torch.cuda` and XLA
devices in the real adapters, and fake GPU records through the whole pipeline to every output."""

from __future__ import annotations

import csv
import sys
import types
from pathlib import Path

import pytest
from support.fakes import FakeExecutor, run_suite

from ttfr.analyse.runs import run_metrics
from ttfr.artifacts.export import formats, nextstat
from ttfr.child import worker
from ttfr.child.backends import Unavailable, numpy_backend
from ttfr.child.job import Job
from ttfr.measure import catalog
from ttfr.measure.spec import RunRequest
from ttfr.model.base import encode
from ttfr.model.policies import COLD_CACHE
from ttfr.model.record import Marks

FAKE_ADAPTER = "fake_gpu_backend"


class _FakeGpuRuntime(numpy_backend.Runtime):
    """NumPy's adapter dressed as a GPU one: a device to initialise and a peak to read (and reset)."""

    fail_init = False

    def __init__(self, job):
        super().__init__(job)
        self.readings = iter((1000, 5000, 3000, 3100))  # setup, first call, steady, the process's end
        self.log = []

    def init_device(self):
        if self.fail_init:
            from ttfr.child.backends import gpu_unusable

            raise gpu_unusable("FakeRT", RuntimeError("no CUDA-capable device is detected\nsecond line"))
        self.log.append("init_device")

    def device_peak(self):
        return next(self.readings)

    def memory(self):
        return {"device_peak_bytes": max(1000, 5000, 3000, self.device_peak()), "device_peaks_reset": True}


@pytest.fixture
def fake_gpu_adapter(monkeypatch):
    module = types.ModuleType(f"ttfr.child.backends.{FAKE_ADAPTER}")
    module.Runtime = _FakeGpuRuntime
    monkeypatch.setitem(sys.modules, module.__name__, module)
    monkeypatch.setattr(_FakeGpuRuntime, "fail_init", False)
    return module


def _job(**extra):
    return Job(adapter=FAKE_ADAPTER, device="gpu", workload="matmul", size=8, dtype="float32", **extra)


def test_the_worker_times_device_init_between_import_and_setup_and_reads_the_peak_per_phase(fake_gpu_adapter):
    marks, record = {"main": 0}, {}
    worker._run_phases(_job(mode="warm", samples=2, min_sample_s=0.0001, max_warmup_s=0.01), marks, record)
    assert marks["imported"] <= marks["device_ready"] <= marks["setup"] <= marks["first"]
    assert record["memory"]["device_peaks"] == {"setup": 1000, "first_call": 5000, "steady": 3000}
    assert record["memory"]["device_peak_bytes"] == 5000 and record["memory"]["device_peaks_reset"] is True
    # a CPU adapter has no device phase and no peaks
    cpu_marks, cpu_record = {"main": 0}, {}
    worker._run_phases(Job(adapter="numpy_backend", workload="matmul", size=8, dtype="float32"), cpu_marks, cpu_record)
    assert "device_ready" not in cpu_marks and "device_peaks" not in cpu_record["memory"]


def test_a_device_that_will_not_initialise_fails_in_its_own_phase_with_its_cause(fake_gpu_adapter, monkeypatch):
    from ttfr.child import hostinfo

    monkeypatch.setattr(_FakeGpuRuntime, "fail_init", True)
    monkeypatch.setattr(hostinfo, "gpu_device_nodes", lambda: [])
    with pytest.raises(worker._PhaseError) as caught:
        worker._run_phases(_job(), {"main": 0}, {})
    assert caught.value.phase == "device_init" and isinstance(caught.value.error, Unavailable)
    assert worker._classify(caught.value) == ("unavailable", "gpu_unavailable: no CUDA-capable device is detected")


def test_device_init_is_its_own_span_and_setup_starts_after_it():
    ms = 1_000_000
    marks = Marks(main=10 * ms, imported=110 * ms, device_ready=160 * ms, user_imported=170 * ms, setup=200 * ms,
                  first=300 * ms, second_start=301 * ms, second=302 * ms)  # fmt: skip
    metrics = run_metrics(0, 400 * ms, types.SimpleNamespace(marks_ns=marks))
    assert metrics.import_s == pytest.approx(0.1) and metrics.device_init_s == pytest.approx(0.05)
    assert metrics.user_import_s == pytest.approx(0.01) and metrics.setup_s == pytest.approx(0.03)
    # the spans still add up to the time to first result
    parts = (metrics.interpreter_s, metrics.import_s, metrics.device_init_s, metrics.user_import_s, metrics.setup_s,
             metrics.first_call_s)  # fmt: skip
    assert sum(parts) == pytest.approx(metrics.ttfr_s)
    plain = run_metrics(0, 400 * ms, types.SimpleNamespace(marks_ns=Marks(main=10 * ms, imported=110 * ms, setup=200 * ms)))
    assert plain.setup_s == pytest.approx(0.09) and "device_init_s" not in encode(plain)


def test_torch_resets_its_peak_at_each_reading_and_keeps_the_process_peak():
    from ttfr.child.backends import torch_backend

    state = {"peak": 0}

    def allocate(n):
        state["peak"] = max(state["peak"], n)

    cuda = types.SimpleNamespace(max_memory_allocated=lambda: state["peak"],
                                 reset_peak_memory_stats=lambda: state.update(peak=0))  # fmt: skip
    runtime = torch_backend.Runtime(Job(adapter="torch_backend", device="gpu", workload="matmul", size=8, dtype="float32"))
    runtime.torch = types.SimpleNamespace(cuda=cuda)
    allocate(100)
    assert runtime.device_peak() == 100
    allocate(900)  # the first call's compile buffers
    assert runtime.device_peak() == 900
    allocate(300)  # steady state: its own peak, not the first call's
    assert runtime.device_peak() == 300
    assert runtime.memory() == {"device_peak_bytes": 900, "device_peaks_reset": True}
    cpu = torch_backend.Runtime(Job(adapter="torch_backend", workload="matmul", size=8, dtype="float32"))
    assert cpu.init_device is None and cpu.device_peak is None and cpu.memory() == {}


def test_jax_peaks_are_cumulative_and_said_so():
    from ttfr.child.backends import jax_backend

    runtime = jax_backend.Runtime(Job(adapter="jax_backend", device="gpu", workload="matmul", size=8, dtype="float32"))
    peaks = iter((10, 70, 70))
    runtime.device = types.SimpleNamespace(memory_stats=lambda: {"peak_bytes_in_use": next(peaks)})
    assert [runtime.device_peak(), runtime.device_peak()] == [10, 70]
    assert runtime.memory() == {"device_peak_bytes": 70, "device_peaks_reset": False}
    cpu = jax_backend.Runtime(Job(adapter="jax_backend", workload="matmul", size=8, dtype="float32"))
    assert cpu.init_device is None and cpu.device_peak is None


def test_triton_autotuning_is_carved_out_of_the_first_execution():
    from ttfr.child.backends.torch_backend import _split_compile_times

    table = {"_compile.compile_inner": 2.0, "OutputGraph.call_user_compiler": 1.5, "compile_fx_inner": 1.0}
    plain = _split_compile_times(table, first_call_s=3.0, wrap_s=0.0)
    assert "autotune_s" not in plain and plain["first_execute_s"] == pytest.approx(1.0)
    tuned = _split_compile_times(dict(table, **{"CachingAutotuner.benchmark_all_configs": 0.6,
                                                "CachingAutotuner.coordinate_descent_tuning": 0.1}), 3.0, 0.0)  # fmt: skip
    assert tuned["autotune_s"] == pytest.approx(0.7) and tuned["first_execute_s"] == pytest.approx(0.3)
    drawn = [tuned[k] for k in ("dynamo_s", "aot_autograd_s", "inductor_s", "autotune_s", "first_execute_s")]
    assert sum(drawn) == pytest.approx(3.0)  # the stages still tile the first call


class _GpuExecutor(FakeExecutor):
    """Every run of a GPU backend reports a 10 ms device phase (fake_record: import ends at 110 ms,
    setup at 130 ms) and per-phase device peaks."""

    def answer(self, job, call, entries, jax_dir):
        record, process_ns = super().answer(job, call, entries, jax_dir)
        if job.device == "gpu":
            # the driver JIT-compiles a PTX-only kernel at load and caches it where CUDA_CACHE_PATH says
            jit_cache = Path(call["env"]["CUDA_CACHE_PATH"])
            if jit_cache.is_dir() and not any(jit_cache.iterdir()):
                (jit_cache / "ComputeCache.bin").write_bytes(b"sass")
            record["marks_ns"]["device_ready"] = record["marks_ns"]["imported"] + 10_000_000
            record["memory"] = {"device_peak_bytes": 7 << 20, "device_peaks_reset": True,
                                "device_peaks": {"setup": 1 << 20, "first_call": 7 << 20, "steady": 2 << 20}}  # fmt: skip
        return record, process_ns


@pytest.mark.gpu
def test_every_output_shows_the_device_phase_and_the_peaks_the_case_result_holds(tmp_path, monkeypatch):
    monkeypatch.setattr(catalog, "gpu_present", lambda: True)
    request = RunRequest(backends="torch_eager_cuda,numpy", workloads="matmul", sizes="64", cold_runs=3, warm_procs=2,
                         warm_samples=5, seed=1)  # fmt: skip
    outcome = run_suite(tmp_path, request, _GpuExecutor())
    cases = {c.backend: c for c in outcome.cases}
    gpu, cpu = cases["torch_eager_cuda"], cases["numpy"]
    summary = gpu.policies.get(COLD_CACHE).summary
    assert summary.device_init_s.median == pytest.approx(0.01) and summary.setup_s.median == pytest.approx(0.01)
    assert encode(gpu.memory)["device_peaks"] == {"setup": 1 << 20, "first_call": 7 << 20, "steady": 2 << 20}
    assert "device_init_s" not in encode(cpu.policies.get(COLD_CACHE).summary)
    # item 13: the driver's JIT cache grew in the eager GPU case's cold-cache runs (never in the CPU case's)
    assert "kernel_cache_grew" in {f.name for f in gpu.flags if f.policy == COLD_CACHE}
    assert not any(f.name == "kernel_cache_grew" for f in cpu.flags)
    root = outcome.result_dir.root
    markdown = (root / "report.md").read_text()
    header = next(line for line in markdown.splitlines() if line.startswith("| case | interpreter |"))
    assert "| import | device init | setup |" in header
    assert "setup 1 MiB · first call 7 MiB · steady 2 MiB" in markdown
    assert "stored kernels in the CUDA driver's JIT cache" in markdown
    (csv_path,) = formats.export("csv", root, tmp_path / "runs.csv", COLD_CACHE)
    rows = [r for r in csv.DictReader(csv_path.open()) if r["metric"] == "device_init_s"]
    cold_runs = [r for _name, policy in gpu.policies.cold() for r in policy.runs]
    assert len(rows) == len(cold_runs) >= 3 and all(float(r["value"]) == pytest.approx(0.01) for r in rows)
    assert all(gpu.backend in r["case"] for r in rows)
    # NextStat's import_s is all the loading before the first call: the device's init included
    run = nextstat.nextstat_run(gpu.policies.get(COLD_CACHE).runs[0].metrics)
    assert run["import_s"] == pytest.approx(0.1 + 0.01 + 0.01)
