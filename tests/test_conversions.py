"""Conversions across runtimes (issue 28): copy evidence on routes whose behaviour the libraries
document, refusals as `unavailable` with the library's words, the memory guard, the leak probe,
and the figures the analysis derives once."""

from __future__ import annotations

import os
import sys
from types import SimpleNamespace

import numpy as np
import pytest
from conftest import have

from ttfr.analyse import conversions
from ttfr.report import flag_text
from ttfr.child.backends import Unavailable, interop_backend
from ttfr.child.conversion_routes import LAYOUTS, ROUTES
from ttfr.child.job import Job
from ttfr.child.workloads import convert
from ttfr.measure import catalog, spawn
from ttfr.model.base import UNSET, decode
from ttfr.model.conversion_evidence import ConversionEvidence, ConversionLayout
from ttfr.model.record import RunRecord

pytestmark = pytest.mark.skipif(not (have("torch") and have("jax")), reason="needs torch and jax")
SIZE = 64 << 10


def runtime(route, dtype="float32"):
    rt = interop_backend.Runtime(Job(adapter="interop_backend", workload="convert", strategy=route, size=SIZE, dtype=dtype))
    rt.import_stack()
    return rt


def row(route, layout, dtype="float32"):
    rt = runtime(route, dtype)
    values = convert.make_inputs(SIZE, dtype, 3)[0]
    return convert.layout_row(rt, rt.route, values, layout, rt.sync or (lambda _x: None))


def test_documented_sharing_and_copying_are_measured_not_assumed():
    shared = row("numpy_to_torch_from_numpy", "contiguous")  # torch.from_numpy shares memory (its docs)
    assert (shared["copied"], shared["shares_memory"], shared["write_through"], shared["values_ok"]) == (False, True, True, True)
    copied = row("numpy_copy", "contiguous")  # np.array(..., copy=True) never does
    assert (copied["copied"], copied["shares_memory"], copied["write_through"]) == (True, False, False)
    transposed = row("numpy_to_torch_from_numpy", "transposed")  # strides kept: still a view, same values
    assert transposed["copied"] is False and transposed["values_ok"] is True
    # np.asarray(jax_array) shares the array's buffer (JAX arrays cannot be written: no write-through probe)
    view = row("jax_to_numpy_asarray", "contiguous")
    assert view["copied"] is False and view["write_through"] is None
    assert row("jax_to_numpy_asarray", "transposed")["outcome"] == "not_applicable"


def test_a_route_that_refuses_a_layout_keeps_the_librarys_words():
    readonly = row("numpy_to_jax_dlpack", "readonly")  # DLPack cannot say read-only: JAX refuses it
    assert readonly["outcome"] == "refused" and readonly["reason"].startswith("BufferError: ")
    assert readonly["copied"] is None and readonly["call_s"] is None


def test_a_timed_route_the_library_refuses_is_unavailable_with_its_reason():
    rt = runtime("numpy_to_torch_from_numpy", "bfloat16")  # torch cannot take NumPy's bfloat16
    source = convert.inputs_for(rt, convert.make_inputs(SIZE, "bfloat16", 0))
    with pytest.raises(Unavailable, match=r"^refused: TypeError: can't convert np.ndarray of type"):
        rt.first_call(convert, source)


def test_the_memory_guard_skips_an_oversized_case_before_allocating(monkeypatch):
    monkeypatch.setattr(convert.hostinfo, "memory_available_bytes", lambda: 512 << 20)
    monkeypatch.setattr(convert, "make_inputs", lambda *a: pytest.fail("allocated before the guard"))
    job = Job(adapter="interop_backend", workload="convert", strategy="numpy_copy", size=1 << 30, dtype="float32")
    # 4 copies of the source and the check's 3 float64 ones (6 float32 copies): 10 GiB and headroom
    with pytest.raises(Unavailable, match=r"^insufficient_memory: 1073741824 bytes need about 10496 MiB free"):
        convert.load_inputs(job)


