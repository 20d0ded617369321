"""`ttfr ab` and `ttfr compare` at a concurrency point (`--concurrency`, issue 29): each (sharing mode,
N) is compared on the time until all N had a result, one group per round, paired by round in `ttfr ab`
and unpaired across sessions, judged with the policies (one Holm correction). The fake executor is
deterministic: no real timing reaches a figure."""

from __future__ import annotations

import json
import statistics
import sys
import threading
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import fake_result
from support.fakes import FakeExecutor, run_suite
from rich.console import Console

from ttfr.artifacts import store as artifacts
from ttfr.exit_codes import EXIT_OK, EXIT_REGRESSION
from ttfr.measure.executors import Executors
from ttfr.measure.plan import GROUP
from ttfr.measure.spec import RunRequest, build_spec
from ttfr.model.base import UNSET, decode
from ttfr.model.comparison import Comparison, Record
from ttfr.model.policies import COLD_CACHE, COLD_PRIVATE, COLD_SHARED, CONCURRENCY_MODES, WARM_SHARED
from ttfr.pipeline import comparison as compare
from ttfr.pipeline import interleaved as ab
from ttfr.pipeline import suite as suite_run
from ttfr.report import comparison_md, terminal

ARM_B = "TTFR_TEST_ARM_B"  # set in arm B's environment (and in the second of two `ttfr run`s)
CASE = "jax_jit_cpu_matmul_64_f32"
N = 2
# (name, offset from the spawn) of a worker's marks at scale 1: its first result 330 ms after its spawn
MARKS = (("main", 10_000_000), ("imported", 110_000_000), ("setup", 130_000_000), ("first", 330_000_000),
         ("second_start", 331_000_000), ("second", 336_000_000))  # fmt: skip


class SlowerGroupsB(FakeExecutor):
    """Group members (threads named ttfr-group-<member>) take `factor` times as long in arm B; every
    other run is the plain fake, the same in both arms. A member's spawn and marks are set, not read
    from a clock: member i starts i ms after the first and takes 330 ms x (1 + i/10), all scaled by the
    arm's factor and by the round's own factor, which both arms share (a machine slower in some rounds
    than in others, `spread` apart): so each round's all_results_s is known exactly. `fail`: (arm, group
    number in that arm, member) of one member that fails (its group has no all_results_s)."""

    def __init__(self, factor=1.0, spread=0.5, fail=None):
        super().__init__()
        self.factor, self.spread, self.fail = factor, spread, fail
        self.lock = threading.Lock()
        self.members = Counter()  # arm -> group members started so far
        self.started: list[tuple[str, int]] = []  # (arm, its group number) of each member, as they started

    def round_scale(self, group: int) -> float:
        return 1.0 + self.spread * (group % 3)

    def __call__(self, job, env, timeout_s, python=None):
        thread = threading.current_thread().name
        if not thread.startswith("ttfr-group-"):
            return super().__call__(job, env, timeout_s, python)
        arm, member = "B" if env.get(ARM_B) else "A", int(thread.rsplit("-", 1)[1])
        with self.lock:  # groups run one after another, in the same order in both arms
            group = self.members[arm] // N
            self.members[arm] += 1
            self.started.append((arm, group))
        if (arm, group, member) == self.fail:
            return fake_result(None, outcome="error", reason="(a failing member)")
        jax_dir = Path(env["JAX_COMPILATION_CACHE_DIR"])
        entries = sorted(p.name for p in jax_dir.iterdir()) if jax_dir.is_dir() else []
        self.calls.append({"job": job, "case": jax_dir.parent.name, "entries_seen": entries, "env": env})
        record, _life = self.answer(job, {}, entries, jax_dir)
        scale = (self.factor if arm == "B" else 1.0) * self.round_scale(group)
        spawn = 1_000_000_000 + round(member * 1_000_000 * scale)
        stretch = scale * (1 + member / 10)
        record["marks_ns"] = {name: spawn + round(offset * stretch) for name, offset in MARKS}
        return fake_result(record, spawn_ns=spawn, process_ns=round(400_000_000 * stretch))

    def all_results_s(self, arm: str, group: int) -> float:
        """What the group's all_results_s must be: its last member's first result after the first spawn."""
        scale = (self.factor if arm == "B" else 1.0) * self.round_scale(group)
        return max(member * 1e-3 * scale + 0.33 * scale * (1 + member / 10) for member in range(N))


