"""Precompiled artifacts as cache policies (issue 39): named on the command line (never in the default suite),
planned as a priming process that makes the artifact and cold runs that load it on an empty or a warm cache,
each run's load checked against what its mechanism claims to skip, and a mechanism that cannot take a workload
unsupported, not a failure. Fakes answer the workers here; tests/test_precompiled_run.py runs real JAX."""

from __future__ import annotations

import os
import shutil
import subprocess
import time

import pytest
from conftest import fake_record, fake_result
from support.fakes import FakeExecutor, run_suite

from ttfr.analyse.case_result import summaries_disagree
from ttfr.errors import UsageError
from ttfr.child import precompiled as child_precompiled
from ttfr.measure import precompiled, process_tree
from ttfr.measure.plan import MAKE, PRIME, build_plan, gate_failure, replay
from ttfr.measure.selection import parse_policies
from ttfr.measure.spec import RunRequest, build_spec
from ttfr.model.base import decode
from ttfr.model.base import present
from ttfr.model.journal import JournalEntry, ProcessTree, SeenProcess
from ttfr.model.policies import COLD_CACHE, POLICIES, WARM_PROCESS, precompiled_policy
from ttfr.model.record import RuntimeCounters

SERIALIZED_COLD = precompiled_policy("jax_serialized", "cold-cache")
EXPORT_WARM = precompiled_policy("jax_export", "warm-cache")


def _spec(**kwargs):
    kwargs.setdefault("backends", "jax_jit_cpu")
    kwargs.setdefault("workloads", "matmul")
    kwargs.setdefault("sizes", "64")
    kwargs.setdefault("cold_runs", 2)
    kwargs.setdefault("seed", 3)
    return build_spec(RunRequest(**kwargs))


def test_the_default_suite_ships_no_artifact_and_all_or_a_name_does():
    assert parse_policies([]) == POLICIES
    every = parse_policies(["all"])
    assert every[0] == COLD_CACHE and every[-1] == WARM_PROCESS
    assert {p for p in every if p.startswith("precompiled/")} == {
        precompiled_policy(m, s) for m in precompiled.MECHANISMS for s in ("cold-cache", "warm-cache")
    }
    # a mechanism's bare name, or precompiled/<mechanism>: both settings; a whole name: that one
    assert (
        parse_policies(["jax_export"])
        == parse_policies(["precompiled/jax_export"])
        == (precompiled_policy("jax_export", "cold-cache"), EXPORT_WARM)
    )
    assert parse_policies([EXPORT_WARM, "cold"]) == (COLD_CACHE, EXPORT_WARM)


@pytest.mark.parametrize("bad", ["precompiled/nope", "precompiled/jax_export/hot", "precompiled/jax_export/cold-cache/x"])
def test_an_unknown_mechanism_or_setting_names_the_valid_ones(bad):
    with pytest.raises(UsageError) as caught:
        parse_policies([bad])
    assert "precompiled/jax_serialized[/cold-cache|warm-cache]" in str(caught.value), caught.value


def test_a_mechanism_named_for_backends_that_have_none_is_refused_naming_those_that_do():
    with pytest.raises(UsageError, match=r"no chosen backend \(numpy\) makes jax_export artifacts; backends that do: "
                                         r"jax_jit_cpu, jax_jit_gpu"):  # fmt: skip
        _spec(backends="numpy", policies="jax_export")
    # `all` keeps them to the backends that offer them: nothing to refuse
    assert _spec(backends="numpy", policies="all").policies == POLICIES


def test_the_plan_makes_each_artifact_once_before_any_measured_run_and_loads_it_in_every_run():
    spec = _spec(backends="numpy,jax_jit_cpu", policies=f"{SERIALIZED_COLD},{EXPORT_WARM}")
    plan = build_plan(spec, lambda _b, _w=None: None)
    jax = plan.tasks_for("jax_jit_cpu_matmul_64_f32")
    makers = [t for t in jax if t.kind == MAKE]
    assert sorted(t.mechanism for t in makers) == ["jax_export", "jax_serialized"] and {t.round for t in makers} == {0}
    assert [t.kind for t in jax if t.makes_template] == [PRIME]  # the warm-cache setting starts from the template
    for policy, warm in ((SERIALIZED_COLD, False), (EXPORT_WARM, True)):
        runs = [t for t in jax if t.policy == policy]
        assert len(runs) == 2 and all(t.measured and t.requires_template == warm for t in runs), runs
        assert min(t.round for t in runs) > 0
    # NumPy has no mechanism: none of its tasks makes or loads anything
    assert not any(t.mechanism for t in plan.tasks_for("numpy_matmul_64_f32"))


