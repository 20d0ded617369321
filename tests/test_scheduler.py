from dataclasses import replace

import pytest
from conftest import fake_result
from support.fakes import FakeExecutor

from ttfr.measure.executors import Executors
from ttfr.measure import catalog
from ttfr.measure.journal import Journal
from ttfr.measure.plan import build_plan
from ttfr.measure.scheduler import Scheduler
from ttfr.measure.spec import RunRequest, build_spec


def make_plan(**kwargs):
    kwargs.setdefault("backends", "numpy,jax_jit_cpu")
    kwargs.setdefault("workloads", "matmul")
    kwargs.setdefault("sizes", "64")
    kwargs.setdefault("cold_runs", 2)
    kwargs.setdefault("warm_procs", 2)
    kwargs.setdefault("seed", 3)
    return build_plan(build_spec(RunRequest(**kwargs)), lambda _b, _w=None: None)


def run(plan, tmp_path, executor):
    journal = Journal(tmp_path / "journal.jsonl")
    scheduler = Scheduler(plan, journal, tmp_path / "scratch", Executors(worker=executor))
    scheduler.run()
    return journal, scheduler


def test_runs_every_task_in_plan_order_and_journals_each(tmp_path):
    plan = make_plan()
    executor = FakeExecutor()
    journal, _ = run(plan, tmp_path, executor)
    assert [e.task for e in journal.entries()] == [t.key for t in plan.tasks]
    assert [c["case"] for c in executor.calls] == [t.case.id for t in plan.tasks]


def test_cache_policy_state_is_what_each_run_sees(tmp_path):
    plan = make_plan()
    executor = FakeExecutor()
    run(plan, tmp_path, executor)
    for task, call in zip(plan.tasks, executor.calls):
        if task.case.backend != "jax_jit_cpu":
            continue
        if task.policy == "cold-process/cold-cache":
            assert call["entries_seen"] == [], task.key  # emptied before every cold-cache run
        else:
            assert call["entries_seen"] == ["jit_fn-cache"], task.key  # restored from the template


def test_priming_and_measured_runs_get_identical_environments(tmp_path):
    plan = make_plan(backends="jax_jit_cpu", threads=2, deterministic=True)
    executor = FakeExecutor()
    run(plan, tmp_path, executor)
    environments = {tuple(sorted(c["env"].items())) for c in executor.calls}
    assert len(environments) == 1
    env = executor.calls[0]["env"]
    assert env["OMP_NUM_THREADS"] == "2" and env["PYTHONHASHSEED"] == "0" and env["JAX_PLATFORMS"] == "cpu"


def test_failed_template_producer_stops_its_case_only(tmp_path):
    plan = make_plan()

    def decide(call):
        if call["case"].startswith("jax") and len([c for c in executor.calls if c["case"] == call["case"]]) == 1:
            return fake_result(None, outcome="error", reason="exit code 1 without a result record")
        return None

    executor = FakeExecutor(decide)
    journal, scheduler = run(plan, tmp_path, executor)
    jax_calls = [c for c in executor.calls if c["case"].startswith("jax")]
    assert len(jax_calls) == 1
    assert scheduler.stopped == {"jax_jit_cpu_matmul_64_f32": "exit code 1 without a result record"}
    assert len([c for c in executor.calls if c["case"].startswith("numpy")]) == 2 + 2 + 2


def test_unavailable_backend_stops_its_case(tmp_path):
    plan = make_plan(backends="jax_jit_cpu")
    executor = FakeExecutor(lambda call: fake_result(None, outcome="unavailable", reason="missing_dependency: jaxlib"))
    journal, scheduler = run(plan, tmp_path, executor)
    assert len(executor.calls) == 1
    assert scheduler.stopped["jax_jit_cpu_matmul_64_f32"] == "missing_dependency: jaxlib"


def test_interrupted_run_resumes_exactly_where_it_stopped(tmp_path):
    plan = make_plan()
    with pytest.raises(KeyboardInterrupt):
        run(plan, tmp_path, FakeExecutor(interrupt_at=5))
    assert len(Journal(tmp_path / "journal.jsonl").entries()) == 5
    second = FakeExecutor()
    journal, _ = run(plan, tmp_path, second)
    keys = [e.task for e in journal.entries()]
    assert keys == [t.key for t in plan.tasks]  # nothing twice, nothing missing, in order
    assert len(second.calls) == len(plan.tasks) - 5


