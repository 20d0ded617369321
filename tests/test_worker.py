"""The worker in real fresh processes (numpy, jax, torch on CPU), and its pure helpers."""

import os
import sys

import pytest
from conftest import have

from ttfr.model.base import encode
from ttfr.child.job import Job
from ttfr.measure import spawn

# Single workers run by hand, judged by their records, never by contention checks.
pytestmark = [pytest.mark.integration, pytest.mark.contention_safe]


def job(adapter, workload="matmul", size=32, dtype="float32", mode="cold", device="cpu", compile_=False, **extra):
    return Job(mode=mode, adapter=adapter, device=device, compile=compile_, workload=workload, size=size, dtype=dtype,
               seed=5, **extra)  # fmt: skip


def run(words, env=None, timeout=120.0):
    return spawn.run_worker(words, env or dict(os.environ), timeout, python=sys.executable)


def test_warm_numpy_worker_checks_its_result_and_samples():
    result = run(job("numpy_backend", mode="warm", samples=5, min_sample_s=0.001, max_warmup_s=0.2, check=True))
    assert result.outcome == "ok", result.output_tail
    record = encode(result.record)
    assert record["check"]["passed"] and record["check"]["max_normalised_error"] < 1e-5
    assert len(record["warm"]["samples_s"]) == 5 and all(s > 0 for s in record["warm"]["samples_s"])
    assert record["warm"]["inner_loops"] >= 1
    assert len(record["dataset_sha256"]) == 64
    assert record["digest"]["finite"] and record["digest"]["count"] == 32 * 32


def test_only_the_checking_process_imports_threadpoolctl():
    """A cold process records no pools and never loads threadpoolctl (~21 ms of every no-op's
    process_s once); the process that checks the result records the BLAS pools NumPy loaded."""
    cold = run(job("numpy_backend", size=8))
    assert cold.outcome == "ok", cold.output_tail
    assert encode(cold.record).get("threadpools") is None and "threadpools" not in encode(cold.record)
    checking = run(job("numpy_backend", size=8, mode="warm", samples=0, check=True))
    assert checking.outcome == "ok", checking.output_tail
    pools = checking.record.threadpools
    if have("threadpoolctl"):
        assert pools and any(p.user_api == "blas" and p.num_threads >= 1 for p in pools), pools
    else:
        assert pools is None


def test_a_no_op_process_loads_nothing_after_its_timing_that_a_bare_interpreter_would_not(tmp_path):
    """What the worker imports after its last mark is ttfr's cost in process_s: a module that
    crept in (threadpoolctl, json, resource) shows here, long before a benchmark notices."""
    probe = tmp_path / "modules.txt"
    code = ("import atexit, sys\n"
            f"atexit.register(lambda: open({str(probe)!r}, 'w').write('\\n'.join(sorted(sys.modules))))\n"
            "from ttfr.child.worker import main; main()")  # fmt: skip
    import subprocess

    read_fd, write_fd = os.pipe()
    words = job("python_backend", workload="noop", size=1, dtype="float64").replace(fd=write_fd).to_words()
    done = subprocess.run([sys.executable, "-P", "-c", code, *words], pass_fds=(write_fd,), timeout=60, check=False)
    os.close(write_fd)
    os.close(read_fd)
    assert done.returncode == 0
    loaded = set(probe.read_text().split())
    bare = subprocess.run([sys.executable, "-P", "-c", "import atexit, sys; print(' '.join(sys.modules))"],
                          capture_output=True, text=True, check=True).stdout.split()  # fmt: skip
    extra = sorted(m for m in loaded - set(bare) if not m.startswith("ttfr"))
    assert extra == [], f"a no-op worker loads {extra} beyond a bare interpreter"


@pytest.mark.skipif(not have("jax"), reason="jax not installed")
def test_jax_worker_splits_the_first_call_into_aot_stages(tmp_path):
    env = dict(os.environ, JAX_COMPILATION_CACHE_DIR=str(tmp_path), JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0",
               JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES="-1", JAX_PLATFORMS="cpu")  # fmt: skip
    result = run(job("jax_backend", workload="mlp_train_step", compile_=True, dtype="float64", mode="warm", samples=3,
                     min_sample_s=0.001, max_warmup_s=0.2, check=True), env)  # fmt: skip
    assert result.outcome == "ok", result.output_tail
    stages = encode(result.record)["stages_s"]
    assert set(stages) == {"wrap_s", "trace_s", "lower_s", "compile_s", "first_execute_s"}
    marks = encode(result.record)["marks_ns"]
    assert sum(stages.values()) <= (marks["first"] - marks["setup"]) / 1e9
    assert encode(result.record)["check"]["passed"] and encode(result.record)["check"]["max_normalised_error"] < 1e-10  # f64
    events = encode(result.record)["cache"]["end"]["events"]
    assert events["/jax/compilation_cache/cache_misses"] >= 1 and "/jax/compilation_cache/cache_hits" not in events
    assert list(tmp_path.iterdir()), "JAX's CPU cache was not written"
    assert encode(result.record)["memory"]["compiled"]["argument_size_in_bytes"] > 0
    again = run(job("jax_backend", workload="mlp_train_step", compile_=True, dtype="float64"), env)
    assert encode(again.record)["cache"]["end"]["events"]["/jax/compilation_cache/cache_hits"] >= 1


