"""What the commands share to parse their options: a parser that answers a mistyped option or
subcommand with a did-you-mean (exit code 2), and the option groups several commands take."""

from __future__ import annotations

import argparse
import difflib
import re
import sys
from pathlib import Path

from ttfr.exit_codes import EXIT_USAGE
from ttfr.measure.profiles import PROFILES
from ttfr.measure.spec import RunRequest
from ttfr.model.policies import POLICIES


class HelpFormatter(argparse.HelpFormatter):
    """Every option's default at the end of its help, as argparse.ArgumentDefaultsHelpFormatter
    does, but for the defaults that say nothing ("default: None", "False", "[]": the option is
    off, or its help says what happens without it) and those the help already states."""

    def _get_help_string(self, action):
        text = action.help or ""
        default = action.default
        if default is None or default is False or default == [] or default is argparse.SUPPRESS or "default" in text:
            return text
        return f"{text} (default: %(default)s)"


class Parser(argparse.ArgumentParser):
    """argparse with a did-you-mean for unknown options and subcommands (exit code 2), and
    the defaults in --help."""

    owners: dict[str, set[str]] = {}  # an option -> the commands (parsers' prog) that take it

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", HelpFormatter)
        # No prefixes: `--exec slurm` must not pass for `--executor` (a Slurm shard re-runs the
        # command line, and a prefix it does not know would be a different option there).
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message):
        hint = ""
        unknown = re.search(r"unrecognized arguments: (.+)", message)
        choice = re.search(r"invalid choice: '([^']*)' \(choose from (.+)\)", message)
        if unknown:
            hint = next(filter(None, map(self._option_hint, unknown.group(1).split())), "")
        elif choice:
            options = re.findall(r"'([^']*)'", choice.group(2))
            close = difflib.get_close_matches(choice.group(1), options, n=1)
            hint = f" Did you mean {close[0]!r}?" if close else ""
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}.{hint}\n")

    def parse_known_args(self, args=None, namespace=None):
        self.given = list(sys.argv[1:] if args is None else args)  # which command an error is about
        return super().parse_known_args(args, namespace)

    def _command_parser(self) -> argparse.ArgumentParser:
        """The parser of the command the line names (the top level reports its subcommand's unknown options)."""
        commands = next((a for a in self._actions if isinstance(a, argparse._SubParsersAction)), None)
        word = next((w for w in getattr(self, "given", ()) if commands and w in commands.choices), None)
        return commands.choices[word] if word else self

    def _option_hint(self, token: str) -> str:
        """This command's option closest to `token` (never `token` itself), or the commands that take it."""
        if not token.startswith("-"):
            return ""
        name, parser = token.split("=")[0], self._command_parser()
        own = sorted(o for o in parser._option_string_actions if o != name)
        close = difflib.get_close_matches(name, own, n=1)
        if close:
            return f" Did you mean {close[0]}?"
        elsewhere = sorted(Parser.owners.get(name, set()) - {parser.prog})
        return f" {name} is an option of {', '.join(f'`{p}`' for p in elsewhere)}." if elsewhere else ""

    def add_argument(self, *names, **kwargs):
        for option in (n for n in names if n.startswith("-")):
            Parser.owners.setdefault(option, set()).add(self.prog)
        return super().add_argument(*names, **kwargs)


def by_profile(attribute: str, unit: str = "") -> str:
    """A default that --profile sets, from the profiles themselves: "default by --profile: quick
    300 s, standard 600 s, publish 900 s"."""
    values = ", ".join(f"{p.name} {getattr(p, attribute):g}{unit}" for p in PROFILES.values())
    return f"default by --profile: {values}"


def list_arg(parser, name, help_text):
    parser.add_argument(name, action="append", default=[], metavar="A,B", help=help_text)


def gate_args(parser) -> None:
    """How B is judged against A, and where the verdicts also go: `ttfr ab` and `ttfr compare`."""
    parser.add_argument("--correction", default="holm", choices=("holm", "none"),
                        help="holm: Holm at 0.05 across the suite; none: alpha 0.01 per comparison")  # fmt: skip
    parser.add_argument("--fail-on", default="regression", choices=("regression", "inconclusive"),
                        help="what fails the gate (exit 3): a regression, or also an inconclusive comparison")  # fmt: skip
    parser.add_argument("--markdown", type=Path, metavar="FILE",
                        help="also write the verdict table (comparison.md, for a pull-request comment) here")  # fmt: skip