def test_the_leak_probe_flags_a_route_that_keeps_what_it_converts_and_clears_a_clean_one():
    kept = []
    rss = {"bytes": 100 << 20}

    def leaky(source):  # keeps every result: the process grows by the array each call
        kept.append(source)
        rss["bytes"] += 1 << 20
        return source

    def clean(source):
        return source

    probe = convert.leak_probe(leaky, "x", lambda _x: None, 1 << 20, calls=100, rss=lambda: rss["bytes"])
    assert probe["grows"] is True and probe["calls"] == 100 and probe["growth_per_call_bytes"] == 1 << 20
    steady = convert.leak_probe(clean, "x", lambda _x: None, 1 << 20, calls=100, rss=lambda: rss["bytes"])
    assert steady["grows"] is False and steady["growth_per_call_bytes"] == 0
    # a one-off growth early on (an allocator's first pool) is not a leak
    once = iter([0] + [64 << 20] * 10)
    assert convert.leak_probe(clean, "x", lambda _x: None, 1, calls=10, rss=lambda: next(once))["grows"] is False


def _evidence(**changes) -> ConversionEvidence:
    layout = {"layout": "contiguous", "outcome": "ok", "reason": None, "copied": True, "shares_memory": False,
              "write_through": False, "values_ok": True, "call_s": 1e-3, "source_offset_64": 16}  # fmt: skip
    data = {"route": "numpy_to_jax_asarray", "source": "numpy", "destination": "jax", "api": "jnp.asarray(a)",
            "bytes": 4 << 20, "source_offset_64": 16, "copied": True, "layouts": [layout], "memcpy_s": 2e-4,
            "memcpy_fresh_s": 1e-3, "leak": {"calls": 2048, "rss_samples": [1, 1], "growth_per_call_bytes": 0.0,
                                             "grows": False}}  # fmt: skip
    data.update(changes)
    return decode(data, ConversionEvidence)


class _Policy:
    def __init__(self, median):
        self.median = median

    def figure(self, _metric):
        return self


def test_a_copying_routes_rate_is_set_against_memcpy_once_and_its_evidence_raises_flags():
    figures, flags = conversions.case_conversion(_evidence(), {"warm-process": _Policy(8e-4)})
    assert figures.bytes_per_s == pytest.approx((4 << 20) / 8e-4) and figures.memcpy_fraction == pytest.approx(0.25)
    assert figures.below_half_memcpy is True and flags == []
    shared, _ = conversions.case_conversion(_evidence(copied=False), {"warm-process": _Policy(1e-6)})
    assert shared.bytes_per_s is None and shared.memcpy_fraction is None  # a view moves no bytes: no rate
    # a memcpy too fast to time has no rate, so nothing is set against it: not 0 % of memcpy, "below half"
    untimed, _ = conversions.case_conversion(_evidence(memcpy_s=0.0), {"warm-process": _Policy(8e-4)})
    assert untimed.memcpy_bytes_per_s is None and untimed.memcpy_fraction is None
    assert untimed.below_half_memcpy is None
    bad = [{"layout": "transposed", "outcome": "ok", "reason": None, "copied": None, "shares_memory": True,
            "write_through": False, "values_ok": False, "call_s": 1e-6, "source_offset_64": 0}]  # fmt: skip
    leak = {"calls": 100, "rss_samples": [0, 1 << 30], "growth_per_call_bytes": 1e7, "grows": True}
    _, flags = conversions.case_conversion(_evidence(layouts=bad, leak=leak), {})
    assert [f.name for f in flags] == ["conversion_leak", "conversion_wrong_values", "copy_evidence_disagrees"]
    assert flag_text.sentence(flags[0]).startswith("the process's memory still grew through 100 conversions, by 10,000,000 bytes")


def test_the_catalog_offers_every_route_on_its_device_and_convert_names_them_all():
    assert catalog.expand_workloads(["convert"]) == list(ROUTES)
    for route in ROUTES.values():
        able = {b.name for b in catalog.BACKENDS.values() if catalog.supports(b, catalog.WORKLOADS[route.name])}
        assert able == {"interop_gpu" if route.device == "gpu" else "interop"}, route.name
    case = catalog.BUILTIN.parse_case_id("interop_numpy_to_jax_asarray_65536_bf16")
    assert (case.dtype, case.size) == ("bfloat16", 65536) and case.id == "interop_numpy_to_jax_asarray_65536_bf16"
    assert set(LAYOUTS) == {"contiguous", "transposed", "misaligned", "readonly"}


