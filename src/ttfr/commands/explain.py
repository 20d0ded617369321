"""`ttfr explain DIR`: --explain added to a finished result directory (pipeline/explain_after.py):
each case's diagnostic processes, then the results written again with the explanations."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from ttfr.commands.output import run_summary

NAME = "explain"


def add_parser(commands):
    explain = commands.add_parser(NAME, help="add --explain's diagnostic processes to a finished result directory")
    explain.add_argument("dir", type=Path, metavar="DIR", help="a finished result directory measured on this machine")
    explain.add_argument("--python", metavar="PATH", help="the interpreter its workers ran under, if it named one")
    explain.add_argument("--case-file", action="append", default=[], metavar="FILE",
                         help="each case file its plan names (ttfr runs no program because plan.json names it)")  # fmt: skip
    explain.add_argument("--command", action="append", default=[], metavar="CMD", help="each command its plan names")
    explain.add_argument("--prepare", action="append", default=[], metavar="CMD", help="each --prepare its plan names")
    explain.add_argument("--no-html", action="store_true", help="write no report.html")
    return explain


def handle(args, console: Console) -> int:
    from ttfr.measure.resume import Named
    from ttfr.pipeline import explain_after, suite
    from ttfr.report.progress import ProgressDisplay

    named = Named(python=args.python, case_files=tuple(args.case_file), commands=tuple(args.command),
                  prepare=tuple(args.prepare))  # fmt: skip
    result_dir, spec = explain_after.reopen_to_explain(args.dir, named)
    progress = ProgressDisplay(console)
    show = run_summary(console, progress, spec)
    try:
        outcome = suite.execute(result_dir, spec, executors=args.executors, progress=progress, html=not args.no_html,
                                shown=show)  # fmt: skip
    finally:
        progress.stop()
    return outcome.exit_code
