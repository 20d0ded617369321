"""ttfr's pytest plugin, run by pytester on fake workers (deterministic): a budget met passes, one
over fails, an interval straddling the limit is inconclusive, a withheld figure (every run
contended) is a skip with its reason, an unavailable GPU case a skip with `gpu_unavailable`; bad
marker arguments stop collection naming the test; the result directory is kept and printed."""

import pytest
from conftest import PASSED_CHECK, fake_record, fake_result
from support.fakes import FakeExecutor
from support.fixture_suite import FixedHost
from support.pty_driver import ContendedExecutor

from ttfr import pytest_plugin
from ttfr.measure.executors import Executors

pytest_plugins = ["pytester"]
CASE = "numpy_matmul_64_f32"


class Spread(FakeExecutor):
    """Cold runs whose TTFR alternates between 0.33 s and `slow` s (the fakes' marks otherwise); `every`: all slow."""

    def __init__(self, slow: float, every: bool = False):
        super().__init__()
        self.slow = slow
        self.cold = 1 if every else 0
        self.step = 0 if every else 1

    def __call__(self, job, env, timeout_s, python=None):
        if job.mode != "cold":
            return super().__call__(job, env, timeout_s, python)
        self.calls.append({"job": job, "env": env})
        extra = 0 if self.cold % 2 == 0 else int((self.slow - 0.33) * 1e9)
        self.cold += self.step
        return fake_result(fake_record(check=PASSED_CHECK if job.check else None), spawn_ns=1_000_000_000 - extra)


def _budget_test(pytester, marker: str):
    pytester.makepyfile(f"""
        import pytest

        @pytest.mark.ttfr({marker})
        def test_budget():
            pass
    """)


@pytest.fixture(scope="module", autouse=True)
def _everything_a_budget_imports_is_loaded(tmp_path_factory):
    """pytester's in-process runs put sys.modules back after each: a compiled extension a budget imported for the
    first time inside one could not be loaded again in the next. One fake run first loads them all."""
    import ttfr

    ttfr.run([CASE], cache_policies="cold-cache", cold_runs=6, progress=False, out=tmp_path_factory.mktemp("warm"),
             _executors=Executors(worker=FakeExecutor(), host=FixedHost))  # fmt: skip


@pytest.fixture
def fakes(monkeypatch):
    def use(worker):
        monkeypatch.setattr(pytest_plugin, "EXECUTORS", Executors(worker=worker, host=FixedHost))

    return use


def test_a_budget_met_passes_and_its_result_is_kept_and_printed(pytester, fakes):
    fakes(FakeExecutor())
    _budget_test(pytester, f'case="{CASE}", policy="cold-cache", p50="600ms"')
    outcome = pytester.runpytest_inprocess("-rA")
    outcome.assert_outcomes(passed=1)
    outcome.stdout.fnmatch_lines(["*ttfr budgets*", "result: *.ttfr-pytest/* (report.html there)"])
    (result,) = [p for p in (pytester.path / ".ttfr-pytest").iterdir() if p.is_dir()]
    assert (result / "report.html").is_file()


def test_a_budget_over_its_limit_fails_with_its_interval(pytester, fakes):
    fakes(FakeExecutor())  # every run 330 ms
    _budget_test(pytester, f'case="{CASE}", policy="cold-cache", p50="100ms"')
    outcome = pytester.runpytest_inprocess()
    outcome.assert_outcomes(failed=1)
    outcome.stdout.fnmatch_lines(["*over budget: numpy_matmul_64_f32 cold-process/cold-cache p50 330.0 ms "
                                  "[[]330.0 ms, 330.0 ms[]] (9*%) over 6 runs, limit 100.0 ms: fail*"])  # fmt: skip


def test_a_warm_call_budget_judges_each_warm_process_s_median_call(pytester, fakes):
    fakes(FakeExecutor())  # every warm process's median call about 1.02 ms
    _budget_test(pytester, f'case="{CASE}", policy="warm-process", p50="2ms"')
    pytester.runpytest_inprocess().assert_outcomes(passed=1)
    (result,) = [p for p in (pytester.path / ".ttfr-pytest").iterdir() if p.is_dir()]
    assert [p.name for p in (result / "cases").iterdir()] == [f"{CASE}.json"]
    _budget_test(pytester, f'case="{CASE}", policy="warm", p50="500us", runs=7')
    over = pytester.runpytest_inprocess("--ttfr-out", "over")
    over.assert_outcomes(failed=1)
    over.stdout.fnmatch_lines(["*over budget: numpy_matmul_64_f32 warm-process p50 1.0 ms [[]1.0 ms, 1.0 ms[]] (9*%) "
                               "over 7 runs, limit 500.0 µs: fail*"])  # fmt: skip


