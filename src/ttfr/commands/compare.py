"""`ttfr compare A B`: B's result directory judged against A's (paired when both were measured
interleaved in one session; unpaired and marked weak with --cross-session)."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from ttfr.commands.options import gate_args
from ttfr.commands.output import rendering, show_comparison

NAME = "compare"


def add_parser(commands):
    compare = commands.add_parser(NAME, help="compare two result directories (B against A)")
    compare.add_argument("a", type=Path, metavar="A", help="result directory of arm A (the baseline)")
    compare.add_argument("b", type=Path, metavar="B", help="result directory of arm B, judged against A")
    compare.add_argument(
        "--cross-session", action="store_true", help="allow an unpaired, weak comparison of results from separate sessions"
    )
    gate_args(compare)
    compare.add_argument("--out", type=Path, default=Path("ttfr-results"), metavar="DIR",
                         help="parent of the comparison directory")  # fmt: skip
    return compare


def handle(args, console: Console) -> int:
    from ttfr.pipeline import comparison

    with rendering(args.a, args.b):
        out, document = comparison.compare_dirs(args.a, args.b, args.out, cross_session=args.cross_session,
                                                correction=args.correction, fail_on=args.fail_on)  # fmt: skip
    return show_comparison(console, document, out, args.markdown, document.summary.exit_code)