def run_request(**fields) -> RunRequest:
    base = dict(backends="jax_jit_cpu", workloads="matmul", sizes="64", policies="cold-cache", concurrency=str(N),
                seed=5)  # fmt: skip
    return RunRequest(**{**base, **fields})


def run_groups(out: Path, executor, rounds: int) -> Path:
    """A `ttfr run` (cold-cache, N=2) with `rounds` groups per sharing mode (more than any profile's); its directory."""
    spec = replace(build_spec(run_request(cold_runs=rounds)), concurrency_rounds=rounds)
    result_dir = suite_run.start(spec, out, ["ttfr", "run"])
    return suite_run.execute(result_dir, spec, Executors(worker=executor)).result_dir.root


def ab_spec(rounds=10) -> ab.AbSpec:
    arms = (ab.Arm("A", sys.executable), ab.Arm("B", sys.executable, ((ARM_B, "1"),)))
    return ab.AbSpec(build_spec(run_request()), arms, rounds, rounds, None, None)


def points(document: Comparison) -> dict[str, Record]:
    return {r.point: r for r in document.comparisons if r.concurrency is not UNSET}


def test_ab_pairs_each_concurrency_point_by_round_and_calls_a_slower_b_a_regression(tmp_path):
    fake = SlowerGroupsB(factor=1.25)
    outcome = ab.execute(ab_spec(rounds=10), tmp_path, executors=Executors(worker=fake))
    document = outcome.comparison
    found = points(document)
    assert set(found) == {f"{mode} x{N}" for mode in CONCURRENCY_MODES}
    for record in found.values():
        assert (record.metric, record.regime, record.concurrency, record.paired) == ("all_results_s", "cold", N, True)
        assert record.excluded_rounds == [] and record.effect.n == 10
        # the rounds differ by up to 2x, the arms by exactly 1.25x: only pairing by round gives an exact ratio
        assert record.effect.ratio == pytest.approx(1.25, rel=1e-6)
        assert record.effect.ci == pytest.approx([1.25, 1.25], rel=1e-6)
        assert record.verdict == "regression" and record.effect.correction == "holm"
        # one Holm correction over the suite: the cold-cache record and the three points (equal p-values)
        assert record.effect.p_gate == pytest.approx(4 * record.effect.p_value)
        assert record.effect.delta == pytest.approx(0.05)  # the cold regime's
    (policy,) = [r for r in document.comparisons if r.concurrency is UNSET]
    assert (policy.policy, policy.verdict) == (COLD_CACHE, "equivalent")  # the groups alone are slower in B
    assert document.summary.regressions == [f"{CASE} ({mode} x{N})" for mode in CONCURRENCY_MODES]
    assert outcome.exit_code == EXIT_REGRESSION
    # what was compared is each arm's groups' all_results_s, round against round: B's is 1.25x A's in every round
    cases = {arm: json.loads((outcome.root / arm / "cases" / f"{CASE}.json").read_text()) for arm in "AB"}
    for mode in CONCURRENCY_MODES:
        by_round = [{g["index"]: g["all_results_s"] for g in cases[arm]["concurrency"]["groups"] if g["mode"] == mode}
                    for arm in "AB"]  # fmt: skip
        assert sorted(by_round[0]) == sorted(by_round[1]) == list(range(10))
        assert all(by_round[1][r] == pytest.approx(1.25 * by_round[0][r], rel=1e-6) for r in range(10))
        assert len(set(by_round[0].values())) > 1  # the rounds differ
        record = found[f"{mode} x{N}"]
        assert record.a.median == pytest.approx(statistics.median(by_round[0].values()))
        assert record.b.median == pytest.approx(statistics.median(by_round[1].values()))
        expected = [fake.all_results_s("A", k) for k in range(3)]  # the three round factors the fake cycles through
        assert all(any(v == pytest.approx(e, rel=1e-6) for e in expected) for v in by_round[0].values())
    written = json.loads((outcome.root / "comparison.json").read_text())
    assert artifacts.schema_errors(written, "ttfr.comparison.v1") == []
    assert decode(written, Comparison) == document
    markdown = (outcome.root / "comparison.md").read_text()
    assert f"| `{CASE}` | {COLD_SHARED} x{N} |" in markdown and comparison_md.CONCURRENCY_NOTE in markdown
    console = Console(record=True, width=250)
    terminal.print_comparison(console, document)
    shown = console.export_text()
    assert f"{WARM_SHARED} x{N}" in shown and f"{COLD_PRIVATE} x{N}" in shown and "until all N had a result" in shown