def test_missing_template_on_resume_is_reprimed_unmeasured(tmp_path):
    plan = make_plan(backends="jax_jit_cpu")
    with pytest.raises(KeyboardInterrupt):
        run(plan, tmp_path, FakeExecutor(interrupt_at=1))
    import shutil

    shutil.rmtree(tmp_path / "scratch")
    second = FakeExecutor()
    journal, _ = run(plan, tmp_path, second)
    assert len(second.calls) == len(plan.tasks)  # remaining tasks + one priming run
    assert second.calls[0]["job"].mode == "cold" and second.calls[0]["entries_seen"] == []
    assert second.calls[1]["entries_seen"] == ["jit_fn-cache"]
    assert len(journal.entries()) == len(plan.tasks)


def test_a_cold_cache_only_plan_starts_no_process_beyond_its_tasks(tmp_path):
    """Without a warm-cache policy no template is made; the check of a compiling backend then
    runs on an empty cache rather than priming one (an extra JAX process per case, ~0.5 s)."""
    plan = make_plan(backends="jax_jit_cpu", policies="cold-process/cold-cache")
    executor = FakeExecutor()
    run(plan, tmp_path, executor)
    assert len(executor.calls) == len(plan.tasks)
    (check,) = [c for c in executor.calls if c["job"].check]
    assert check["entries_seen"] == []


@pytest.mark.parametrize("factor", [1.0, 4.0])
def test_gate_processes_get_their_workloads_timeout_factor(tmp_path, factor):
    spec = build_spec(RunRequest(backends="numpy", workloads="matmul", sizes="64", cold_runs=2, warm_procs=2, seed=3,
                                 timeout=10))  # fmt: skip
    # The scheduler reads the factor from the case's own workload (as a user's case carries it).
    cases = tuple(replace(c, info=replace(c.workload_info, check_timeout_factor=factor)) for c in spec.cases)
    plan = build_plan(replace(spec, cases=cases), lambda _b, _w=None: None)
    seen = []

    class Recording(FakeExecutor):
        def __call__(self, job, env, timeout_s, python=None):
            seen.append((job.check, timeout_s))
            return super().__call__(job, env, timeout_s, python)

    journal, _ = run(plan, tmp_path, Recording())
    assert {t for c, t in seen if c} == {10 * factor}
    assert {t for c, t in seen if not c} == {10}
    assert {e.timeout_s for e in journal.entries()} == {10, 10 * factor}


def test_only_histfactory_checks_get_a_longer_timeout():
    assert {w.check_timeout_factor for w in catalog.WORKLOADS.values() if w.name in catalog.HF_WORKLOADS} == {4.0}
    assert {w.check_timeout_factor for w in catalog.WORKLOADS.values() if w.name not in catalog.HF_WORKLOADS} == {1.0}


def test_only_ttfrs_own_jax_engine_on_a_fit_like_workload_runs_cpu_computations_inline(tmp_path):
    """HistFactory workloads need each result before the next call: the native JAX engine's
    worker runs CPU computations inline (the adapter's option, recorded in the sync policy);
    pyhf's JAX backend, torch and array workloads run as their users run them."""
    spec = build_spec(RunRequest(cases="jax_jit_cpu_hf_nll_grad_8_f64,pyhf_jax_hf_nll_grad_8_f64,"
                                       "torch_eager_cpu_hf_nll_grad_8_f64,jax_jit_cpu_matmul_512_f32",
                                 cold_runs=1, warm_procs=1, seed=3))  # fmt: skip
    plan = build_plan(spec, lambda _b, _w=None: None)
    from ttfr.measure.workerenv import build_job

    dataset = {"workspace": "w.json", "point": "p.json", "signal": "SR0/signal", "reference": "r.json"}
    inline = {t.case.id: build_job(t, spec, dataset if t.case.uses_workspace else None).inline_cpu for t in plan.tasks}
    assert inline == {"jax_jit_cpu_hf_nll_grad_8_f64": True, "pyhf_jax_hf_nll_grad_8_f64": False,
                      "torch_eager_cpu_hf_nll_grad_8_f64": False, "jax_jit_cpu_matmul_512_f32": False}  # fmt: skip
    by_id = {c.id: c for c in spec.cases}
    assert (
        "; CPU computations run inline in the calling thread (jax_cpu_enable_async_dispatch=False)"
        in by_id["jax_jit_cpu_hf_nll_grad_8_f64"].sync_policy
    )
    assert "inline" not in by_id["pyhf_jax_hf_nll_grad_8_f64"].sync_policy


