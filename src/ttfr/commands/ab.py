"""`ttfr ab`: the same cases under two arms (interpreters, environments or programs), measured
interleaved in one session, and B judged against A."""

from __future__ import annotations

import shlex
from dataclasses import replace
from pathlib import Path

from rich.console import Console

from ttfr.commands.options import by_profile, command_args, command_request, gate_args, selection_args, selection_request
from ttfr.commands.output import show_comparison
from ttfr.errors import UsageError
from ttfr.measure.limits import check_ab_limits
from ttfr.measure.profiles import PROFILES
from ttfr.measure.spec import RunRequest, build_spec

NAME = "ab"


def add_parser(commands):
    ab = commands.add_parser(NAME, help="measure the same cases under two arms, interleaved, and judge B vs A")
    ab.add_argument("--a", metavar="PYTHON|VENV", help="arm A's interpreter or virtualenv (default: this one)")
    ab.add_argument("--b", metavar="PYTHON|VENV", help="arm B's interpreter or virtualenv (default: this one)")
    ab.add_argument("--a-env", action="append", default=[], metavar="KEY=VALUE", help="environment of arm A")
    ab.add_argument("--b-env", action="append", default=[], metavar="KEY=VALUE", help="environment of arm B")
    selection_args(ab)
    command_args(ab, arms=True)
    ab.add_argument("--profile", default="quick", choices=sorted(PROFILES),
                    help="default cases and per-run timeout, as for `ttfr run` (the rounds are --rounds')")  # fmt: skip
    ab.add_argument("--rounds", type=int, default=20, metavar="N", help="paired rounds (the maximum with --precision)")
    ab.add_argument("--min-rounds", type=int, default=10, metavar="N",
                    help="with --precision: the rounds run before it may stop")  # fmt: skip
    ab.add_argument("--precision", type=float, metavar="REL", help="stop once every CI half-width is <= REL (e.g. 0.05)")
    ab.add_argument("--budget", metavar="DURATION", help="stop adding rounds after this long, e.g. 600, 10m")
    gate_args(ab)
    ab.add_argument("--explain", action="store_true",
                    help="after the rounds, one unmeasured diagnostic process per arm, case and cold policy (as `ttfr "
                         "run --explain`); the comparison lists the modules and programs whose time changed most")  # fmt: skip
    ab.add_argument("--deterministic", action="store_true", help="seed 0: the same data and round order every time")
    ab.add_argument("--seed", type=int, help="input-data and round-order seed (default: a random one, recorded)")
    ab.add_argument("--timeout", type=float, metavar="S", help=f"per-run timeout in seconds ({by_profile('timeout_s', ' s')})")
    ab.add_argument("--out", type=Path, default=Path("ttfr-results"), metavar="DIR",
                    help="parent of the directory that holds both arms (A/, B/) and the comparison")  # fmt: skip
    return ab


def handle(args, console: Console) -> int:
    from ttfr.pipeline import interleaved, selftest
    from ttfr.report.progress import ProgressDisplay

    budget_s = check_ab_limits(args.rounds, args.min_rounds, args.precision, args.budget)
    own = (None, None)
    options = command_request(args)
    if args.a or args.b:  # `python` in a command is each arm's: find programs on the arms' PATH too
        options["command_path"] = interleaved.arms_path(args.a, args.b)
    if args.a_command is not None or args.b_command is not None:
        if args.command:
            raise UsageError("--command runs the same program in both arms; --a-command/--b-command give each arm its "
                             "own: choose one")  # fmt: skip
        own = interleaved.arm_commands(args.a_command, args.b_command, args.command_name, args.first_result,
                                       args.first_result_mark, args.prepare, options.get("command_path"),
                                       args.stop_at_first_result)  # fmt: skip
    if own[0]:  # the case of the two programs, under A's program until each arm brings its own
        options.update(commands=[shlex.join(own[0].argv)], command_names=[own[0].name])
    run_spec = build_spec(RunRequest(profile=args.profile, timeout=args.timeout, deterministic=args.deterministic,
                                     seed=args.seed, explain=args.explain, **selection_request(args), **options))  # fmt: skip
    if own[0]:
        run_spec = replace(run_spec, commands=())  # each arm brings its own program
    measured = bool(run_spec.commands or own[0])
    spec = interleaved.AbSpec(
        run=run_spec, arms=(interleaved.make_arm("A", args.a, args.a_env, measured, own[0]),
                            interleaved.make_arm("B", args.b, args.b_env, measured, own[1])),
        min_rounds=interleaved.min_rounds_for(args.min_rounds, args.rounds, args.precision), max_rounds=args.rounds,
        precision=args.precision, budget_s=budget_s, correction=args.correction, fail_on=args.fail_on,
        noise_floor=selftest.load_noise_floor(),
    )  # fmt: skip
    advice = selftest.rounds_advice(selftest.load_stored(), args.rounds, args.precision)
    if advice:
        console.print(advice, style="yellow", markup=False, highlight=False)
    progress = ProgressDisplay(console)
    try:
        outcome = interleaved.execute(spec, args.out, ["ttfr", *args.argv], progress=progress, executors=args.executors)
    finally:
        progress.stop()
    return show_comparison(console, outcome.comparison, outcome.root, args.markdown, outcome.exit_code)
