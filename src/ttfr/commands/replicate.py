"""`ttfr replicate SNAPSHOT`: run a published snapshot's plan again here and say which of its
gates replicated."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

NAME = "replicate"


def add_parser(commands):
    again = commands.add_parser(NAME, help="run a published snapshot's plan again here and say what replicated")
    again.add_argument("snapshot", type=Path, metavar="SNAPSHOT", help="a snapshot directory from `ttfr publish`")
    again.add_argument("--out", type=Path, default=Path("ttfr-results"), help="parent of the replica's result directory")
    # A snapshot is someone else's files: the programs its plan runs run only when named here.
    again.add_argument(
        "--case-file",
        action="append",
        default=[],
        metavar="FILE",
        help="a case file the snapshot's plan names (each must be named to run; repeatable)",
    )
    again.add_argument(
        "--command",
        action="append",
        default=[],
        metavar="CMD",
        help="a command the snapshot's plan names, as it records it (each must be named to run)",
    )
    again.add_argument(
        "--prepare",
        action="append",
        default=[],
        metavar="CMD",
        help="a --prepare step the snapshot's plan names (each must be named to run)",
    )
    return again


def handle(args, console: Console) -> int:
    from ttfr.measure.resume import Named
    from ttfr.pipeline import replication
    from ttfr.report import terminal
    from ttfr.report.progress import ProgressDisplay

    named = Named(case_files=tuple(args.case_file), commands=tuple(args.command), prepare=tuple(args.prepare))

    progress = ProgressDisplay(console)
    try:
        outcome, document = replication.replicate(args.snapshot, args.out, ["ttfr", *args.argv], progress=progress,
                                                  executors=args.executors, named=named)  # fmt: skip
    finally:
        progress.stop()
    if document is None:
        console.print(f"interrupted: the replica is in {outcome.result_dir.root}", markup=False)
        return outcome.exit_code
    terminal.print_replication(console, document)
    console.print(f"report: {outcome.result_dir.root / replication.REPORT}", markup=False, highlight=False)
    return document.summary.exit_code
