"""Command line: assemble the commands' parsers, parse, call the command, map errors to exit codes.

Each command is a module of its own (ttfr/commands/<command>.py: `add_parser`, `handle`) and
imports its stack inside `handle`: `--help`, `list` and a mistyped option do not pay for SciPy
(~0.7 s). Exit codes (ttfr/exit_codes.py): 0 success (warn cases included), 1 a case failed /
artifacts invalid, 2 bad input (before anything runs), 3 a comparison's gate failed, 130
interrupted (finished cases are written).
"""

from __future__ import annotations

import signal
import sys

from ttfr import __version__
from ttfr.artifacts.store import ArtifactError, StorageError
from ttfr.commands import (ab, compare, env, explain, export, history, list_cases, merge, publish, replicate, report, run,
                           selftest, validate)  # fmt: skip
from ttfr.commands.options import Parser
from ttfr.commands.output import PipeConsole
from ttfr.errors import MeasurementFailed, UsageError
from ttfr.exit_codes import EXIT_CASE_FAILED, EXIT_INTERRUPTED, EXIT_USAGE
from ttfr.measure.journal import JournalError

COMMANDS = (run, ab, compare, history, explain, selftest, list_cases, env, report, validate, merge, replicate, publish, export)


def build_parser() -> Parser:
    parser = Parser(prog="ttfr", description="Time to first result: cold-start and warm-throughput benchmarks.")
    parser.add_argument("--version", action="version", version=f"ttfr {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=Parser, metavar="COMMAND")
    for command in COMMANDS:  # each command's own parser, and the function that runs it
        command.add_parser(commands).set_defaults(handler=command.handle)
    return parser


def main(argv: list[str] | None = None, executors=None) -> int:
    """`executors`: what runs the measured processes (ttfr.pipeline.executors; None: real
    processes). A seam for tests: the command line cannot choose it."""
    args = build_parser().parse_args(argv)
    try:  # SIGTERM ends any command as Ctrl-C does (a publish or a Slurm wait cleans up after itself)
        previous = signal.signal(signal.SIGTERM, _terminate)
    except ValueError:  # not the main thread: signals are not ours to handle
        return _main(args, argv, executors)
    try:
        return _main(args, argv, executors)
    finally:
        signal.signal(signal.SIGTERM, previous)


def _terminate(_signum, _frame):
    raise KeyboardInterrupt


def _main(args, argv, executors) -> int:
    args.argv = list(sys.argv[1:] if argv is None else argv)  # the command line, for what re-runs it (Slurm shards)
    args.executors = executors
    # Piped output (CI logs) would otherwise be wrapped at 80 columns, splitting case ids.
    console = PipeConsole() if sys.stdout.isatty() else PipeConsole(width=200)
    try:
        return args.handler(args, console)
    except (UsageError, MeasurementFailed) as exc:
        print(f"ttfr: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except ArtifactError as exc:
        print(f"ttfr: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except StorageError as exc:
        print(f"ttfr: error: {exc}", file=sys.stderr)
        return EXIT_CASE_FAILED
    except JournalError as exc:  # a journal.jsonl that is a symlink, FIFO or device: refused, not read
        print(f"ttfr: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("ttfr: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # stdout's reader is gone (`ttfr list | head -1`): not an error; see commands/entry.py
        raise
    except OSError as exc:  # the last resort for a file error no command anticipated: one line, no traceback
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"ttfr: error: {where}{exc.strerror or exc}", file=sys.stderr)
        return EXIT_CASE_FAILED


if __name__ == "__main__":
    sys.exit(main())
