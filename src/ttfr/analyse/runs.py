"""One journal entry -> one run's figures: cold-start spans from the marks, resources,
the run's cache check, the digest comparison, and a warm process's samples."""

from __future__ import annotations

import math
import statistics

import msgspec

from ttfr.analyse import contention, loops, sync_check
from ttfr.child.workloads.user_case import USERS_FRAMES
from ttfr.measure import cache, catalog, precompiled, process_tree
from ttfr.model.base import UNSET, present
from ttfr.model.run_figures import COLD_METRICS, Metrics, OPTIONAL_METRICS, Resources, RunFigures, STAGE_METRICS, Stages, Warmup
from ttfr.model.journal import JournalEntry
from ttfr.model.record import Marks, OwnRusage, RunRecord
from ttfr.model.result_check import Digest
from ttfr.model.policies import precompiled_parts

__all__ = ["COLD_METRICS", "OPTIONAL_METRICS", "STAGE_METRICS", "run_metrics", "run_view", "warm_view"]
_DIGEST_RTOL = {"float32": 1e-3, "float64": 1e-8, "bfloat16": 1e-2}


def run_metrics(spawn: int, reaped: int | None, record: RunRecord | None) -> Metrics:
    """Seconds between the parent's spawn mark, the worker's marks and the reap."""
    marks = (record.marks_ns if record else None) or Marks()

    def span(start, end):
        return (end - start) / 1e9 if start not in (None, UNSET) and end not in (None, UNSET) else None

    # the optional phases (a GPU's device init, a user's import) sit between import and setup, in that order
    device_ready = marks.device_ready is not UNSET
    user_imported = marks.user_imported is not UNSET
    after_device = marks.device_ready if device_ready else marks.imported
    loaded = marks.artifact_loaded is not UNSET  # a precompiled policy's run: its load between setup and the first call
    return Metrics(
        interpreter_s=span(spawn, marks.main),
        import_s=span(marks.main, marks.imported),
        setup_s=span(marks.user_imported if user_imported else after_device, marks.setup),
        first_call_s=span(marks.artifact_loaded if loaded else marks.setup, marks.first),
        second_call_s=span(marks.second_start, marks.second),
        ttfr_s=span(spawn, marks.first),
        process_s=span(spawn, reaped),
        user_import_s=span(after_device, marks.user_imported) if user_imported else UNSET,
        device_init_s=span(marks.imported, marks.device_ready) if device_ready else UNSET,
        artifact_load_s=span(marks.setup, marks.artifact_loaded) if loaded else UNSET,
    )


def _resources(entry: JournalEntry) -> Resources:
    own = (entry.record.rusage_self if entry.record else None) or OwnRusage()
    tree = entry.rusage

    def of(struct, name):
        value = getattr(struct, name) if struct else None
        return None if value is UNSET else value

    return Resources(
        peak_rss_bytes=of(own, "max_rss_bytes"),
        tree_peak_rss_bytes=of(tree, "max_rss_bytes"),
        cpu_user_s=of(tree, "user_s"),
        cpu_sys_s=of(tree, "sys_s"),
        involuntary_switches=of(tree, "involuntary_switches"),
        **_compilers_to_first_result(entry),
    )


def _compilers_to_first_result(entry: JournalEntry) -> dict:
    """The compiler runs the worker's tree showed from the spawn to the first result, as Resources' fields; none
    where the tree was not watched or the run has no first result."""
    found = _compilers_before_first(entry, from_load=False)
    return {} if found is None else {"compiler_runs": sum(found[0].values()), "compiler_seen_s": found[1]}


def _compilers_before_first(entry: JournalEntry, from_load: bool) -> tuple[dict[str, int], float] | None:
    """The compiler runs (by name, and seconds seen) the worker's tree showed before the first result: from the
    spawn, or `from_load`: from the artifact load's start (the setup's end). None: the tree was not watched, or the
    run has no such span."""
    marks = entry.record.marks_ns if entry.record else None
    if not present(entry.process_tree) or not marks or marks.first is UNSET:
        return None
    start = marks.setup if from_load else entry.spawn_ns
    return None if start is UNSET else process_tree.compiler_runs(entry.process_tree, start, marks.first)


