"""`ttfr validate DIR`: every artifact against its schema and hash (a published snapshot: its
index too)."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

NAME = "validate"


def add_parser(commands):
    validate = commands.add_parser(NAME, help="check every artifact against its schema and hash")
    validate.add_argument("dir", type=Path, metavar="DIR", help="a result directory or a published snapshot")
    return validate


def handle(args, console: Console) -> int:
    from ttfr.artifacts import snapshot_verify
    from ttfr.artifacts.reader import validate_dir

    # a published snapshot: its index (every file's hash, nothing extra) and the result inside it
    problems = snapshot_verify.verify(args.dir) if snapshot_verify.is_snapshot(args.dir) else validate_dir(args.dir)
    for problem in problems:
        console.print(f"invalid: {problem}", markup=False, highlight=False)
    if not problems:
        console.print(f"ok: every artifact in {args.dir} matches its schema and hash", markup=False, highlight=False)
    return 1 if problems else 0
