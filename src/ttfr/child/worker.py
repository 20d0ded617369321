"""The child process: runs one job in phases, timing each, and writes one JSON record to
the pipe whose write end the parent passed (fd `fd=`), never to stdout.

Started as `python -P -c "from ttfr.child.worker import main; main()" key=value ...`: `-m` would
add runpy (~6 ms), and the job is plain key=value words and the record a Python literal
because `import json` costs ~8 ms (it pulls in `re`). Only `os`, `sys`, `time` and the
stdlib-only `ttfr.child.job` are imported before the first mark; the runtime stack is imported inside the timed import
phase; everything else (hashlib, traceback; threadpoolctl in the checking process only) only after
the last timed phase.

Marks are CLOCK_MONOTONIC nanoseconds, which is system-wide on Linux, so the parent can
subtract its own spawn timestamp from them.
"""

import os
import sys
import time

from ttfr.child.job import ARTIFACT_LOAD, ARTIFACT_MAKE, WARM, Job, JobError

_now = time.monotonic_ns


class _PhaseError(Exception):
    def __init__(self, phase, error):
        super().__init__(phase)
        self.phase, self.error = phase, error


def parse_job(words):
    try:
        return Job.parse(words)
    except JobError as exc:
        raise SystemExit(f"ttfr worker: {exc}") from None


PHASE_MARKER = b"ttfr-phase "  # --explain: `ttfr-phase <mark>` on stderr, among -X importtime's lines


def _marked(job, marks, name):
    """Take mark `name`; in --explain's process also say so on stderr, where -X importtime writes its
    lines (both unbuffered, in order), so each import falls in the phase it happened in."""
    marks[name] = _now()
    if job.explain:
        os.write(2, PHASE_MARKER + name.encode() + b"\n")


def _import(module_name):
    __import__(module_name)
    return sys.modules[module_name]