def test_ab_runs_each_round_s_group_in_both_arms_back_to_back_in_abba_order(tmp_path):
    fake = SlowerGroupsB()
    outcome = ab.execute(ab_spec(rounds=4), tmp_path, executors=Executors(worker=fake))
    chunks = [fake.started[i : i + N] for i in range(0, len(fake.started), N)]
    assert len(chunks) == 2 * 4 * len(CONCURRENCY_MODES) and all(len(set(c)) == 1 for c in chunks)  # a group at a time
    pairs = [(chunks[i][0], chunks[i + 1][0]) for i in range(0, len(chunks), 2)]
    assert all({first[0], second[0]} == {"A", "B"} and first[1] == second[1] for first, second in pairs)
    assert sum(first[0] == "A" for first, _second in pairs) == len(pairs) // 2  # ABBA: A first in half of them
    journals = {}
    for arm in "AB":
        lines = (outcome.root / arm / "journal.jsonl").read_text().splitlines()
        journals[arm] = [(e["task"], e["member"], e["index"]) for e in map(json.loads, lines) if e.get("kind") == GROUP]
        assert sorted({index for _task, _member, index in journals[arm]}) == [0, 1, 2, 3]  # a group per round
    assert journals["A"] == journals["B"]  # the same groups, in the same order


def test_ab_with_equal_groups_calls_no_concurrency_point_a_regression(tmp_path):
    outcome = ab.execute(ab_spec(rounds=10), tmp_path, executors=Executors(worker=SlowerGroupsB(factor=1.0)))
    found = points(outcome.comparison)
    assert len(found) == len(CONCURRENCY_MODES)
    assert {r.verdict for r in found.values()} == {"equivalent"}
    assert {r.effect.ratio for r in found.values()} == {1.0}
    assert not outcome.comparison.summary.regressions and outcome.exit_code == EXIT_OK


def test_a_group_with_a_failed_member_leaves_its_round_out_of_the_pairs(tmp_path):
    fake = SlowerGroupsB(factor=1.25, fail=("B", 4, 1))  # arm B's fifth group: its second member fails
    outcome = ab.execute(ab_spec(rounds=10), tmp_path, executors=Executors(worker=fake))
    excluded = {point: r.excluded_rounds for point, r in points(outcome.comparison).items() if r.excluded_rounds}
    (point, rounds) = next(iter(excluded.items()))
    assert len(excluded) == 1 and len(rounds) == 1
    record = points(outcome.comparison)[point]
    assert record.effect.n == 9 and record.verdict == "regression"
    case = json.loads((outcome.root / "B" / "cases" / f"{CASE}.json").read_text())
    (broken,) = [g for g in case["concurrency"]["groups"] if g["all_results_s"] is None]
    assert f"{broken['mode']} x{broken['n']}" == point and [broken["index"]] == rounds


