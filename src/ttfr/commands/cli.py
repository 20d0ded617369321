"""Command line: parse arguments, call the library, map errors to exit codes.

Exit codes (ttfr/exit_codes.py): 0 success (warn cases included), 1 a case failed /
artifacts invalid, 2 bad input (before anything runs), 3 a comparison's gate failed,
130 interrupted (finished cases are written).
Each handler imports its command's stack itself: `--help`, `list` and a mistyped option
do not pay for SciPy (~0.7 s).
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import json
import re
import shlex
import signal
import sys
from dataclasses import replace
from pathlib import Path

from rich.console import Console

from ttfr import __version__
from ttfr.artifacts.export.formats import FORMATS as EXPORT_FORMATS
from ttfr.artifacts.store import ArtifactError, StorageError
from ttfr.errors import UsageError
from ttfr.exit_codes import EXIT_CASE_FAILED, EXIT_INTERRUPTED, EXIT_USAGE
from ttfr.measure.journal import JournalError
from ttfr.model.policies import COLD_POLICIES, POLICIES
from ttfr.measure.spec import PROFILES, build_spec, check_ab_limits


class _Parser(argparse.ArgumentParser):
    """argparse with a did-you-mean for unknown options and subcommands (exit code 2)."""

    known_options: set[str] = set()

    def __init__(self, *args, **kwargs):
        # No prefixes: `--exec slurm` must not pass for `--executor` (a Slurm shard re-runs the
        # command line, and a prefix it does not know would be a different option there).
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message):
        hint = ""
        unknown = re.search(r"unrecognized arguments: (.+)", message)
        choice = re.search(r"invalid choice: '([^']*)' \(choose from (.+)\)", message)
        if unknown:
            for token in unknown.group(1).split():
                close = difflib.get_close_matches(token.split("=")[0], sorted(self.known_options), n=1)
                if token.startswith("-") and close:
                    hint = f" Did you mean {close[0]}?"
                    break
        elif choice:
            options = re.findall(r"'([^']*)'", choice.group(2))
            close = difflib.get_close_matches(choice.group(1), options, n=1)
            hint = f" Did you mean {close[0]!r}?" if close else ""
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}.{hint}\n")

    def add_argument(self, *names, **kwargs):
        _Parser.known_options.update(n for n in names if n.startswith("-"))
        return super().add_argument(*names, **kwargs)


def _list_arg(parser, name, help_text):
    parser.add_argument(name, action="append", default=[], metavar="A,B", help=help_text)


def _command_args(parser, arms: bool = False) -> None:
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


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="ttfr", description="Time to first result: cold-start and warm-throughput benchmarks.")
    parser.add_argument("--version", action="version", version=f"ttfr {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser, metavar="COMMAND")

    run = commands.add_parser("run", help="measure a suite (default: the quick CPU suite)")
    _list_arg(run, "--cases", "case ids, e.g. jax_jit_cpu_matmul_512_f32 (see `ttfr list`)")
    _list_arg(run, "--backends", "backends to include (default: all but `python`)")
    _list_arg(run, "--workloads", "workloads to include (default: all non-diagnostic)")
    _list_arg(run, "--sizes", "sizes (default: the profile's)")
    _list_arg(run, "--dtypes", "f32, f64 (default: the profile's)")
    _list_arg(run, "--cache-policy", f"any of {', '.join(POLICIES)}, or all (default: all)")
    _list_arg(run, "--workspace-preset", "HistFactory presets: simple, complex8p, thu184p, ladder500/1000/2000")
    run.add_argument("--workspace", metavar="FILE", help="a pyhf JSON workspace for the HistFactory workloads")
    run.add_argument("--signal", metavar="CHANNEL/SAMPLE", help="that workspace's signal sample (default: the POI's)")
    run.add_argument("--case-file", action="append", default=[], metavar="FILE",
                     help="your own cases (ttfr.cases.Case objects in a Python file); repeatable. "
                     "Without --workloads/--cases, only these cases run")  # fmt: skip
    _command_args(run)
    run.add_argument("--profile", default="quick", choices=sorted(PROFILES), help="run counts and default cases (default: quick)")
    run.add_argument("--cold-runs", type=int, help="fresh processes per cold policy")
    run.add_argument("--warm-procs", type=int, help="fresh processes in the warm regime")
    run.add_argument("--warm-samples", type=int, help="samples per warm process")
    run.add_argument("--timeout", type=float, metavar="S", help="per-run timeout in seconds")
    run.add_argument("--deterministic", action="store_true", help="fixed seed and order; byte-stable JSON but for timings")
    run.add_argument("--seed", type=int, help="input-data and round-order seed")
    run.add_argument("--threads", type=int, help="set OMP/MKL/OpenBLAS thread counts in every worker")
    run.add_argument("--shard", metavar="K/N", help="run only the K-th of N interleaved slices of the cases")
    run.add_argument("--python", metavar="PATH", help="interpreter the workers run under (default: this one)")
    run.add_argument(
        "--precision",
        type=float,
        metavar="REL",
        help="after the profile's runs, add runs where they buy the most precision per second until "
        "every 95%% CI half-width is <= REL of its median (e.g. 0.05)",
    )
    run.add_argument("--budget", metavar="DURATION", help="with --precision: wall-time limit of the run, e.g. 600, 10m, 1h")
    run.add_argument("--out", type=Path, default=Path("ttfr-results"), help="parent of the result directory")
    run.add_argument("--resume", type=Path, metavar="DIR", help="finish an interrupted result directory")
    run.add_argument(
        "--executor",
        choices=("local", "slurm"),
        default="local",
        help="slurm: run the plan as a Slurm job array of --shards N (one node each) and merge them",
    )
    run.add_argument("--shards", type=int, metavar="N", help="with --executor slurm: how many shards")
    run.add_argument("--slurm-partition", metavar="P")
    run.add_argument("--slurm-time", metavar="T", help="Slurm's --time of each shard, e.g. 2:00:00")
    run.add_argument("--slurm-account", metavar="A")
    run.set_defaults(handler=_run)

    compare_ab = commands.add_parser("ab", help="measure the same cases under two arms, interleaved, and judge B vs A")
    compare_ab.add_argument("--a", metavar="PYTHON|VENV", help="arm A's interpreter or virtualenv (default: this one)")
    compare_ab.add_argument("--b", metavar="PYTHON|VENV", help="arm B's interpreter or virtualenv (default: this one)")
    compare_ab.add_argument("--a-env", action="append", default=[], metavar="KEY=VALUE", help="environment of arm A")
    compare_ab.add_argument("--b-env", action="append", default=[], metavar="KEY=VALUE", help="environment of arm B")
    for name in ("--cases", "--backends", "--workloads", "--sizes", "--dtypes", "--cache-policy", "--workspace-preset"):
        _list_arg(compare_ab, name, f"as for `ttfr run {name}`")
    compare_ab.add_argument("--workspace", metavar="FILE")
    compare_ab.add_argument("--case-file", action="append", default=[], metavar="FILE", help="your cases (see `run`)")
    _command_args(compare_ab, arms=True)
    compare_ab.add_argument("--profile", default="quick", choices=sorted(PROFILES))
    compare_ab.add_argument("--rounds", type=int, default=20, help="paired rounds (the maximum with --precision)")
    compare_ab.add_argument("--min-rounds", type=int, default=10)
    compare_ab.add_argument("--precision", type=float, help="stop once every CI half-width is <= this (e.g. 0.05)")
    compare_ab.add_argument("--budget", metavar="DURATION", help="stop adding rounds after this long, e.g. 600, 10m")
    compare_ab.add_argument(
        "--correction",
        default="holm",
        choices=("holm", "none"),
        help="Holm at 0.05 across the suite (default) or alpha 0.01 per comparison",
    )
    compare_ab.add_argument("--fail-on", default="regression", choices=("regression", "inconclusive"))
    compare_ab.add_argument("--markdown", type=Path, metavar="FILE", help="also write the verdict table here")
    compare_ab.add_argument("--deterministic", action="store_true")
    compare_ab.add_argument("--seed", type=int)
    compare_ab.add_argument("--timeout", type=float, metavar="S")
    compare_ab.add_argument("--out", type=Path, default=Path("ttfr-results"))
    compare_ab.set_defaults(handler=_ab)

    compare_dirs = commands.add_parser("compare", help="compare two result directories (B against A)")
    compare_dirs.add_argument("a", type=Path)
    compare_dirs.add_argument("b", type=Path)
    compare_dirs.add_argument(
        "--cross-session", action="store_true", help="allow an unpaired, weak comparison of results from separate sessions"
    )
    compare_dirs.add_argument("--correction", default="holm", choices=("holm", "none"))
    compare_dirs.add_argument("--fail-on", default="regression", choices=("regression", "inconclusive"))
    compare_dirs.add_argument("--markdown", type=Path, metavar="FILE")
    compare_dirs.add_argument("--out", type=Path, default=Path("ttfr-results"), help="parent of the comparison directory")
    compare_dirs.set_defaults(handler=_compare)

    test_self = commands.add_parser("selftest", help="measure this machine's false-alarm rate and detection power")
    test_self.add_argument("--aa", type=int, default=40, help="A/A comparisons per regime")
    test_self.add_argument("--per-level", type=int, default=20, help="comparisons per injected slowdown")
    test_self.add_argument("--rounds", type=int, default=20)
    test_self.add_argument("--no-store", action="store_true", help="do not keep the noise floor for `ttfr ab`")
    test_self.set_defaults(handler=_selftest)

    listing = commands.add_parser("list", help="backends, workloads and case ids, with availability here")
    listing.add_argument("--case-file", action="append", default=[], metavar="FILE", help="also your cases in FILE")
    listing.set_defaults(handler=_list)

    env = commands.add_parser("env", help="print the environment manifest a run would record")
    env.set_defaults(handler=_env)

    report = commands.add_parser("report", help="render report.md (and report.html) for a result directory and print it")
    report.add_argument("dir", type=Path)
    report.add_argument("--html", action="store_true", help="also (re)write report.html and print its path")
    report.set_defaults(handler=_report)

    validate = commands.add_parser("validate", help="check every artifact against its schema and hash")
    validate.add_argument("dir", type=Path)
    validate.set_defaults(handler=_validate)

    merging = commands.add_parser("merge", help="one result directory from the --shard K/N runs of one plan")
    merging.add_argument("shards", type=Path, nargs="+", metavar="SHARD_DIR")
    merging.add_argument("--out", type=Path, default=Path("ttfr-results"), help="parent of the merged directory")
    merging.set_defaults(handler=_merge)

    again = commands.add_parser("replicate", help="run a published snapshot's plan again here and say what replicated")
    again.add_argument("snapshot", type=Path)
    again.add_argument("--out", type=Path, default=Path("ttfr-results"), help="parent of the replica's result directory")
    again.set_defaults(handler=_replicate)

    publish = commands.add_parser("publish", help="an immutable, content-addressed snapshot of a finished result directory")
    publish.add_argument("dir", type=Path)
    publish.add_argument("--out", type=Path, default=Path("ttfr-snapshots"), help="parent of the snapshot")
    publish.set_defaults(handler=_publish)

    export = commands.add_parser("export", help="write a result directory's figures in another format")
    export.add_argument("--format", required=True, choices=EXPORT_FORMATS,
                        help="nextstat-v1 (a directory of NextStat contract files), openmetrics / prometheus "
                        "(for scrapers and node_exporter's textfile collector), csv (a row per run and metric)")  # fmt: skip
    export.add_argument(
        "--cold-policy", default=COLD_POLICIES[0], choices=COLD_POLICIES, help="nextstat-v1: the cold policy a case carries"
    )
    export.add_argument("dir", type=Path)
    export.add_argument(
        "dest", type=Path, help="a directory (nextstat-v1; the others write ttfr.prom / <snapshot>.csv in it) or a file"
    )
    export.set_defaults(handler=_export)
    return parser


_RUN_SELECTION = ("cases", "backends", "workloads", "sizes", "dtypes", "cache_policy", "cold_runs", "warm_procs",
                  "warm_samples", "timeout", "seed", "threads", "shard", "python", "workspace", "workspace_preset",
                  "signal", "precision", "budget", "case_file", "command", "command_name", "first_result",
                  "first_result_mark", "prepare", "stop_at_first_result", "shards", "slurm_partition", "slurm_time",
                  "slurm_account")  # fmt: skip


def _run(args, console: Console) -> int:
    if args.resume:
        chosen = [f"--{n.replace('_', '-')}" for n in _RUN_SELECTION if getattr(args, n) not in (None, [], False)]
        chosen += ["--executor"] if args.executor != "local" else []
        if chosen or args.deterministic:
            raise UsageError(f"--resume continues the stored plan; drop {', '.join(chosen or ['--deterministic'])}")
    else:
        spec = build_spec(
            profile=args.profile, cases=args.cases, backends=args.backends, workloads=args.workloads,
            sizes=args.sizes, dtypes=args.dtypes, policies=args.cache_policy, cold_runs=args.cold_runs,
            warm_procs=args.warm_procs, warm_samples=args.warm_samples, timeout=args.timeout,
            deterministic=args.deterministic, seed=args.seed, threads=args.threads, shard=args.shard,
            python=args.python, workspace=args.workspace, workspace_presets=args.workspace_preset, signal=args.signal,
            precision=args.precision, budget=args.budget, case_files=args.case_file, **_command_options(args),
        )  # fmt: skip
    if args.executor == "slurm" or args.shards is not None:
        return _run_on_slurm(args, spec, console)
    from ttfr.commands import run as suite_run  # the analysis stack, once the input is known good
    from ttfr.report import terminal

    if args.resume:
        result_dir, spec = suite_run.reopen(args.resume)
        console.print(f"resuming {result_dir.root}: workers run {spec.python or sys.executable}", markup=False,
                      highlight=False)  # fmt: skip
    else:
        result_dir = suite_run.start(spec, args.out, ["ttfr", *sys.argv[1:]])
    progress = terminal.ProgressDisplay(console)
    try:
        outcome = suite_run.execute(result_dir, spec, progress=progress)
    finally:
        progress.stop()
    for warning in outcome.warnings:
        print(f"ttfr: warning: {warning}", file=sys.stderr)
    terminal.print_summary(console, outcome.suite, outcome.cases, result_dir.root)
    if outcome.interrupted:
        console.print(f"interrupted: finish with `ttfr run --resume {result_dir.root}`", markup=False)
    return outcome.exit_code


def _run_on_slurm(args, spec, console: Console) -> int:
    from ttfr.artifacts.reader import load_finished
    from ttfr.commands import slurm
    from ttfr.report import terminal

    if args.executor != "slurm" or args.shards is None:
        raise UsageError("--shards N goes with --executor slurm (and --executor slurm needs --shards N)")
    if args.shard:
        raise UsageError("--executor slurm cuts the plan into --shards N itself: drop --shard")
    options = slurm.SlurmOptions(args.shards, args.slurm_partition, args.slurm_time, args.slurm_account)
    slurm.check(options, len(spec.cases))
    root = slurm.run(args.argv[1:], spec.seed, options, args.out, ["ttfr", *args.argv],
                     say=lambda text: console.print(text, markup=False, highlight=False))  # fmt: skip
    result = load_finished(root)
    terminal.print_summary(console, result.suite, result.cases, root)
    return 1 if result.suite.summary.n_failed else 0


def _command_options(args) -> dict:
    return {
        "commands": args.command,
        "command_names": args.command_name,
        "first_result": args.first_result,
        "stop_at_first_result": args.stop_at_first_result,
        "first_result_mark": args.first_result_mark,
        "prepare": args.prepare,
    }


def _ab(args, console: Console) -> int:
    from ttfr.commands import ab, selftest
    from ttfr.report import terminal

    budget_s = check_ab_limits(args.rounds, args.min_rounds, args.precision, args.budget)
    own = (None, None)
    options = _command_options(args)
    if args.a or args.b:  # `python` in a command is each arm's: find programs on the arms' PATH too
        options["command_path"] = ab.arms_path(args.a, args.b)
    if args.a_command is not None or args.b_command is not None:
        if args.command:
            raise UsageError("--command runs the same program in both arms; --a-command/--b-command give each arm its "
                             "own: choose one")  # fmt: skip
        own = ab.arm_commands(args.a_command, args.b_command, args.command_name, args.first_result,
                              args.first_result_mark, args.prepare, options.get("command_path"),
                              args.stop_at_first_result)  # fmt: skip
    if own[0]:  # the case of the two programs, under A's program until each arm brings its own
        options.update(commands=[shlex.join(own[0].argv)], command_names=[own[0].name])
    run_spec = build_spec(
        profile=args.profile, cases=args.cases, backends=args.backends, workloads=args.workloads, sizes=args.sizes,
        dtypes=args.dtypes, policies=args.cache_policy, timeout=args.timeout, deterministic=args.deterministic,
        seed=args.seed, workspace=args.workspace, workspace_presets=args.workspace_preset, case_files=args.case_file,
        **options,
    )  # fmt: skip
    if own[0]:
        run_spec = replace(run_spec, commands=())  # each arm brings its own program
    measured = bool(run_spec.commands or own[0])
    spec = ab.AbSpec(
        run=run_spec, arms=(ab.make_arm("A", args.a, args.a_env, measured, own[0]),
                            ab.make_arm("B", args.b, args.b_env, measured, own[1])),
        min_rounds=ab.min_rounds_for(args.min_rounds, args.rounds, args.precision), max_rounds=args.rounds,
        precision=args.precision, budget_s=budget_s, correction=args.correction, fail_on=args.fail_on,
        noise_floor=selftest.load_noise_floor(),
    )  # fmt: skip
    advice = selftest.rounds_advice(selftest.load_stored(), args.rounds, args.precision)
    if advice:
        console.print(advice, style="yellow", markup=False, highlight=False)
    progress = terminal.ProgressDisplay(console)
    try:
        outcome = ab.execute(spec, args.out, ["ttfr", *sys.argv[1:]], progress=progress)
    finally:
        progress.stop()
    return _show_comparison(console, outcome.comparison, outcome.root, args.markdown, outcome.exit_code)


def _compare(args, console: Console) -> int:
    from ttfr.commands import compare

    with _rendering(args.a, args.b):
        out, document = compare.compare_dirs(args.a, args.b, args.out, cross_session=args.cross_session,
                                             correction=args.correction, fail_on=args.fail_on)  # fmt: skip
    return _show_comparison(console, document, out, args.markdown, document["summary"]["exit_code"])


def _show_comparison(console: Console, document: dict, root: Path, markdown_path, exit_code: int) -> int:
    from ttfr.report import terminal

    terminal.print_comparison(console, document)
    if markdown_path:
        try:
            markdown_path.write_text((root / "comparison.md").read_text(encoding="utf-8"), encoding="utf-8")
        except OSError as exc:
            print(f"ttfr: warning: --markdown {markdown_path}: cannot be written ({exc.strerror}); "
                  f"the table is in {root / 'comparison.md'}", file=sys.stderr)  # fmt: skip
    console.print(f"comparison: {root / 'comparison.json'}", markup=False, highlight=False)
    return exit_code


def _selftest(args, console: Console) -> int:
    from ttfr.commands import selftest
    from ttfr.report import terminal

    result = selftest.run(args.aa, args.per_level, args.rounds, progress=lambda m: console.print(m, markup=False))
    terminal.print_selftest(console, result)
    if not args.no_store:
        console.print(f"stored: {selftest.store(result)} (used by `ttfr ab` for delta)", markup=False, highlight=False)
    return 0


def _list(args, console: Console) -> int:
    from ttfr.measure import user_cases
    from ttfr.report import terminal

    user_cases.register(args.case_file)
    terminal.print_catalog(console)
    return 0


def _env(_args, _console: Console) -> int:
    from ttfr.artifacts import manifest

    print(json.dumps(manifest.collect(["ttfr", *sys.argv[1:]], policies=POLICIES), indent=2, sort_keys=True))
    return 0


@contextlib.contextmanager
def _rendering(*dirs):
    """Artifacts that pass every check can still hold values no renderer expects (a hand-made
    file): one line naming the directories, not a traceback."""
    try:
        yield
    except (KeyError, IndexError, TypeError, ValueError, ArithmeticError) as exc:
        where = " and ".join(str(d) for d in dirs)
        raise ArtifactError(f"{where}: its artifacts pass their schemas and hashes but cannot be rendered "
                            f"({type(exc).__name__}: {exc}); if nobody edited them, this is a ttfr bug") from None  # fmt: skip


def _report(args, console: Console) -> int:
    from ttfr.artifacts.reader import load_finished
    from ttfr.report import markdown

    result = load_finished(args.dir)
    with _rendering(args.dir):
        text = markdown.render(result)
    try:
        markdown.write(result)
    except ArtifactError as exc:  # a read-only result directory still gets its report printed
        print(f"ttfr: warning: {exc}; the report is printed only", file=sys.stderr)
    if args.html:
        from ttfr.report import html

        with _rendering(args.dir):
            page = html.write(result)
        print(f"wrote {page}", file=sys.stderr)
    if console.is_terminal:  # a person: the tables with inline bars; a pipe gets the Markdown
        from ttfr.report import terminal

        with _rendering(args.dir):
            terminal.print_report(console, result)
        return 0
    print(text, end="")
    return 0


def _validate(args, console: Console) -> int:
    from ttfr.artifacts import snapshot
    from ttfr.artifacts.reader import validate_dir

    # a published snapshot: its index (every file's hash, nothing extra) and the result inside it
    problems = snapshot.verify(args.dir) if snapshot.is_snapshot(args.dir) else validate_dir(args.dir)
    for problem in problems:
        console.print(f"invalid: {problem}", markup=False, highlight=False)
    if not problems:
        console.print(f"ok: every artifact in {args.dir} matches its schema and hash", markup=False, highlight=False)
    return 1 if problems else 0


def _merge(args, console: Console) -> int:
    from ttfr.commands import merge

    with _rendering(*args.shards):
        root = merge.merge(args.shards, args.out, ["ttfr", *sys.argv[1:]])
    console.print(f"merged {len(args.shards)} shards: {root}", markup=False, highlight=False)
    return 0


def _replicate(args, console: Console) -> int:
    from ttfr.commands import replicate
    from ttfr.report import terminal

    progress = terminal.ProgressDisplay(console)
    try:
        outcome, document = replicate.replicate(args.snapshot, args.out, ["ttfr", *sys.argv[1:]], progress=progress)
    finally:
        progress.stop()
    if document is None:
        console.print(f"interrupted: the replica is in {outcome.result_dir.root}", markup=False)
        return outcome.exit_code
    terminal.print_replication(console, document)
    console.print(f"report: {outcome.result_dir.root / replicate.REPORT}", markup=False, highlight=False)
    return document["summary"]["exit_code"]


def _publish(args, console: Console) -> int:
    from ttfr.artifacts import snapshot

    with _rendering(args.dir):
        path, new = snapshot.publish(args.dir, args.out)
    verdict = snapshot.read_validation(path)
    console.print(f"{'published' if new else 'already published'}: {path} (gates: {verdict})", markup=False, highlight=False)
    return 0


def _export(args, console: Console) -> int:
    from ttfr.artifacts.export import formats, nextstat
    from ttfr.artifacts.reader import load_finished

    with _rendering(args.dir):
        written = formats.export(args.format, args.dir, args.dest, args.cold_policy)
    left_out = nextstat.commands_left_out(load_finished(args.dir).cases) if args.format == "nextstat-v1" else []
    if left_out:
        print(f"ttfr: warning: left out command case(s) {', '.join(left_out)}: NextStat's ml contract describes a "
              "workload on a dataset, which a program is not", file=sys.stderr)  # fmt: skip
    shown = written[0] if len(written) == 1 else f"{len(written)} files to {args.dest}"
    console.print(f"wrote {shown}", markup=False, highlight=False)
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:  # SIGTERM ends any command as Ctrl-C does (a publish or a Slurm wait cleans up after itself)
        previous = signal.signal(signal.SIGTERM, _terminate)
    except ValueError:  # not the main thread: signals are not ours to handle
        return _main(args, argv)
    try:
        return _main(args, argv)
    finally:
        signal.signal(signal.SIGTERM, previous)


def _terminate(_signum, _frame):
    raise KeyboardInterrupt


def _main(args, argv) -> int:
    args.argv = list(sys.argv[1:] if argv is None else argv)  # the command line, for what re-runs it (Slurm shards)
    # Piped output (CI logs) would otherwise be wrapped at 80 columns, splitting case ids.
    console = Console() if sys.stdout.isatty() else Console(width=200)
    try:
        return args.handler(args, console)
    except UsageError as exc:
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
    except OSError as exc:  # the last resort for a file error no command anticipated: one line, no traceback
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"ttfr: error: {where}{exc.strerror or exc}", file=sys.stderr)
        return EXIT_CASE_FAILED


if __name__ == "__main__":
    sys.exit(main())