@pytest.mark.integration
def test_a_warm_conversion_process_records_its_evidence_in_a_real_worker():
    job = Job(mode="warm", adapter="interop_backend", workload="convert", strategy="numpy_to_jax_asarray", size=SIZE,
              dtype="float32", samples=3, min_sample_s=0.001, max_warmup_s=0.05, check=True)  # fmt: skip
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    result = spawn.run_worker(job, env, 120.0, python=sys.executable)
    assert result.outcome == "ok", result.output_tail
    record: RunRecord = result.record
    assert record.check.passed and record.check.tolerance == 0.0
    evidence = record.conversion
    assert evidence.bytes == SIZE and [r.layout for r in evidence.layouts] == list(LAYOUTS)
    assert all(r.values_ok for r in evidence.layouts if r.outcome == "ok")
    assert evidence.memcpy_s > 0 and evidence.leak.calls >= 10
    assert evidence.copied is not None and evidence.source_offset_64 is not None  # measured, with the alignment


def test_the_nextstat_export_leaves_out_what_its_contract_cannot_hold_and_says_why():
    """NextStat's ml contract knows float32 and float64: a bfloat16 route's case would be rejected."""
    from types import SimpleNamespace

    from ttfr.artifacts.export import nextstat

    cases = [SimpleNamespace(case="a_f32", command=UNSET, dtype="float32"),
             SimpleNamespace(case="b_bf16", command=UNSET, dtype="bfloat16"),
             SimpleNamespace(case="c_cmd", command=object(), dtype="float64")]  # fmt: skip
    why = nextstat.left_out(cases)
    assert set(why) == {"b_bf16", "c_cmd"}
    assert why["b_bf16"] == "bfloat16: NextStat's ml contract knows float32 and float64 only"


def _at_offset(values, offset: int):
    """`values` copied into a buffer whose first element sits `offset` bytes past a 64-byte boundary."""
    import numpy as np

    raw = np.empty(values.nbytes + 128, dtype=np.uint8)
    start = (-raw.__array_interface__["data"][0]) % 64 + offset
    placed = raw[start : start + values.nbytes].view(values.dtype).reshape(values.shape)
    placed[...] = values
    return placed


def test_the_cases_verdict_is_its_timed_sources_and_xla_aliases_only_aligned_buffers():
    """Whether NumPy -> JAX copies depends on where the source sits (XLA:CPU aliases 64-byte aligned
    buffers, copies others): the verdict must be the one of the array the timed calls converted, not of
    another allocation made for the evidence."""
    rt = runtime("numpy_to_jax_device_put")
    values = convert.make_inputs(SIZE, "float32", 3)[0]
    verdicts = {}
    for offset in (0, 16):
        source = _at_offset(values, offset)
        rt.call = convert.route_call(rt, source)
        evidence = convert.conversion_evidence(rt, [source], [values], None)
        assert evidence["source_offset_64"] == offset == evidence["layouts"][0]["source_offset_64"]
        verdicts[offset] = evidence["copied"]
    assert verdicts == {0: False, 16: True}


def test_a_conversion_size_is_the_bytes_measured_and_a_torch_source_is_torchs_own():
    from ttfr.errors import UsageError
    from ttfr.measure.spec import RunRequest, build_spec

    with pytest.raises(UsageError, match="a multiple of 512 bytes"):  # 2000 would have measured 1536
        build_spec(RunRequest(backends="interop", workloads="numpy_copy", sizes="2000"))
    rt = runtime("torch_to_jax_dlpack")
    values = convert.make_inputs(SIZE, "float32", 0)[0]
    source = convert.make_source(rt, "torch", values, "contiguous")
    # torch's allocation (its allocator aligns to 64 bytes), not the NumPy array a float32 cast would keep
    assert not convert.shares_memory(convert.extent(rt, values), convert.extent(rt, source))
    assert source.data_ptr() % 64 == 0


def test_bf16_on_a_workload_that_has_none_names_the_dtypes_not_the_backends():
    from ttfr.errors import UsageError
    from ttfr.measure.spec import RunRequest, build_spec

    with pytest.raises(UsageError, match=r"^no chosen workload is offered in --dtypes bf16 \(bf16: the conversion "
                       r"routes only\); dtypes offered: matmul: f32, f64$"):  # fmt: skip
        build_spec(RunRequest(backends="jax_jit_cpu", workloads="matmul", sizes="64", dtypes="bf16"))


