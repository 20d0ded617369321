"""The catalog's per-backend facts, stated once more by hand: a changed fact must be a
decision (edit this table too), never the side effect of a refactor."""

import pytest

from ttfr.measure import catalog
from ttfr.measure.spec import RunRequest, build_spec
from ttfr.measure import workerenv
from ttfr.measure.workerenv import build_env

# backend: (barrier, cache counters, environment added for a worker with an empty base)
FACTS = {
    "python": (False, None, {}),
    "numpy": (False, None, {}),
    "jax_jit_cpu": (True, catalog.JAX_MONITORING, {"JAX_PLATFORMS": "cpu"}),
    "jax_jit_gpu": (True, catalog.JAX_MONITORING, {"CUDA_VISIBLE_DEVICES": "0", "XLA_PYTHON_CLIENT_PREALLOCATE": "true"}),
    "torch_eager_cpu": (False, catalog.TORCH_COUNTERS, {"CUDA_VISIBLE_DEVICES": ""}),  # no CUDA for a CPU case
    "torch_compile_cpu": (False, catalog.TORCH_COUNTERS, {"CUDA_VISIBLE_DEVICES": ""}),
    "torch_eager_cuda": (True, catalog.TORCH_COUNTERS, {"CUDA_VISIBLE_DEVICES": "0"}),  # one GPU per worker
    "torch_compile_cuda": (True, catalog.TORCH_COUNTERS, {"CUDA_VISIBLE_DEVICES": "0"}),
    # the declared TF32 variants: their base backend's facts
    "jax_jit_gpu_tf32": (True, catalog.JAX_MONITORING, {"CUDA_VISIBLE_DEVICES": "0", "XLA_PYTHON_CLIENT_PREALLOCATE": "true"}),
    "torch_eager_cuda_tf32": (True, catalog.TORCH_COUNTERS, {"CUDA_VISIBLE_DEVICES": "0"}),
    "torch_compile_cuda_tf32": (True, catalog.TORCH_COUNTERS, {"CUDA_VISIBLE_DEVICES": "0"}),
    "pyhf_numpy": (False, None, {}),
    # pyhf's JAX backend synchronises with block_until_ready and reports JAX's cache events;
    # it is a CPU backend, so it stays off a GPU like jax_jit_cpu.
    "pyhf_jax": (True, catalog.JAX_MONITORING, {"JAX_PLATFORMS": "cpu"}),
    "pyhf_pytorch": (False, None, {"CUDA_VISIBLE_DEVICES": ""}),
    "nextstat": (False, None, {}),
    # conversions: a route into JAX (or CUDA) waits on its barrier; the CPU one keeps JAX and CUDA off a GPU
    "interop": (True, None, {"JAX_PLATFORMS": "cpu", "CUDA_VISIBLE_DEVICES": ""}),
    "interop_gpu": (True, None, {"CUDA_VISIBLE_DEVICES": "0"}),
    # a user's program: no counters to read, its cache directories' files instead; its Python
    # prints reach the --first-result scanner line by line
    "command": (False, catalog.DIRECTORY_ENTRIES, {"PYTHONUNBUFFERED": "1"}),
}


def test_every_backend_is_stated():
    assert set(FACTS) == set(catalog.BACKENDS)


@pytest.mark.parametrize("name", sorted(FACTS))
def test_barrier_counters_and_worker_environment(name, monkeypatch):
    monkeypatch.setattr(workerenv, "toolkit_ptxas", lambda environ: None)  # no CUDA toolkit here
    backend = catalog.BACKENDS[name]
    barrier, counters, env = FACTS[name]
    assert (backend.barrier, backend.cache_counters) == (barrier, counters)
    if name == catalog.COMMAND:
        spec = build_spec(RunRequest(commands=["true"]))
        case = spec.cases[0]
    else:
        case = next(c for c in catalog.BUILTIN.catalogued_cases() if c.backend == name)
        presets = ["complex8p"] if case.uses_workspace else []
        spec = build_spec(RunRequest(cases=[case.id], workspace_presets=presets))
    assert build_env(case, spec, {}, base={}) == env
    # a user's own platform choice is kept
    assert build_env(case, spec, {}, base={"JAX_PLATFORMS": "cuda"}).get("JAX_PLATFORMS") == "cuda"


