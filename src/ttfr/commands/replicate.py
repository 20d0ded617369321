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
    return again


def handle(args, console: Console) -> int:
    from ttfr.pipeline import replication
    from ttfr.report import terminal

    progress = terminal.ProgressDisplay(console)
    try:
        outcome, document = replication.replicate(args.snapshot, args.out, ["ttfr", *args.argv], progress=progress,
                                                  executors=args.executors)  # fmt: skip
    finally:
        progress.stop()
    if document is None:
        console.print(f"interrupted: the replica is in {outcome.result_dir.root}", markup=False)
        return outcome.exit_code
    terminal.print_replication(console, document)
    console.print(f"report: {outcome.result_dir.root / replication.REPORT}", markup=False, highlight=False)
    return document["summary"]["exit_code"]
