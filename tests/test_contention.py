"""Contention evidence and flags: synthetic samples for the rules, and one real BLAS worker
run while the test keeps every usable core busy."""

import os
import subprocess
import sys

import pytest

from ttfr.analyse import contention
from ttfr.report import flag_text
from ttfr.model.base import decode, encode
from ttfr.model.journal import Host, Rusage
from ttfr.model.record import SampleEvidence, Sched

IDLE = {"runnable_start": [1, 90], "runnable_end": [1, 90], "usable_cores": 2}
IDLE_HOST = Host(**IDLE)
WINDOW = [0, 100_000_000]  # 0.1 s


def raw_evidence(waits, wall=0.01, cpu=0.01, others_cores=1.0) -> dict:
    """A warm process's sample evidence as the worker writes it."""
    n = len(waits)
    return {"wall_s": [wall] * n, "cpu_s": [cpu] * n, "runq_wait_s": waits, "window_ns": WINDOW,
            "others_cpu_s": None if others_cores is None else others_cores * 0.1}  # fmt: skip


def evidence(waits, wall=0.01, cpu=0.01, others_cores=1.0) -> SampleEvidence:
    return decode(raw_evidence(waits, wall, cpu, others_cores), SampleEvidence)


def test_a_process_that_waited_while_a_neighbour_ran_is_contended_with_its_evidence():
    verdict = contention.warm_process(evidence([0.005] * 5 + [0.0] * 5), IDLE_HOST)
    assert verdict.contended and verdict.samples_contended == 5
    assert verdict.waited and verdict.others_cores == pytest.approx(1.0) and verdict.runnable_cores is None
    assert flag_text.contention(verdict, "process") == (
        "5/10 samples waited for a CPU > 5% of their time (median 25%); the rest of the machine used 1 cores meanwhile"
    )


def test_a_runtime_waiting_for_its_own_threads_is_not_contended():
    # XLA's pool on 2 cores: its threads wait for each other 60% of a sample; nobody else runs.
    assert not contention.warm_process(evidence([0.006] * 10, others_cores=0.05), IDLE_HOST).contended
    # either reading alone decides when the other is missing
    assert contention.warm_process(evidence([0.006] * 10, others_cores=None), IDLE_HOST).contended
    assert contention.warm_process(evidence([None] * 10, others_cores=0.9), IDLE_HOST).contended
    assert not contention.warm_process(evidence([None] * 10, others_cores=None), IDLE_HOST).contended


def test_a_neighbour_that_did_not_make_the_worker_wait_is_not_contention():
    # a single-threaded worker beside a busy loop on the other core
    assert not contention.warm_process(evidence([0.0] * 10, others_cores=1.0), IDLE_HOST).contended


@pytest.mark.parametrize("waits", [[0.0] * 10, [0.0004] * 10, [0.005] * 3 + [0.0] * 7])
def test_an_idle_process_or_a_few_unlucky_samples_are_not_contended(waits):
    # 4% waiting stays under WAIT_FRACTION; 3 of 10 samples do not exceed CONTENDED_SAMPLE_SHARE.
    assert not contention.warm_process(evidence(waits), IDLE_HOST).contended


def test_other_runnable_tasks_filling_every_core_count_on_their_own():
    busy = Host(runnable_start=[3, 90], runnable_end=[4, 90], usable_cores=2)
    verdict = contention.warm_process(evidence([None] * 10, others_cores=None), busy)
    assert verdict.contended and verdict.samples_with_evidence == 0 and verdict.runnable_cores == 2
    assert (
        flag_text.contention(verdict, "process") == "other runnable tasks filled all 2 usable cores before and after the process"
    )
    only_at_start = Host(runnable_start=[3, 90], runnable_end=[1, 90], usable_cores=2)
    assert not contention.warm_process(evidence([None] * 10, others_cores=None), only_at_start).contended
    assert not contention.warm_process(None, None).contended