def test_a_gpu_jax_case_uses_a_cuda_toolkit_only_when_asked(tmp_path):
    """XLA keeps its wheels' ptxas unless the user asks for a toolkit's (issue 27, item 4): an older
    or newer one breaks compiles or disables parallel compilation without a word."""
    from ttfr.artifacts import manifest

    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "ptxas").write_text("")
    case = catalog.BUILTIN.make_case("jax_jit_gpu", "matmul", 64, "float32")
    spec = build_spec(RunRequest(cases=[case.id]))
    plain = build_env(case, spec, {}, base={"CUDA_HOME": str(tmp_path), "PATH": "/usr/bin"})
    assert plain["PATH"] == "/usr/bin" and "XLA_FLAGS" not in plain  # installed, not asked for
    for request in ("1", str(tmp_path)):
        base = {"CUDA_HOME": str(tmp_path), "PATH": "/usr/bin", workerenv.TOOLKIT_REQUEST: request}
        env = build_env(case, spec, {}, base=base)
        assert env["PATH"].startswith(str(tmp_path / "bin")) and f"--xla_gpu_cuda_data_dir={tmp_path}" in env["XLA_FLAGS"]
        # JAX overrides XLA_FLAGS' CUDA directory with its own (CUDA_ROOT, else its wheels): CUDA_ROOT chooses
        assert env["CUDA_ROOT"] == str(tmp_path)
        assert manifest.ptxas_info(base)["source"] == "cuda_toolkit (TTFR_CUDA_TOOLKIT)"
    # =1 takes a CUDA_ROOT already set first (JAX's own first choice); a path asked for wins over it
    other = tmp_path / "other"
    (other / "bin").mkdir(parents=True)
    (other / "bin" / "ptxas").write_text("")
    asked = {"CUDA_HOME": str(tmp_path), workerenv.TOOLKIT_REQUEST: "1", "CUDA_ROOT": str(other)}
    assert build_env(case, spec, {}, base=asked)["CUDA_ROOT"] == str(other)
    asked = {workerenv.TOOLKIT_REQUEST: str(tmp_path), "CUDA_ROOT": str(other)}
    assert build_env(case, spec, {}, base=asked)["CUDA_ROOT"] == str(tmp_path)


@pytest.mark.parametrize("layout", ["cu13", "cuda_nvcc"])
def test_the_ptxas_of_jaxs_cuda_wheels_is_the_one_in_the_directory_jax_hands_xla(tmp_path, monkeypatch, layout):
    """CUDA 13's nvidia-cuda-nvcc wheel puts ptxas in nvidia/cu13/bin, CUDA 12's in nvidia/cuda_nvcc/bin;
    the manifest records the one JAX's own discovery finds (so a nvidia/cu13 of libraries only, torch's
    CUDA 13 wheels, hides a cuda_nvcc one from JAX: the manifest says that, not the wheel's)."""
    from ttfr.artifacts import manifest

    monkeypatch.syspath_prepend(str(tmp_path))
    ptxas = tmp_path / "nvidia" / layout / "bin" / "ptxas"
    ptxas.parent.mkdir(parents=True)
    ptxas.write_text("")
    found = manifest.ptxas_info({"PATH": ""})
    assert found["path"] == str(ptxas) and found["source"] == f"JAX's CUDA directory (nvidia.{layout} wheel)"
    if layout == "cuda_nvcc":
        (tmp_path / "nvidia" / "cu13" / "lib").mkdir(parents=True)  # torch's cu13 libraries, no ptxas
        found = manifest.ptxas_info({"PATH": "", "CUDA_HOME": "/nonexistent"})
        assert found is None or found["source"].startswith(("PATH", "cuda_toolkit"))


def test_with_a_toolkit_asked_for_the_manifest_says_what_the_workers_get(tmp_path, monkeypatch):
    """TTFR_CUDA_TOOLKIT makes the workers' CUDA_ROOT the toolkit's (JAX then hands XLA that directory):
    the manifest's ptxas and JAX directory are the workers', not this process's environment's."""
    from ttfr.artifacts import manifest
    from ttfr.child.backends import compat

    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "ptxas").write_text("")
    workers = manifest.workers_cuda_environment({workerenv.TOOLKIT_REQUEST: str(tmp_path), "CUDA_ROOT": "/old"})
    assert workers["CUDA_ROOT"] == str(tmp_path)
    assert compat.jax_cuda_directory(workers) == {"path": str(tmp_path), "source": "CUDA_ROOT"}
    assert manifest.workers_cuda_environment({"CUDA_ROOT": "/mine"})["CUDA_ROOT"] == "/mine"  # nothing asked: kept


