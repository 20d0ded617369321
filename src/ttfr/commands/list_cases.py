"""`ttfr list`: backends, workloads and case ids, with what is available here and why not."""

from __future__ import annotations

from rich.console import Console

NAME = "list"


def add_parser(commands):
    listing = commands.add_parser(NAME, help="backends, workloads and case ids, with availability here")
    listing.add_argument("--case-file", action="append", default=[], metavar="FILE", help="also your cases in FILE")
    return listing


def handle(args, console: Console) -> int:
    from ttfr.measure import catalog, user_cases
    from ttfr.report import terminal

    known = catalog.BUILTIN.with_workloads(c.workload() for c in user_cases.read(args.case_file))
    terminal.print_catalog(console, known)
    return 0