def test_a_cold_run_is_contended_when_its_threads_waited_behind_a_neighbour():
    host = Host(**IDLE, machine_busy_s=1.9)
    rusage = Rusage(user_s=0.8, sys_s=0.1)  # the rest of the machine used 1.0 core for 1 s
    verdict = contention.cold_run(Sched(runq_wait_s=0.2, on_cpu_s=1.0), 1.0, host, rusage)
    assert verdict.contended and verdict.others_cores == pytest.approx(1.0)
    alone = Host(**IDLE, machine_busy_s=0.95)
    assert not contention.cold_run(Sched(runq_wait_s=0.2, on_cpu_s=1.0), 1.0, alone, rusage).contended
    calm = contention.cold_run(Sched(runq_wait_s=0.01, on_cpu_s=1.0), 1.0, host, rusage)
    assert not calm.contended and calm.wait_fraction == pytest.approx(0.01)
    assert contention.cold_run(None, 1.0, IDLE_HOST).wait_fraction is None


def test_process_disagreement_needs_significance_and_size():
    tight = [[1.00, 1.01, 0.99, 1.00, 1.02, 0.98, 1.01, 0.99, 1.00, 1.00] for _ in range(2)]
    apart = [tight[0], [x * 1.5 for x in tight[1]]]
    assert contention.process_disagreement(apart).disagree
    assert not contention.process_disagreement(tight).disagree
    small = [tight[0], [x * 1.05 for x in tight[1]]]  # significant with many samples, but under 10%
    assert not contention.process_disagreement([g * 10 for g in small]).disagree
    assert contention.process_disagreement([tight[0]]) is None


def test_tick_quantised_samples_sit_whole_ticks_apart():
    walls = [0.020, 0.024, 0.028, 0.024, 0.020, 0.028, 0.024, 0.020]
    verdict = contention.tick_quantised([w for w in walls], walls)
    assert verdict.quantised and verdict.tick_s == 0.004 and verdict.steps == [0, 1, 2]
    shifted = [w - 0.0002 for w in walls]  # the grid need not start at zero
    assert contention.tick_quantised(shifted, shifted).quantised


@pytest.mark.parametrize(
    "walls",
    [
        [0.0101, 0.0102, 0.0100, 0.0103, 0.0101, 0.0100, 0.0102, 0.0101],  # noise around one value
        [0.024] * 8,  # one value, however exact, is not a grid
        [0.0103, 0.0117, 0.0131, 0.0109, 0.0122, 0.0138, 0.0113, 0.0127],  # spread, off any grid
    ],
)
def test_ordinary_samples_are_not_tick_quantised(walls):
    assert not contention.tick_quantised(walls, walls).quantised


def test_too_few_samples_give_no_tick_verdict():
    assert contention.tick_quantised([0.02, 0.024, 0.028], None) is None


def test_the_case_result_flags_contended_processes_with_their_evidence(tmp_path):
    from conftest import PASSED_CHECK, fake_record, fake_result, fake_warm
    from support.fakes import FakeExecutor
    from test_artifacts import run_fake

    def waited(call):
        if call["job"].mode != "warm":
            return None
        warm = fake_warm()
        n = len(warm["samples_s"])
        warm["sample_evidence"] = raw_evidence([0.008] * n, wall=0.01)
        return fake_result(fake_record(check=PASSED_CHECK, warm=warm))

    outcome = run_fake(tmp_path, FakeExecutor(decide=waited), backends="numpy")
    (case,) = [encode(c) for c in outcome.cases]
    flags = [f for f in case["flags"] if f["flag"] == "contended"] or [
        f for p in case["policies"].values() for f in p.get("flags", []) if f["flag"] == "contended"
    ]
    evidence = flags[0]["evidence"][0]["contention"]
    assert evidence["waited"] and evidence["samples_contended"] == evidence["samples_with_evidence"] > 0
    (flag,) = [f for f in outcome.cases[0].flags if f.name == "contended"]
    assert f"Process 0: {evidence['samples_contended']}/" in flag_text.sentence(flag)