# ------------------------------------------------------------------ what the first GPU lease found (2026-11-28, H200)
def test_the_same_buffer_seen_from_host_and_device_is_shared_memory():
    """Under CUDA's unified addressing host and device pointers share one address space: JAX's import of a
    torch pinned tensor sat on the GPU over the tensor's own bytes (a write showed through), and a check that
    called host and device memory disjoint by their spaces gave no copy verdict."""
    assert convert.shares_memory(("host", 0x1000, 0x2000), ("device", 0x1000, 0x2000)) is True
    assert convert.shares_memory(("host", 0x1000, 0x2000), ("device", 0x2000, 0x3000)) is False
    assert convert.shares_memory(None, ("device", 0, 1)) is None


def test_a_gpu_array_in_host_memory_is_placed_in_host_memory():
    class PinnedJaxArray:  # the surface extent() reads of a jax.Array
        dtype, shape = np.dtype("float32"), (4, 4)
        sharding = SimpleNamespace(memory_kind="pinned_host")

        def unsafe_buffer_pointer(self):
            return 0x4000

        def devices(self):
            return [SimpleNamespace(platform="gpu")]

    rt = SimpleNamespace(torch=None)
    assert convert.extent(rt, PinnedJaxArray()) == ("host", 0x4000, 0x4000 + 64)
    PinnedJaxArray.sharding = SimpleNamespace(memory_kind="device")
    assert convert.extent(rt, PinnedJaxArray())[0] == "device"


def test_a_conversion_whose_result_fails_when_used_is_unusable_in_the_librarys_words(monkeypatch):
    """JAX took a misaligned torch CUDA view through DLPack without a word, then refused to compute on it:
    the layout row says so (it crashed the whole evidence before)."""

    class BrokenArray:
        def __array__(self, *args, **kwargs):
            raise RuntimeError("INTERNAL: Address of buffer 0 must be a multiple of 10, but was 0x7fa71a800004\nmore")

    monkeypatch.setattr(convert, "converter", lambda _rt, _route, _source: lambda _s: BrokenArray())
    rt = SimpleNamespace(torch=None, jax=None)
    values = convert.make_inputs(SIZE, "float32", 3)[0]
    got = convert.layout_row(rt, ROUTES["numpy_copy"], values, "misaligned", lambda _x: None, source=values.copy())
    assert got["outcome"] == "unusable" and got["copied"] is None and got["call_s"] is None
    assert got["reason"] == "RuntimeError: INTERNAL: Address of buffer 0 must be a multiple of 10, but was 0x7fa71a800004"
    layout = decode({**got, "layout": "misaligned"}, ConversionLayout)  # the typed evidence holds it
    assert layout.outcome == "unusable"


def test_a_disagreement_between_addresses_and_a_write_says_both(monkeypatch):
    rt = runtime("numpy_to_torch_from_numpy")
    values = convert.make_inputs(SIZE, "float32", 3)[0]
    monkeypatch.setattr(convert, "shares_memory", lambda _a, _b: False)  # the addresses miss what the write sees
    got = convert.layout_row(rt, rt.route, values, "contiguous", lambda _x: None)
    assert got["copied"] is None and got["write_through"] is True
    assert got["reason"].startswith("the addresses (host 0x") and got["reason"].endswith("a write through the source showed")


def test_jax_device_arrays_are_converted_afresh_each_call():
    """np.asarray of a JAX device array keeps the host copy on the array: timing the same array twice timed a
    lookup (762 GB/s on an H200). The route converts a fresh device copy each call, so its source's own
    buffer is never what comes back (on CPU, np.asarray(x) alone is a view of it)."""
    rt = runtime("jax_gpu_to_numpy")
    values = convert.make_inputs(SIZE, "float32", 3)[0]
    source = convert.make_source(rt, "jax", values, "contiguous")
    call = convert.converter(rt, rt.route, source)
    first, second = call(source), call(source)
    assert np.array_equal(first, values) and first is not second
    assert not convert.shares_memory(convert.extent(rt, source), convert.extent(rt, first))
    assert convert.shares_memory(convert.extent(rt, source), convert.extent(rt, np.asarray(source)))  # the control


def test_a_source_the_probe_cannot_write_gives_no_write_verdict_not_an_unusable_route():
    rt = runtime("torch_to_numpy_numpy")
    import torch

    leaf = torch.ones((2, 2), requires_grad=True)  # an in-place write into it raises: the probe's, not the route's
    assert convert.write_through(rt, leaf, leaf.detach().numpy().copy(), lambda _x: None) is None
    assert leaf[0, 0].item() == 1.0  # and it was left as it was