def command_args(parser, arms: bool = False) -> None:
    parser.add_argument("--command", action="append", default=[], metavar="CMD",
                        help="measure a program's time to first result, e.g. \"python train.py --epochs 1\" (split like a "
                        "shell would, run without one); repeatable. Policies: cold-cache, warm-cache")  # fmt: skip
    if arms:
        parser.add_argument("--a-command", metavar="CMD", help="arm A's program (with --b-command: two commands, one case)")
        parser.add_argument("--b-command", metavar="CMD", help="arm B's program")
    parser.add_argument("--command-name", action="append", default=[], metavar="NAME",
                        help="the case name of each --command, in order (default: its script's name)")  # fmt: skip
    parser.add_argument(
        "--first-result",
        metavar="REGEX",
        help="a command's first result is its first output line matching REGEX (default: its exit)",
    )
    parser.add_argument(
        "--first-result-mark", action="store_true", help="a command's first result is its call of ttfr_mark.first_result()"
    )
    parser.add_argument("--stop-at-first-result", action="store_true",
                        help="end each run of a command at its first result (a server, a long training)")  # fmt: skip
    parser.add_argument(
        "--prepare",
        action="append",
        default=[],
        metavar="CMD",
        help="run before every run of a command, untimed (once for all, or once per --command)",
    )


def command_request(args) -> dict:
    """The RunRequest fields of the command options (command_args)."""
    return {
        "commands": args.command,
        "command_names": args.command_name,
        "first_result": args.first_result,
        "stop_at_first_result": args.stop_at_first_result,
        "first_result_mark": args.first_result_mark,
        "prepare": args.prepare,
    }


def selection_args(parser) -> None:
    """Which cases: the selection `ttfr run` and `ttfr ab` share."""
    list_arg(parser, "--cases", "case ids, e.g. jax_jit_cpu_matmul_512_f32 (see `ttfr list`)")
    list_arg(parser, "--backends", "backends to include (default: all but `python`)")
    list_arg(parser, "--workloads", "workloads to include (default: all non-diagnostic)")
    list_arg(parser, "--sizes", "sizes (default: the profile's)")
    list_arg(parser, "--dtypes", "f32, f64, bf16 (bf16: the conversion routes only; default: the profile's)")
    list_arg(
        parser,
        "--cache-policy",
        f"any of {', '.join(POLICIES)} (the default: all three); precompiled artifacts "
        "(opt-in): precompiled[/MECHANISM[/cold-cache|warm-cache]] (`ttfr list` names them); all: every one",
    )
    list_arg(
        parser,
        "--concurrency",
        "also start N fresh processes at once per compiling case, sharing one cache "
        "(cold-shared, warm-shared) or not (cold-private), for each N given, e.g. 1,2,4,8",
    )
    list_arg(parser, "--workspace-preset", "HistFactory presets: simple, complex8p, mid72p, thu184p, ladder500/1000/2000")
    parser.add_argument("--workspace", metavar="FILE", help="a pyhf JSON workspace for the HistFactory workloads")
    parser.add_argument("--case-file", action="append", default=[], metavar="FILE",
                        help="your own cases (ttfr.cases.Case objects in a Python file); repeatable. "
                        "Without --workloads/--cases, only these cases run")  # fmt: skip


def selection_request(args) -> dict:
    """The RunRequest fields of selection_args."""
    return {"cases": args.cases, "backends": args.backends, "workloads": args.workloads, "sizes": args.sizes,
            "dtypes": args.dtypes, "policies": args.cache_policy, "workspace": args.workspace,
            "workspace_presets": args.workspace_preset, "case_files": args.case_file,
            "concurrency": args.concurrency}  # fmt: skip


__all__ = ["Parser", "RunRequest", "by_profile", "command_args", "command_request", "gate_args", "list_arg",
           "selection_args", "selection_request"]  # fmt: skip