def _busy_loops(per_core: int = 2):
    """CPU-bound loops pinned to each usable core: any thread of the worker must wait. Each says it
    is on its core before it spins, and the worker starts only once all have (a CI run that measured
    before the loops' interpreters had started saw no contention). Two a core: with one, the
    scheduler now and then gave a new worker a core for its whole 80 ms window (the neighbours'
    reading fell to 0 cores, or its samples waited 0%), and the run was rightly not contended."""
    loops = []
    for core in sorted(os.sched_getaffinity(0)) * per_core:
        code = f"import os\nos.sched_setaffinity(0, {{{core}}})\nprint('spinning', flush=True)\nwhile True: pass"
        loops.append(subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                      text=True))  # fmt: skip
    for loop in loops:
        assert loop.stdout.readline() == "spinning\n"  # a barrier: its word, not a sleep
    return loops


@pytest.mark.integration
def test_a_blas_worker_on_busy_cores_records_the_evidence_and_the_flag():
    from ttfr.child.job import Job
    from ttfr.measure import spawn

    job = Job(mode="warm", adapter="numpy_backend", workload="matmul", size=256, dtype="float32", samples=8,
              min_sample_s=0.01, max_warmup_s=0.3, check=True)  # fmt: skip
    verdicts = []
    # The scheduler decides whether the loops share the worker's window; the flag's rule is under
    # test, not the scheduler, so a window it gave the worker alone is measured again (3 at most).
    for _attempt in range(3):
        loops = _busy_loops()
        try:
            result = spawn.run_worker(job, dict(os.environ), 120.0)
        finally:
            for loop in loops:
                loop.kill()
                loop.wait()
        assert result.outcome == "ok", result.reason
        ev = result.record.warm.sample_evidence
        assert len(ev.wall_s) == len(ev.cpu_s) == len(ev.runq_wait_s) == 8
        assert ev.window_ns[1] > ev.window_ns[0]
        if ev.runq_wait_s[0] is None:
            pytest.skip("this kernel has no /proc/<pid>/task/<tid>/schedstat")
        verdicts.append(contention.warm_process(ev, None))
        if verdicts[-1].contended:
            break
    assert verdicts[-1].contended, verdicts  # every core had CPU-bound neighbours the whole time
    assert result.record.sched.runq_wait_s > 0
    assert result.record.threadpools is None or any(p.internal_api for p in result.record.threadpools)


def test_machine_health_counts_contended_runs_and_advises(fixture_case):
    def case(name, contended, cores):
        runs = [
            fixture_case.run(contention={"contended": c, "waited": None, "others_cores": cores, "runnable_cores": None})
            for c in contended
        ]
        return fixture_case(name, cold_runs=runs, procs=[])

    a, b = "numpy_matmul_64_f32", "jax_jit_cpu_matmul_64_f32"
    health = contention.machine_health([case(a, [True, False], 1.2), case(b, [False, False], 0.0)])
    assert (health.runs, health.contended, health.cases, health.max_others_cores) == (4, 1, [a], 1.2)
    line = contention.health_line(health)
    assert "1 of 4 measured runs contended" in line and "--threads 1" in line and "ttfr selftest" in line
    calm = contention.machine_health([case(b, [False], 0.0)])
    assert contention.health_line(calm) is None and calm.advice == []


def test_the_report_and_the_terminal_say_when_a_run_was_contended(tmp_path):
    import io

    from conftest import PASSED_CHECK, fake_record, fake_result, fake_warm
    from support.fakes import FakeExecutor
    from rich.console import Console
    from test_artifacts import run_fake

    from ttfr.report import terminal

    def waited(call):
        if call["job"].mode != "warm":
            return None
        warm = fake_warm()
        warm["sample_evidence"] = raw_evidence([0.008] * len(warm["samples_s"]), wall=0.01)
        return fake_result(fake_record(check=PASSED_CHECK, warm=warm))

    outcome = run_fake(tmp_path, FakeExecutor(decide=waited), backends="numpy")
    report = (outcome.result_dir.root / "report.md").read_text()
    assert "## Machine health" in report and "were `contended`" in report and "--threads 1" in report
    out = io.StringIO()
    terminal.print_summary(Console(file=out, width=200), outcome.suite, outcome.cases, outcome.result_dir.root)
    assert "machine health: 2 of " in out.getvalue()