def _run_phases(job, marks, record):
    phase = "import"
    try:
        adapter = _import("ttfr.child.backends." + job.adapter)
        runtime = adapter.Runtime(job)
        runtime.import_stack()
        _marked(job, marks, "imported")

        init_device = getattr(runtime, "init_device", None)  # a GPU's context, memory pool, math handles
        if init_device is not None:
            phase = "device_init"
            init_device()
            _marked(job, marks, "device_ready")

        workload = None  # a built-in's module is imported in setup, as it always was
        if job.case_source:  # the user's own module, timed apart from the runtime stack
            phase = "user_import"
            workload = _import("ttfr.child.workloads." + job.workload)
            workload.load(job.case_source, job.case_name)
            _marked(job, marks, "user_imported")

        phase = "setup"
        workload = workload or _import("ttfr.child.workloads." + job.workload)
        # Workloads that read their inputs from disk (HistFactory) and build per-engine
        # models have hooks; array workloads generate seeded arrays.
        load = getattr(workload, "load_inputs", None)
        host_inputs = load(job) if load else workload.make_inputs(job.size, job.dtype, job.seed)
        prepare = getattr(workload, "inputs_for", None)
        is_loop = getattr(workload, "LOOP", False)
        # A loop of arrays moves its data to the device inside its iterations, as a sweep loads
        # its data; one on a prepared problem (HistFactory) gets it prepared here.
        if is_loop and not prepare:
            inputs = host_inputs
        else:
            inputs = runtime.put(prepare(runtime, host_inputs) if prepare else host_inputs)
        # A device's peak memory at each phase's end (GPU adapters; torch resets it at each reading, so the
        # first call's compile and autotuning buffers stand apart from the steady state). None on a CPU.
        device_peak = getattr(runtime, "device_peak", None) or (lambda: None)
        _marked(job, marks, "setup")
        peaks = {"setup": device_peak()}  # after the mark: reading (and resetting) it is not setup's time

        if job.artifact_action and is_loop:  # its iterations compile as they go: no one artifact stands for them
            from ttfr.child.backends import Unavailable

            raise Unavailable(f"{job.precompiled} makes one function's artifact; a loop workload compiles in its "
                              "iterations, each a compile of its own")  # fmt: skip
        if job.artifact_action == ARTIFACT_LOAD:  # a precompiled policy's run: the first call runs what this loads
            phase = "artifact_load"
            from ttfr.child import precompiled

            runtime.load_precompiled(precompiled.read(job, runtime))
            _marked(job, marks, "artifact_loaded")

        phase = "first_call"
        if is_loop:  # the whole loop is the timed unit; the driver then stands in for the runtime
            from ttfr.child import loop

            runtime = loop.LoopDriver(runtime, workload.build_loop(runtime, job, inputs))
            output, record["loop"] = runtime.first()
            stages = {}
        else:
            output, stages = runtime.first_call(workload, inputs)
        _marked(job, marks, "first")
        peaks["first_call"] = device_peak()
        if job.case_source:  # after the mark: a user's function that returned nothing fails saying so
            workload.check_output(output)
        record["stages_s"] = stages
        record["cache"] = {"first": runtime.cache_counters()}
        if job.explain and getattr(runtime, "explain_compile", None):  # torch.compile's frames, breaks, compiler runs
            record["torch_compile"] = runtime.explain_compile()
        if job.explain and getattr(runtime, "explain_cache", None):  # JAX's words on its caches in the first call
            record["cache_log"] = runtime.explain_cache()

        # The check needs the first call's result before a second (possibly in-place) step.
        checking = job.mode == WARM and job.check
        host_first = runtime.to_host(output) if checking else None

        phase = "second_call"
        sync = runtime.sync
        marks["second_start"] = _now()
        output = runtime.call(*runtime.args)
        if sync is not None:
            sync(output)
        _marked(job, marks, "second")

        # Nothing below is timed as a cold figure; its failures are data all the same.
        phase = "after_second_call"
        record["cache"]["end"] = runtime.cache_counters()
        record["digest"] = _digest(runtime.to_host(output))
        if job.artifact_action == ARTIFACT_MAKE:  # the priming process of a precompiled policy: its artifact, whole
            phase = "artifact_make"
            from ttfr.child import precompiled

            record["artifact"] = precompiled.write(job, runtime)
        if job.mode == WARM and job.samples > 0:
            phase = "warm"
            record["warm"] = _warm_regime(runtime, job)
        peaks["steady"] = device_peak()  # the second call and the warm regime, before the check's own work
        if checking:
            phase = "check"
            record["check"] = _check_result(runtime, workload, inputs, host_inputs, host_first, job)
            record["dataset_sha256"] = _dataset_sha256(workload, host_inputs)
            gather = getattr(workload, "conversion_evidence", None)  # a conversion: copied or not, layouts, memcpy, leaks
            if gather is not None:
                phase = "conversion_evidence"
                record["conversion"] = gather(runtime, inputs, host_inputs, job)
        record["memory"] = runtime.memory()
        if any(v is not None for v in peaks.values()):
            record["memory"]["device_peaks"] = peaks
        record["device"] = runtime.device_info()
        record["versions"] = runtime.versions()
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - every failure (a user's sys.exit too) becomes data
        raise _PhaseError(phase, exc) from exc
    return record


def _check_result(runtime, workload, inputs, host_inputs, host_first, job):
    custom_check = getattr(workload, "check", None)
    if custom_check:
        return custom_check(runtime, inputs, host_inputs, host_first, job)
    return _check(workload, host_inputs, host_first, job.dtype, tf32=job.variant == "tf32")


def _user_case_sha256(job):
    """After every timed phase: what the user's case file holds now."""
    from ttfr.child.workloads import user_case

    return user_case.file_sha256(job.case_source)


def _dataset_sha256(workload, host_inputs):
    from ttfr.child.workloads import inputs_sha256

    return getattr(workload, "dataset_sha256", inputs_sha256)(host_inputs)


def _warm_regime(runtime, job):
    from ttfr.child import sampling

    call, args, barrier = runtime.call, runtime.args, runtime.sync
    # `sync=False` only tests the sync check: the timed loops of the samples and doubling
    # ratios then dispatch without waiting, while the trailing check (which also drains the
    # runtime between samples) still uses the real barrier. Calibration waits on the barrier
    # either way, so both modes time the same number of calls per sample.
    sync = barrier if job.sync else None
    calibration = sampling.calibrate(call, args, barrier, job.min_sample_s, job.max_warmup_s)
    inner = calibration["inner_loops"]
    ready = getattr(runtime, "ready", None)  # adapters of asynchronous runtimes may have the probe
    per_call, trailing, pending, evidence = sampling.sample(call, args, sync, inner, job.samples, barrier=barrier,
                                                            ready=ready)  # fmt: skip
    return {
        "samples_s": per_call,
        "sample_evidence": evidence,
        "inner_loops": inner,
        "warmup_per_call_s": calibration["warmup_per_call_s"],
        "warmup_stable": calibration["stable"],
        "trailing_sync_fraction": trailing,
        "pending_after_loop": pending,
        "doubling_ratios": sampling.doubling_ratios(call, args, sync, inner, barrier=barrier),
        "overlap": sampling.overlap_check(call, args, sync, barrier, inner),
    }


def _digest(arrays):
    """Order-free fingerprint of a result, to spot a run that computed something else."""
    if not arrays:
        return None
    import numpy

    total = total_sq = 0.0
    finite = True
    count = 0
    for a in arrays:
        a64 = numpy.asarray(a, dtype=numpy.float64)
        finite = finite and bool(numpy.isfinite(a64).all())
        total += float(a64.sum())
        total_sq += float((a64 * a64).sum())
        count += a64.size
    return {"sum": total, "sum_sq": total_sq, "count": count, "finite": finite}


# A TF32 variant's float32 result check: TF32 keeps 10 of float32's 23 mantissa bits (unit round-off
# 2^-11 = 4.9e-4); emulated, a 512 or 1024 matmul's normalised error is ~3e-4 (tests/test_worker.py).
TF32_TOLERANCE = 2e-3


def _check(workload, host_inputs, host_first, dtype, tf32=False):
    """Compare the first call's result with the float64 NumPy reference on the same inputs."""
    expected = workload.reference(host_inputs)
    tolerance = workload.TOLERANCE[dtype]
    if tf32 and dtype == "float32":
        tolerance = max(tolerance, TF32_TOLERANCE)
    if not expected:
        # nothing to compare with: not checked, and no error figure that would read as a measured 0.0
        return {"reference": "none", "max_normalised_error": None, "tolerance": tolerance, "passed": None}
    import numpy

    if len(expected) != len(host_first):
        return {
            "reference": "numpy float64",
            "max_normalised_error": None,
            "tolerance": tolerance,
            "passed": False,
            "detail": f"{len(host_first)} outputs, reference has {len(expected)}",
        }
    worst = 0.0
    for got, ref in zip(host_first, expected):
        got64 = numpy.asarray(got, dtype=numpy.float64)
        if got64.shape != ref.shape:
            return {
                "reference": "numpy float64",
                "max_normalised_error": None,
                "tolerance": tolerance,
                "passed": False,
                "detail": f"shape {got64.shape} != reference {ref.shape}",
            }
        scale = max(float(numpy.max(numpy.abs(ref))), 1e-30)
        error = float(numpy.max(numpy.abs(got64 - ref))) / scale
        worst = max(worst, error if numpy.isfinite(error) else float("inf"))
    return {
        "reference": "numpy float64",
        "max_normalised_error": worst,
        "tolerance": tolerance,
        "passed": worst <= tolerance,
    }


def _classify(phase_error):
    from ttfr.child.backends import Unavailable, device_out_of_memory, first_line

    exc = phase_error.error
    if isinstance(exc, Unavailable):
        return "unavailable", str(exc)
    if isinstance(exc, ModuleNotFoundError) and phase_error.phase == "import":
        package = (exc.name or "unknown").split(".")[0]
        return "unavailable", f"missing_dependency: {package}"
    if isinstance(exc, MemoryError):
        return "oom", f"MemoryError in {phase_error.phase}"
    if device_out_of_memory(exc):  # a GPU's memory, not the host's: still the run's oom, not an error
        return "oom", f"device out of memory in {phase_error.phase} ({type(exc).__name__}: {first_line(exc)})"
    message = str(exc).strip().splitlines()
    return "error", f"{type(exc).__name__} in {phase_error.phase}: {message[0] if message else ''}"[:500]


def _users_failure(job, error):
    if not job.case_source:
        return None
    from ttfr.child.workloads import user_case

    return user_case.describe_failure(error, job.case_source)


def _plain(value):
    """Builtin types only, so repr() is a Python literal: numpy scalars become numbers,
    tuples lists, non-finite floats None (a NaN is not a figure)."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if value - value == 0.0 else None
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "item"):
        return _plain(value.item())
    return str(value)


def _ru_maxrss_bytes():
    """Where there is no /proc: getrusage's peak (a .so to load, hence only here)."""
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _emit(fd, record):
    # repr() of builtins needs no import (json would cost ~8 ms of `re` in every run's
    # process_s); the parent reads it with ast.literal_eval, which evaluates literals only.
    payload = repr(_plain(record)).encode()
    view = memoryview(payload)
    while view:
        written = os.write(fd, view)
        view = view[written:]
    os.close(fd)


def main(argv=None):
    t_main = _now()
    job = parse_job(sys.argv[1:] if argv is None else argv)
    marks = {"main": t_main}
    record = {"protocol": 1, "outcome": "ok", "reason": None, "marks_ns": marks}
    if job.explain:
        os.write(2, PHASE_MARKER + b"main\n")
    try:
        _run_phases(job, marks, record)
        digest = record.get("digest")
        if digest is not None and not digest["finite"]:
            record["outcome"], record["reason"] = "invalid-measurement", "non-finite values in the result"
    except _PhaseError as err:
        import traceback

        record["outcome"], record["reason"] = _classify(err)
        record["phase"] = err.phase
        if record["outcome"] != "unavailable":
            record["traceback"] = "".join(traceback.format_exception(err.error))[-4000:]
            users = _users_failure(job, err.error) if record["outcome"] == "error" else None
            if users:  # the user's code failed: point at their file and line, not at ttfr's frames
                record["reason"], record["traceback"] = users[0][:500], users[1][-4000:]
    if job.case_sha256 and record["outcome"] == "ok" and _user_case_sha256(job) != job.case_sha256:
        record["outcome"] = "invalid-measurement"
        record["reason"] = f"the case file {job.case_source} changed since the run was planned"
    from ttfr.child import hostinfo  # after every timed phase

    # This process's own peak (VmHWM of its memory after exec): ru_maxrss also counts the parent's
    # memory this process held between its fork and its exec, a floor of ttfr's size. Its CPU time
    # and switches are the parent's wait4 rusage (with its children's): `resource` is not imported.
    record["rusage_self"] = {"max_rss_bytes": hostinfo.peak_rss_bytes() or _ru_maxrss_bytes()}
    sched = hostinfo.thread_schedstats()  # threads still alive (the main thread does the timed work)
    record["sched"] = {"on_cpu_s": sched[0] / 1e9, "runq_wait_s": sched[1] / 1e9} if sched else None
    main_thread = hostinfo.task_schedstat(os.getpid())  # the thread that did the timed work, and when it was read
    if record["sched"] is not None and main_thread:
        record["sched"].update(main_on_cpu_s=main_thread[0] / 1e9, main_runq_wait_s=main_thread[1] / 1e9, read_ns=_now())
    if job.check:
        # The BLAS/OpenMP pools, once per case: in the process that checks its result (the check
        # run, or the first warm process after its samples). threadpoolctl's import costs ~21 ms,
        # which in every cold process would be most of a no-op's process_s.
        record["threadpools"] = hostinfo.threadpools()
    if job.explain:  # after every timed phase: which installed distribution each imported package is
        from ttfr.child.distributions import imported_distributions

        record["distributions"] = imported_distributions()
    record["pid"] = os.getpid()
    _emit(job.fd, record)


if __name__ == "__main__":
    main()
