"""Precompiled artifacts in the worker (issue 39): a priming process makes the artifact after its timed phases; a
measured process loads it in a timed phase of its own (`artifact_load`) and its first call runs what it loaded.
Real JAX: a loaded serialized executable compiles nothing, gives the compiling run's result, and a corrupted or
foreign artifact fails that run alone with the runtime's words."""

from __future__ import annotations

import hashlib
import os
import sys

import pytest
from conftest import have

from ttfr.analyse import runs
from ttfr.child import precompiled
from ttfr.child.job import ARTIFACT_LOAD, ARTIFACT_MAKE, Job
from ttfr.measure import spawn
from ttfr.model.base import UNSET

pytestmark = [pytest.mark.integration, pytest.mark.contention_safe,  # records and counts, no figure judged
              pytest.mark.skipif(not have("jax"), reason="jax not installed")]  # fmt: skip


def _job(artifact, action, mechanism="jax_serialized", **extra):
    case = {"workload": "matmul", "size": 64, "dtype": "float32", **extra}
    return Job(mode="cold", adapter="jax_backend", seed=1, precompiled=mechanism, artifact=str(artifact),
               artifact_action=action, **case)  # fmt: skip


def _run(job, tmp_path):
    # an empty persistent cache of its own: a program it compiled would be a miss, never a silent hit
    env = dict(os.environ, JAX_COMPILATION_CACHE_DIR=str(tmp_path / "jax-cache"))
    return spawn.run_worker(job, env, 120.0, python=sys.executable)


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("made")
    artifact = tmp_path / "matmul.jax_serialized"
    return artifact, _run(_job(artifact, ARTIFACT_MAKE), tmp_path)


def test_the_priming_process_writes_the_artifact_whole_after_its_timed_phases(made):
    artifact, result = made
    assert result.outcome == "ok", result.output_tail
    made_record = result.record.artifact
    assert made_record.mechanism == "jax_serialized" and made_record.bytes == artifact.stat().st_size > 1000
    assert made_record.make_s > 0 and artifact.read_bytes().startswith(precompiled.FORMAT)
    assert made_record.sha256 == hashlib.sha256(artifact.read_bytes()).hexdigest()  # what a load is checked against
    assert not artifact.with_name(artifact.name + ".partial").exists()
    assert result.record.marks_ns.artifact_loaded is UNSET  # the maker loads nothing


def test_a_loaded_executable_compiles_nothing_and_gives_the_compiling_runs_result(made, tmp_path):
    artifact, maker = made
    result = _run(_job(artifact, ARTIFACT_LOAD), tmp_path)
    assert result.outcome == "ok", result.output_tail
    counters = result.record.cache.first
    assert maker.record.cache.first.programs  # the same counters name the program the compiling run built
    # JAX's own events in the first call: no trace, no lowering, no backend compile, nothing asked of its cache
    assert counters.programs == {} and not any(counters.events.values()), (counters.programs, counters.events)
    assert result.record.cache.end.programs == {}  # nor in the second call, which runs the loaded executable too
    assert result.record.digest == maker.record.digest
    metrics = runs.run_metrics(result.spawn_ns, result.reaped_ns, result.record)
    assert metrics.artifact_load_s > 0 and metrics.first_call_s > 0
    marks = result.record.marks_ns
    # the load is its own span: setup, then the load, then the first call, adding up to the time to first result
    assert marks.setup < marks.artifact_loaded < marks.first
    parts = (metrics.interpreter_s, metrics.import_s, metrics.setup_s, metrics.artifact_load_s, metrics.first_call_s)
    assert sum(parts) == pytest.approx(metrics.ttfr_s, abs=1e-6)
    assert set(result.record.stages_s) == {"wrap_s", "first_execute_s"}  # no trace, lower or compile stage


def test_a_corrupted_or_foreign_artifact_fails_its_run_in_the_load_with_the_runtimes_words(made, tmp_path):
    artifact, _maker = made
    truncated = tmp_path / "truncated"
    truncated.write_bytes(artifact.read_bytes()[: artifact.stat().st_size // 2])
    result = _run(_job(truncated, ARTIFACT_LOAD), tmp_path)
    assert (result.outcome, result.record.phase) == ("error", "artifact_load")
    assert "pickle" in result.reason.lower() or "truncated" in result.reason.lower(), result.reason
    foreign = tmp_path / "foreign"
    foreign.write_bytes(b"\x80\x04not ttfr's")
    result = _run(_job(foreign, ARTIFACT_LOAD), tmp_path)
    assert (result.outcome, result.record.phase) == ("error", "artifact_load")
    assert "is not an artifact ttfr wrote" in result.reason
    missing = _run(_job(tmp_path / "absent", ARTIFACT_LOAD), tmp_path)
    assert (missing.outcome, missing.record.phase) == ("error", "artifact_load") and "No such file" in missing.reason


def test_an_exported_function_is_compiled_once_through_its_wrapper_and_never_traced_again(tmp_path):
    """jax.export's claim: the user's function is neither traced nor lowered in the loading process; JAX compiles
    the small wrapper `Exported.call` makes (`call_exported`) once, and the second call compiles nothing."""
    artifact = tmp_path / "matmul.jax_export"
    maker = _run(_job(artifact, ARTIFACT_MAKE, mechanism="jax_export"), tmp_path)
    assert maker.outcome == "ok", maker.output_tail
    assert maker.record.artifact.mechanism == "jax_export" and maker.record.artifact.bytes == artifact.stat().st_size
    users = set(maker.record.cache.first.programs)  # the function the compiling run traced
    loader = _run(_job(artifact, ARTIFACT_LOAD, mechanism="jax_export"), tmp_path)
    assert loader.outcome == "ok", loader.output_tail
    programs = loader.record.cache.first.programs
    assert set(programs) == {"call_exported"} and not users & set(programs), programs
    assert (programs["call_exported"].traces, programs["call_exported"].compiles) == (1, 1)
    assert loader.record.cache.end.programs == programs  # the second call: nothing more
    assert loader.record.digest == maker.record.digest


def test_an_executable_that_calls_lapack_loads_without_compiling_and_gives_the_same_result(tmp_path):
    # The profiled q0 solves (LAPACK's getrf/trsm): a deserialised executable calling LAPACK crashed the process
    # (SIGSEGV) unless LAPACK's kernels were bound first; the load binds them, and still compiles nothing.
    from ttfr.measure import datasets

    workspace = datasets.resolve(8, 0, None)
    files = datasets.files(workspace, 0).values()
    for name, payload in files:
        (tmp_path / name).write_bytes(payload)
    spec_path, point_path = (str(tmp_path / name) for name, _payload in files)
    artifact = tmp_path / "q0.jax_serialized"
    q0 = {"workload": "hf_profiled_q0", "size": 8, "dtype": "float64", "workspace": spec_path, "point": point_path,
          "signal": "SR0/signal"}  # fmt: skip
    maker = _run(_job(artifact, ARTIFACT_MAKE, **q0), tmp_path)
    assert maker.outcome == "ok", (maker.reason, maker.output_tail)
    assert b"lapack_" in artifact.read_bytes()  # the premise: the executable names LAPACK's targets
    result = _run(_job(artifact, ARTIFACT_LOAD, **q0), tmp_path)
    assert result.outcome == "ok", (result.reason, result.output_tail)
    assert result.record.cache.first.programs == {} and result.record.digest == maker.record.digest
