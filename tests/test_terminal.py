"""The live display's pieces for every catalogued backend (a pseudo-terminal run of each
family is in test_terminal_pty.py)."""

import pytest

from ttfr.measure import catalog
from ttfr.measure.plan import COLD, PRIME, WARM, Task
from ttfr.model.policies import COLD_CACHE, WARM_CACHE, WARM_PROCESS
from ttfr.report.progress import RunEstimator


@pytest.mark.parametrize("case", catalog.BUILTIN.catalogued_cases(), ids=lambda c: c.id)
def test_every_catalogued_backend_has_an_eta_prior(case):
    # The display asked a framework-keyed table before: pyhf and nextstat crashed it (KeyError).
    estimator = RunEstimator()
    tasks = [Task(PRIME, case, None, 0, 0), Task(COLD, case, COLD_CACHE, 0, 0), Task(COLD, case, WARM_CACHE, 0, 2),
             Task(WARM, case, WARM_PROCESS, 0, 1)]  # fmt: skip
    for task in tasks:
        assert estimator.estimate(task) > 0


def test_the_prior_gives_way_to_observed_runs_of_the_same_kind():
    case = catalog.BUILTIN.make_case("torch_compile_cpu", "matmul", 64, "float32")
    estimator = RunEstimator()
    cold, warm_cache = Task(COLD, case, COLD_CACHE, 0, 0), Task(COLD, case, WARM_CACHE, 0, 2)
    fresh, from_template = case.backend_info.cost_prior_s
    assert (estimator.estimate(cold), estimator.estimate(warm_cache)) == (fresh, from_template)
    estimator.observe(cold, 3.0)
    estimator.observe(cold, 5.0)
    assert estimator.estimate(cold) == 4.0
    assert estimator.estimate(warm_cache) == from_template  # another kind: still the prior


def _progress_run(tmp_path, executor, policies="cold-cache,warm"):
    import io
    import re

    from support.fakes import run_suite
    from rich.console import Console

    from ttfr.measure.spec import RunRequest
    from ttfr.report.progress import ProgressDisplay
    from ttfr.report.terminal import print_summary

    console = Console(file=io.StringIO(), width=200, force_terminal=False)
    progress = ProgressDisplay(console)
    request = RunRequest(backends="numpy,jax_jit_cpu", workloads="matmul", sizes="64", cold_runs=2, warm_procs=2,
                         policies=policies, seed=1)  # fmt: skip
    outcome = run_suite(tmp_path, request, executor, progress=progress)
    print_summary(console, outcome.suite, outcome.cases, outcome.result_dir.root)
    text = console.file.getvalue()
    return outcome, text, [tuple(map(int, m)) for m in re.findall(r"^\[(\d+)/(\d+)\]", text, re.M)]


def test_the_counter_counts_every_task_when_a_case_stops_and_ends_at_n_of_n(tmp_path):
    """A failed gate skips its case's remaining runs: they get their lines ([4/10] -> [6/10] was a skip)."""
    from support.fakes import FakeExecutor

    from ttfr.measure.spawn import RunResult

    def fail_numpy(call):
        if call["job"].adapter == "numpy_backend":
            return RunResult("error", "ValueError in setup: boom", None, 0, 1, 1)
        return None

    _outcome, text, counts = _progress_run(tmp_path, FakeExecutor(fail_numpy))
    total = counts[0][1]
    assert [n for n, _total in counts] == list(range(1, total + 1)) and counts[-1] == (total, total)
    assert "skipped: its case stopped earlier" in text


def test_an_interrupted_run_shows_its_unfinished_cases_and_how_far_they_got(tmp_path):
    from support.fakes import FakeExecutor

    outcome, text, _counts = _progress_run(tmp_path, FakeExecutor(interrupt_at=5))
    assert outcome.interrupted and outcome.suite.pending
    rows = {row.case: row for row in outcome.suite.pending_runs}
    assert set(rows) == set(outcome.suite.pending)
    from ttfr.measure.journal import Journal

    journaled = [e for e in Journal(outcome.result_dir.journal).entries() if e.case in rows]
    assert sum(r.runs_done for r in rows.values()) == len(journaled) > 0
    for row in rows.values():
        assert 0 <= row.runs_done < row.runs_planned
        assert f"{row.runs_done} of {row.runs_planned} runs done" in text
    assert "pending (" in text and "of their runs done)" in text
