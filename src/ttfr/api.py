"""ttfr from Python: `ttfr.run`, `ttfr.load`, `ttfr.compare` over the typed model.

The same options as the command line, typed; the same checks and messages. Bad input raises
`ttfr.errors.UsageError` (the command line's exit 2, `exit_code` 2) before anything runs; a run
whose every worker failed raises `MeasurementFailed` (exit 1). Measured processes are fresh
processes, as on the command line: running from a notebook never measures the notebook's kernel
(its own CPU use is a neighbour like any other, seen by every run's contention evidence).

`import ttfr` loads none of this: the package exposes it lazily (every worker imports `ttfr`).
"""

from __future__ import annotations

import io
import os
from dataclasses import dataclass
from pathlib import Path

from ttfr.artifacts.reader import VerifiedResult, load_finished
from ttfr.errors import MeasurementFailed, UsageError
from ttfr.model.case import CaseResult
from ttfr.model.comparison import Comparison
from ttfr.model.suite import SuiteResult

# Where the measuring parent is a notebook's kernel, the report's limitations say so.
KERNEL_NOTE = ("Started from a Jupyter kernel (pid {pid}): the measured processes are fresh ones, and the kernel's own "
               "CPU use during the runs counts as a neighbour in their contention evidence (Machine health)")  # fmt: skip

__all__ = ["Case", "MeasurementFailed", "Result", "UsageError", "compare", "load", "run"]


def _listed(value) -> tuple:
    """A list as the command line's repeated, comma-separated option takes it (a str is one item)."""
    if value is None:
        return ()
    return (value,) if isinstance(value, str) else tuple(str(v) for v in value)


@dataclass(frozen=True)
class Case:
    """One case of a result: its typed record, its summary table and components chart in a notebook."""

    result: CaseResult
    _verified: VerifiedResult

    @property
    def id(self) -> str:
        return self.result.case

    def _repr_html_(self) -> str:
        from ttfr.report import html

        return html.render_fragment(self._verified, [self.result])


class Result:
    """A verified result directory: its suite, its cases (by id), the tidy frame, and its notebook view."""

    def __init__(self, verified: VerifiedResult):
        self._verified = verified

    @property
    def path(self) -> Path:
        return self._verified.result_dir.root

    @property
    def suite(self) -> SuiteResult:
        return self._verified.suite

    @property
    def cases(self) -> dict[str, Case]:
        return {c.case: Case(c, self._verified) for c in self._verified.cases}

    def __getitem__(self, case_id: str) -> Case:
        cases = self.cases
        if case_id not in cases:
            raise KeyError(f"{case_id!r}: not a case of {self.path.name}; its cases: {', '.join(cases)}")
        return cases[case_id]

    def __repr__(self) -> str:
        summary = self.suite.summary
        return (f"<ttfr.Result {self.path.name}: {summary.n_cases} cases, {summary.n_ok} ok, {summary.n_warn} warn, "
                f"{summary.n_failed} failed>")  # fmt: skip

    def to_pandas(self):
        """The tidy frame `ttfr export --format csv` writes (one row per run and metric), read by pandas: one
        definition of the rows (export/tidy.py), the CSV's text the one way they become a frame."""
        try:
            import pandas
        except ImportError:
            raise ImportError("Result.to_pandas() needs pandas: pip install pandas (or ttfr[pandas])") from None
        from ttfr.artifacts.export import csv_long

        return pandas.read_csv(io.StringIO(csv_long.render(self._verified)), keep_default_na=False, na_values=[""])

    def _repr_html_(self) -> str:
        from ttfr.report import html

        return html.render_fragment(self._verified)


def load(path) -> Result:
    """A finished result directory, verified (schemas, hashes, paths) as every reader does; ArtifactError names
    the first problem."""
    return Result(load_finished(Path(path)))


