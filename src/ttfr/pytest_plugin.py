"""ttfr's pytest plugin (entry point `pytest11`): cold-start (and warm-call) budgets as tests, off unless a test uses
them.

    @pytest.mark.ttfr(case="jax_jit_cpu_matmul_512_f32", policy="warm-cache", p50="600ms")
    def test_jax_starts_fast(): ...

A marked test measures its case in fresh processes (`ttfr.run`), enough of them for the statistic's
95% interval (a p50: 6, a p95: 59; `runs=` more: with policy="warm-process", that many warm processes,
each one value, its median call), and judges the interval against the limit
(analyse/budgets.py): it fails only when the whole interval is above the limit; an interval that
straddles it is skipped as `inconclusive` with its figures; a withheld figure (a contended machine)
and an unavailable case (`gpu_unavailable`, a missing package) are skips with their reason, never a
pass. Budget tests never measure beside each other: under pytest-xdist they take a lock in turn.
Bad marker arguments are the command line's usage errors, raised when the tests are collected.

--ttfr-out DIR keeps the session's result directories (printed in the summary); --ttfr-baseline DIR
with --ttfr-compare-fail PCT also compares each with the baseline's result of the same case, as
`ttfr compare --cross-session` does, and fails beyond PCT.

This module is loaded by every pytest session where ttfr is installed: it imports only pytest and
the standard library until a marked test runs.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path

import pytest

MARK = "ttfr"
EXECUTORS = None  # an Executors for the measured processes (None: real processes); tests give fakes
_KEY = pytest.StashKey[dict]()


def pytest_addoption(parser):
    group = parser.getgroup("ttfr", "cold-start budgets (ttfr)")
    group.addoption("--ttfr-out", default=".ttfr-pytest", metavar="DIR",
                    help="where budget tests keep their result directories (default .ttfr-pytest)")  # fmt: skip
    group.addoption("--ttfr-baseline", metavar="DIR",
                    help="a directory of earlier budget results: each case is also compared with its result there")  # fmt: skip
    group.addoption("--ttfr-inconclusive", choices=("skip", "fail"), default="skip",
                    help="what a budget whose interval straddles its limit is: skip (default: more runs or a quieter "
                         "machine would decide) or fail (a gate that passes only what it can show)")  # fmt: skip
    group.addoption("--ttfr-compare-fail", metavar="PCT",
                    help="with --ttfr-baseline: fail a budget test whose TTFR is slower than the baseline's by more than "
                         "PCT percent (a cross-session comparison: weak)")  # fmt: skip


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "ttfr(case=None, policy='warm-cache', p50=None, p95=None, runs=None, case_file=None, command=None, precision=None):"
        " a cold-start budget on a case (a built-in id, a case file's case, or a command), judged by its interval; "
        "precision=0.05 adds runs until its half-width is 5% (an interval that would straddle the limit may then not)",
    )
    config.pluginmanager.register(_Kept(), "ttfr-budget-results")


def _budget(item, mark) -> dict:
    """The marker's arguments, checked as the command line checks them (pytest.UsageError naming the test)."""
    from ttfr.analyse import budgets
    from ttfr.errors import UsageError
    from ttfr.measure.spec import RunRequest, build_spec
    from ttfr.model.policies import WARM_PROCESS

    kwargs = dict(mark.kwargs)
    known = {"case", "policy", "p50", "p95", "runs", "case_file", "command", "precision"}
    try:
        unknown = sorted(set(kwargs) - known)
        if unknown or mark.args:
            raise ValueError(f"unknown argument(s) {unknown or list(mark.args)}; it takes {', '.join(sorted(known))}")
        stats = [s for s in budgets.STATISTICS if kwargs.get(s) is not None]
        if len(stats) != 1:
            raise ValueError('give one limit: p50="600ms" or p95="1s"')
        statistic = stats[0]
        limit = budgets.parse_limit(kwargs[statistic], statistic)
        policy = kwargs.get("policy", "warm-cache")
        needed = budgets.fewest_runs(budgets.STATISTICS[statistic])
        runs = kwargs.get("runs") or needed
        if not isinstance(runs, int) or runs < needed:
            raise ValueError(f"runs={runs!r}: a {statistic}'s 95% interval needs at least {needed} runs")
        command, case = kwargs.get("command"), kwargs.get("case")
        if bool(command) == bool(case):
            raise ValueError('name the case (case="<id>", with case_file= for your own) or a program (command="...")')
        warm = policy in ("warm", WARM_PROCESS)  # a steady-state call's budget: each warm process's median a value
        request = dict(cases=() if command else (case,), policies=(policy,), cold_runs=None if warm else runs,
                       warm_procs=runs if warm else None,
                       case_files=(str(Path(kwargs["case_file"]).resolve()),) if kwargs.get("case_file") else (),
                       commands=(command,) if command else (), command_names=("budget",) if command else (),
                       precision=kwargs.get("precision"))  # fmt: skip
        if warm and command:
            raise ValueError(f"policy={policy!r}: a program (command=) has no warm calls to budget; its budget is on "
                             "its cold start (cold-cache, warm-cache)")  # fmt: skip
        spec = build_spec(RunRequest(**request))
    except (ValueError, UsageError) as exc:
        raise pytest.UsageError(f"{item.nodeid}: @pytest.mark.ttfr: {exc}") from None
    run_args = dict(cases=request["cases"], cache_policies=request["policies"], cold_runs=request["cold_runs"],
                    warm_procs=request["warm_procs"],
                    case_files=request["case_files"], commands=request["commands"],
                    command_names=request["command_names"], precision=request["precision"])  # fmt: skip
    return dict(run=run_args, statistic=statistic, limit=limit, policy=spec.policies[0],
                case=spec.cases[0].id if spec.cases else None)  # fmt: skip


