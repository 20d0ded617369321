"""`ttfr history PATH...`: results in series (by date or a package's version, never mixing machines),
the steps in each and what changed at them; exit 3 when a newest segment is a step up beyond
--fail-above."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from ttfr.errors import UsageError

NAME = "history"
# The figures a series can follow (artifacts/history_sources.py holds them; kept here so --help imports nothing).
FIGURES = ("ttfr_s", "interpreter_s", "import_s", "device_init_s", "user_import_s", "setup_s", "artifact_load_s",
           "first_call_s", "call_s")  # fmt: skip


def add_parser(commands):
    history = commands.add_parser(NAME, help="series of results over time or a package's versions, and their steps")
    history.add_argument("paths", nargs="*", type=Path, metavar="PATH",
                         help="result directories or snapshots (ttfr's, or NextStat's of ML results)")  # fmt: skip
    history.add_argument("--registry", type=Path, metavar="FILE",
                         help="a NextStat snapshot registry (nextstat.snapshot_registry.v1): its snapshots too")  # fmt: skip
    history.add_argument("--root", type=Path, metavar="DIR",
                         help="where the registry's snapshots are (default: the registry's folder)")  # fmt: skip
    history.add_argument("--by", metavar="PACKAGE",
                         help="order by this package's version (as each manifest records it) instead of by date")  # fmt: skip
    history.add_argument("--cases", metavar="ID,...", help="only these cases (default: every case measured)")
    history.add_argument("--figure", action="append", default=[], metavar="NAME",
                         help=f"only these figures, repeatable or comma-separated ({', '.join(FIGURES)}; "
                              "default: all)")  # fmt: skip
    history.add_argument("--fail-above", metavar="PCT",
                         help="exit 3 when a series' newest segment (TTFR or the warm call) is a step up whose whole "
                              "95%% interval is above this, e.g. 10 or 10%%")  # fmt: skip
    history.add_argument("--out", type=Path, default=Path("ttfr-results"), metavar="DIR",
                         help="parent of the history directory (history.json, .md, .html, .csv)")  # fmt: skip
    return history


def percent(value: str | None) -> float | None:
    """--fail-above's value as a fraction (`10`, `10%`, `2.5` -> 0.10, 0.10, 0.025)."""
    if value is None:
        return None
    try:
        number = float(value.strip().removesuffix("%"))
    except ValueError:
        number = -1.0
    if not number >= 0 or number == float("inf"):
        raise UsageError(f"--fail-above {value!r}: give a percentage at or above 0, e.g. 10 or 10%")
    return number / 100


def figures(values: list[str]) -> list[str]:
    chosen = [v.strip() for item in values for v in item.split(",") if v.strip()]
    unknown = [v for v in chosen if v not in FIGURES]
    if unknown:
        raise UsageError(f"--figure {unknown[0]!r}: not a figure; choose from {', '.join(FIGURES)}")
    return chosen or list(FIGURES)


def handle(args, console: Console) -> int:
    from ttfr.pipeline import history
    from ttfr.report import terminal

    fail_above = percent(args.fail_above)
    chosen = figures(args.figure)
    cases = [c.strip() for c in args.cases.split(",") if c.strip()] if args.cases else None
    if args.root and not args.registry:
        raise UsageError("--root says where a registry's snapshots are: give --registry FILE too")
    results, left_out = history.read_sources(args.paths, args.registry, args.root)
    if not results:
        reasons = "; ".join(f"{item.path}: {item.reason}" for item in left_out[:3])
        raise UsageError(f"no result could be read ({reasons})")
    document = history.build(results, left_out, by=args.by, figures=chosen, cases=cases, fail_above=fail_above)
    if cases and not document.series:
        raise UsageError(f"--cases {args.cases}: no such case in these results; they hold "
                         f"{', '.join(sorted({k[0] for r in results for k in r.figures})) or 'none'}")  # fmt: skip
    out = history.write(document, args.out)
    terminal.show_history(console, document, out)
    return document.gate.exit_code
