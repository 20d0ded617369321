"""One `ttfr run`, start to finish: spec -> plan -> scheduler -> analysis -> artifacts.

An interrupted run (Ctrl-C, SIGTERM) still writes valid artifacts for every case whose
runs all finished; `--resume DIR` re-plans from plan.json, skips what the journal holds
and completes the rest.
"""

from __future__ import annotations

import datetime as dt
import signal
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

import ttfr
from ttfr.artifacts import manifest, reader
from ttfr.artifacts.reader import load_finished
from ttfr.artifacts.result_dir import ResultDir, snapshot_id
from ttfr.artifacts.store import (
    PLAN_SCHEMA,
    SUITE_SCHEMA,
    ArtifactError,
    StorageError,
    write_bytes_atomic,
    write_json,
)
from ttfr.errors import UsageError
from ttfr.exit_codes import EXIT_CASE_FAILED, EXIT_INTERRUPTED, EXIT_OK
from ttfr.measure import datasets
from ttfr.measure.executors import REAL, Executors
from ttfr.measure.journal import Journal
from ttfr.measure.plan import Plan, build_plan, pending_cases, replay
from ttfr.measure.resume import NOTHING_NAMED, Named
from ttfr.measure.scheduler import Scheduler
from ttfr.measure.spawn import ensure_worker_bytecode
from ttfr.measure.spec import RunSpec
from ttfr.measure.worker_probe import check_worker_python
from ttfr.model.base import UNSET, decode, encode
from ttfr.model.case import CASE_SCHEMA, CaseResult
from ttfr.model.journal import JournalEntry
from ttfr.model.manifest import MANIFEST_SCHEMA, Arm, Manifest
from ttfr.model.plan import DatasetFiles, PlanDocument, PlannedDataset
from ttfr.model.suite import CaseRef, DatasetFile, FileRef, PendingCase, ScalingRow, SuiteResult
from ttfr.pipeline.costs import Costs
from ttfr.report import markdown

if TYPE_CHECKING:
    from ttfr.analyse import precision


@dataclass
class SuiteOutcome:
    result_dir: ResultDir
    suite: SuiteResult
    cases: list[CaseResult]
    interrupted: bool
    warnings: list[str]  # e.g. journal lines that were skipped

    @property
    def exit_code(self) -> int:
        if self.interrupted:
            return EXIT_INTERRUPTED
        return EXIT_CASE_FAILED if self.suite.summary.n_failed else EXIT_OK


def start(spec: RunSpec, out_parent: Path, command_line: list[str] | None = None, *, name: str | None = None,
          session_id: str | None = None, arm: Arm | None = None, notes: tuple[str, ...] = ()) -> ResultDir:  # fmt: skip
    """Create the result directory with its plan and manifest, before anything runs. `ttfr ab`
    names each arm's directory, shares one session id between them and records the arm; `notes` are
    limitations the caller knows of (a run started from a notebook's kernel)."""
    now = dt.datetime.now(dt.timezone.utc)
    recorded = spec.recorded()
    result_dir = ResultDir.create(out_parent, name or snapshot_id(now, encode(recorded), spec.deterministic))
    try:
        recorded_arm = arm if arm is not None else UNSET
        plan = PlanDocument(spec=recorded, created_at=now.isoformat(timespec="seconds"),
                            ttfr_version=ttfr.__version__,
                            datasets=write_datasets(spec, result_dir),
                            arm=recorded_arm)  # fmt: skip
        info = decode(manifest.collect(command_line, spec.python, spec.policies, session_id=session_id), Manifest)
        info = msgspec.structs.replace(info, arm=recorded_arm, limitations=[*info.limitations, *notes])
        write_json(result_dir.plan, plan, PLAN_SCHEMA)
        write_json(result_dir.manifest, info, MANIFEST_SCHEMA)
    except BaseException as exc:
        # A failed or interrupted start leaves nothing behind: the directory held nothing
        # before create() (it checks), so all of it is ours to remove.
        result_dir.discard()
        if isinstance(exc, OSError):
            raise StorageError(f"{exc.filename or result_dir.root}: cannot be written ({exc.strerror}); "
                               "nothing was measured and the result directory was removed") from None  # fmt: skip
        raise
    return result_dir


