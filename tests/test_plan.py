from collections import Counter

from ttfr.measure.plan import CHECK, COLD, PRIME, WARM, build_plan
from ttfr.model.policies import COLD_CACHE, WARM_CACHE, WARM_PROCESS
from ttfr.measure.spec import RunRequest, build_spec


def always_available(_backend, _workload=None):
    return None


def spec(**kwargs):
    kwargs.setdefault("backends", "numpy,jax_jit_cpu,torch_compile_cpu")
    kwargs.setdefault("workloads", "matmul")
    kwargs.setdefault("cold_runs", 3)
    kwargs.setdefault("warm_procs", 2)
    return build_spec(RunRequest(**kwargs))


def test_every_case_gets_its_runs_per_policy():
    plan = build_plan(spec(), always_available)
    counts = Counter((t.case.backend, t.policy) for t in plan.tasks if t.measured)
    for backend in ("numpy", "jax_jit_cpu", "torch_compile_cpu"):
        assert counts[(backend, COLD_CACHE)] == 3
        assert counts[(backend, WARM_CACHE)] == 3
        assert counts[(backend, WARM_PROCESS)] == 2
    assert not [t for t in plan.tasks if not t.measured]  # cold-cache #0 primes; warm #0 checks


def test_template_producer_runs_before_anything_that_uses_the_template():
    plan = build_plan(spec(), always_available)
    for case in plan.spec.cases:
        tasks = plan.tasks_for(case.id)
        producers = [i for i, t in enumerate(tasks) if t.makes_template]
        users = [i for i, t in enumerate(tasks) if t.uses_template]
        if case.backend_info.compiles:
            assert len(producers) == 1 and tasks[producers[0]].policy == COLD_CACHE
            assert producers[0] < min(users)
        else:
            assert producers == []  # NumPy has no compile cache to prime


def test_gate_comes_before_the_interleaved_rounds():
    plan = build_plan(spec(), always_available)
    for case in plan.spec.cases:
        tasks = plan.tasks_for(case.id)
        gate = next(t for t in tasks if t.kind == WARM and t.index == 0)
        assert gate.round == 1
        first_cold = next(t for t in tasks if t.policy == COLD_CACHE and t.index == 0)
        assert first_cold.round == 0
        assert all(t.round >= 2 for t in tasks if t not in (gate, first_cold))


def test_rounds_interleave_cases_and_are_shuffled_reproducibly():
    a = build_plan(spec(seed=1), always_available)
    b = build_plan(spec(seed=1), always_available)
    c = build_plan(spec(seed=2), always_available)
    assert [t.key for t in a.tasks] == [t.key for t in b.tasks]
    assert [t.key for t in a.tasks] != [t.key for t in c.tasks]
    assert [t.round for t in a.tasks] == sorted(t.round for t in a.tasks)
    later = [t for t in a.tasks if t.round == 3]
    assert {t.case.id for t in later} == {c.id for c in a.spec.cases}


def test_unmeasured_prime_and_check_when_their_policies_are_not_selected():
    plan = build_plan(spec(policies="warm-cache"), always_available)
    kinds = Counter((t.case.backend, t.kind) for t in plan.tasks)
    assert kinds[("jax_jit_cpu", PRIME)] == 1 and kinds[("numpy", PRIME)] == 0
    assert kinds[("jax_jit_cpu", CHECK)] == 1 and kinds[("numpy", CHECK)] == 1
    assert kinds[("jax_jit_cpu", COLD)] == 3


def test_unavailable_cases_get_no_tasks():
    plan = build_plan(spec(), lambda b, _w=None: "gpu_unavailable" if b.name == "numpy" else None)
    assert plan.unavailable == {"numpy_matmul_512_f32": "gpu_unavailable"}
    assert not plan.tasks_for("numpy_matmul_512_f32")


def test_task_keys_are_unique():
    plan = build_plan(spec(), always_available)
    keys = [t.key for t in plan.tasks]
    assert len(keys) == len(set(keys))