def _run_with_contended_warm_processes(tmp_path, contended_indexes, **request):
    from conftest import PASSED_CHECK, fake_record, fake_result, fake_warm
    from support.fakes import FakeExecutor
    from test_artifacts import run_fake

    seen = []

    def waited(call):
        if call["job"].mode != "warm":
            return None
        index = len(seen)
        seen.append(index)
        per_call = 0.020 if index in contended_indexes else 0.001  # the contended process is slower
        warm = fake_warm(per_call=per_call)
        waits = [0.008 if index in contended_indexes else 0.0] * len(warm["samples_s"])
        warm["sample_evidence"] = raw_evidence(waits, wall=0.01)
        check = PASSED_CHECK if call["job"].check else None
        return fake_result(fake_record(check=check, warm=warm))

    return run_fake(tmp_path, FakeExecutor(decide=waited), backends="numpy", warm_procs=2, **request)


def test_the_headline_sets_contended_processes_aside_when_clean_ones_remain(tmp_path):
    from ttfr.artifacts.reader import validate_dir

    outcome = _run_with_contended_warm_processes(tmp_path, {1})
    (case,) = [encode(c) for c in outcome.cases]
    warm = case["policies"]["warm-process"]
    assert warm["summary"]["call_s"]["n"] == 1 and warm["summary"]["call_s"]["median"] < 0.002  # the clean one (~1 ms), not 20 ms
    flag = next(f for f in case["flags"] if f["flag"] == "contended")
    assert flag["processes"] == [1] and flag["set_aside"] == {"contended": 1, "clean": 1, "ok": 2}
    assert flag["evidence"][0]["index"] == 1 and flag["evidence"][0]["contention"]["waited"]
    assert len(warm["procs"]) == 2  # the contended process stays in the raw data
    assert validate_dir(outcome.result_dir.root) == []  # the reader recomputes the same rule


def test_too_few_clean_processes_give_no_figure_and_say_so(tmp_path):
    from ttfr.artifacts.reader import validate_dir

    outcome = _run_with_contended_warm_processes(tmp_path, {0, 1})
    (case,) = [encode(c) for c in outcome.cases]
    assert case["policies"]["warm-process"]["summary"]["call_s"] is None
    flag = next(f for f in case["flags"] if f["flag"] == "could_not_measure_cleanly")
    assert (flag["contended"], flag["ok"], flag["unit"]) == (2, 2, "process")
    # no figure is no `ok`: warn, with the reason, and counted as such (issue 25, item 2)
    assert case["status"] == "warn" and case["reason"] == (
        "figures withheld (warm-process): 2 of 2 processes were "
        "contended: no figure is given; rerun on a quieter machine "
        "(see Machine health)"
    )
    assert (outcome.suite.summary.n_ok, outcome.suite.summary.n_warn) == (0, 1)
    assert validate_dir(outcome.result_dir.root) == []


def test_keep_contended_gives_the_figures_from_every_run_and_says_so_everywhere(tmp_path):
    """--keep-contended (issue 25, item 1): the user wants the figures anyway. They come from the
    contended processes too; the case is `warn` saying why, a `contended_kept` flag is what every
    reader derives the same figures from, and the CSV marks those runs as used."""
    from ttfr.artifacts.export import tidy
    from ttfr.artifacts.reader import load_finished, validate_dir

    outcome = _run_with_contended_warm_processes(tmp_path, {0, 1}, keep_contended=True)
    (case,) = [encode(c) for c in outcome.cases]
    warm = case["policies"]["warm-process"]
    assert warm["summary"]["call_s"]["n"] == 2 and warm["summary"]["call_s"]["median"] > 0.01  # both, contended
    assert {"contended", "contended_kept"} <= {f["flag"] for f in case["flags"]}
    assert not any(f["flag"] == "could_not_measure_cleanly" for f in case["flags"])
    assert case["status"] == "warn" and "--keep-contended" in case["reason"] and case["config"]["keep_contended"]
    root = outcome.result_dir.root
    assert validate_dir(root) == []  # the reader recomputes the same figures from the flag
    assert "(--keep-contended)" in (root / "report.md").read_text()
    rows = [r for r in tidy.rows("s", load_finished(root).cases) if r["policy"] == "warm-process"]
    assert rows and all(r["in_figures"] == "true" and r["contended"] == "true" for r in rows)