def _counters(programs):
    return decode({"events": {}, "durations_s": {}, "programs": programs}, RuntimeCounters)


def _program(compiles, backend_s=0.01):
    return {"traces": compiles, "compiles": compiles, "hits": 0, "trace_s": 0.0, "lower_s": 0.0, "backend_s": backend_s}


def test_a_load_is_verified_only_when_it_compiled_nothing_its_mechanism_claims_to_skip():
    nothing = precompiled.verify(SERIALIZED_COLD, None, 0, 0, _counters({}))
    assert (nothing.verdict, nothing.flags, nothing.claim.held) == ("verified", [], True)
    redone = precompiled.verify(SERIALIZED_COLD, None, 0, 1, _counters({"matmul": _program(1, 0.2)}))
    assert redone.verdict == "unverified" and redone.flags == ["artifact_recompiled"]
    assert redone.claim.compiled == {"matmul": 1} and redone.claim.compile_s == pytest.approx(0.2)
    assert "matmul x1" in redone.note
    # jax_export: its call wrapper once is what it claims; twice, or the user's function, is not
    once = precompiled.verify(EXPORT_WARM, None, 3, 4, _counters({"call_exported": _program(1)}))
    assert once.verdict == "verified" and once.claim.allowed == {"call_exported": 1} and once.written == 1
    twice = precompiled.verify(EXPORT_WARM, None, 3, 4, _counters({"call_exported": _program(2)}))
    assert twice.verdict == "unverified" and twice.claim.compiled == {"call_exported": 2}
    # the cache directory's state is the setting's, as for the standard policies
    assert precompiled.verify(SERIALIZED_COLD, None, 2, 2, _counters({})).flags == ["cold_cache_not_empty"]
    assert precompiled.verify(EXPORT_WARM, None, 0, 1, _counters({"call_exported": _program(1)})).verdict == "flagged"
    # no counters: nothing to judge the claim by
    assert precompiled.verify(SERIALIZED_COLD, None, 0, 0, None).verdict == "unverified"


def test_a_compiler_process_in_the_load_is_beyond_every_claim_even_when_the_counters_say_nothing():
    mega = precompiled_policy("torch_megacache", "cold-cache")
    quiet = _torch_counters(graphs=1, hits=1, compile_inner=0.3)  # the runtime says: caches hit, no compiler run
    seen = precompiled.verify(mega, None, 0, 2, quiet, ({"g++": 3}, 2.5))
    assert seen.verdict == "unverified" and seen.flags == ["artifact_recompiled"] and seen.claim.held is False
    assert seen.claim.processes == {"g++": 3} and seen.claim.processes_s == 2.5
    assert "its process tree showed g++ x3" in seen.note and "no program by the runtime's count" in seen.note
    # a tree watched and empty: the counters decide alone; not watched: the field is absent
    assert precompiled.verify(mega, None, 0, 2, quiet, ({}, 0.0)).verdict == "verified"
    assert not present(precompiled.verify(mega, None, 0, 2, quiet).claim.processes)
    # jax.export's one allowed compile may run ptxas (on a GPU), only where that compile ran; no other compiler
    wrapper = _counters({"call_exported": _program(1)})
    assert precompiled.verify(EXPORT_WARM, None, 3, 4, wrapper, ({"ptxas": 2}, 0.05)).verdict == "verified"
    gpp = precompiled.verify(EXPORT_WARM, None, 3, 4, wrapper, ({"ptxas": 1, "g++": 1}, 0.3))
    assert gpp.verdict == "unverified" and "its process tree showed g++ x1" in gpp.note and "ptxas" not in gpp.note
    assert precompiled.verify(EXPORT_WARM, None, 3, 4, _counters({}), ({"ptxas": 1}, 0.05)).verdict == "unverified"
    # no counters, yet a compiler seen: that alone says the claim did not hold
    assert precompiled.verify(SERIALIZED_COLD, None, 0, 0, None, ({"ptxas": 1}, 0.1)).claim.held is False


