"""Every adapter and workload the catalog names satisfies the worker's contracts."""

import importlib

import pytest

from ttfr.child.contracts import ArrayWorkload, EngineWorkload, LoopWorkload, RuntimeAdapter
from ttfr.child.job import Job
from ttfr.measure import catalog

# What each framework's adapter asks its workload for (child/backends/*.py first_call).
BUILDER = {"python": "python_fn", "numpy": "numpy_fn", "jax": "jax_fn", "torch": "torch_build",
           "pyhf": "engine_build", "nextstat": "engine_build", "interop": "route_call", "interop_gpu": "route_call"}  # fmt: skip


@pytest.mark.parametrize("backend", [b for b in catalog.BACKENDS.values() if b.in_process], ids=lambda b: b.name)
def test_every_adapter_is_a_runtime_adapter(backend):
    module = importlib.import_module(f"ttfr.child.backends.{backend.adapter}")
    job = Job(adapter=backend.adapter, device=backend.device, compile=backend.compiles, variant=backend.variant,
              workload="matmul", size=2, dtype="float64")  # fmt: skip
    runtime = module.Runtime(job)  # constructing imports no runtime
    assert isinstance(runtime, RuntimeAdapter)
    assert runtime.framework == backend.framework


@pytest.mark.parametrize("workload", catalog.WORKLOADS.values(), ids=lambda w: w.name)
def test_every_workload_keeps_its_contract_for_every_framework_it_claims(workload):
    module = importlib.import_module(f"ttfr.child.workloads.{workload.child_module}")
    if workload.loop:  # its builders are per strategy: tests/test_loops.py builds every one the catalog claims
        assert isinstance(module, LoopWorkload) and module.LOOP
        if workload.reads_workspace:
            assert all(callable(getattr(module, name, None)) for name in ("load_inputs", "check", "dataset_sha256"))
        else:
            assert isinstance(module, ArrayWorkload)
        return
    contract = EngineWorkload if workload.reads_workspace else ArrayWorkload
    assert isinstance(module, contract)
    builders = {BUILDER[b.framework] for b in catalog.BACKENDS.values() if catalog.supports(b, workload)}
    assert [name for name in sorted(builders) if not callable(getattr(module, name, None))] == []


def test_a_module_missing_a_piece_breaks_the_contract():
    import types

    broken = types.ModuleType("broken")
    broken.TOLERANCE, broken.make_inputs = {}, lambda size, dtype, seed: []
    assert not isinstance(broken, ArrayWorkload)  # no reference
    broken.reference = lambda inputs: []
    assert isinstance(broken, ArrayWorkload)