def test_compare_of_two_separate_runs_judges_each_concurrency_point_unpaired_and_weak(tmp_path, monkeypatch):
    fake = SlowerGroupsB(factor=1.25, spread=0.02)
    dirs = [run_groups(tmp_path / "one", fake, rounds=8)]
    monkeypatch.setenv(ARM_B, "1")
    dirs.append(run_groups(tmp_path / "two", fake, rounds=8))
    _out, document = compare.compare_dirs(dirs[0], dirs[1], tmp_path / "cmp", cross_session=True, correction="holm",
                                          fail_on="regression")  # fmt: skip
    found = points(document)
    assert set(found) == {f"{mode} x{N}" for mode in CONCURRENCY_MODES}
    for record in found.values():
        assert record.paired is False and record.excluded_rounds is UNSET and "unpaired" in record.effect.method
        assert record.verdict == "regression (weak)" and record.effect.ratio == pytest.approx(1.25, rel=0.03)
    assert document.summary.gate == "fail"


def test_a_point_one_arm_never_ran_is_not_compared_and_says_which(tmp_path):
    fake = SlowerGroupsB()
    with_groups = run_suite(tmp_path / "one", run_request(cold_runs=4), fake).cases
    without = run_suite(tmp_path / "two", run_request(cold_runs=4, concurrency=()), fake).cases
    records = compare.compare_cases(with_groups, without, paired=False)
    found = {r.point: r for r in records if r.concurrency is not UNSET}
    assert {r.verdict for r in found.values()} == {"not_compared"}
    assert found[f"{COLD_SHARED} x{N}"].explanation == f"arm B ran no {COLD_SHARED} x{N} groups"
    assert {r.failed for r in found.values()} == {False}


def test_a_record_s_policy_and_group_size_go_together():
    head = dict(case=CASE, regime="cold", paired=True, verdict="not_compared", explanation="-", failed=False)
    assert Record(**head, policy=COLD_SHARED, metric="all_results_s", concurrency=8).label == f"{CASE} (cold-shared x8)"
    for bad in (dict(policy=COLD_SHARED, metric="all_results_s"), dict(policy=COLD_CACHE, metric="ttfr_s", concurrency=8),
                dict(policy=COLD_SHARED, metric="ttfr_s", concurrency=8)):  # fmt: skip
        with pytest.raises(ValueError, match="concurrency point"):
            Record(**head, **bad)


def test_an_interval_below_95_percent_says_its_level_under_the_95_percent_column(tmp_path):
    """Two rounds allow no 95% interval: the row says the level it has (it read as a 95% one)."""
    few = ab.execute(ab_spec(rounds=2), tmp_path / "few", executors=Executors(worker=SlowerGroupsB(factor=1.25)))
    with_ci = [r for r in few.comparison.comparisons if r.effect is not UNSET and r.effect.ci]
    assert with_ci and all(r.effect.ci_level < 0.95 for r in with_ci)
    assert all(f"({r.effect.ci_level:.0%} CI: too few runs for 95%)" in comparison_md.row(r)[5] for r in with_ci)
    many = ab.execute(ab_spec(rounds=10), tmp_path / "many", executors=Executors(worker=SlowerGroupsB(factor=1.25)))
    assert not any("too few runs" in comparison_md.row(r)[5] for r in many.comparison.comparisons)


def test_each_abs_round_runs_its_groups_after_its_single_runs_so_round_0s_after_the_gate():
    """A case whose gate (the template producer, the check) fails stops before any of its groups runs: in
    every round, the groups come after the single runs (shuffled among themselves as before)."""
    from ttfr.measure.plan import GROUP, build_plan, is_gate
    from ttfr.pipeline.interleaved import rounds_of

    spec = replace(build_spec(run_request(cold_runs=3, policies="cold-cache,warm-cache")), concurrency_rounds=3)
    plan = build_plan(spec)
    for seed in range(6):  # the shuffle differs by seed; the order's rule must not
        rounds = rounds_of(plan, seed)
        for index, tasks in enumerate(rounds):
            kinds = [t.kind == GROUP for t in tasks]
            assert any(kinds) and kinds == sorted(kinds), (index, [t.key for t in tasks])
        first = rounds[0]
        last_gate = max(i for i, t in enumerate(first) if is_gate(t.kind, t.index, t.makes_template))
        assert min(i for i, t in enumerate(first) if t.kind == GROUP) > last_gate
