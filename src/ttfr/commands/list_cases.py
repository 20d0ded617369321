"""`ttfr list`: backends, workloads and case ids, with what is available here and why not;
the cases of `--case-file` first (only those with `--user-only`); `run`'s selection options
(`--backends`, `--workloads`, `--sizes`, `--dtypes`) narrow it."""

from __future__ import annotations

from rich.console import Console

from ttfr.commands.options import list_arg
from ttfr.errors import UsageError

NAME = "list"


def add_parser(commands):
    listing = commands.add_parser(NAME, help="backends, workloads and case ids, with availability here")
    listing.add_argument("--case-file", action="append", default=[], metavar="FILE",
                         help="your cases in FILE (ttfr.cases.Case objects in a Python file), listed first; "
                         "repeatable")  # fmt: skip
    listing.add_argument("--user-only", action="store_true", help="list only the cases of --case-file, not ttfr's own")
    # the selection `ttfr run` takes, as filters of what is listed
    for name, text in (
        ("--backends", "only these backends (and their cases)"),
        ("--workloads", "only these workloads or families (and their cases)"),
        ("--sizes", "only cases of these sizes"),
        ("--dtypes", "only cases of these dtypes (f32, f64, bf16)"),
    ):
        list_arg(listing, name, text)  # fmt: skip
    return listing


def handle(args, console: Console) -> int:
    if args.user_only and not args.case_file:
        raise UsageError("--user-only lists the cases of your case files: name one with --case-file FILE")
    from ttfr.measure import catalog, user_cases
    from ttfr.measure.profiles import PROFILES
    from ttfr.measure.selection import catalogue_view
    from ttfr.report import terminal

    # importing a case file runs its top-level code: limited as a run's is (the default profile's --timeout)
    cases = user_cases.read(args.case_file, installed=not args.user_only, timeout_s=PROFILES["quick"].timeout_s)
    known = catalog.BUILTIN.with_workloads(c.workload() for c in cases)
    view = catalogue_view(known, args.backends, args.workloads, args.sizes, args.dtypes)
    if args.case_file:  # on top: among the ~400 catalogued case ids below they would be lost
        terminal.print_user_cases(console, known, {c.source for c in cases if c.from_file}, view)
    if not args.user_only:
        if args.case_file:
            console.print("\nThe whole catalogue (yours included):", markup=False, highlight=False)
        terminal.print_catalog(console, known, view)
    return 0
