"""The sync check: its judgement of a warm process's evidence (pure), and real JAX workers
with a synchronised and a deliberately unsynchronised timed loop (integration)."""

import os
import subprocess
import sys
import time

import pytest
from conftest import have

from ttfr.analyse import sync_check
from ttfr.child.job import Job
from ttfr.measure import catalog, spawn

from ttfr.model.base import decode, encode
from ttfr.model.record import WarmRecord

EXPECTED_KEYS = {"trailing_sync_fraction_median", "doubling_ratio_median", "overlap_ratio", "unsynchronised", "problems"}


def warm(trailing, inner, doubling=(2.0, 2.0, 2.0), pending=None, as_timed=None, each_waited=None):
    evidence = {"trailing_sync_fraction": list(trailing), "inner_loops": inner, "doubling_ratios": list(doubling)}
    if pending is not None:
        evidence["pending_after_loop"] = list(pending)
    if as_timed is not None:
        evidence["overlap"] = {"as_timed_s": [s * 1e-6 for s in as_timed], "each_waited_s": [s * 1e-6 for s in each_waited]}
    return evidence


def judge(evidence: dict, has_sync: bool):
    """The sync check of a warm process whose record holds `evidence` (its other fields minimal)."""
    record = {"samples_s": [0.001], "warmup_per_call_s": [], "warmup_stable": True, **evidence}
    return sync_check.judge(decode(record, WarmRecord), has_sync)


def test_a_synchronised_call_on_a_busy_machine_is_not_flagged():
    # jax_jit_cpu_fused_chain_4096_f32 / matmul_64_f32 beside a busy core: the barrier after
    # the timed loop finds the result ready (a few µs), but contention flattened the doubling
    # ratio, which the old rule (doubling < 1.5) flagged.
    busy = encode(judge(warm([0.0007, 0.0006, 0.0009, 0.0007, 0.0008], 60, [1.13, 1.37, 1.10]), True))
    assert busy == {"trailing_sync_fraction_median": 0.0007, "doubling_ratio_median": 1.13, "overlap_ratio": None,
                    "unsynchronised": False, "problems": []}  # fmt: skip
    assert set(busy) == EXPECTED_KEYS


def test_a_few_preempted_barriers_are_not_a_flag():
    # A preemption inside the trailing barrier costs milliseconds in that sample only.
    preempted = [0.0005] * 6 + [0.4, 0.6, 0.5, 0.3]  # 4 of 10 samples, each 25-40 calls' time
    assert not judge(warm(preempted, 60), True).unsynchronised


def test_a_dispatch_only_call_is_flagged_even_when_its_backlog_is_a_small_fraction_of_the_sample():
    # Dispatch-only matmul_64 on a busy machine: ~10 calls still queued after 228 dispatched,
    # 4.6% of the sample (under the old 5% limit), far more than the one call a synchronised
    # loop could leave the barrier.
    result = judge(warm([0.046, 0.03, 0.05, 0.06, 0.018, 0.041, 0.055], 228), True)
    assert result.unsynchronised
    assert "waited 10.5 calls' time" in result.problems[0] and "4.6% of a sample" in result.problems[0]


def test_a_dispatch_only_call_whose_execution_nearly_keeps_up_is_caught_by_the_probe():
    # Dispatch-only matmul_64 in a process whose execution nearly kept up with its dispatch
    # (~14 µs a call): under one call's wait (0.78) was left for the barrier in the median
    # sample, but the last result was still running at the end of 4 of 10 samples.
    fractions = [0.0034, 0.0036, 0.0039, 0.0041, 0.0032, 0.0035, 0.0030, 0.0033, 0.0037, 0.0031]
    timing_only = judge(warm(fractions, 227), True)
    assert not timing_only.unsynchronised
    probed = judge(warm(fractions, 227, pending=[True, False, False, True] + [False] * 4 + [True, True]), True)
    assert probed.unsynchronised
    assert probed.problems == ["the last result was still pending after the timed loop in 4 of 10 samples"]


def test_a_dispatch_only_call_that_leaves_nothing_in_flight_is_caught_by_the_overlap_comparison():
    # Its calls finished as fast as they were dispatched: nothing pending, the barrier's
    # wait under a call, so nothing after the loop can tell. But the same calls each waited
    # on take ~22 µs against ~12 µs pipelined (benchmark processes: overlap 0.38-0.60).
    after_the_loop = warm([0.0014] * 10, 280, pending=[False] * 10)
    assert not judge(after_the_loop, True).unsynchronised
    compared = judge({**after_the_loop, **warm([], 280, as_timed=[12.4, 12.1, 13.0, 12.2, 12.6],
                                                            each_waited=[22.1, 21.8, 22.5, 21.9, 23.0])}, True)  # fmt: skip
    assert compared.unsynchronised and compared.overlap_ratio == pytest.approx(12.1 / 21.8)
    assert "calls as timed ran 0.56x the time of the same calls each waited on" in compared.problems[0]