def run(cases=None, *, backends=None, workloads=None, sizes=None, dtypes=None, cache_policies=None,
        profile: str = "quick", cold_runs: int | None = None, warm_procs: int | None = None,
        warm_samples: int | None = None, case_files=None, commands=None, command_names=None, seed: int | None = None,
        deterministic: bool = False, explain: bool = False, keep_contended: bool = False,
        precision: float | None = None, budget=None, timeout: float | None = None, threads: int | None = None,
        python: str | None = None, workspace=None, workspace_presets=None, signal: str | None = None,
        concurrency=None, first_result: str | None = None, first_result_mark: bool = False, prepare=None,
        stop_at_first_result: bool = False, html: bool = True, out="ttfr-results", progress: bool = True,
        _executors=None) -> Result:  # fmt: skip
    """Measure, as `ttfr run` does, and return the verified result. `out` is the parent of the result directory.
    In a notebook the progress is a bar that renders there; elsewhere, lines on stderr. Every option is `ttfr run`'s
    of the same name (`cache_policies`: --cache-policy; `workspace_presets`: --workspace-preset); --concurrency
    groups run on this machine."""
    from ttfr.measure.spec import build_spec
    from ttfr.pipeline import suite

    request = run_request(cases=cases, backends=backends, workloads=workloads, sizes=sizes, dtypes=dtypes,
                          cache_policies=cache_policies, profile=profile, cold_runs=cold_runs, warm_procs=warm_procs,
                          warm_samples=warm_samples, case_files=case_files, commands=commands,
                          command_names=command_names, seed=seed, deterministic=deterministic, explain=explain,
                          keep_contended=keep_contended, precision=precision, budget=budget, timeout=timeout,
                          threads=threads, python=python, workspace=workspace, workspace_presets=workspace_presets,
                          signal=signal, concurrency=concurrency, first_result=first_result,
                          first_result_mark=first_result_mark, prepare=prepare,
                          stop_at_first_result=stop_at_first_result)  # fmt: skip
    spec = build_spec(request)  # every check the command line makes: UsageError before anything runs
    from ttfr.report.progress import for_python_api, in_notebook

    notes = (KERNEL_NOTE.format(pid=os.getpid()),) if in_notebook() else ()
    result_dir = suite.start(spec, Path(out), ["ttfr.run(...)"], notes=notes)
    display = for_python_api() if progress else None
    try:
        outcome = suite.execute(result_dir, spec, executors=_executors, progress=display, html=html)
    finally:
        if display is not None:
            display.stop()
    return load(outcome.result_dir.root)


def run_request(*, cases=None, backends=None, workloads=None, sizes=None, dtypes=None, cache_policies=None,
                profile="quick", cold_runs=None, warm_procs=None, warm_samples=None, case_files=None, commands=None,
                command_names=None, seed=None, deterministic=False, explain=False, keep_contended=False,
                precision=None, budget=None, timeout=None, threads=None, python=None, workspace=None,
                workspace_presets=None, signal=None, concurrency=None, first_result=None, first_result_mark=False,
                prepare=None, stop_at_first_result=False):  # fmt: skip
    """`run`'s arguments as the RunRequest `ttfr run`'s options make (measure/spec.py checks it)."""
    from ttfr.measure.spec import RunRequest

    return RunRequest(profile=profile, cases=_listed(cases), backends=_listed(backends), workloads=_listed(workloads),
                      sizes=_listed(sizes), dtypes=_listed(dtypes), policies=_listed(cache_policies),
                      cold_runs=cold_runs, warm_procs=warm_procs, warm_samples=warm_samples, seed=seed,
                      deterministic=deterministic, case_files=tuple(str(f) for f in _listed(case_files)),
                      commands=_listed(commands), command_names=_listed(command_names), explain=explain,
                      keep_contended=keep_contended, precision=precision, budget=budget, timeout=timeout,
                      threads=threads, python=None if python is None else str(python),
                      workspace=None if workspace is None else str(workspace),
                      workspace_presets=_listed(workspace_presets), signal=signal, concurrency=_listed(concurrency),
                      first_result=first_result, first_result_mark=first_result_mark, prepare=_listed(prepare),
                      stop_at_first_result=stop_at_first_result)  # fmt: skip


def compare(a, b, *, cross_session: bool = False, correction: str = "holm", fail_on: str = "regression",
            out="ttfr-results") -> Comparison:  # fmt: skip
    """B's result judged against A's, as `ttfr compare` does (a Result or a path each); the comparison document,
    also written under `out`."""
    from ttfr.pipeline import comparison

    paths = [x.path if isinstance(x, Result) else Path(x) for x in (a, b)]
    _out, document = comparison.compare_dirs(paths[0], paths[1], Path(out), cross_session=cross_session,
                                             correction=correction, fail_on=fail_on)  # fmt: skip
    return document
