"""What the commands share to show their results: a console that a closed pipe ends quietly,
one line instead of a traceback for artifacts no renderer expects, and a comparison's verdicts
on the terminal (ttfr ab, ttfr compare)."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path

from rich.console import Console

from ttfr.artifacts.store import ArtifactError, copy_file
from ttfr.commands.closed_pipe import discard_stdout
from ttfr.model.comparison import Comparison


class PipeConsole(Console):
    """rich's Console, quiet once its stdout's reader has gone (`ttfr run | head -1`): the command
    goes on to its end (a run's measurements are not thrown away for a closed pipe) and the `ttfr`
    command then exits 141 (commands/entry.py), as git or cat would."""

    def on_broken_pipe(self) -> None:
        # rich's own answer is exit 1, ttfr's "a case failed"; raising would end a run half-written.
        self.quiet = True
        discard_stdout()


@contextlib.contextmanager
def rendering(*dirs):
    """Artifacts that pass every check can still hold values no renderer expects (a hand-made
    file): one line naming the directories, not a traceback."""
    try:
        yield
    except (KeyError, IndexError, TypeError, ValueError, ArithmeticError) as exc:
        where = " and ".join(str(d) for d in dirs)
        raise ArtifactError(f"{where}: its artifacts pass their schemas and hashes but cannot be rendered "
                            f"({type(exc).__name__}: {exc}); if nobody edited them, this is a ttfr bug") from None  # fmt: skip


def show_comparison(console: Console, document: Comparison, root: Path, markdown_path, exit_code: int) -> int:
    """The verdicts on the terminal, comparison.md copied where --markdown asks; the exit code."""
    from ttfr.report import terminal

    terminal.print_comparison(console, document)
    if markdown_path:
        try:
            copy_file(root / "comparison.md", markdown_path)
        except OSError as exc:
            print(f"ttfr: warning: --markdown {markdown_path}: cannot be written ({exc.strerror}); "
                  f"the table is in {root / 'comparison.md'}", file=sys.stderr)  # fmt: skip
    console.print(f"comparison: {root / 'comparison.json'}", markup=False, highlight=False)
    return exit_code


def run_summary(console: Console, progress, spec):
    """What `ttfr run` and `ttfr explain` show once the results are written (before report.html): the live
    display stopped, the warnings, the summary table, and how to finish an interrupted run."""
    from ttfr.report import terminal

    def show(outcome) -> None:
        progress.stop()
        for warning in outcome.warnings:
            print(f"ttfr: warning: {warning}", file=sys.stderr)
        terminal.print_summary(console, outcome.suite, outcome.cases, outcome.result_dir.root)
        if outcome.interrupted:
            console.print(f"interrupted: finish with `{spec.resume_command(outcome.result_dir.root)}`", markup=False,
                          highlight=False)  # fmt: skip

    return show
