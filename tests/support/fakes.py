"""A fake executor: no processes, but the same cache-directory contract as real workers."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from conftest import PASSED_CHECK, fake_record, fake_result, fake_warm

from ttfr.child.job import WARM
from ttfr.measure import import_trace
from ttfr.measure.executors import Executors
from ttfr.measure.spec import RunRequest, build_spec
from ttfr.pipeline import suite as suite_run


def run_suite(out: Path, request: RunRequest, executor=None, **execute):
    """A whole `ttfr run` (plan, schedule, journal, analysis, artifacts, reports) into a new
    result directory under `out`, every worker answered by `executor` (a FakeExecutor by
    default); the outcome (`.result_dir`, `.suite`, `.cases`)."""
    spec = build_spec(request)
    result_dir = suite_run.start(spec, Path(out), ["ttfr", "run"])
    return suite_run.execute(result_dir, spec, Executors(worker=executor or FakeExecutor()), **execute)


FAKE_POOLS = [{"user_api": "blas", "internal_api": "openblas", "num_threads": 2, "version": "0.3.27",
               "threading_layer": "pthreads", "prefix": "libscipy_openblas"}]  # fmt: skip


# --explain's diagnostic process, as -X importtime and the worker's marks write it: 100 ms of imports in the
# import phase (fake_record's import span), a module of no distribution in setup, one the first call imports.
FAKE_IMPORTTIME = """import time: self [us] | cumulative | imported package
import time:      2000 |       2000 | encodings
ttfr-phase main
import time:     20000 |      20000 |   numpy._core
import time:     40000 |      60000 | numpy
import time:     40000 |      40000 | json
ttfr-phase imported
import time:      1000 |       1000 | mylocal
ttfr-phase setup
import time:      5000 |       5000 | decimal
ttfr-phase first
ttfr-phase second
"""
FAKE_DISTRIBUTIONS = {"numpy": ["numpy", "2.0.0"], "json": ["python", "3.11.7"], "decimal": ["python", "3.11.7"],
                      "encodings": ["python", "3.11.7"]}  # fmt: skip


class FakeExecutor:
    """Answers each run with a plausible record; `decide(call)` may override.

    A compiling backend's run "writes" one cache entry when its JAX cache dir is empty and
    reports a hit (JAX monitoring events) when it finds one, like jax does.
    """

    def __init__(self, decide=None, interrupt_at=None):
        self.calls: list[dict] = []
        self.decide = decide
        self.interrupt_at = interrupt_at

    def __call__(self, job, env, timeout_s, python=None):
        if self.interrupt_at is not None and len(self.calls) == self.interrupt_at:
            raise KeyboardInterrupt
        # A run's environment names its case's cache directories; a job outside a run (`ttfr
        # selftest --harness`'s no-op) has none
        jax_dir = Path(env["JAX_COMPILATION_CACHE_DIR"]) if "JAX_COMPILATION_CACHE_DIR" in env else None
        case_id = jax_dir.parent.name if jax_dir else f"{job.adapter}/{job.workload}"
        entries = sorted(p.name for p in jax_dir.iterdir()) if jax_dir and jax_dir.is_dir() else []
        call = {"job": job, "case": case_id, "entries_seen": entries, "env": env}
        self.calls.append(call)
        if self.decide:
            decided = self.decide(call)
            if decided is not None:
                return decided
        record, process_ns = self.answer(job, call, entries, jax_dir)
        result = fake_result(record, process_ns=process_ns)
        if job.explain:  # like spawn.py: the diagnostic process's stderr read as its import trace
            result = dataclasses.replace(result, imports=import_trace.parse(FAKE_IMPORTTIME, FAKE_DISTRIBUTIONS))
        return result

    def answer(self, job, call, entries, jax_dir) -> tuple[dict, int]:
        """The worker record (a dict, as the worker writes it) and the process's life in ns."""
        cache = None
        if job.compile:
            hit = bool(entries)
            if not hit:
                (jax_dir / "jit_fn-cache").write_bytes(b"executable")
            events = {"/jax/compilation_cache/compile_requests_use_cache": 1}
            events["/jax/compilation_cache/cache_hits" if hit else "/jax/compilation_cache/cache_misses"] = 1
            cache = {"first": None, "end": {"events": events, "durations_s": {}}}
        warm = job.mode == WARM
        record = fake_record(
            cache=cache,
            check=PASSED_CHECK if warm else None,
            warm=fake_warm() if warm and job.samples else None,
            stages={"trace_s": 0.01, "compile_s": 0.1} if job.compile else {},
        )
        if job.check:  # like the worker: only the process that checks the result records its pools
            record["threadpools"] = FAKE_POOLS
        return record, 400_000_000


def explained_programs(backend_s: float):
    """A FakeExecutor `decide`: a compiling case's --explain process names one JAX program, `matmul`, compiled in
    `backend_s` seconds (the others run as the fake runs them)."""
    import msgspec

    fake = FakeExecutor()

    def with_programs(call):
        job = call["job"]
        if not (job.explain and job.compile):
            return None
        result = fake(job, call["env"], 60.0)
        programs = {"matmul": {"traces": 1, "compiles": 1, "hits": 0, "trace_s": 0.002, "lower_s": 0.015,
                               "backend_s": backend_s}}  # fmt: skip
        first = msgspec.structs.replace(result.record.cache.first or result.record.cache.end, programs=programs)
        cache = msgspec.structs.replace(result.record.cache, first=first)
        return dataclasses.replace(result, record=msgspec.structs.replace(result.record, cache=cache))

    return with_programs


def explain_entry(record: dict, imports, *, case="numpy_matmul_64_f32", outcome="ok"):
    """The journal entry of a cold-cache --explain diagnostic process whose worker wrote `record` (a dict, as
    the worker writes it) and whose stderr gave the import trace `imports`; `outcome` other than ok: it crashed."""
    from ttfr.measure.plan import EXPLAIN
    from ttfr.model.journal import CacheDir, JournalEntry
    from ttfr.model.policies import COLD_CACHE

    result = fake_result(record, outcome=outcome, reason=None if outcome == "ok" else "it crashed")
    return JournalEntry(task="x", case=case, kind=EXPLAIN, policy=COLD_CACHE, index=0, round=9, measured=False,
                        makes_template=False, host=None, output_tail=None, imports=imports,
                        cache_dir=CacheDir(entries_before=0, entries_after=0, restored_template=False, by_directory={}),
                        **{k: getattr(result, k) for k in ("outcome", "reason", "record", "spawn_ns", "reaped_ns",
                                                           "exit_code", "rusage")})  # fmt: skip
