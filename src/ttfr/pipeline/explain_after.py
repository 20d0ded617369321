"""`ttfr explain DIR`: --explain added to a finished result directory. Its diagnostic processes are
the only work left once the stored plan asks for them, so the directory is resumed like an
interrupted run (suite.execute), with the plan's `explain` set: each cold policy's process runs on
its policy's cache (a warm cache's template, gone with the finished run's scratch area, is primed
again), and the results are written again with the explanations beside the unchanged figures.

Refused (exit 2, before anything runs or is written): a directory that is not finished, one already
explained (its diagnostic processes in the journal: one stopped before they all ran is finished), one
run with --precision (a resume would buy it more runs), one measured on another machine or with other
versions (its explanation would be of another cold start than its figures), and, as for --resume, one
that names a program (an interpreter, a case file, a command) the user did not name on this command
line.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path


from ttfr.artifacts import manifest, reader
from ttfr.artifacts.result_dir import ResultDir
from ttfr.errors import UsageError
from ttfr.measure.journal import Journal
from ttfr.measure.plan import EXPLAIN, build_plan, unmade_artifacts
from ttfr.measure.resume import Named
from ttfr.measure.spec import RunSpec
from ttfr.pipeline import suite


def reopen_to_explain(root: Path, named: Named) -> tuple[ResultDir, RunSpec]:
    """The finished directory, locked, and its spec with --explain, recorded in its plan.json."""
    result_dir, spec = suite.reopen(root, named)
    try:
        recorded = reader.load_finished(result_dir.root)  # verified, as every reader of a result directory
        if recorded.suite.state != "complete":
            raise UsageError(f"{result_dir.root}: the run is not finished ({recorded.suite.summary.n_pending} cases "
                             f"pending): finish it with `{spec.resume_command(result_dir.root)}` first")  # fmt: skip
        if spec.precision:  # a resume would buy runs for it again: the figures would not stay
            raise UsageError(f"{result_dir.root} ran with --precision, whose runs a resumed directory adds to: explain "
                             "it with `ttfr run --precision ... --explain` instead")  # fmt: skip
        entries = Journal(result_dir.journal).entries()
        explained = [e for e in entries if e.kind == EXPLAIN]
        unmade = unmade_artifacts(entries)  # a precompiled policy with no artifact has no process to explain
        planned = [t for t in build_plan(replace(spec, explain=True)).tasks
                   if t.kind == EXPLAIN and (t.case.id, t.mechanism) not in unmade]  # fmt: skip
        if spec.explain and len(explained) >= len(planned):  # (a crash before they all ran: they run now)
            raise UsageError(f"{result_dir.root}: already explained (its diagnostic processes ran)")
        differ = manifest.differences(recorded.manifest)
        if differ:
            raise UsageError(f"{result_dir.root} was measured on another machine or with other versions than this "
                             f"one's ({'; '.join(differ)}): an explanation made here would explain another cold start "
                             "than its figures; run `ttfr run --explain` here instead")  # fmt: skip
        spec = replace(spec, explain=True)
        suite.record_spec(result_dir, spec)
        return result_dir, spec
    except BaseException:
        result_dir.unlock()
        raise