@pytest.mark.timeout(120)  # the safety net: a scheduler that never waits for the work leaves it blocked
def test_work_alongside_overlaps_only_unmeasured_runs_and_ends_before_a_measured_one(tmp_path):
    """ttfr's own imports run beside the result checks (unmeasured) and are finished before any
    measured process starts: a measured run never shares the machine with ttfr's work.

    The work alongside ends only once the scheduler waits for it (joins its thread, with no
    time limit) or, if the scheduler does not, once a measured run has started: the join, not
    the work being slower or faster than the runs, orders what follows."""
    import threading

    plan = make_plan(backends="numpy,jax_jit_cpu", cold_runs=2, policies="cold-process/cold-cache")
    events, release, joining = [], threading.Event(), threading.Event()

    def decide(call):  # the scheduler runs the plan in order: a case's next task is this call's
        task = next(t for t in plan.tasks if t.case.id == call["case"] and t.key not in seen)
        seen.add(task.key)
        events.append(("run", task.measured))
        if not task.measured:
            release.set()  # the work alongside may finish only once an unmeasured run is under way
        elif release.is_set():
            joining.set()  # a measured run began beside the work (the bug): it ends now, recorded after the run
        return None

    def alongside():
        release.wait()  # set by the unmeasured run the scheduler starts it beside
        joining.wait()
        events.append(("alongside done", None))

    class Waited(Scheduler):
        def _start_alongside(self):
            fresh = self._helper is None  # a thread started here is a new one, its join not yet watched
            super()._start_alongside()
            helper = self._helper  # the work's thread (once started): its join is the scheduler waiting for it
            if fresh and helper is not None:
                join = helper.join

                def waited(timeout=None):
                    if timeout is None:
                        joining.set()
                    join(timeout)

                helper.join = waited

    seen: set = set()
    journal = Journal(tmp_path / "journal.jsonl")
    scheduler = Waited(plan, journal, tmp_path / "scratch", Executors(worker=FakeExecutor(decide)), alongside=alongside)
    scheduler.run()
    assert ("alongside done", None) in events
    done = events.index(("alongside done", None))
    first_check = events.index(("run", False))
    assert first_check < done  # it overlapped an unmeasured run ...
    measured_after_check = [i for i, e in enumerate(events) if e == ("run", True) and i > first_check]
    assert measured_after_check and min(measured_after_check) > done  # ... and ended before the next measured one


def test_without_an_unmeasured_run_the_work_alongside_is_not_started(tmp_path):
    plan = make_plan(backends="numpy", warm_procs=2, policies="warm-process")  # the gate is a measured warm process
    started = []
    journal = Journal(tmp_path / "journal.jsonl")
    Scheduler(plan, journal, tmp_path / "scratch", Executors(worker=FakeExecutor()),
              alongside=lambda: started.append(1)).run()  # fmt: skip
    assert all(t.measured for t in plan.tasks) and started == []


def test_cpu_torch_cases_do_not_see_the_gpus_unless_the_user_says_so(tmp_path):
    """A CPU torch case on a GPU machine loaded CUDA all the same (issue 27, item 12)."""
    from ttfr.measure.workerenv import build_env

    plan = make_plan(backends="torch_eager_cpu,torch_compile_cpu,jax_jit_gpu", workloads="matmul")
    by_backend = {t.case.backend: t.case for t in plan.tasks}
    spec = plan.spec
    assert build_env(by_backend["torch_eager_cpu"], spec, {}, base={})["CUDA_VISIBLE_DEVICES"] == ""
    assert build_env(by_backend["torch_compile_cpu"], spec, {}, base={})["CUDA_VISIBLE_DEVICES"] == ""
    assert build_env(by_backend["jax_jit_gpu"], spec, {}, base={})["CUDA_VISIBLE_DEVICES"] == "0"  # one GPU per worker
    assert build_env(by_backend["torch_eager_cpu"], spec, {}, base={"CUDA_VISIBLE_DEVICES": "1"})["CUDA_VISIBLE_DEVICES"] == "1"
