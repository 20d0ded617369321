"""`ttfr report DIR`: render report.md (and report.html) from a result directory and show it:
tables with component bars on a terminal, the Markdown through a pipe."""

from __future__ import annotations

import sys
from pathlib import Path

from rich.console import Console

from ttfr.artifacts.store import ArtifactError
from ttfr.commands.output import rendering

NAME = "report"


def add_parser(commands):
    report = commands.add_parser(NAME, help="render report.md (and report.html) for a result directory and print it")
    report.add_argument("dir", type=Path, metavar="DIR", help="a result directory")
    report.add_argument("--html", action="store_true", help="also (re)write report.html and print its path")
    return report


def handle(args, console: Console) -> int:
    from ttfr.artifacts.reader import load_finished
    from ttfr.report import markdown

    result = load_finished(args.dir)
    with rendering(args.dir):
        text = markdown.render(result)
    try:
        result.result_dir.write_page("report.md", text)
    except ArtifactError as exc:  # a read-only result directory still gets its report printed
        print(f"ttfr: warning: {exc}; the report is printed only", file=sys.stderr)
    if args.html:
        from ttfr.report import html

        with rendering(args.dir):
            page = result.result_dir.write_page("report.html", html.render(result))
        print(f"wrote {page}", file=sys.stderr)
    if console.is_terminal:  # a person: the tables with inline bars; a pipe gets the Markdown
        from ttfr.report import terminal

        with rendering(args.dir):
            terminal.print_report(console, result)
        return 0
    print(text, end="")
    return 0
