"""`ttfr list`: backends, workloads and case ids, with what is available here and why not;
the cases of `--case-file` first (only those with `--user-only`)."""

from __future__ import annotations

from rich.console import Console

from ttfr.errors import UsageError

NAME = "list"


def add_parser(commands):
    listing = commands.add_parser(NAME, help="backends, workloads and case ids, with availability here")
    listing.add_argument("--case-file", action="append", default=[], metavar="FILE",
                         help="your cases in FILE (ttfr.cases.Case objects in a Python file), listed first; "
                         "repeatable")  # fmt: skip
    listing.add_argument("--user-only", action="store_true", help="list only the cases of --case-file, not ttfr's own")
    return listing


def handle(args, console: Console) -> int:
    if args.user_only and not args.case_file:
        raise UsageError("--user-only lists the cases of your case files: name one with --case-file FILE")
    from ttfr.measure import catalog, user_cases
    from ttfr.measure.spec import PROFILES
    from ttfr.report import terminal

    # importing a case file runs its top-level code: limited as a run's is (the default profile's --timeout)
    cases = user_cases.read(args.case_file, installed=not args.user_only, timeout_s=PROFILES["quick"].timeout_s)
    known = catalog.BUILTIN.with_workloads(c.workload() for c in cases)
    if args.case_file:  # on top: among the ~400 catalogued case ids below they would be lost
        terminal.print_user_cases(console, known, {c.source for c in cases if c.from_file})
    if not args.user_only:
        if args.case_file:
            console.print("\nThe whole catalogue (yours included):", markup=False, highlight=False)
        terminal.print_catalog(console, known)
    return 0
