from ttfr.measure import cache, catalog
from ttfr.measure.cache import CacheDirs
from ttfr.measure.catalog import TORCH_COUNTERS
from ttfr.model.base import decode
from ttfr.model.run_figures import HitMiss
from ttfr.model.policies import COLD_CACHE, WARM_CACHE
from ttfr.model.record import RuntimeCounters


def jax_counters(hits, requests, written) -> RuntimeCounters:
    events = {
        "/jax/compilation_cache/cache_hits": hits,
        "/jax/compilation_cache/compile_requests_use_cache": requests,
        "/jax/compilation_cache/cache_misses": written,
    }
    return decode({"events": {k: v for k, v in events.items() if v}, "durations_s": {}}, RuntimeCounters)


def test_jax_hits_and_misses_come_from_monitoring_events():
    counts = cache.hit_miss(catalog.JAX_MONITORING, jax_counters(hits=1, requests=3, written=2))
    assert counts == HitMiss(hits=1, misses=2, requests=3, entries_written=2)


def test_torch_hits_and_misses_add_fx_graph_and_autograd_caches():
    counters = {"counters": {
        "inductor": {"fxgraph_cache_hit": 2, "fxgraph_cache_miss": 1},
        "aot_autograd": {"autograd_cache_hit": 1},
        "graph_break": {"some reason": 2},
        "stats": {"unique_graphs": 3},
    }}  # fmt: skip
    counts = cache.hit_miss(catalog.TORCH_COUNTERS, decode(counters, RuntimeCounters))
    assert (counts.hits, counts.misses, counts.graph_breaks, counts.unique_graphs) == (3, 1, 2, 3)


def test_cold_cache_run_with_hits_is_flagged():
    counts = cache.hit_miss(catalog.JAX_MONITORING, jax_counters(hits=1, requests=1, written=0))
    result = cache.verify(COLD_CACHE, True, counts, entries_before=0, entries_after=1)
    assert result.verdict == "flagged" and "cold_cache_hits" in result.flags


def test_cold_cache_run_that_wrote_nothing_is_flagged():
    counts = cache.hit_miss(catalog.JAX_MONITORING, jax_counters(hits=0, requests=1, written=0))
    result = cache.verify(COLD_CACHE, True, counts, entries_before=0, entries_after=0)
    assert result.flags == ["cache_not_written"]


def test_warm_cache_run_without_hits_is_flagged_and_with_hits_verified():
    miss = cache.hit_miss(catalog.JAX_MONITORING, jax_counters(hits=0, requests=1, written=1))
    assert cache.verify(WARM_CACHE, True, miss, 3, 4).flags == ["warm_cache_no_hits"]
    hit = cache.hit_miss(catalog.JAX_MONITORING, jax_counters(hits=1, requests=1, written=0))
    assert cache.verify(WARM_CACHE, True, hit, 3, 3).verdict == "verified"


def test_cold_cache_clean_run_is_verified():
    counts = cache.hit_miss(catalog.JAX_MONITORING, jax_counters(hits=0, requests=1, written=1))
    assert cache.verify(COLD_CACHE, True, counts, 0, 1).verdict == "verified"


def test_warm_process_counts_are_reported_but_not_judged():
    counts = cache.hit_miss(catalog.JAX_MONITORING, jax_counters(hits=1, requests=1, written=0))
    result = cache.verify("warm-process", True, counts, 3, 3)
    assert result.verdict == "not_applicable" and result.hits == 1


def test_runtimes_without_a_compile_cache_are_not_applicable():
    assert cache.verify(COLD_CACHE, False, None, 0, 0).verdict == "not_applicable"


def test_template_restores_the_same_files_at_the_same_path(tmp_path):
    dirs = CacheDirs(tmp_path, "jax_jit_cpu_matmul_512_f32")
    dirs.make_empty()
    assert dirs.count_entries() == 0
    (dirs.root / "jax" / "entry-cache").write_bytes(b"compiled")
    dirs.save_template()
    dirs.make_empty()
    assert dirs.count_entries() == 0
    dirs.restore_template()
    assert (dirs.root / "jax" / "entry-cache").read_bytes() == b"compiled"
    assert dirs.env()["JAX_COMPILATION_CACHE_DIR"] == str(dirs.root / "jax")
    assert dirs.env()["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] == "0"


def test_cold_cache_hits_on_entries_the_run_wrote_itself_are_not_a_warm_cache():
    # pyhf's JAX backend compiles the same computation twice in one process: the second
    # compile finds the entry the first one wrote. The directory started empty.
    counts = cache.hit_miss(catalog.JAX_MONITORING, jax_counters(hits=2, requests=94, written=92))
    result = cache.verify(COLD_CACHE, True, counts, 0, 92)
    assert result.verdict == "verified" and result.self_hits == 2
    # the same hits from a directory that was not empty, or that nothing was written to, are not
    assert cache.verify(COLD_CACHE, True, counts, 5, 97).flags == ["cold_cache_not_empty", "cold_cache_hits"]
    assert cache.verify(COLD_CACHE, True, counts, 0, 0).flags == ["cold_cache_hits", "cache_not_written"]


def test_a_program_that_writes_no_cache_in_any_run_is_not_applicable_not_flagged():
    """`python -c "import json"` compiles nothing: its cache check was `flagged` (cache_not_written)
    in every run (issue 25, item 13). The case decides (no run wrote), each run renders it."""
    from ttfr.measure import cache as cache_mod
    from ttfr.model.policies import COLD_CACHE, WARM_CACHE

    for policy in (COLD_CACHE, WARM_CACHE):
        check = cache_mod.verify(policy, True, None, 0, 0, cache_mod.DIRECTORY_ENTRIES, uncached=True)
        assert check.verdict == "not_applicable" and check.flags == [] and "elsewhere" in check.note
    # a run that wrote nothing while others of the case did is still flagged
    alone = cache_mod.verify(COLD_CACHE, True, None, 0, 0, cache_mod.DIRECTORY_ENTRIES)
    assert alone.verdict == "flagged" and alone.flags == ["cache_not_written"]


def test_an_eager_gpu_run_whose_driver_jit_cache_grew_is_flagged_and_counted():
    """Issue 27, item 13: torch_eager_cuda has no compilation cache, but the CUDA driver compiles a
    PTX-only kernel at load into CUDA_CACHE_PATH (and NVRTC kernels into PYTORCH_KERNEL_CACHE_PATH)."""
    grew = cache.verify(COLD_CACHE, False, None, 0, 3, TORCH_COUNTERS, {"cuda": [0, 2], "torch_kernels": [0, 1]})
    assert grew.flags == ["kernel_cache_grew"] and grew.written == 3 and grew.verdict == "not_applicable"
    other = cache.verify(COLD_CACHE, False, None, 0, 4, TORCH_COUNTERS, {"inductor": [0, 4]})  # not a kernel cache
    quiet = cache.verify(COLD_CACHE, False, None, 0, 0, TORCH_COUNTERS, None)
    assert other.flags == [] and quiet.flags == [] and quiet.note == "this runtime has no persistent compilation cache"