@pytest.mark.parametrize("adapter", ["jax_backend", "torch_backend"])
def test_gpu_backend_without_a_gpu_is_unavailable_not_failed(adapter):
    module = {"jax_backend": "jax", "torch_backend": "torch"}[adapter]
    if not have(module):
        pytest.skip(f"{module} not installed")
    env = {k: v for k, v in os.environ.items() if k != "JAX_PLATFORMS"}
    result = run(job(adapter, device="gpu", compile_=True), env)
    if result.record and result.record.device and result.record.device.platform == "gpu":
        pytest.skip("this machine has a GPU")
    assert result.outcome == "unavailable" and result.reason.startswith("gpu_unavailable: ")
    assert len(result.reason) > len("gpu_unavailable: ")  # the runtime's own words, not a bare label (issue 27)
    assert "traceback" not in encode(result.record)


def test_missing_runtime_is_a_missing_dependency(tmp_path):
    fake = tmp_path / "jax"
    fake.mkdir()
    (fake / "__init__.py").write_text("raise ModuleNotFoundError(\"No module named 'jaxlib'\", name='jaxlib')\n")
    env = dict(os.environ, PYTHONPATH=f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    result = run(job("jax_backend", compile_=True), env)
    assert (result.outcome, result.reason) == ("unavailable", "missing_dependency: jaxlib")


def test_an_exception_is_an_error_with_its_phase_and_traceback():
    result = run(job("numpy_backend", workload="no_such_workload"))
    assert result.outcome == "error"
    assert result.reason.startswith("ModuleNotFoundError in setup")
    assert "Traceback" in encode(result.record)["traceback"]


@pytest.mark.skipif(not have("torch"), reason="torch not installed")
def test_torch_eager_train_step_matches_the_reference():
    result = run(job("torch_backend", workload="mlp_train_step", size=16, mode="warm", samples=3,
                     min_sample_s=0.001, max_warmup_s=0.2, check=True))  # fmt: skip
    assert result.outcome == "ok", result.output_tail
    assert encode(result.record)["check"]["passed"]
    assert encode(result.record)["versions"]["torch"].startswith("2.")


@pytest.mark.skipif(not (have("nextstat") and have("pyhf")), reason="needs nextstat and pyhf")
def test_a_failure_inside_the_check_is_an_error_record_not_a_crash(tmp_path):
    from ttfr.measure import datasets

    workspace = datasets.resolve(8, 0, None)
    spec_path, point_path = (tmp_path / name for name, _payload in datasets.files(workspace, 0).values())
    for name, payload in datasets.files(workspace, 0).values():
        (tmp_path / name).write_bytes(payload)
    words = job("nextstat_backend", workload="hf_nll_grad", size=8, dtype="float64", mode="warm", check=True,
                workspace=str(spec_path), point=str(point_path), signal="SR0/signal",
                reference="/dev/null/cannot/ref.json")  # fmt: skip
    result = run(words)
    assert result.outcome == "error" and encode(result.record)["phase"] == "check"
    assert "NotADirectoryError" in result.reason or "FileNotFoundError" in result.reason
    assert encode(result.record)["marks_ns"]["second"] > encode(result.record)["marks_ns"]["first"]  # the cold figures survive


def test_a_gpu_that_fails_to_initialise_keeps_its_cause_and_is_an_error_where_a_gpu_is_present(monkeypatch):
    """A driver/plugin mismatch on a GPU machine was `warn: gpu_unavailable` with the cause thrown
    away and exit 0 (issue 27, item 3)."""
    from ttfr.child import hostinfo
    from ttfr.child.backends import GpuInitFailed, Unavailable, gpu_unusable

    cause = RuntimeError("Unable to initialize backend 'cuda': FAILED_PRECONDITION: No visible GPU devices.\nmore")
    monkeypatch.setattr(hostinfo, "gpu_device_nodes", lambda: [])
    missing = gpu_unusable("JAX", cause)
    assert isinstance(missing, Unavailable)
    assert str(missing) == "gpu_unavailable: Unable to initialize backend 'cuda': FAILED_PRECONDITION: No visible GPU devices."
    monkeypatch.setattr(hostinfo, "gpu_device_nodes", lambda: ["nvidia0"])
    broken = gpu_unusable("JAX", cause)
    assert isinstance(broken, GpuInitFailed) and "a GPU is present but JAX could not use it: Unable" in str(broken)


def test_tf32_arithmetic_would_fail_the_float32_check_so_the_adapters_ask_for_full_float32():
    """XLA's GPU default is TF32 (10 mantissa bits) where torch keeps FP32: emulated here, TF32 misses
    matmul's float32 tolerance at 512, full float32 meets it (issue 27, item 2). The adapters set the
    precision, and every JAX and torch case says so."""
    import numpy as np

    from ttfr.child.workloads import matmul
    from ttfr.measure import catalog

    a, b = matmul.make_inputs(512, "float32", 0)
    (reference,) = matmul.reference([a, b])

    def tf32(x):  # keep 10 of float32's 23 mantissa bits, as TF32 inputs do
        return (x.view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)

    def error(out):
        return float(np.max(np.abs(out.astype(np.float64) - reference)) / np.max(np.abs(reference)))

    tolerance = matmul.TOLERANCE["float32"]
    assert error(tf32(a) @ tf32(b)) > tolerance > error(a @ b)
    for name in ("jax_jit_gpu", "jax_jit_cpu", "torch_eager_cuda", "torch_compile_cpu"):
        case = catalog.BUILTIN.make_case(name, "matmul", 512, "f32")
        assert "float32 matmul precision highest" in case.sync_policy, name


def test_tf32_is_a_declared_variant_chosen_by_name_whose_check_allows_tf32s_error():
    """Issue 27, item 2: TF32 for both frameworks as declared backends, never in a default suite; their
    float32 check allows TF32's error (emulated: it passes there, and fails the full-precision tolerance)."""
    import numpy as np

    from ttfr.child import worker
    from ttfr.child.workloads import matmul
    from ttfr.measure.spec import RunRequest, build_spec

    variants = {"jax_jit_gpu_tf32", "torch_eager_cuda_tf32", "torch_compile_cuda_tf32"}
    assert not variants & {case.backend for case in build_spec(RunRequest()).cases}
    named = build_spec(RunRequest(backends="jax_jit_gpu_tf32,torch_eager_cuda_tf32", workloads="matmul", sizes="512"))
    policies = {case.backend: case.sync_policy for case in named.cases}
    assert "precision tensorfloat32: TF32" in policies["jax_jit_gpu_tf32"]
    assert "precision high: TF32" in policies["torch_eager_cuda_tf32"]
    for size in (512, 1024):
        a, b = matmul.make_inputs(size, "float32", 0)
        tf32 = [(x.view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32) for x in (a, b)]
        result = [tf32[0] @ tf32[1]]
        assert worker._check(matmul, [a, b], result, "float32", tf32=True)["passed"], size
        assert not worker._check(matmul, [a, b], result, "float32")["passed"], size
    assert worker._check(matmul, [a, b], result, "float64", tf32=True)["tolerance"] == matmul.TOLERANCE["float64"]


def test_the_adapters_set_tf32_only_for_the_tf32_variant():
    jax = pytest.importorskip("jax")
    torch = pytest.importorskip("torch")
    from ttfr.child.backends import jax_backend, torch_backend

    before = jax.config.jax_default_matmul_precision, torch.get_float32_matmul_precision()
    try:
        jax_backend.Runtime(job("jax_backend", variant="tf32")).import_stack()
        assert jax.config.jax_default_matmul_precision == "tensorfloat32"
        torch_backend.Runtime(job("torch_backend", variant="tf32")).import_stack()
        assert torch.get_float32_matmul_precision() == "high"
        torch_backend.Runtime(job("torch_backend")).import_stack()
        assert torch.get_float32_matmul_precision() == "highest"
    finally:
        jax.config.update("jax_default_matmul_precision", before[0])
        torch.set_float32_matmul_precision(before[1])


def test_the_jax_adapter_sets_full_float32_matmuls():
    jax = pytest.importorskip("jax")
    from ttfr.child.backends import jax_backend

    before = jax.config.jax_default_matmul_precision
    try:
        jax_backend.Runtime(job("jax_backend")).import_stack()
        assert jax.config.jax_default_matmul_precision == "highest"
    finally:
        jax.config.update("jax_default_matmul_precision", before)


def test_a_gpus_out_of_memory_is_oom_not_error():
    """torch's OutOfMemoryError and XLA's RESOURCE_EXHAUSTED (issue 27, item 13)."""
    from ttfr.child import worker

    class OutOfMemoryError(RuntimeError):  # torch.cuda.OutOfMemoryError's name
        pass

    class XlaRuntimeError(RuntimeError):  # jaxlib's
        pass

    for exc in (OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"),
                XlaRuntimeError("RESOURCE_EXHAUSTED: Out of memory while trying to allocate 4294967296 bytes.")):  # fmt: skip
        outcome, reason = worker._classify(worker._PhaseError("first_call", exc))
        assert outcome == "oom" and reason.startswith("device out of memory in first_call"), reason
    assert worker._classify(worker._PhaseError("first_call", XlaRuntimeError("INTERNAL: boom")))[0] == "error"
