"""`ttfr export --format F DIR DEST`: a result directory's figures in another format (NextStat's
contracts, OpenMetrics / Prometheus text, a tidy CSV)."""

from __future__ import annotations

import sys
from pathlib import Path

from rich.console import Console

from ttfr.artifacts.export.formats import EXPORTERS
from ttfr.commands.output import rendering
from ttfr.model.policies import COLD_POLICIES

NAME = "export"


def add_parser(commands):
    export = commands.add_parser(NAME, help="write a result directory's figures in another format")
    export.add_argument("--format", required=True, choices=tuple(EXPORTERS),
                        help="; ".join(f"{e.name}: {e.description}" for e in EXPORTERS.values()))  # fmt: skip
    export.add_argument(
        "--cold-policy",
        default=COLD_POLICIES[0],
        help=f"nextstat-v1: the cold policy a case carries ({', '.join(COLD_POLICIES)}, or a precompiled one the run "
        "measured: precompiled/MECHANISM/SETTING; default: %(default)s)",
    )
    export.add_argument("dir", type=Path, metavar="DIR", help="a finished result directory")
    export.add_argument(
        "dest", type=Path, help="a directory (nextstat-v1; the others write ttfr.prom / <snapshot>.csv in it) or a file"
    )
    return export


def handle(args, console: Console) -> int:
    from ttfr.artifacts.export import formats

    with rendering(args.dir):
        written = formats.export(args.format, args.dir, args.dest, args.cold_policy)
    for case, why in formats.left_out(args.format, args.dir).items():
        print(f"ttfr: warning: left out {case}: {why}", file=sys.stderr)
    shown = written[0] if len(written) == 1 else f"{len(written)} files to {args.dest}"
    console.print(f"wrote {shown}", markup=False, highlight=False)
    return 0