def test_an_interval_that_straddles_the_limit_is_inconclusive_not_a_pass(pytester, fakes):
    fakes(Spread(slow=0.73))  # half the runs 330 ms, half 730 ms: the median's interval holds 500 ms
    _budget_test(pytester, f'case="{CASE}", policy="cold-cache", p50="500ms"')
    outcome = pytester.runpytest_inprocess("-rs")
    outcome.assert_outcomes(skipped=1)
    outcome.stdout.fnmatch_lines(["*inconclusive: numpy_matmul_64_f32 cold-process/cold-cache p50 * [[]330.0 ms, "
                                  "730.0 ms[]]*limit 500.0 ms: inconclusive*"])  # fmt: skip


def test_an_inconclusive_budget_fails_where_the_gate_asks_for_a_decision(pytester, fakes):
    fakes(Spread(slow=0.73))
    _budget_test(pytester, f'case="{CASE}", policy="cold-cache", p50="500ms"')
    outcome = pytester.runpytest_inprocess("--ttfr-inconclusive", "fail")
    outcome.assert_outcomes(failed=1)
    outcome.stdout.fnmatch_lines(["*inconclusive: numpy_matmul_64_f32 cold-process/cold-cache p50 *limit 500.0 ms: "
                                  "inconclusive*--ttfr-inconclusive fail*"])  # fmt: skip
    assert pytester.runpytest_inprocess("--ttfr-inconclusive", "maybe").ret == pytest.ExitCode.USAGE_ERROR


def test_a_withheld_figure_is_a_skip_with_its_reason_never_a_pass(pytester, fakes):
    fakes(ContendedExecutor())  # every run waited for a CPU while other work used one
    _budget_test(pytester, f'case="{CASE}", policy="cold-cache", p50="600ms"')
    outcome = pytester.runpytest_inprocess("-rs")
    outcome.assert_outcomes(skipped=1)
    outcome.stdout.fnmatch_lines(["*were contended: no figure is given*"])


def test_an_unavailable_gpu_case_is_a_skip_with_gpu_unavailable(pytester, fakes, monkeypatch):
    from ttfr.measure import catalog

    monkeypatch.setattr(catalog, "gpu_present", lambda: False)
    fakes(FakeExecutor())
    _budget_test(pytester, 'case="jax_jit_gpu_matmul_512_f32", policy="cold-cache", p50="2s"')
    outcome = pytester.runpytest_inprocess("-rs")
    outcome.assert_outcomes(skipped=1)
    outcome.stdout.fnmatch_lines(["*jax_jit_gpu_matmul_512_f32: gpu_unavailable*"])


@pytest.mark.parametrize("marker, message", [
    ('case="numpy_matmul_64_f3", p50="600ms"', "unknown case"),
    (f'case="{CASE}", p50="600 parsecs"', "p50='600 parsecs': a duration like 600ms, 1.5s or 2m"),
    (f'case="{CASE}", policy="tepid", p50="600ms"', "unknown cache policy"),
    (f'case="{CASE}", p95="1s", runs=20', "a p95's 95% interval needs at least 59 runs"),
    (f'case="{CASE}"', 'give one limit: p50="600ms" or p95="1s"'),
    ('command="python -c pass", policy="warm-process", p50="1ms"', "has no warm calls to budget"),
])  # fmt: skip
def test_bad_marker_arguments_stop_collection_naming_the_test(pytester, fakes, marker, message):
    fakes(FakeExecutor())
    _budget_test(pytester, marker)
    outcome = pytester.runpytest_inprocess()
    assert outcome.ret == pytest.ExitCode.USAGE_ERROR
    text = outcome.stderr.str() + outcome.stdout.str()
    assert "test_bad_marker_arguments_stop_collection_naming_the_test.py::test_budget: @pytest.mark.ttfr:" in text
    assert message in text


def test_an_unmarked_session_loads_nothing_of_ttfr_beyond_the_plugin(pytester):
    pytester.makepyfile("import sys\n\ndef test_plain():\n    loaded = [m for m in sys.modules if m.startswith('ttfr.')]\n"
                        "    assert loaded == ['ttfr.pytest_plugin'], loaded\n")  # fmt: skip
    outcome = pytester.runpytest_subprocess("-q")
    outcome.assert_outcomes(passed=1)