def write_datasets(spec: RunSpec, result_dir: ResultDir) -> dict[str, PlannedDataset]:
    """Write the HistFactory workspaces the cases use, keyed by the cases' size token (`8`: the
    preset with 8 parameters, `custom_8`: the --workspace file) -> name, size, signal, hashes."""
    by_key = {c.size_token: c for c in sorted(spec.cases) if c.uses_workspace}
    user = datasets.load_user_workspace(spec.workspace, spec.signal) if spec.workspace else None
    mapping = {}
    for key, case in sorted(by_key.items(), key=lambda kv: (kv[1].size, kv[1].custom)):
        workspace = datasets.resolve(case.size, spec.seed, user, case.custom)
        written = {}
        for role, (name, payload) in datasets.files(workspace, spec.seed).items():
            write_bytes_atomic(result_dir.workspaces / name, payload)
            written[role] = (result_dir.workspaces / name).relative_to(result_dir.root).as_posix()
        mapping[key] = PlannedDataset(name=workspace.name, size=case.size, dataset_id=datasets.dataset_id(case, spec.seed),
                                      signal="/".join(workspace.signal), files=DatasetFiles(**written),
                                      sha256=workspace.sha256)  # fmt: skip
    return mapping


def dataset_fields(result_dir: ResultDir) -> dict[str, dict]:
    """Job fields per HistFactory size token (Case.size_token, e.g. `8` or `custom_8`): absolute
    paths, the signal and the reference cache."""
    fields = {}
    for key, info in (reader.read_plan(result_dir.root).datasets or {}).items():
        # plan.json may come from someone else (--resume): its files must be the directory's own
        fields[key] = {
            "workspace": str(reader.confined(result_dir.root, info.files.workspace)),
            "point": str(reader.confined(result_dir.root, info.files.point)),
            "signal": info.signal,
            "reference": str(result_dir.scratch / "references" / f"{info.name}.json"),
        }
    return fields


def write_scaling_csv(result_dir: ResultDir, rows: list[ScalingRow]) -> None:
    """scaling.csv: suite.json's `scaling` rows, for plotting (cost vs parameter count)."""
    import csv
    import io

    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(ScalingRow.__struct_encode_fields__), lineterminator="\n")
    writer.writeheader()
    writer.writerows(encode(rows))
    write_bytes_atomic(result_dir.root / "scaling.csv", out.getvalue().encode())


def reopen(root: Path, named: Named = NOTHING_NAMED) -> tuple[ResultDir, RunSpec]:
    """The result directory to resume and its spec, checked like a new run's: plan.json against
    its schema; every program it names (interpreter, case files, commands, --prepare steps) must
    be one the user named on the resume's command line (`named`), and is refused before anything
    runs otherwise: resuming someone else's directory never runs a program because a file names it."""
    result_dir = ResultDir.open(root)
    linked = reader.symlinked_entries(result_dir.root)
    if linked:  # a writer would follow them out of the directory
        raise ArtifactError(f"{result_dir.root}: {', '.join(linked)} is a symlink; a result directory holds its own "
                            "files, so it cannot be resumed")  # fmt: skip
    result_dir.lock()  # a resume while the run (or another resume) is still writing is refused
    try:
        return result_dir, _resumable_spec(result_dir, named)
    except BaseException:
        result_dir.unlock()
        raise


def record_spec(result_dir: ResultDir, spec: RunSpec) -> None:
    """Write `spec` into the directory's plan.json (the rest of the plan as it is): what runs next, or what ran, is
    what its plan says (`ttfr ab`'s rounds that ran; `ttfr explain`'s diagnostic processes, which a resume finds)."""
    write_json(result_dir.plan, msgspec.structs.replace(reader.read_plan(result_dir.root), spec=spec.recorded()),
               PLAN_SCHEMA)  # fmt: skip


