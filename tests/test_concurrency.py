"""Many cold starts at once (`--concurrency`, issue 29): the plan's groups, the barrier start and its
skew, what each process did with the shared cache, dedup and integrity, the advice; with a fake
executor (no processes), and once with real JAX processes on a shared temporary cache."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from conftest import fake_record, fake_result
from support.fakes import FakeExecutor, run_suite

from ttfr.analyse import concurrency
from ttfr.report import flag_text
from ttfr.errors import UsageError
from ttfr.measure.plan import GROUP, build_plan
from ttfr.measure.spec import RunRequest, build_spec
from ttfr.model.concurrency import ConcurrencyPoint
from ttfr.model.policies import COLD_PRIVATE, COLD_SHARED, WARM_SHARED

MISS = "/jax/compilation_cache/cache_misses"
HIT = "/jax/compilation_cache/cache_hits"


def request(**fields) -> RunRequest:
    base = dict(backends="jax_jit_cpu,numpy", workloads="matmul", sizes="64", cold_runs=2, warm_procs=1, warm_samples=3,
                seed=3, concurrency="1,2")  # fmt: skip
    return RunRequest(**{**base, **fields})


def test_groups_come_after_every_other_run_for_each_compiling_case_mode_and_size():
    plan = build_plan(build_spec(request(profile="standard")))
    groups = [t for t in plan.tasks if t.kind == GROUP]
    # jax only (numpy has no cache to share): (3 modes x 2 sizes - cold-private x1) x 3 rounds (the standard
    # profile); one process on a private empty directory is cold-shared x1's experiment, run once
    assert {t.case.backend for t in groups} == {"jax_jit_cpu"} and len(groups) == 15
    assert {(t.policy, t.concurrency) for t in groups} == {(m, n) for m in (COLD_SHARED, WARM_SHARED, COLD_PRIVATE)
                                                           for n in (1, 2)} - {(COLD_PRIVATE, 1)}  # fmt: skip
    first_group = min(plan.tasks.index(t) for t in groups)
    assert all(t.kind == GROUP for t in plan.tasks[first_group:])  # nothing runs beside or after them
    assert len({t.key for t in plan.tasks}) == len(plan.tasks)


def test_bad_concurrency_is_refused_naming_the_range(monkeypatch):
    from ttfr.measure import limits as spec_module

    for bad in ("0", "two", "65", "", "-1", "1.5"):
        with pytest.raises(UsageError, match="--concurrency"):
            build_spec(request(concurrency=bad))
    assert build_spec(request(concurrency="4,1,4")).concurrency == (4, 1)
    # nothing to share a compilation cache: refused, naming what would
    with pytest.raises(UsageError, match="none of the selected cases compiles in ttfr's worker"):
        build_spec(request(backends="numpy"))
    # groups count against the process limit: 3 modes x (8 + 1) fit under 50, with 16 + 1 more they do not
    monkeypatch.setattr(spec_module, "MAX_WORKER_PROCESSES", 50)
    build_spec(request(concurrency="8"))
    with pytest.raises(UsageError, match=r"--concurrency 8,16 would start 78 worker processes in groups"):
        build_spec(request(concurrency="8,16"))


class RacingExecutor(FakeExecutor):
    """JAX's persistent cache as N processes at once see it: each member of a group looks at the shared
    directory after the barrier, before any has written (so on an empty cache all compile), then writes;
    spawn marks are real clock readings (their spread is the start skew)."""

    def __init__(self):
        super().__init__()
        self.barrier: threading.Barrier | None = None  # the running group's (groups run one after another)
        self.lock = threading.Lock()

    def __call__(self, job, env, timeout_s, python=None):
        if job.mode == "warm":  # the case's warm processes (its check): the plain fake's
            return super().__call__(job, env, timeout_s, python)
        spawn = time.monotonic_ns()
        self.calls.append({"job": job})  # list.append: safe from the group's threads
        jax_dir = Path(env["JAX_COMPILATION_CACHE_DIR"])
        entries = sorted(p.name for p in jax_dir.iterdir()) if jax_dir.is_dir() else []
        if threading.current_thread().name.startswith("ttfr-group-"):  # a group's member
            # the scheduler's barrier released every member together: all of the group's threads are alive
            members = sum(t.name.startswith("ttfr-group-") for t in threading.enumerate())
            with self.lock:  # every member looks at the cache before any writes
                barrier = self.barrier = self.barrier or threading.Barrier(members)
            try:
                if barrier.wait(timeout=2) == 0:
                    self.barrier = None  # all have passed it: the next group makes its own
            except threading.BrokenBarrierError:  # a member a subclass answered without looking
                self.barrier = None
        hit = bool(entries)
        if not hit:
            (jax_dir / "jit_fn-cache").write_bytes(b"executable")
        events = {"/jax/compilation_cache/compile_requests_use_cache": 1, HIT if hit else MISS: 1}
        record = fake_record(start_ns=spawn, cache={"first": None, "end": {"events": events, "durations_s": {}}})
        # its main thread, read 400 ms after the spawn: 250 ms on a CPU, 50 ms waiting for one (100 ms blocked)
        record["sched"].update(main_on_cpu_s=0.25, main_runq_wait_s=0.05, read_ns=spawn + 400_000_000)
        return fake_result(record, spawn_ns=spawn)


def test_a_suite_with_groups_reports_what_each_process_did_and_each_groups_figures(tmp_path):
    outcome = run_suite(tmp_path, request(backends="jax_jit_cpu", cold_runs=1), RacingExecutor())
    (case,) = outcome.cases
    together = case.concurrency
    points = {(p.mode, p.n): p for p in together.points}
    assert set(points) == {(m, n) for m in (COLD_SHARED, WARM_SHARED, COLD_PRIVATE) for n in (1, 2)}
    cold2 = next(g for g in together.groups if (g.mode, g.n) == (COLD_SHARED, 2))
    assert [m.cache_use for m in cold2.members] == ["compiled", "compiled"]  # both looked before either wrote
    assert cold2.compiles_total == 2 and cold2.distinct_programs == 1 and cold2.dedup_ratio == 2.0
    assert cold2.start_skew_s == max(m.start_skew_s for m in cold2.members) >= 0
    assert cold2.all_results_s >= max(m.ttfr_s for m in cold2.members)
    # the main thread's life to its reading, less its CPU time and its wait for a CPU
    assert all(m.blocked_s == pytest.approx(0.1) and m.runq_wait_s == 0.05 for m in cold2.members)
    assert cold2.check.whole is True and cold2.check.files >= 1 and cold2.check.compiles == 0
    warm2 = next(g for g in together.groups if (g.mode, g.n) == (WARM_SHARED, 2))
    assert [m.cache_use for m in warm2.members] == ["loaded", "loaded"] and warm2.dedup_ratio == 0.0
    private2 = next(g for g in together.groups if (g.mode, g.n) == (COLD_PRIVATE, 2))
    assert private2.dedup_ratio == 2.0 and private2.bytes_written == 2 * len(b"executable")
    assert points[(COLD_SHARED, 2)].ttfr_p95_s == points[(COLD_SHARED, 2)].ttfr_max_s  # nearest rank of two
    assert [a.n for a in together.fan_out] == [2]  # N=1 has nobody to fan out to
    (advice,) = together.fan_out
    assert advice.warm_up_first_s == pytest.approx(advice.warm_up_s + advice.fan_out_s)
    assert advice.saving_s == pytest.approx(advice.together_s - advice.warm_up_first_s)
    # the policies' figures are untouched by the groups (their runs are apart)
    assert len(case.policies.get("cold-process/cold-cache").runs) == 1


def test_a_cache_left_with_an_unreadable_entry_is_flagged_not_whole(tmp_path, monkeypatch):
    from ttfr.measure import cache as cache_dirs

    real = cache_dirs.CacheDirs.unreadable
    monkeypatch.setattr(cache_dirs.CacheDirs, "unreadable",
                        lambda self: ["jax/jit_fn-cache: Permission denied"] + real(self))  # fmt: skip
    outcome = run_suite(tmp_path, request(backends="jax_jit_cpu", cold_runs=1, concurrency="2"), RacingExecutor())
    (case,) = outcome.cases
    assert all(g.check.whole is False for g in case.concurrency.groups)
    (flag,) = [f for f in case.flags if f.name == "shared_cache_not_whole"]
    assert flag_text.sentence(flag).startswith("after cold-shared x2 #0, warm-shared x2 #0 and cold-private x2 #0 the cache")


def test_percentiles_are_nearest_rank_and_the_advice_needs_both_shared_modes():
    assert concurrency.nearest_rank([5.0, 1.0, 3.0, 2.0], 0.5) == 2.0
    assert concurrency.nearest_rank([1.0] * 19 + [9.0], 0.95) == 1.0 and concurrency.nearest_rank([], 0.5) is None

    def point(mode, n, all_results):
        return ConcurrencyPoint(mode=mode, n=n, groups=1, processes=n, ttfr_p50_s=1.0, ttfr_p95_s=1.0, ttfr_max_s=1.0,
                                all_results_s=all_results, dedup_ratio=None, bytes_written=None, blocked_s=None,
                                runq_wait_s=None, whole=True, oversubscribed=False)  # fmt: skip

    points = [point(COLD_SHARED, 4, 8.0), point(WARM_SHARED, 4, 2.0), point(COLD_SHARED, 8, 12.0)]
    (advice,) = concurrency.fan_out(points, cold_cache_ttfr_s=3.0)  # no N=1 group: the cold-cache TTFR warms up
    assert (advice.n, advice.warm_up_first_s, advice.saving_s) == (4, 5.0, 3.0)


@pytest.mark.integration
def test_two_real_jax_processes_on_one_shared_cache_record_their_evidence_and_leave_it_whole(tmp_path):
    from ttfr.measure.executors import REAL
    from ttfr.pipeline import suite as suite_run

    spec = build_spec(RunRequest(cases="jax_jit_cpu_matmul_64_f32", concurrency="2", cold_runs=1, warm_procs=1,
                                 policies="cold-cache", seed=1))  # fmt: skip
    result_dir = suite_run.start(spec, tmp_path / "out", ["ttfr", "run"])
    (case,) = suite_run.execute(result_dir, spec, REAL).cases
    groups = {g.mode: g for g in case.concurrency.groups}
    assert set(groups) == {COLD_SHARED, WARM_SHARED, COLD_PRIVATE}
    for group in groups.values():
        assert [m.outcome for m in group.members] == ["ok", "ok"], [m.reason for m in group.members]
        # each process's cache evidence, from JAX's own counters
        assert all(m.compiles is not None and m.loads is not None for m in group.members)
        if group.mode != COLD_PRIVATE:
            assert group.check.whole is True, group.check  # readable, and a fresh process compiled nothing
    # what each check rests on: a fresh process after the cold-shared group; none after the warm-shared one,
    # which changed no file (its two processes were fresh ones on that cache); none on private directories,
    # whose files (each written by one process) were read back
    assert {mode: g.check.basis for mode, g in groups.items()} == {
        COLD_SHARED: "process",
        WARM_SHARED: "members",
        COLD_PRIVATE: "private",
    }
    assert groups[WARM_SHARED].check.compiles == 0 and groups[WARM_SHARED].check.loads >= 2
    assert groups[COLD_PRIVATE].check.whole is None and groups[COLD_PRIVATE].check.files >= 2
    points = {(p.mode, p.n): p for p in case.concurrency.points}
    assert points[(COLD_PRIVATE, 2)].check_basis == "private" and points[(WARM_SHARED, 2)].check_basis == "members"
    assert all(m.cache_use == "loaded" for m in groups[WARM_SHARED].members)
    assert groups[COLD_SHARED].compiles_total >= groups[COLD_SHARED].distinct_programs >= 1
    assert groups[COLD_PRIVATE].dedup_ratio == 2.0  # nothing shared: both compiled everything


@pytest.mark.integration
@pytest.mark.parametrize("damage", ["truncated", "foreign"])
def test_a_damaged_shared_cache_is_what_each_process_did_never_a_silent_warm_figure(tmp_path, monkeypatch, damage):
    """Issue 29: a truncated entry, or entries another library version wrote (keys this one never asks
    for), in the cache a warm-shared group starts from: every process runs, the ones that compiled say so, and the
    case flags the group; ttfr does not crash and gives no quietly 'warm' figure."""
    from ttfr.measure import cache as cache_dirs
    from ttfr.measure.executors import REAL
    from ttfr.pipeline import suite as suite_run

    restore = cache_dirs.CacheDirs.restore_template

    def damaged(self):
        restore(self)
        for entry in sorted(p for p in (self.root / "jax").rglob("*") if p.is_file()):
            if damage == "truncated":
                entry.write_bytes(entry.read_bytes()[: entry.stat().st_size // 3])
            else:
                entry.rename(entry.with_name("0" * 16 + "-" + entry.name))

    monkeypatch.setattr(cache_dirs.CacheDirs, "restore_template", damaged)
    spec = build_spec(RunRequest(cases="jax_jit_cpu_matmul_64_f32", concurrency="2", cold_runs=1, warm_procs=1,
                                 policies="cold-cache", seed=1))  # fmt: skip
    result_dir = suite_run.start(spec, tmp_path / "out", ["ttfr", "run"])
    (case,) = suite_run.execute(result_dir, spec, REAL).cases
    (warm,) = [g for g in case.concurrency.groups if g.mode == WARM_SHARED]
    assert [m.outcome for m in warm.members] == ["ok", "ok"], [m.reason for m in warm.members]
    # the first to look finds nothing it can use and compiles; the other may load what it wrote (a race
    # the test does not decide), so at least one compiled, and the case says so
    assert any(m.cache_use in ("compiled", "mixed") for m in warm.members), [m.cache_use for m in warm.members]
    assert any(f.name == "warm_shared_compiled" for f in case.flags)
    # JAX leaves a truncated entry as it is (it recompiles, and its write under an existing key changes
    # nothing): the group changed no file, so its own processes, which compiled on that very cache, are the
    # verdict: not whole. Entries under foreign keys make it write its own: a group that changed the cache is
    # checked by a fresh process after it, which finds what the group wrote.
    if damage == "truncated":
        assert (warm.check.basis, warm.check.whole) == ("members", False), warm.check
        assert any(f.name == "shared_cache_not_whole" for f in case.flags)
    else:
        assert (warm.check.basis, warm.check.whole) == ("process", True), warm.check


@pytest.mark.parametrize("edit", ["point", "advice", "group"])
def test_an_edited_concurrency_figure_is_found_by_every_reader_even_rehashed(tmp_path, edit):
    from support.forgery import edit_case

    from ttfr.artifacts.reader import validate_dir

    outcome = run_suite(tmp_path, request(backends="jax_jit_cpu", cold_runs=1), RacingExecutor())
    root = outcome.result_dir.root
    assert validate_dir(root) == []

    def forge(case):
        together = case["concurrency"]
        if edit == "point":
            together["points"][0]["ttfr_p50_s"] = 1e-6
        elif edit == "advice":
            together["fan_out"][0]["saving_s"] = 99.0
        else:
            together["groups"][0]["dedup_ratio"] = 0.5

    edit_case(root, outcome.cases[0].case, forge)
    assert any("concurrency: its figures are not what its groups' processes give" in p for p in validate_dir(root))


def test_a_group_cut_short_by_an_interrupt_runs_again_and_never_counts_as_n(tmp_path):
    """kill -9 between two of a group's journal lines: the group is not done (a resume runs it again,
    the rerun replaces it), and until then its few members give no "all N" figure."""
    from ttfr.analyse.concurrency import case_concurrency
    from ttfr.measure.journal import Journal
    from ttfr.measure.plan import GROUP_CHECK, replay

    outcome = run_suite(tmp_path, request(backends="jax_jit_cpu", cold_runs=1, concurrency="2"), RacingExecutor())
    root = outcome.result_dir.root
    entries = Journal(root / "journal.jsonl").entries()
    group = next(e for e in entries if e.kind == GROUP)
    cut = [e for e in entries if not (e.task == group.task and (e.member == 1 or e.kind == GROUP_CHECK))]
    plan = build_plan(build_spec(request(backends="jax_jit_cpu", cold_runs=1, concurrency="2")))
    remaining, _stopped = replay(plan, cut)
    assert [t.key for t in remaining] == [group.task]
    case = plan.spec.cases[0]
    partial = case_concurrency(cut, case, None, 2)
    (shown,) = [g for g in partial.groups if (g.mode, g.n) == (group.policy, 2)]
    assert len(shown.members) == 1 and shown.all_results_s is None and shown.dedup_ratio is None
    assert (group.policy, 2) not in {(p.mode, p.n) for p in partial.points}
    # the rerun's members (member 0 again) replace the cut group's
    rerun = [e for e in entries if e.task == group.task]
    whole = case_concurrency(cut + rerun, case, None, 2)
    (again,) = [g for g in whole.groups if (g.mode, g.n) == (group.policy, 2)]
    assert [m.member for m in again.members] == [0, 1] and again.all_results_s is not None


def test_every_shard_of_a_plan_with_groups_is_planned_alike():
    """A shard holding no compiling case still takes --concurrency (its plan's other shard runs the groups),
    so the shards merge; the whole plan must have a compiling case."""
    whole = dict(cases="jax_jit_cpu_matmul_64_f32,numpy_matmul_64_f32", backends=None, workloads=None, sizes=None, seed=1)
    shards = [build_spec(request(**whole, shard=f"{k}/2")) for k in (1, 2)]
    assert [s.concurrency for s in shards] == [(1, 2), (1, 2)]
    assert sorted(c.backend for s in shards for c in s.cases) == ["jax_jit_cpu", "numpy"]
