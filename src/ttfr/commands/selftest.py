"""`ttfr selftest`: this machine's false-alarm rate and detection power (A/A comparisons and
injected slowdowns), and the noise floor `ttfr ab` uses; then ttfr measured on itself (its cold
and warm overhead against the bare interpreter, gated; hyperfine's agreement; the fast tier)."""

from __future__ import annotations

import math

from rich.console import Console

from ttfr.errors import UsageError
from ttfr.exit_codes import EXIT_CASE_FAILED, EXIT_OK, EXIT_REGRESSION

NAME = "selftest"


def add_parser(commands):
    test_self = commands.add_parser(NAME, help="measure this machine's false-alarm rate and detection power, and "
                                               "ttfr's own overhead")  # fmt: skip
    test_self.add_argument("--aa", type=int, default=40, metavar="N", help="A/A comparisons per regime")
    test_self.add_argument("--per-level", type=int, default=20, metavar="N", help="comparisons per injected slowdown")
    test_self.add_argument("--rounds", type=int, default=20, metavar="N",
                           help="paired rounds of each comparison, as `ttfr ab --rounds` runs them")  # fmt: skip
    test_self.add_argument("--no-store", action="store_true", help="do not keep the noise floor for `ttfr ab`")
    test_self.add_argument("--harness", action="store_true",
                           help="only ttfr's own figures: its overhead against the bare interpreter (exit 3 when "
                                "the gate fails, 1 when it could not measure), hyperfine's agreement, the fast test "
                                "tier")  # fmt: skip
    test_self.add_argument(
        "--limit",
        type=float,
        default=None,
        metavar="RATIO",
        help="the overhead gate: fail when a ratio's whole 95%% interval lies above this (default 1.5)",
    )
    test_self.add_argument("--harness-rounds", type=int, default=20, metavar="N", help="paired rounds of each overhead figure")
    test_self.add_argument("--no-hyperfine", action="store_true", help="skip the agreement with hyperfine")
    test_self.add_argument("--fast-tier", action="store_true",
                           help="also time the source checkout's `make test-fast` (~1 min)")  # fmt: skip
    return test_self


def handle(args, console: Console) -> int:
    from ttfr.analyse.overhead import MIN_ROUNDS
    from ttfr.pipeline import harness_check, selftest
    from ttfr.report import terminal

    limit = harness_check.DEFAULT_LIMIT if args.limit is None else args.limit
    if not 1.0 < limit < math.inf:
        raise UsageError(f"--limit {args.limit:g}: the gate's limit is a finite ratio above 1 (e.g. 1.5)")
    if args.harness_rounds < MIN_ROUNDS:
        raise UsageError(f"--harness-rounds {args.harness_rounds}: at least {MIN_ROUNDS} paired rounds (the fewest with "
                         "a 95% interval)")  # fmt: skip
    if args.rounds < 2 or args.aa < 1 or args.per_level < 1:
        raise UsageError("--rounds is at least 2 paired rounds; --aa and --per-level are counts of comparisons: at least 1")
    say = lambda message: console.print(message, markup=False, highlight=False)  # noqa: E731
    if not args.harness:
        result = selftest.run(args.aa, args.per_level, args.rounds, progress=say)
        terminal.print_selftest(console, result)
        if not args.no_store:
            console.print(f"stored: {selftest.store(result)} (used by `ttfr ab` for delta)", markup=False, highlight=False)
    check = harness_check.run(args.harness_rounds, limit, executors=args.executors, hyperfine=not args.no_hyperfine,
                              fast_tier=args.fast_tier, progress=say)  # fmt: skip
    terminal.print_harness(console, check)
    for failed in check.failed:
        console.print(f"ttfr: overhead gate: {failed.sentence()}", style="bold red", markup=False, highlight=False)
    if not args.harness:  # the machine's self-test: the overhead is shown, the gate is --harness's
        return EXIT_OK
    return {"pass": EXIT_OK, "regression": EXIT_REGRESSION, "unmeasured": EXIT_CASE_FAILED}[check.gate]