def _resumable_spec(result_dir: ResultDir, named: Named) -> RunSpec:
    plan, problems = reader.inspect(result_dir.root, "plan.json", PLAN_SCHEMA)
    if problems:
        shown = "; ".join(p.removeprefix("plan.json: ") for p in problems[:3])
        raise ArtifactError(f"{result_dir.plan}: not a ttfr plan ({shown}); it cannot be resumed")
    plan = reader.typed(plan, PlanDocument, "plan.json")
    if plan.ttfr_version != ttfr.__version__:  # its runs and this one's would measure different workers
        raise UsageError(f"{result_dir.plan}: the run was started by ttfr {plan.ttfr_version} and this is ttfr "
                         f"{ttfr.__version__}: one case's runs must come from one worker, so it cannot be resumed "
                         "here; resume it with that version, or start a new run")  # fmt: skip
    try:
        spec = RunSpec.from_recorded(plan.spec, named)
    except UsageError as exc:
        raise UsageError(f"{result_dir.plan}: {exc}") from None
    dataset_fields(result_dir)  # every workspace path it names must be the directory's own
    if spec.python is not None:  # the one the user named (--python): checked like a new run's
        check_worker_python(spec.python, option="--python")
    return spec


class _TerminateAsInterrupt:
    """SIGTERM ends a run like Ctrl-C does: finished cases still get their artifacts."""

    def __enter__(self):
        self.previous = signal.signal(signal.SIGTERM, self._raise)
        return self

    @staticmethod
    def _raise(_signum, _frame):
        raise KeyboardInterrupt

    def __exit__(self, *exc):
        signal.signal(signal.SIGTERM, self.previous)
        return False


def execute(result_dir: ResultDir, spec: RunSpec, executors: Executors | None = None, progress=None,
            clock=time.monotonic, html: bool = True, costs: Costs | None = None, shown=None) -> SuiteOutcome:  # fmt: skip
    """Run the plan's tasks the journal does not hold yet (`executors`: real processes unless a
    test gives fakes), then analyse and write everything. `shown(outcome)` is called once the
    results are written and before report.html (`ttfr run` prints its summary there: the page's
    figures are the slowest part of ttfr's own time); `html` False writes no page (and removes
    one an earlier part of the run left). `costs`: ttfr's own time, by phase."""
    executors = executors or REAL
    costs = costs or Costs()
    started = clock()  # --budget counts from here (a resumed run gets its budget again)
    with costs.phase("plan (its tasks)"):
        plan = build_plan(spec)
    journal = Journal(result_dir.journal)
    if executors.starts_workers:
        ensure_worker_bytecode()
    interrupted = False
    try:
        with _TerminateAsInterrupt():
            scheduler = Scheduler(plan, journal, result_dir.scratch, executors, progress,
                                  dataset_fields=dataset_fields(result_dir),
                                  alongside=lambda: costs.timed_alongside(_analysis_imports, html))  # fmt: skip
            bought = None
            if spec.precision:
                from ttfr.pipeline.precision_phase import PrecisionPurchase

                bought = PrecisionPurchase(plan, journal, scheduler, started, clock)
            try:
                with costs.phase("runs"):
                    scheduler.run()
                    if bought:
                        bought.run()
            except KeyboardInterrupt:
                interrupted = True
            entries = journal.entries()
            costs.processes, costs.worker_lives_s = len(scheduler.lives_ns), sum(scheduler.lives_ns) / 1e9
            with costs.phase("analysis, JSON, report.md"):
                suite, cases, verified = _write(result_dir, plan, entries, bought.outcome(clock) if bought else None)
            if shown is not None:
                shown(SuiteOutcome(result_dir, suite, cases, interrupted, journal.skipped))
            if html:
                with costs.phase("report.html"):
                    write_html(verified)
            else:  # a page from before a resume would describe another suite
                result_dir.remove_page("report.html")
        if not suite.pending and not (bought and bought.stopped_by is None):
            result_dir.remove_scratch()  # kept when --precision was interrupted: its resume needs the templates
    except OSError as exc:  # disk full, directory made read-only: every finished run is journaled
        resume = spec.resume_command(result_dir.root)
        raise StorageError(f"{exc.filename or result_dir.root}: cannot be written ({exc.strerror}); the runs "
                           f"that finished are kept: fix that, then `{resume}`") from None  # fmt: skip
    finally:
        result_dir.unlock()  # taken by start() or reopen(): this run has stopped writing
    return SuiteOutcome(result_dir, suite, cases, interrupted, journal.skipped)


def _analysis_imports(html: bool) -> None:
    """What the analysis (scipy's order statistics) and report.html (matplotlib) import, ~0.35 s:
    loaded while an unmeasured process (a result check, a cache priming) runs, by the scheduler's
    `alongside`, which never overlaps a measured one; otherwise, here, when they are needed."""
    from ttfr.analyse import case_result  # noqa: F401 - the import is the point

    if html:
        from ttfr.report import plots

        plots.load_matplotlib()