def test_the_manifest_says_which_cuda_directory_jax_will_hand_xla(tmp_path, monkeypatch):
    """JAX's own discovery: CUDA_ROOT, else the nvidia.cu13 / nvidia.cuda_nvcc wheel holding ptxas; a
    nvidia/cu13 of libraries only makes it hand over 'None' (said, with what to do)."""
    from ttfr.child.backends import compat

    monkeypatch.syspath_prepend(str(tmp_path))
    assert compat.jax_cuda_directory({"CUDA_ROOT": "/opt/cuda"}) == {"path": "/opt/cuda", "source": "CUDA_ROOT"}
    (tmp_path / "nvidia" / "cu13" / "lib").mkdir(parents=True)
    found = compat.jax_cuda_directory({})
    assert found["path"] is None and "without bin/ptxas" in found["source"] and "TTFR_CUDA_TOOLKIT=1" in found["source"]
    (tmp_path / "nvidia" / "cu13" / "bin").mkdir()
    (tmp_path / "nvidia" / "cu13" / "bin" / "ptxas").write_text("")
    assert compat.jax_cuda_directory({}) == {"path": str(tmp_path / "nvidia" / "cu13"), "source": "nvidia.cu13 wheel"}


def test_the_gpu_stacks_distributions_are_recognised_by_either_cuda_generations_names():
    from ttfr.child.backends import compat

    named = ["jax-cuda13-plugin", "jax-cuda13-pjrt", "jax-cuda12-plugin", "nvidia-cublas", "nvidia-cublas-cu12",
             "nvidia-cudnn-cu13", "nvidia-cuda-nvcc", "nvidia-cuda-nvcc-cu12", "triton"]  # fmt: skip
    assert all(compat.GPU_STACK_DISTRIBUTIONS.fullmatch(name) for name in named)
    assert not any(compat.GPU_STACK_DISTRIBUTIONS.fullmatch(n) for n in ("jax", "jaxlib", "torch", "nvidia-ml-py"))


def test_the_gpu_stacks_versions_are_read_off_the_installed_folders_names(tmp_path):
    """The GPU image's own distributions as installed (names normalised), without opening any metadata."""
    from ttfr.child.backends import compat

    for folder in ("jax_cuda13_plugin-0.11.2.dist-info", "nvidia_cublas-13.1.0.3.dist-info", "triton-3.6.0.dist-info",
                   "torch-2.11.0+cu130.dist-info", "jax_cuda13_plugin-0.11.2.data", "README.txt",
                   "nvidia-cudnn-cu13-9.13.0.50.dist-info", "nvidia_cuda_nvcc-13.0.88-py3.12.egg-info"):  # fmt: skip
        (tmp_path / folder).mkdir()
    assert compat.gpu_stack_versions([str(tmp_path), str(tmp_path / "missing")]) == {
        "jax-cuda13-plugin": "0.11.2", "nvidia-cublas": "13.1.0.3", "nvidia-cuda-nvcc": "13.0.88",
        "nvidia-cudnn-cu13": "9.13.0.50", "triton": "3.6.0"}  # fmt: skip


@pytest.mark.parametrize("backend", catalog.BACKENDS.values(), ids=lambda b: b.name)
def test_every_backend_states_a_sync_policy_and_a_positive_eta_prior(backend):
    assert backend.sync_policy and all(seconds > 0 for seconds in backend.cost_prior_s)
    assert backend.barrier == ("block_until_ready" in backend.sync_policy or "synchronize" in backend.sync_policy)


def test_the_manifest_records_what_a_gpus_timings_depend_on_besides_the_chip():
    """Persistence mode, MIG and compute mode, clocks, ECC per device (issue 27, item 13), from
    nvidia-smi's CSV; and the GPU stack's own packages."""
    from ttfr.artifacts import manifest

    line = "NVIDIA H100 80GB HBM3, 550.54.15, 81559 MiB, Enabled, Disabled, Default, 1980 MHz, 1980 MHz, 2619 MHz, Enabled"
    (device,) = manifest.gpu_devices(line + "\n")
    assert device == {"name": "NVIDIA H100 80GB HBM3", "memory": "81559 MiB", "driver_version": "550.54.15",
                      "persistence_mode": "Enabled", "mig.mode.current": "Disabled", "compute_mode": "Default",
                      "clocks.sm": "1980 MHz", "clocks.max.sm": "1980 MHz", "clocks.mem": "2619 MHz",
                      "ecc.mode.current": "Enabled"}  # fmt: skip
    assert manifest.gpu_devices("garbage, line\n") == []
    info = manifest.gpu_info()
    from ttfr.child.backends import compat

    assert info["packages"] == compat.gpu_stack_versions()  # whichever are installed (none in the CPU lock)
