"""One fixture suite whose cases cover every verdict a case can have, measured by a fake
executor on a fake, fixed machine: byte-stable artifacts (tests/test_golden.py) and one
suite to render through every output (tests/test_outputs_agree.py).

| case | what happens | verdict |
|---|---|---|
| numpy_matmul_64_f32 | clean runs | ok |
| jax_jit_cpu_matmul_64_f32 | compiles; cache verified | ok |
| jax_jit_gpu_* | no GPU here | warn: gpu_unavailable |
| numpy_fused_chain_64_f32 | every cold-cache run waited for a CPU | ok, its cold-cache figures withheld |
| torch_eager_cpu_matmul_64_f32 | the result check fails | failed |
| torch_eager_cpu_fused_chain_64_f32 | the first run is 10x the others | ok, flagged first_run_outlier |
| jax_jit_cpu_fused_chain_64_f32 | the workload has no reference | ok, result not checked |
"""

from __future__ import annotations

import datetime as real_dt
import types

from support.fakes import FakeExecutor

from ttfr.measure.executors import Executors
from ttfr.child.job import WARM
from ttfr.pipeline import suite as suite_run
from ttfr.measure.spec import RunRequest, build_spec

SNAPSHOT = "20260101T000000Z-fixture"
FIXED_NOW = real_dt.datetime(2026, 1, 1, tzinfo=real_dt.timezone.utc)
FAILED_CHECK = {"reference": "numpy float64", "max_normalised_error": 0.5, "tolerance": 2e-4, "passed": False}
UNCHECKED = {"reference": "none", "max_normalised_error": None, "tolerance": 2e-4, "passed": True}  # as the worker writes it


class FixtureExecutor(FakeExecutor):
    """FakeExecutor's runs (a compiling backend's cache written, then hit), each a little slower
    than the one before (real spread: confidence intervals of some width), changed per case."""

    def __init__(self):
        super().__init__()
        self.runs_seen: dict[tuple, int] = {}

    def answer(self, job, call, entries, jax_dir):
        record, process_ns = super().answer(job, call, entries, jax_dir)
        case, warm = call["case"], job.mode == WARM
        self.runs_seen[case, job.mode] = seen = self.runs_seen.get((case, job.mode), 0) + 1
        if warm and record.get("check"):
            if case == "torch_eager_cpu_matmul_64_f32":
                record["check"] = FAILED_CHECK
            elif case == "jax_jit_cpu_fused_chain_64_f32":
                record["check"] = UNCHECKED
        if warm:
            return record, process_ns
        delay_ns = seen * 1_000_000
        if case == "numpy_fused_chain_64_f32":
            record["sched"] = {"runq_wait_s": 0.2}  # half its process time waiting for a CPU
        if case == "torch_eager_cpu_fused_chain_64_f32" and seen == 1:
            delay_ns = 3_000_000_000  # its first run: 10x the others
        for mark in ("first", "second_start", "second"):
            record["marks_ns"][mark] += delay_ns
        return record, process_ns + delay_ns


class _FixedDatetime(real_dt.datetime):
    @classmethod
    def now(cls, tz=None):  # noqa: ARG003 - datetime.now's signature
        return FIXED_NOW


FIXED_DT = types.SimpleNamespace(datetime=_FixedDatetime, timezone=real_dt.timezone, timedelta=real_dt.timedelta)


class FixedHost:
    """A machine that reads the same every time; no /proc/stat (so a run's own CPU wait decides
    whether it was contended, as on a machine without that reading)."""

    @staticmethod
    def load_average():
        return [0.5, 0.25, 0.125]

    @staticmethod
    def cpu_pressure():
        return {"avg10": 1.5, "total_us": 1_000_000}

    @staticmethod
    def cpu_times():
        return None

    @staticmethod
    def runnable_tasks():
        return [1, 100]

    @staticmethod
    def usable_cpus():
        return 2


def fixed_manifest(real_collect):
    def collect(*args, **kwargs):
        info = real_collect(*args, **kwargs)
        info.update(
            session_id="0000000000000001",
            machine_id="0000000000000002",
            ttfr={"version": info["ttfr"]["version"], "git": {"commit": None, "dirty": None}},
            python={"version": "3.11.7", "implementation": "CPython", "executable": "/fixture/python",
                    "worker_executable": "/fixture/python"},
            os={"platform": "Linux-fixture", "system": "Linux", "release": "fixture", "machine": "x86_64",
                "libc": "glibc 2.36"},
            cpu={"model": "Fixture CPU", "logical_cores": 2, "usable_cores": 2},
            memory={"total_bytes": 8 << 30},
            threadpools=[],
            gpu={"present": False, "devices": [], "driver_version": None, "cuda_version": None, "ptxas": None},
            runtimes={"numpy": "2.0.0", "jax": "0.10.2", "jaxlib": "0.10.2", "torch": "2.13.0", "pyhf": None,
                      "nextstat": None, "scipy": "1.17.1", "jsonschema": "4.26.0", "rich": "15.0.0"},
            environment={},
        )  # fmt: skip
        return info

    return collect


def fix_machine(monkeypatch):
    """Everything a fake run reads of the real machine and clock, made fixed (but the host's
    readings around each run: FixedHost, given with the executors)."""
    from ttfr.artifacts import manifest
    from ttfr.measure import scheduler

    monkeypatch.setattr(suite_run, "dt", FIXED_DT)
    monkeypatch.setattr(scheduler, "dt", FIXED_DT)
    monkeypatch.setattr(manifest, "collect", fixed_manifest(manifest.collect))


def fixture_spec():
    return build_spec(RunRequest(backends="numpy,jax_jit_cpu,jax_jit_gpu,torch_eager_cpu", workloads="matmul,fused_chain",
                      sizes="64", cold_runs=4, warm_procs=2, warm_samples=5, seed=7, deterministic=True))  # fmt: skip


def run_fixture_suite(tmp_path, monkeypatch):
    """The fixture suite's result directory (its report.md and report.html written)."""
    fix_machine(monkeypatch)
    spec = fixture_spec()
    result_dir = suite_run.start(spec, tmp_path / "out", ["ttfr", "run", "--fixture"], name=SNAPSHOT)
    outcome = suite_run.execute(result_dir, spec, Executors(worker=FixtureExecutor(), host=FixedHost))
    return outcome


def run_loop_suite(tmp_path, monkeypatch):
    """A loop family (sweep_mlp, every strategy) on numpy and JAX: timelines, compile counts
    (one strategy's count wrong), cost curves and the strategies against naive."""
    from test_loops import LoopExecutor

    fix_machine(monkeypatch)
    spec = build_spec(RunRequest(backends="numpy,jax_jit_cpu", workloads="sweep_mlp", sizes="4", cold_runs=2, warm_procs=2,
                      warm_samples=5, seed=7, deterministic=True))  # fmt: skip
    result_dir = suite_run.start(spec, tmp_path / "out", ["ttfr", "run", "--fixture"], name=SNAPSHOT)
    return suite_run.execute(result_dir, spec, Executors(worker=LoopExecutor(wrong=("bucketed",)), host=FixedHost))