def write_results(result_dir: ResultDir, plan: Plan, entries: list[JournalEntry],
                  bought: precision.PhaseEnd | None = None) -> tuple[SuiteResult, list[CaseResult]]:  # fmt: skip
    """Analyse what the journal holds and write case files, the suite index and the reports;
    `bought`: how the --precision phase ended (its statistics are derived here)."""
    suite, cases, verified = _write(result_dir, plan, entries, bought)
    write_html(verified)
    return suite, cases


def _write(result_dir: ResultDir, plan: Plan, entries: list[JournalEntry], bought: precision.PhaseEnd | None):
    """write_results without report.html: (suite, cases, the directory as verified from its files)."""
    from ttfr.analyse import case_result, loops, precision, suite_figures

    pending = pending_cases(plan, entries)
    cases = case_result.case_results(plan, entries, skip=pending)
    for case_id in pending:  # finished once, pending again (`ttfr explain DIR` interrupted): its old file goes
        result_dir.remove_page(f"cases/{case_id}.json")
    refs = []
    for result in cases:
        case_id = result.case
        digest = write_json(result_dir.case_path(case_id), result, CASE_SCHEMA)
        refs.append(CaseRef(case=case_id, path=f"cases/{case_id}.json", sha256=digest, status=result.status,
                            reason=result.reason, headline=result.headline()))  # fmt: skip
    plan_info = reader.read_plan(result_dir.root)
    spec = plan.spec
    loop_rows = loops.strategy_rows(cases)
    suite = SuiteResult(
        schema=SUITE_SCHEMA,
        snapshot_id=result_dir.root.name,
        created_at=plan_info.created_at,
        state="incomplete" if pending else "complete",
        ttfr_version=plan_info.ttfr_version,
        deterministic=spec.deterministic,
        profile=spec.profile,
        seed=spec.seed,
        policies=list(spec.policies),
        manifest=FileRef(path="manifest.json", sha256=reader.sha256_of(result_dir.root, "manifest.json")),
        cases=refs,
        pending=pending,
        summary=suite_figures.suite_summary(cases, pending),
        break_even=suite_figures.break_even(cases),
        scaling=suite_figures.scaling_rows(cases),
        loops=loop_rows or UNSET,
        datasets=[
            DatasetFile(name=info.name, size=info.size, path=path, sha256=artifact_sha)
            for _key, info in sorted((plan_info.datasets or {}).items(), key=lambda kv: (kv[1].size, kv[0]))
            for path, artifact_sha in (
                (p, reader.sha256_of(result_dir.root, p)) for p in (info.files.point, info.files.workspace)
            )
        ],
        precision=precision.record(cases, bought) if bought is not None else UNSET,
        pending_runs=_pending_runs(plan, entries, pending) or UNSET,
    )
    write_json(result_dir.suite, suite, SUITE_SCHEMA)
    if suite.scaling:
        write_scaling_csv(result_dir, suite.scaling)
    verified = load_finished(result_dir.root)
    result_dir.write_page("report.md", markdown.render(verified))  # rendered from the files, as `ttfr report` would
    return suite, cases, verified


def _pending_runs(plan: Plan, entries: list[JournalEntry], pending: list[str]) -> list[PendingCase]:
    """How many of each pending case's planned runs the journal holds (an interrupted run's summary
    says so instead of an empty table): the plan's tasks less those a resume would run (replay)."""
    remaining, _stopped = replay(plan, entries)
    planned, left = Counter(t.case.id for t in plan.tasks), Counter(t.case.id for t in remaining)
    return [PendingCase(case=case, runs_done=planned[case] - left[case], runs_planned=planned[case]) for case in pending]


def write_html(verified) -> None:
    """report.html beside report.md. A figure that cannot be drawn must not cost the run its
    results: every JSON artifact and report.md are written by then, so it is a warning."""
    from ttfr.report import html

    try:
        verified.result_dir.write_page("report.html", html.render(verified))
    except Exception as exc:  # noqa: BLE001 - matplotlib's failures are many; the run's data is safe
        print(f"ttfr: warning: {verified.result_dir.root / 'report.html'} could not be rendered "
              f"({type(exc).__name__}: {exc}); the JSON artifacts and report.md are complete", file=sys.stderr)  # fmt: skip
