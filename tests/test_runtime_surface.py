"""Every runtime API ttfr's adapters call exists in the installed versions (child/backends/compat.py
keeps the list and what differs between the versions ttfr supports). Here on the lock file's CPU
stack; on a GPU image through `pytest -m gpu` (make gpu-check), where torch 2.11 / jax 0.11 are."""

import subprocess
import sys

import pytest
from conftest import machine_has_gpu

from ttfr.child.backends import compat


@pytest.mark.integration
@pytest.mark.gpu
@pytest.mark.parametrize("runtime", sorted(compat.RUNTIME_SURFACE))
def test_every_api_the_adapters_call_exists_in_the_installed_runtime(runtime):
    pytest.importorskip(runtime)
    assert compat.missing_surface(compat.RUNTIME_SURFACE[runtime]) == []


def test_a_missing_api_is_named_with_why_not_raised():
    assert compat.missing_surface(["json.dumps", "json.no_such_thing", "no_such_module.thing"]) == [
        "json.no_such_thing: AttributeError: module 'json' has no attribute 'no_such_thing'",
        "no_such_module.thing: ModuleNotFoundError: No module named 'no_such_module'",
    ]


_ON_THE_GPU = """
import json, torch
from ttfr.artifacts import manifest
from ttfr.child.backends import compat
torch.set_float32_matmul_precision("high")
tf32 = torch.backends.cuda.matmul.allow_tf32
torch.set_float32_matmul_precision("highest")
info = manifest.gpu_info()
print(json.dumps({"tf32_high": tf32, "tf32_highest": torch.backends.cuda.matmul.allow_tf32,
                  "ptxas": info["ptxas"], "packages": info["packages"], "driver": info["driver_version"]}))
"""


@pytest.mark.gpu
@pytest.mark.skipif(not machine_has_gpu(), reason="needs a real GPU")
def test_on_the_gpu_the_tf32_setting_reaches_cublas_and_the_manifest_finds_ptxas_and_the_cuda_plugin():
    """What only a GPU image can show: TF32 on and off as asked (the worker's one call), a ptxas the
    manifest can name and run, and the JAX CUDA plugin among the GPU stack's packages."""
    import json

    done = subprocess.run([sys.executable, "-c", _ON_THE_GPU], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["tf32_high"] is True and found["tf32_highest"] is False
    assert found["ptxas"] and found["ptxas"]["version"], found["ptxas"]
    assert any(name.startswith("jax-cuda") for name in found["packages"]), found["packages"]
    assert found["driver"]
