"""`ttfr merge SHARD_DIR...`: one result directory from the --shard K/N runs of one plan."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from ttfr.commands.output import rendering

NAME = "merge"


def add_parser(commands):
    merging = commands.add_parser(NAME, help="one result directory from the --shard K/N runs of one plan")
    merging.add_argument("shards", type=Path, nargs="+", metavar="SHARD_DIR", help="the result directory of every shard")
    merging.add_argument("--out", type=Path, default=Path("ttfr-results"), help="parent of the merged directory")
    return merging


def handle(args, console: Console) -> int:
    from ttfr.pipeline import shards

    with rendering(*args.shards):
        root = shards.merge(args.shards, args.out, ["ttfr", *args.argv])
    console.print(f"merged {len(args.shards)} shards: {root}", markup=False, highlight=False)
    return 0
