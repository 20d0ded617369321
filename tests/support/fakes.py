"""A fake executor: no processes, but the same cache-directory contract as real workers."""

from __future__ import annotations

from pathlib import Path

from conftest import PASSED_CHECK, fake_record, fake_result, fake_warm

from ttfr.child.job import WARM
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
        return fake_result(record, process_ns=process_ns)

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