def _seen(pid, name, ppid, first, last):
    return SeenProcess(name=name, parent="", first_ns=first, last_ns=last, pid=pid, ppid=ppid)


def test_the_tree_counts_each_compiler_run_by_its_outermost_compiler_within_the_window():
    worker = 1
    tree = ProcessTree(poll_s=0.05, polls=9, watch_cpu_s=0.01, left_out=0, processes=[
        _seen(2, "python3.11", worker, 0, 900),  # a compile pool's worker: no compiler
        _seen(3, "g++", 2, 100, 300), _seen(4, "cc1plus", 3, 120, 250), _seen(5, "collect2", 3, 255, 295),
        _seen(6, "ld", 5, 260, 290),  # a driver's parts, however deep, are its run, not runs of their own
        _seen(7, "g++-12", worker, 500, 700),  # a versioned driver; it straddles the window's end: the part within
        _seen(8, "cc1plus", 7, 510, 690), _seen(9, "as", 7, 690, 695),
        _seen(10, "nvcc", worker, 150, 400), _seen(11, "sh", 10, 160, 390), _seen(12, "ptxas", 11, 170, 380),
        _seen(13, "x86_64-linux-gn", worker, 50, 90),  # before the window
        _seen(14, "openssl", worker, 150, 160),
    ])  # fmt: skip
    runs, seconds = process_tree.compiler_runs(tree, 100, 600)
    assert runs == {"g++": 1, "g++-12": 1, "nvcc": 1} and seconds == pytest.approx((200 + 100 + 250) / 1e9)
    assert process_tree.compiler_runs(tree, 0, 95) == ({"x86_64-linux-gn": 1}, pytest.approx(40 / 1e9))
    assert process_tree.compiler_runs(None, 0, 1) is None
    compilers = ("ptxas", "nvcc", "clang++", "clang-17", "g++-12", "x86_64-linux-gnu-g++", "x86_64-conda-li",
                 "aarch64-linux-g", "cc1plus", "ld.lld")  # fmt: skip
    assert all(map(process_tree.is_compiler, compilers))
    assert not any(map(process_tree.is_compiler, ("python3.11", "openssl", "sh", "worker", "pt_main_thread")))


def _watched_once(argv: list[str]) -> ProcessTree:
    """The tree under a real process that says it is ready, then waits for its input: one poll, at the watch's start."""
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert proc.stdout.readline() == b"ready\n"
        watch = process_tree.TreeWatch(proc.pid, poll_s=3600)
        proc.stdin.close()
        proc.wait(timeout=30)
        watch.stop()
    finally:
        proc.kill()
    return watch.result()


def test_what_a_compiler_run_as_the_measured_process_runs_is_its_compile_not_runs_of_its_own(tmp_path):
    """`ttfr run --command "g++ x.cpp"`: the root is not in the tree, so the watch names its children after it where
    it is a compiler; their cc1plus (and its parts) are the compile that is timed, never compiler runs. Under a root
    that is no compiler (a shell, a worker) the same child is one. Scripts named g++ and cc1plus: the kernel names a
    process after the file it ran."""
    part = tmp_path / "cc1plus"
    part.write_text("#!/bin/sh\necho ready\nread line\n")
    driver = tmp_path / "g++"
    driver.write_text(f"#!/bin/sh\n{part}\n")
    for script in (part, driver):
        script.chmod(0o755)
    under_driver = _watched_once([str(driver)])
    assert [(p.name, p.parent) for p in under_driver.processes] == [("cc1plus", "g++")]
    assert process_tree.compiler_runs(under_driver, 0, time.monotonic_ns()) == ({}, 0.0)
    under_shell = _watched_once(["sh", "-c", f"{part}; true"])
    assert [(p.name, p.parent) for p in under_shell.processes] == [("cc1plus", "worker")]
    assert process_tree.compiler_runs(under_shell, 0, time.monotonic_ns())[0] == {"cc1plus": 1}


