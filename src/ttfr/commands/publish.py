"""`ttfr publish DIR`: an immutable, content-addressed snapshot of a finished result directory."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from ttfr.commands.output import rendering

NAME = "publish"


def add_parser(commands):
    publish = commands.add_parser(NAME, help="an immutable, content-addressed snapshot of a finished result directory")
    publish.add_argument("--out", type=Path, default=Path("ttfr-snapshots"), help="parent of the snapshot")
    publish.add_argument("dir", type=Path, metavar="DIR", help="a finished result directory")
    publish.add_argument("--registry", type=Path, metavar="FILE",
                         help="also add (or update) the snapshot's entry in this NextStat snapshot registry "
                         "(nextstat.snapshot_registry.v1; created if missing)")  # fmt: skip
    return publish


def handle(args, console: Console) -> int:
    from ttfr.artifacts import snapshot
    from ttfr.artifacts import snapshot_verify
    from ttfr.artifacts import snapshot_registry

    if args.registry:
        snapshot_registry.read_registry(args.registry)  # a registry that cannot take the entry: said before publishing
    with rendering(args.dir):
        path, new = snapshot.publish(args.dir, args.out)
    verdict = snapshot_verify.read_validation(path)
    console.print(f"{'published' if new else 'already published'}: {path} (gates: {verdict})", markup=False, highlight=False)
    if args.registry:
        entry = snapshot_registry.register(path, args.registry)
        console.print(f"registered {entry['snapshot_id']} in {args.registry}", markup=False, highlight=False)
    return 0
