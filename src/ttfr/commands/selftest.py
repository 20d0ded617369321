"""`ttfr selftest`: this machine's false-alarm rate and detection power (A/A comparisons and
injected slowdowns), and the noise floor `ttfr ab` uses."""

from __future__ import annotations

from rich.console import Console

NAME = "selftest"


def add_parser(commands):
    test_self = commands.add_parser(NAME, help="measure this machine's false-alarm rate and detection power")
    test_self.add_argument("--aa", type=int, default=40, help="A/A comparisons per regime")
    test_self.add_argument("--per-level", type=int, default=20, help="comparisons per injected slowdown")
    test_self.add_argument("--rounds", type=int, default=20)
    test_self.add_argument("--no-store", action="store_true", help="do not keep the noise floor for `ttfr ab`")
    return test_self


def handle(args, console: Console) -> int:
    from ttfr.pipeline import selftest
    from ttfr.report import terminal

    result = selftest.run(args.aa, args.per_level, args.rounds, progress=lambda m: console.print(m, markup=False))
    terminal.print_selftest(console, result)
    if not args.no_store:
        console.print(f"stored: {selftest.store(result)} (used by `ttfr ab` for delta)", markup=False, highlight=False)
    return 0