def test_a_watch_that_cannot_watch_says_so_and_the_run_counts_as_not_watched(monkeypatch):
    def broken(_pid):
        raise PermissionError("no /proc here")

    monkeypatch.setattr(process_tree, "_children", broken)
    watch = process_tree.TreeWatch(os.getpid(), poll_s=3600)
    watch.stop()
    assert watch.failed == "PermissionError: no /proc here" and watch.result() is None


@pytest.mark.skipif(not process_tree.available(), reason="the kernel lists no thread's children")
def test_the_watch_sees_a_grandchild_under_the_name_it_ran_and_its_parent(tmp_path):
    # a program named g++ (a script: the kernel names a process after the file it ran) that says it runs, then
    # waits for its input: the watch's first poll (at its start) sees it under that name, never after it ended
    program = tmp_path / "g++"
    program.write_text("#!/bin/sh\necho ready\nread line\n")
    program.chmod(0o755)
    proc = subprocess.Popen([str(program)], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert proc.stdout.readline() == b"ready\n"
        watch = process_tree.TreeWatch(os.getpid(), poll_s=3600)  # one poll at its start, none before stop
        proc.stdin.close()
        proc.wait(timeout=30)
        watch.stop()
    finally:
        proc.kill()
    tree = watch.result()
    mine = [p for p in tree.processes if p.name == "g++"]
    assert [(p.parent, p.ppid, p.first_ns == p.last_ns) for p in mine] == [("worker", os.getpid(), True)], mine
    assert tree.polls == 1 and tree.watch_cpu_s >= 0 and tree.left_out == 0
    assert process_tree.compiler_runs(tree, mine[0].first_ns, mine[0].first_ns) == ({"g++": 1}, 0.0)


class ShippingExecutor(FakeExecutor):
    """A priming process writes its artifact and records it; a loading run's first call compiles `loaded_programs`
    (nothing by default); `unsupported`: the priming process says the mechanism cannot take the workload."""

    def __init__(self, loaded_programs=None, unsupported=None):
        super().__init__()
        self.loaded_programs = loaded_programs or {}
        self.unsupported = unsupported

    def __call__(self, job, env, timeout_s, python=None):
        if job.artifact_action == "make" and job.precompiled == self.unsupported:
            self.calls.append({"job": job, "case": "", "entries_seen": [], "env": env})
            return fake_result(None, outcome="unavailable", reason="this mechanism cannot take that function")
        return super().__call__(job, env, timeout_s, python)

    def answer(self, job, call, entries, jax_dir):
        if job.artifact_action != "load":
            record, life = super().answer(job, call, entries, jax_dir)
            if job.artifact_action == "make":
                with open(job.artifact, "wb") as handle:
                    handle.write(b"ttfr-precompiled-1\n" + b"x" * 100)
                record["artifact"] = {"mechanism": job.precompiled, "bytes": 119, "make_s": 0.004,
                                      "sha256": child_precompiled.digest(job.artifact, job.precompiled)}  # fmt: skip
            return record, life
        first = {"events": {}, "durations_s": {}, "programs": self.loaded_programs}
        record = fake_record(cache={"first": first, "end": first})
        record["marks_ns"]["artifact_loaded"] = record["marks_ns"]["setup"] + 5_000_000
        return record, 300_000_000


def test_a_suite_holds_each_precompiled_policy_with_its_artifact_and_what_still_compiled(tmp_path):
    executor = ShippingExecutor()
    outcome = run_suite(tmp_path, RunRequest(backends="jax_jit_cpu", workloads="matmul", sizes="64", cold_runs=4,
                                             seed=1, policies=f"cold-cache,{SERIALIZED_COLD},{EXPORT_WARM}"),
                        executor)  # fmt: skip
    (case,) = outcome.cases
    assert case.status == "ok", case.reason
    assert [name for name, _p in case.policies.items()] == [COLD_CACHE, EXPORT_WARM, SERIALIZED_COLD]
    shipped = case.policies.get(SERIALIZED_COLD)
    assert shipped.artifact.state == "made" and shipped.artifact.bytes == 119
    assert shipped.artifact.bound_to == {"numpy": "0", "device": "cpu: test cpu"}
    assert shipped.cache_verification.verdict == "verified"
    assert shipped.figure("artifact_load_s").median == pytest.approx(0.005)
    assert shipped.still_compiled.runs_compiling == 0 and shipped.still_compiled.share_of_ttfr == 0.0
    # every loading run was handed the artifact its mechanism's priming process wrote
    loads = [c["job"] for c in executor.calls if c["job"].artifact_action == "load"]
    assert len(loads) == 8 and all(j.artifact.endswith(f"/{j.precompiled}.artifact") for j in loads)
    # against the standard cold policy measured beside it (warm-cache was not): a ratio with its interval, judged
    (against,) = shipped.versus.items()
    assert against[0] == COLD_CACHE and against[1].n == 4 and against[1].ci is not None
    # the figures a reader recomputes are the ones written
    assert summaries_disagree(case) == []


def test_a_load_that_recompiled_is_unverified_with_what_compiled_in_the_case_flags(tmp_path):
    executor = ShippingExecutor(loaded_programs={"matmul": _program(1, 0.1)})
    outcome = run_suite(tmp_path, RunRequest(backends="jax_jit_cpu", workloads="matmul", sizes="64", cold_runs=2,
                                             seed=1, policies=SERIALIZED_COLD), executor)  # fmt: skip
    (case,) = outcome.cases
    policy = case.policies.get(SERIALIZED_COLD)
    assert policy.cache_verification.verdict == "unverified"
    assert policy.still_compiled.runs_beyond_claim == 2 and policy.still_compiled.what == ["matmul"]
    assert policy.still_compiled.compile_s.median == pytest.approx(0.1)
    assert [(f.name, f.policy) for f in case.flags] == [("artifact_recompiled", SERIALIZED_COLD)]


def test_a_mechanism_that_cannot_take_the_workload_is_unsupported_and_the_case_goes_on(tmp_path):
    executor = ShippingExecutor(unsupported="jax_export")
    outcome = run_suite(tmp_path, RunRequest(backends="jax_jit_cpu", workloads="matmul", sizes="64", cold_runs=2,
                                             seed=1, policies=f"cold-cache,{EXPORT_WARM},{SERIALIZED_COLD}"),
                        executor)  # fmt: skip
    (case,) = outcome.cases
    assert case.status == "ok", case.reason  # data, not a failure
    export = case.policies.get(EXPORT_WARM)
    assert export.unsupported and export.artifact.reason == "this mechanism cannot take that function"
    assert export.runs == [] and export.figure("ttfr_s") is None
    assert case.policies.get(SERIALIZED_COLD).figure("ttfr_s") is not None
    # its runs were never started: nothing to load
    assert not [c for c in executor.calls if c["job"].precompiled == "jax_export" and c["job"].artifact_action == "load"]


def test_a_failed_priming_process_stops_no_case_and_leaves_no_run_pending():
    spec = _spec(policies=SERIALIZED_COLD)
    plan = build_plan(spec, lambda _b, _w=None: None)
    (maker,) = [t for t in plan.tasks if t.kind == MAKE]
    entry = decode({"task": maker.key, "case": maker.case.id, "kind": MAKE, "policy": maker.policy, "index": 0,
                    "round": 0, "measured": False, "makes_template": False, "timeout_s": 60.0,
                    "cache_dir": {"entries_before": 0, "entries_after": 0, "restored_template": False},
                    "host": None, "outcome": "error", "reason": "boom", "record": None, "spawn_ns": 1, "reaped_ns": 2,
                    "exit_code": 1, "rusage": None, "output_tail": None}, JournalEntry)  # fmt: skip
    assert gate_failure(entry) is None
    remaining, stopped = replay(plan, [entry])
    assert stopped == {} and not [t for t in remaining if t.mechanism == "jax_serialized"]


def _interrupted_after_one_load(tmp_path):
    """A jax_serialized run stopped (Ctrl-C) once the maker, the check and one loading run are done: its plan,
    journal, and a function that resumes it with a new executor (returned)."""
    from ttfr.measure.executors import Executors
    from ttfr.measure.journal import Journal
    from ttfr.measure.scheduler import Scheduler

    plan = build_plan(_spec(policies=SERIALIZED_COLD), lambda _b, _w=None: None)
    journal = Journal(tmp_path / "journal.jsonl")
    first = ShippingExecutor()
    first.interrupt_at = 3
    with pytest.raises(KeyboardInterrupt):
        Scheduler(plan, journal, tmp_path / "scratch", Executors(worker=first)).run()

    def resume(executor):
        Scheduler(plan, journal, tmp_path / "scratch", Executors(worker=executor)).run()
        return executor

    return plan, journal, resume


def test_an_artifact_gone_on_resume_is_made_again_before_a_run_loads_it(tmp_path):
    plan, journal, resume = _interrupted_after_one_load(tmp_path)
    artifacts = tmp_path / "scratch" / "artifacts"
    assert list(artifacts.rglob("*.artifact"))

    shutil.rmtree(artifacts)  # e.g. the scratch area cleaned between the two sessions
    second = resume(ShippingExecutor())
    actions = [c["job"].artifact_action for c in second.calls]
    assert actions[0] == "make" and actions[1:] == ["load"] * (len(actions) - 1), actions
    # every planned task once, and the artifact made again journaled beside them (the case's artifact is its)
    keys = [e.task for e in journal.entries()]
    (maker,) = [t.key for t in plan.tasks if t.kind == MAKE]
    assert sorted(keys) == sorted([t.key for t in plan.tasks] + [maker])
    assert [e.kind for e in journal.entries()][3] == MAKE


def test_an_artifact_changed_since_it_was_made_is_made_again_never_loaded(tmp_path):
    plan, journal, resume = _interrupted_after_one_load(tmp_path)
    (artifact,) = (tmp_path / "scratch" / "artifacts").rglob("*.artifact")
    made = artifact.read_bytes()
    artifact.write_bytes(made[:-1] + b"y")  # one byte changed between the sessions: a pickle is code
    second = resume(ShippingExecutor())
    actions = [c["job"].artifact_action for c in second.calls]
    assert actions[0] == "make" and actions[1:] == ["load"] * (len(actions) - 1), actions
    assert artifact.read_bytes() == made  # what the loads read is the maker's again
    # unchanged, it is loaded as it is: a third session makes nothing
    third = resume(ShippingExecutor())
    assert third.calls == []  # (and nothing was pending)
    from ttfr.measure.executors import Executors
    from ttfr.measure.scheduler import Scheduler

    scheduler = Scheduler(plan, journal, tmp_path / "scratch", Executors(worker=third))
    scheduler.pending()
    (task,) = [t for t in plan.tasks if t.mechanism and t.kind != MAKE][:1]
    assert scheduler._intact(task) and not scheduler._unmade(task) and third.calls == []


def test_every_output_says_the_policy_s_figures_as_the_case_file_holds_them(tmp_path):
    from ttfr.artifacts.export import nextstat
    from ttfr.report import precompiled_md
    from ttfr.report.formatting import fmt_summary

    outcome = run_suite(tmp_path, RunRequest(backends="jax_jit_cpu", workloads="matmul", sizes="64", cold_runs=4,
                                             seed=1, policies=f"cold-cache,warm-cache,{SERIALIZED_COLD}"),
                        ShippingExecutor(loaded_programs={"matmul": _program(1, 0.1)}))  # fmt: skip
    (case,) = outcome.cases
    policy = case.policies.get(SERIALIZED_COLD)
    (row,) = precompiled_md.tables([case], mark=str).rows
    assert row[:4] == [case.case, "jax_serialized", "cold-cache", fmt_summary(policy.figure("ttfr_s"))]
    assert row[5] == precompiled_md.against(policy.versus[COLD_CACHE]) and row[5].startswith("×")
    assert row[7].startswith("matmul: 100 ms") and row[8] == "unverified" and row[9] == "119 B, made in 4 ms"
    report = (outcome.result_dir.root / "report.md").read_text()
    assert "## Precompiled artifacts" in report and " | ".join(row[1:4]) in report.replace("`", "")
    assert "## Cold start components (precompiled/jax_serialized/cold-cache)" in report
    assert nextstat.cache_policy_name(SERIALIZED_COLD) == "process_cold+precompiled:jax_serialized"


def _torch_counters(graphs=0, misses=0, hits=0, compiler_runs=(), compile_inner=0.0):
    table = {"stats": {"unique_graphs": graphs}, "inductor": {"fxgraph_cache_miss": misses, "fxgraph_cache_hit": hits}}
    data = {"counters": table, "compile_times_s": {"_compile.compile_inner": compile_inner} if compile_inner else {}}
    if compiler_runs:
        data["compiler_runs_s"] = {"compile_file": list(compiler_runs)}
    return decode(data, RuntimeCounters)


def test_torch_loads_are_judged_by_its_counters_and_inductor_s_compiler_runs():
    mega = precompiled_policy("torch_megacache", "cold-cache")
    aot = precompiled_policy("torch_aot_compile", "cold-cache")
    # Mega-Cache: dynamo traces again by design; its caches must hit and no compiler run
    hit = precompiled.verify(mega, None, 0, 2, _torch_counters(graphs=1, hits=1, compile_inner=0.3))
    assert hit.verdict == "verified" and hit.claim.allowed == {"graphs compiled": 1} and hit.claim.compile_s == 0.3
    rebuilt = precompiled.verify(mega, None, 0, 9, _torch_counters(graphs=1, hits=1, compiler_runs=(0.8, 0.7)))
    assert rebuilt.verdict == "unverified" and rebuilt.claim.compiled == {"compiler runs": 2}
    # aot_compile claims dynamo too: a graph compiled is beyond it; ISA probes alone are timed by their runs
    assert precompiled.verify(aot, None, 0, 0, _torch_counters(graphs=1)).claim.compiled == {"graphs compiled": 1}
    probes = precompiled.verify(aot, None, 0, 6, _torch_counters(compiler_runs=(1.0, 0.5)))
    assert probes.claim.compile_s == pytest.approx(1.5) and probes.flags == ["artifact_recompiled"]
    assert precompiled.verify(aot, None, 0, 0, _torch_counters()).verdict == "verified"


def test_every_compiling_torch_backend_offers_the_three_torch_mechanisms():
    from ttfr.measure import catalog

    for name, backend in catalog.BACKENDS.items():
        if backend.framework == "torch" and backend.compiles:
            assert backend.precompiled == ("torch_megacache", "torch_aot_compile", "torch_aoti"), name
        assert set(backend.precompiled) <= set(precompiled.MECHANISMS), name
        # one runtime's mechanisms: a JAX backend's judged by JAX's counters, a torch one's by torch's
        assert len({precompiled.MECHANISMS[m].witness for m in backend.precompiled}) <= 1, name


def test_precompiled_alone_keeps_the_mechanisms_the_chosen_backends_offer_and_refuses_none():
    shipped = [p for p in _spec(backends="numpy,jax_jit_cpu", policies="precompiled").policies]
    assert shipped == [precompiled_policy(m, s) for m in ("jax_export", "jax_serialized")
                       for s in ("cold-cache", "warm-cache")]  # fmt: skip
    with pytest.raises(UsageError, match="no chosen backend makes precompiled artifacts; backends that do: jax_jit_cpu"):
        _spec(backends="numpy", policies="precompiled")


def test_three_runs_against_three_allow_no_interval_and_the_report_says_so(tmp_path):
    from ttfr.report import precompiled_md

    outcome = run_suite(tmp_path, RunRequest(backends="jax_jit_cpu", workloads="matmul", sizes="64", cold_runs=3,
                                             seed=1, policies=f"cold-cache,{SERIALIZED_COLD}"), ShippingExecutor())  # fmt: skip
    (case,) = outcome.cases
    assert case.policies.get(SERIALIZED_COLD).versus == {}  # the Mann-Whitney interval needs more runs
    (row,) = precompiled_md.tables([case], mark=str).rows
    assert row[5] == "too few runs for a 95% interval" and row[6] == "—"  # warm-cache was not run


def test_a_reader_finds_an_edited_precompiled_figure(tmp_path):
    import msgspec

    outcome = run_suite(tmp_path, RunRequest(backends="jax_jit_cpu", workloads="matmul", sizes="64", cold_runs=2,
                                             seed=1, policies=SERIALIZED_COLD),
                        ShippingExecutor(loaded_programs={"matmul": _program(1, 0.1)}))  # fmt: skip
    (case,) = outcome.cases
    policy = case.policies.get(SERIALIZED_COLD)
    hidden = msgspec.structs.replace(policy.still_compiled, runs_beyond_claim=0)  # "it compiled nothing extra"
    edited = msgspec.structs.replace(
        case,
        policies=msgspec.structs.replace(
            case.policies, precompiled={"jax_serialized/cold-cache": msgspec.structs.replace(policy, still_compiled=hidden)}
        ),
    )
    assert summaries_disagree(edited) == [f"{SERIALIZED_COLD}: what it still compiled, or its comparisons, are not "
                                          "what the runs give"]  # fmt: skip
    renamed = msgspec.structs.replace(
        case, policies=msgspec.structs.replace(case.policies, precompiled={"jax_export/cold-cache": policy})
    )
    assert any("mechanism or setting is not its name's" in p for p in summaries_disagree(renamed))


def test_gates_take_unsupported_as_data_and_a_claim_that_did_not_hold_as_a_finding(tmp_path):
    from ttfr.analyse import gates

    outcome = run_suite(tmp_path, RunRequest(backends="jax_jit_cpu", workloads="matmul", sizes="64", cold_runs=2,
                                             seed=1, policies=f"{SERIALIZED_COLD},{EXPORT_WARM}"),
                        ShippingExecutor(loaded_programs={"matmul": _program(1)}, unsupported="jax_export"))  # fmt: skip
    claims = {g.policy: g for g in gates.gates(outcome.cases) if g.gate == "precompiled_claim"}
    assert claims[EXPORT_WARM].result == "not_applicable" and "unsupported" in claims[EXPORT_WARM].detail
    assert claims[SERIALIZED_COLD].result == "flagged" and "matmul" in claims[SERIALIZED_COLD].detail
    assert gates.validation_pack("x", outcome.cases).passed  # neither is a failure of the snapshot


def test_compare_says_why_an_unsupported_policy_is_not_compared(tmp_path):
    from ttfr.pipeline import comparison

    request = RunRequest(backends="jax_jit_cpu", workloads="matmul", sizes="64", cold_runs=2, seed=1,
                         policies=f"cold-cache,{EXPORT_WARM}")  # fmt: skip
    a = run_suite(tmp_path / "a", request, ShippingExecutor(unsupported="jax_export")).cases
    b = run_suite(tmp_path / "b", request, ShippingExecutor()).cases
    records = {r.policy: r for r in comparison.compare_cases(a, b, paired=False)}
    assert records[EXPORT_WARM].verdict == "not_compared" and not records[EXPORT_WARM].failed
    assert records[EXPORT_WARM].explanation.startswith("arm A's artifact unsupported: ")
    assert records[COLD_CACHE].verdict != "not_compared"


def test_ab_rounds_make_each_artifact_before_any_run_loads_it():
    from ttfr.pipeline.interleaved import rounds_of

    plan = build_plan(_spec(policies=f"{SERIALIZED_COLD},{EXPORT_WARM}"), lambda _b, _w=None: None)
    for seed in range(20):  # whatever the shuffle, the makers lead round 0
        first = rounds_of(plan, seed)[0]
        kinds = [t.kind for t in first]
        assert all(k in (MAKE, PRIME) for k in kinds[: kinds.count(MAKE) + kinds.count(PRIME)]), kinds


def test_the_nextstat_export_refuses_a_policy_the_run_did_not_measure(tmp_path):
    from ttfr.artifacts.export import nextstat

    outcome = run_suite(tmp_path, RunRequest(backends="jax_jit_cpu", workloads="matmul", sizes="64", cold_runs=2,
                                             seed=1, policies=f"cold-cache,{SERIALIZED_COLD}"), ShippingExecutor())  # fmt: skip
    with pytest.raises(UsageError, match="did not measure it; its cold policies: cold-process/cold-cache, "
                                         "precompiled/jax_serialized/cold-cache"):  # fmt: skip
        nextstat.export(outcome.result_dir.root, tmp_path / "out", EXPORT_WARM)
    written = nextstat.export(outcome.result_dir.root, tmp_path / "out", SERIALIZED_COLD)
    assert written