def _digest_differs(digest: Digest | None, reference: Digest | None, dtype: str) -> bool:
    if not digest or not reference:
        return False
    if None in (digest.sum, digest.sum_sq, reference.sum, reference.sum_sq):
        return False  # a sum that overflowed float64 (written as null) cannot be compared
    rtol = _DIGEST_RTOL[dtype]
    scale = math.sqrt(max(reference.sum_sq, 0.0) * max(reference.count, 1)) or 1.0
    return (
        digest.count != reference.count
        or abs(digest.sum_sq - reference.sum_sq) > rtol * max(abs(reference.sum_sq), 1e-300)
        or abs(digest.sum - reference.sum) > rtol * scale
    )


def _users(traceback) -> bool:
    """A failed run's traceback cut to a user's own code (the case file keeps it; ttfr's own
    frames stay in the journal)."""
    return isinstance(traceback, str) and traceback.startswith(USERS_FRAMES)


def run_view(entry: JournalEntry, case: catalog.Case, reference_digest: Digest | None, uncached: bool = False) -> RunFigures:
    """`uncached`: a command that wrote nothing into its cache directories in any run (see
    cache.verify)."""
    record = entry.record
    backend = case.backend_info
    counters = record.cache.end if record and record.cache else None
    counts = cache.hit_miss(backend.cache_counters, counters or None)
    outcome, reason = entry.outcome, entry.reason
    if outcome == "ok" and _digest_differs(record.digest if record else None, reference_digest, case.dtype):
        outcome, reason = "invalid-measurement", "result differs from the case's checked run (digest mismatch)"
    metrics = run_metrics(entry.spawn_ns, entry.reaped_ns, record)
    stages = (record.stages_s if record else None) or {}
    ok = outcome == "ok"
    return RunFigures(
        index=entry.index,
        round=entry.round,
        outcome=outcome,
        reason=reason,
        metrics=metrics,
        stages=Stages(**{k: v for k, v in stages.items() if k in STAGE_METRICS}),
        resources=_resources(entry),
        cache=_cache_check(entry, backend, counts, uncached),
        host=entry.host,
        exit_code=entry.exit_code,
        loop=loops.run_loop(record.loop if record else None) or UNSET,
        contention=contention.cold_run(record.sched or None, metrics.process_s, entry.host, entry.rusage) if ok else UNSET,
        output_tail=UNSET if ok else entry.output_tail,
        traceback=record.traceback if record and not ok and _users(record.traceback) else UNSET,
    )  # fmt: skip


def _cache_check(entry: JournalEntry, backend: catalog.Backend, counts, uncached: bool):
    """What the run's cache was against its policy (a precompiled policy's: and its mechanism's claim)."""
    before, after = entry.cache_dir.entries_before, entry.cache_dir.entries_after
    if precompiled_parts(entry.policy):
        first = entry.record.cache.first if entry.record and entry.record.cache else None
        in_load = _compilers_before_first(entry, from_load=True)
        return precompiled.verify(entry.policy, counts, before, after, first or None, in_load)
    return cache.verify(entry.policy, backend.compiles, counts, before, after, backend.cache_counters,
                        entry.cache_dir.by_directory or None, uncached=uncached)  # fmt: skip


def warm_view(entry: JournalEntry, case: catalog.Case, reference_digest: Digest | None) -> RunFigures:
    view = run_view(entry, case, reference_digest)
    warm = entry.record.warm if entry.record else None
    if view.outcome == "ok" and not warm:
        view = msgspec.structs.replace(view, outcome="invalid-measurement", reason="warm process returned no samples")
    if not warm:
        return view
    evidence = warm.sample_evidence or None
    return msgspec.structs.replace(
        view,
        samples_s=warm.samples_s,
        inner_loops=warm.inner_loops,
        median_s=statistics.median(warm.samples_s),
        warmup=Warmup(per_call_s=warm.warmup_per_call_s, stable=warm.warmup_stable),
        sync_check=sync_check.judge(warm, case.backend_info.barrier),
        contention=contention.warm_process(evidence, entry.host),
        tick=contention.tick_quantised(warm.samples_s, (evidence.wall_s or None) if evidence else None),
    )