def test_the_overlap_comparison_ignores_contention():
    # Synchronised matmul_64 beside a busy core: some loops of each kind preempted (4 ms
    # ticks), at random; the fastest loop of each escaped, and they agree.
    noisy = warm([0.0005] * 5, 60, as_timed=[84.0, 160.3, 83.1, 150.0, 84.9], each_waited=[151.2, 83.9, 149.0, 84.2, 150.7])
    judged = judge(noisy, True)
    assert not judged.unsynchronised and judged.overlap_ratio == pytest.approx(83.1 / 83.9)


def test_the_overlap_limit():
    assert judge(warm([0.0005] * 5, 60, as_timed=[74.9], each_waited=[100.0]), True).unsynchronised
    assert not judge(warm([0.0005] * 5, 60, as_timed=[75.1], each_waited=[100.0]), True).unsynchronised
    # a synchronous backend records no overlap evidence, and none could accuse it
    assert not judge(warm([], 60, as_timed=[10.0], each_waited=[100.0]), False).unsynchronised


def test_a_synchronised_loop_leaves_nothing_pending():
    # The loop waited on every call, so the probe finds every last result finished, under
    # any load; one pending result is therefore a flag on its own.
    assert not judge(warm([0.0007] * 5, 60, pending=[False] * 5), True).unsynchronised
    assert judge(warm([0.0007] * 5, 60, pending=[True] + [False] * 4), True).unsynchronised


def test_a_dispatch_only_long_call_is_flagged():
    # fused_chain_4096: 2 dispatches of ~60 µs each, then a barrier that waits ~6.7 ms.
    result = judge(warm([58.0, 43.0, 73.0, 0.5], 2, [0.05, 0.06, 0.03], [True] * 4), True)
    assert result.unsynchronised and len(result.problems) == 2  # both triggers


def test_the_limit_is_one_call_in_the_median_sample():
    at_limit = judge(warm([1 / 100] * 5, 100), True)
    below = judge(warm([0.9 / 100] * 5, 100), True)
    assert at_limit.unsynchronised and not below.unsynchronised


def test_the_doubling_ratio_is_reported_but_never_flags():
    flat = judge(warm([0.001] * 5, 50, [1.05, 1.1, 1.0]), True)
    assert not flat.unsynchronised and flat.doubling_ratio_median == 1.05
    synchronous = judge({"trailing_sync_fraction": [], "inner_loops": 5, "doubling_ratios": [1.05]}, False)
    assert not synchronous.unsynchronised and synchronous.trailing_sync_fraction_median is None


def test_a_backend_without_a_barrier_is_never_flagged():
    # Synchronous backends return finished results; they record no trailing evidence, and
    # what there is cannot accuse them.
    assert not judge(warm([0.5] * 5, 100, pending=[True] * 5), False).unsynchronised
    empty = encode(judge({"inner_loops": 3}, True))
    assert empty == {"trailing_sync_fraction_median": None, "doubling_ratio_median": None, "overlap_ratio": None,
                     "unsynchronised": False, "problems": []}  # fmt: skip


@pytest.fixture
def busy_core():
    """A spinning process pinned to one core for the duration of the test."""
    core = min(os.sched_getaffinity(0))
    code = f"import os\nos.sched_setaffinity(0, {{{core}}})\nwhile True: pass"
    busy = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.DEVNULL)
    time.sleep(0.3)
    yield
    busy.kill()
    busy.wait()


@pytest.mark.integration
@pytest.mark.skipif(not have("jax"), reason="jax not installed")
@pytest.mark.parametrize("synchronised", [False, True], ids=["dispatch_only", "synchronised"])
def test_a_real_jax_worker_is_judged_right_beside_a_busy_core(busy_core, synchronised):
    # fused_chain_4096 (the case of the old false flag): its execution (~1.5-3 ms) outlasts
    # its dispatch (~50 µs) many times over, so a dispatch-only loop always ends with work in
    # flight (pending in >= 9 of 10 samples and a wait of >= 5 calls in every benchmark
    # process). matmul_64 is not a deterministic subject for this side: its calls can finish
    # as fast as they are dispatched, leaving nothing to find (benchmarks/sync_check.py).
    # The synchronised side does not rest on timing luck either: its last result is finished
    # by construction, so the probe cannot see it pending under any load, and a false flag
    # from the barrier's wait would need the barrier on a finished result (µs) to take a
    # whole call's time (ms) in half the samples.
    job = Job(mode="warm", adapter="jax_backend", compile=True, workload="fused_chain", size=4096,
              dtype="float32", samples=10, min_sample_s=0.005, max_warmup_s=1.0, sync=synchronised)  # fmt: skip
    result = spawn.run_worker(job, dict(os.environ, JAX_PLATFORMS="cpu"), 120.0, python=sys.executable)
    assert result.outcome == "ok", result.output_tail
    evidence = result.record.warm
    assert len(evidence.trailing_sync_fraction) == len(evidence.pending_after_loop) == 10
    assert len(evidence.doubling_ratios) == 3
    assert len(evidence.overlap.as_timed_s) == len(evidence.overlap.each_waited_s) == 9
    judged = sync_check.judge(evidence, catalog.BACKENDS["jax_jit_cpu"].barrier)
    assert judged.unsynchronised is (not synchronised), (judged, evidence)
