"""`ttfr export --format F DIR DEST`: a result directory's figures in another format (NextStat's
contracts, OpenMetrics / Prometheus text, a tidy CSV)."""

from __future__ import annotations

import sys
from pathlib import Path

from rich.console import Console

from ttfr.artifacts.export.formats import FORMATS
from ttfr.commands.output import rendering
from ttfr.model.policies import COLD_POLICIES

NAME = "export"


def add_parser(commands):
    export = commands.add_parser(NAME, help="write a result directory's figures in another format")
    export.add_argument("--format", required=True, choices=FORMATS,
                        help="nextstat-v1 (a directory of NextStat contract files), openmetrics / prometheus "
                        "(for scrapers and node_exporter's textfile collector), csv (a row per run and metric)")  # fmt: skip
    export.add_argument(
        "--cold-policy", default=COLD_POLICIES[0], choices=COLD_POLICIES, help="nextstat-v1: the cold policy a case carries"
    )
    export.add_argument("dir", type=Path, metavar="DIR", help="a finished result directory")
    export.add_argument(
        "dest", type=Path, help="a directory (nextstat-v1; the others write ttfr.prom / <snapshot>.csv in it) or a file"
    )
    return export


def handle(args, console: Console) -> int:
    from ttfr.artifacts.export import formats, nextstat
    from ttfr.artifacts.reader import load_finished

    with rendering(args.dir):
        written = formats.export(args.format, args.dir, args.dest, args.cold_policy)
    left_out = nextstat.left_out(load_finished(args.dir).cases) if args.format == "nextstat-v1" else {}
    for case, why in left_out.items():
        print(f"ttfr: warning: left out {case}: {why}", file=sys.stderr)
    shown = written[0] if len(written) == 1 else f"{len(written)} files to {args.dest}"
    console.print(f"wrote {shown}", markup=False, highlight=False)
    return 0