def pytest_collection_modifyitems(session, config, items):
    for item in items:
        mark = item.get_closest_marker(MARK)
        if mark is not None:
            item.stash[_KEY] = _budget(item, mark)


@contextlib.contextmanager
def _one_at_a_time(config):
    """Budget tests measure one at a time: under pytest-xdist each takes a lock its workers share."""
    root = Path(config.getoption("--ttfr-out")).resolve()
    root.mkdir(parents=True, exist_ok=True)
    fd = os.open(root / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield root
    finally:
        os.close(fd)


def _values(case, policy: str) -> list[float]:
    """The values a budget judges: each headline run's TTFR, or each headline warm process's median call."""
    from ttfr.model.policies import WARM_PROCESS

    block = case.policies.get(policy)
    if policy == WARM_PROCESS:
        return [p.median_s for p in block.figure_runs() if p.median_s]
    return [r.metrics.ttfr_s for r in block.figure_runs() if r.metrics.ttfr_s]


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_call(item):
    budget = item.stash.get(_KEY, None)
    if budget is None:
        return
    from ttfr import api
    from ttfr.analyse import budgets
    from ttfr.analyse.contention import withheld_reason

    with _one_at_a_time(item.config) as root:
        result = api.run(out=root, html=True, progress=False, _executors=EXECUTORS, **budget["run"])
    item.user_properties.append(("ttfr_result", str(result.path)))  # to the controller too, under pytest-xdist
    (case,) = (c.result for c in result.cases.values())
    policy = budget["policy"]
    name = case.case
    if not case.policies.items():  # unavailable here: gpu_unavailable, a missing package
        pytest.skip(f"{name}: {case.reason} (result: {result.path})")
    if case.status == "failed":
        pytest.fail(f"{name} failed: {case.reason} (result: {result.path})", pytrace=False)
    block = case.policies.get(policy)
    withheld = block.withheld() if block else None
    if withheld is not None:
        pytest.skip(f"{name} {policy}: {withheld_reason(withheld)} (result: {result.path})")
    values = _values(case, policy)
    aside = len([r for r in block.measured if r.outcome == "ok"]) - len(values)
    verdict = budgets.judge(values, budget["statistic"], budget["limit"])
    item.user_properties.append(("ttfr", verdict.sentence(name, policy, aside)))
    _against_baseline(item, result, name, policy)
    if verdict.verdict == "fail":
        pytest.fail(f"over budget: {verdict.sentence(name, policy, aside)} (result: {result.path})", pytrace=False)
    if verdict.verdict == "inconclusive":
        said = (f"inconclusive: {verdict.sentence(name, policy, aside)}; more runs (runs=) or a quieter machine would "
                f"decide (result: {result.path})")  # fmt: skip
        if item.config.getoption("--ttfr-inconclusive") == "fail":
            pytest.fail(f"{said}; --ttfr-inconclusive fail", pytrace=False)
        pytest.skip(said)


def _against_baseline(item, result, name: str, policy: str) -> None:
    """--ttfr-baseline DIR --ttfr-compare-fail PCT: this case against its newest result under DIR."""
    baseline, limit = item.config.getoption("--ttfr-baseline"), item.config.getoption("--ttfr-compare-fail")
    if not baseline:
        return
    from ttfr import api
    from ttfr.errors import UsageError

    earlier = sorted(p for p in Path(baseline).iterdir() if (p / "cases" / f"{name}.json").is_file())
    if not earlier:
        pytest.skip(f"--ttfr-baseline {baseline}: no result of {name} there")
    document = api.compare(earlier[-1], result.path, cross_session=True, out=result.path.parent / ".comparisons")
    (record,) = [r for r in document.comparisons if r.case == name and r.policy == policy]
    ratio = record.effect.ratio if record.effect else None
    try:
        fail_above = float(str(limit).rstrip("%")) / 100 if limit is not None else None
    except ValueError:
        raise UsageError(f"--ttfr-compare-fail {limit!r}: a percentage, e.g. 10") from None
    item.user_properties.append(("ttfr_baseline_ratio", ratio))
    if fail_above is not None and ratio is not None and record.effect.ci and record.effect.ci[0] > 1 + fail_above:
        figure = "warm call" if policy.endswith("warm-process") else "TTFR"
        pytest.fail(f"{name} {policy}: x{ratio:.2f} the baseline's {figure} ({earlier[-1].name}), its interval above "
                    f"+{fail_above:.0%} ({record.verdict}; cross-session, weak)", pytrace=False)  # fmt: skip


class _Kept:
    """One session's budget results, as their tests' reports carry them (the controller's, under pytest-xdist)."""

    def __init__(self):
        self.paths: list[str] = []

    def pytest_runtest_logreport(self, report):
        if report.when == "call":
            self.paths += [v for k, v in report.user_properties if k == "ttfr_result" and v not in self.paths]

    def pytest_terminal_summary(self, terminalreporter, exitstatus, config):
        if not self.paths:
            return
        terminalreporter.write_sep("-", "ttfr budgets")
        for path in self.paths:
            terminalreporter.write_line(f"result: {path} (report.html there)")
        if config.getoption("numprocesses", None):
            terminalreporter.write_line("pytest-xdist: the budget tests measured one at a time, each waiting for the "
                                        f"lock in {config.getoption('--ttfr-out')} (never beside each other)")  # fmt: skip