def test_the_guides_example_prints_what_the_guide_shows(pytester, fakes):
    """docs/guide/python.md's budget test, run as written (on fake workers): the lines the guide prints."""
    import re
    from pathlib import Path

    guide = (Path(__file__).resolve().parents[1] / "docs" / "guide" / "python.md").read_text()
    section = guide.split("## Cold-start budgets in pytest", 1)[1]
    example = re.search(r"```python\n(.*?)```", section, re.S)[1]
    printed = re.findall(r"```text\n(.*?)```", section, re.S)
    fakes(FakeExecutor())  # every run 330 ms
    pytester.makepyfile(test_budget=example)
    passed = pytester.runpytest_inprocess("-rA")
    passed.assert_outcomes(passed=1)
    # the guide's lines, its example paths and stamps as wildcards
    shown = [re.sub(r"/home/me/project/\.ttfr-pytest/\S+", "*/.ttfr-pytest/*", line) for line in printed[0].splitlines()]
    passed.stdout.fnmatch_lines([line.replace("[", "[[]") for line in shown])
    pytester.makepyfile(test_budget=example.replace('p50="600ms"', 'p50="100ms"'))
    failed = pytester.runpytest_inprocess("-rA")
    failed.assert_outcomes(failed=1)
    words = " ".join(printed[1].split()).split(" - Failed: ")[1].split(" (result:")[0]
    assert words in " ".join(failed.stdout.str().split())


@pytest.mark.slow  # a pytest session of its own with two xdist workers: ~6 s
def test_under_xdist_budget_tests_take_the_lock_in_turn_and_the_controller_prints_their_results(pytester):
    from pathlib import Path

    tests_dir = Path(__file__).resolve().parent
    pytester.makepyfile(
        budget_fakes=f"""
        import sys
        sys.path.insert(0, {str(tests_dir)!r})
        from support.fakes import FakeExecutor
        from support.fixture_suite import FixedHost
        from ttfr import pytest_plugin
        from ttfr.measure.executors import Executors

        pytest_plugin.EXECUTORS = Executors(worker=FakeExecutor(), host=FixedHost)
    """
    )
    pytester.makepyfile(
        test_two_budgets=f"""
        import pytest

        @pytest.mark.ttfr(case="{CASE}", policy="cold-cache", p50="600ms")
        def test_one():
            pass

        @pytest.mark.ttfr(case="{CASE}", policy="cold-cache", p50="700ms")
        def test_two():
            pass
    """
    )
    outcome = pytester.runpytest_subprocess("-n", "2", "-p", "budget_fakes")  # the fakes, in every xdist worker
    outcome.assert_outcomes(passed=2)
    outcome.stdout.fnmatch_lines(["*ttfr budgets*", "result: *", "result: *",
                                  "pytest-xdist: the budget tests measured one at a time*"])  # fmt: skip


def test_against_a_baseline_a_slowdown_beyond_the_limit_fails_and_one_within_passes(pytester, fakes):
    _budget_test(pytester, f'case="{CASE}", policy="cold-cache", p50="2s", runs=8')
    fakes(FakeExecutor())  # the baseline: every run 330 ms
    pytester.runpytest_inprocess("--ttfr-out", "baseline").assert_outcomes(passed=1)
    fakes(Spread(slow=0.53, every=True))  # now every run 530 ms: x1.6
    failed = pytester.runpytest_inprocess("--ttfr-out", "now", "--ttfr-baseline", "baseline", "--ttfr-compare-fail", "25")
    failed.assert_outcomes(failed=1)
    failed.stdout.fnmatch_lines(["*numpy_matmul_64_f32 cold-process/cold-cache: x1.6* the baseline's TTFR*above +25%*weak*"])
    passed = pytester.runpytest_inprocess("--ttfr-out", "later", "--ttfr-baseline", "baseline", "--ttfr-compare-fail",
                                          "80")  # fmt: skip
    passed.assert_outcomes(passed=1)


@pytest.mark.integration
def test_a_programs_budget_runs_real_processes(pytester, monkeypatch):
    """A program's budget (command=), measured for real, its interval judged. Twelve runs: a CI run had one of six
    set aside as contended, and five leave no 95% interval (an inconclusive skip, as they should)."""
    import sys

    monkeypatch.setattr(pytest_plugin, "EXECUTORS", None)
    pytester.makepyfile(
        test_program_budgets=f"""
        import pytest

        @pytest.mark.ttfr(command="{sys.executable} -S -c pass", policy="cold-cache", p50="30s", runs=12)
        def test_program():
            pass
    """
    )
    outcome = pytester.runpytest_inprocess("-rA")
    outcome.assert_outcomes(passed=1)
    outcome.stdout.fnmatch_lines(["*ttfr budgets*", "result: *"])
    (result,) = [p for p in (pytester.path / ".ttfr-pytest").iterdir() if p.is_dir()]
    assert (result / "cases" / "command_budget_1_f64.json").is_file()
