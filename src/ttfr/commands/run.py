"""`ttfr run`: measure a suite (default: the quick CPU suite), locally or as a Slurm job array;
`--resume DIR` finishes an interrupted one."""

from __future__ import annotations

import sys
from pathlib import Path

from rich.console import Console

from ttfr import startup
from ttfr.commands.output import run_summary
from ttfr.commands.options import by_profile, command_args, command_request, selection_args, selection_request
from ttfr.errors import UsageError
from ttfr.measure.profiles import PROFILES
from ttfr.measure.resume import Named
from ttfr.measure.spec import RunRequest, build_spec

NAME = "run"
# Every option that chooses what to run: --resume continues the stored plan, so none of them goes with it
# but the programs it runs, which the user names again (_NAMED): a file never makes ttfr run one.
_SELECTION = ("cases", "backends", "workloads", "sizes", "dtypes", "cache_policy", "concurrency", "cold_runs", "warm_procs",
              "warm_samples", "timeout", "seed", "threads", "shard", "workspace", "workspace_preset",
              "signal", "precision", "budget", "command_name", "first_result", "keep_contended", "explain",
              "first_result_mark", "stop_at_first_result", "shards", "slurm_partition", "slurm_time",
              "slurm_account")  # fmt: skip


def add_parser(commands):
    run = commands.add_parser(NAME, help="measure a suite (default: the quick CPU suite)")
    selection_args(run)
    run.add_argument("--signal", metavar="CHANNEL/SAMPLE", help="that workspace's signal sample (default: the POI's)")
    command_args(run)
    run.add_argument("--profile", default="quick", choices=sorted(PROFILES), help="run counts and default cases")
    run.add_argument("--cold-runs", type=int, metavar="N", help=f"fresh processes per cold policy ({by_profile('cold_runs')})")
    run.add_argument("--warm-procs", type=int, metavar="N",
                     help=f"fresh processes in the warm regime ({by_profile('warm_procs')})")  # fmt: skip
    run.add_argument("--warm-samples", type=int, metavar="N",
                     help=f"samples per warm process ({by_profile('warm_samples')})")  # fmt: skip
    run.add_argument("--timeout", type=float, metavar="S", help=f"per-run timeout in seconds ({by_profile('timeout_s', ' s')})")
    run.add_argument("--deterministic", action="store_true", help="seed 0 and a fixed order; byte-stable JSON but for timings")
    run.add_argument("--seed", type=int, help="input-data and round-order seed (default: a random one, recorded in plan.json)")
    run.add_argument("--threads", type=int, metavar="N",
                     help="set OMP/MKL/OpenBLAS thread counts in every worker (default: the libraries' own)")  # fmt: skip
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
    run.add_argument("--out", type=Path, default=Path("ttfr-results"), metavar="DIR", help="parent of the result directory")
    run.add_argument(
        "--no-html",
        action="store_true",
        help="write no report.html (its figures take ~0.1 s; `ttfr report DIR --html` renders it later)",
    )
    run.add_argument("--explain", action="store_true",
                     help="after each case's measured runs, one unmeasured diagnostic process per cold policy under "
                     "`-X importtime`: each phase's imports by distribution and module, against its measured median")  # fmt: skip
    run.add_argument("--keep-contended", action="store_true",
                     help="keep runs contended by other work in the figures (set aside by default), flagged as such "
                     "in every output and the case `warn`")  # fmt: skip
    run.add_argument("--verbose", action="store_true", help="after the summary, ttfr's own time by phase")
    run.add_argument("--resume", type=Path, metavar="DIR",
                     help="finish an interrupted result directory; name the programs its plan runs again "
                     "(--python, --case-file, --command, --prepare): ttfr runs none just because plan.json names it")  # fmt: skip
    run.add_argument(
        "--executor",
        choices=("local", "slurm"),
        default="local",
        help="slurm: run the plan as a Slurm job array of --shards N (one node each) and merge them",
    )
    run.add_argument("--shards", type=int, metavar="N", help="with --executor slurm: how many shards")
    run.add_argument("--slurm-partition", metavar="P", help="Slurm's --partition of each shard or group task (default: Slurm's)")
    run.add_argument("--slurm-time", metavar="T", help="Slurm's --time of each shard or group task, e.g. 2:00:00")
    run.add_argument("--slurm-account", metavar="A", help="Slurm's --account of each shard or group task (default: Slurm's)")
    run.add_argument("--concurrency-executor", choices=("local", "slurm"), default="local",
                     help="where --concurrency groups run: local (this machine), or slurm: each group a Slurm job "
                     "array of N tasks, a node each, released together, on one cache under --concurrency-cache-dir")  # fmt: skip
    run.add_argument("--concurrency-cache-dir", type=Path, metavar="DIR",
                     help="an existing directory for the groups' caches (with slurm: one every node mounts); "
                     "default: the result directory's scratch area")  # fmt: skip
    run.add_argument("--slurm-start-patience", type=float, metavar="S",
                     help="with --concurrency-executor slurm: how long a group waits for all N of its tasks to "
                     "start before it is cancelled and fails, saying so (default: 1800)")  # fmt: skip
    run.add_argument("--slurm-cpus-per-task", type=int, metavar="C",
                     help="with --concurrency-executor slurm: C CPUs per group task, so that tasks may share a node "
                     "(default: --exclusive, a node each)")  # fmt: skip
    return run


def request(args) -> RunRequest:
    """The run the command line asks for, unchecked (build_spec checks it)."""
    return RunRequest(
        profile=args.profile, cold_runs=args.cold_runs, warm_procs=args.warm_procs, warm_samples=args.warm_samples,
        timeout=args.timeout, deterministic=args.deterministic, seed=args.seed, threads=args.threads, shard=args.shard,
        python=args.python, signal=args.signal, precision=args.precision, budget=args.budget,
        keep_contended=args.keep_contended, explain=args.explain, **selection_request(args), **command_request(args),
    )  # fmt: skip


def handle(args, console: Console) -> int:
    from ttfr.pipeline.costs import Costs  # light: the analysis stack comes once the input is known good

    costs = Costs(startup_s=startup.seconds())
    spec = None
    if args.resume:
        chosen = [f"--{n.replace('_', '-')}" for n in _SELECTION if getattr(args, n) not in (None, [], False)]
        chosen += ["--executor"] if args.executor != "local" else []
        if chosen or args.deterministic:
            raise UsageError(f"--resume continues the stored plan; drop {', '.join(chosen or ['--deterministic'])}")
    else:
        with costs.phase("spec (cases, options, case files)"):
            spec = build_spec(request(args))
    placed = args.concurrency_executor != "local" or args.concurrency_cache_dir is not None
    if spec is not None and placed and not spec.concurrency:
        raise UsageError("--concurrency-executor and --concurrency-cache-dir place --concurrency groups: add --concurrency N")
    if args.slurm_cpus_per_task is not None and (args.concurrency_executor != "slurm" or args.slurm_cpus_per_task < 1):
        raise UsageError("--slurm-cpus-per-task C (1 or more) goes with --concurrency-executor slurm")
    patience = args.slurm_start_patience
    if patience is not None and (args.concurrency_executor != "slurm" or not 0 < patience < float("inf")):
        raise UsageError("--slurm-start-patience S (seconds, more than 0) goes with --concurrency-executor slurm")
    if placed and args.concurrency_cache_dir is not None and not args.concurrency_cache_dir.is_dir():
        raise UsageError(f"--concurrency-cache-dir {args.concurrency_cache_dir}: not an existing directory")
    if args.executor == "slurm" or args.shards is not None:
        return _on_slurm(args, spec, console)
    with costs.phase("ttfr's pipeline imports"):
        from ttfr.measure.executors import placing_groups, release_groups
        from ttfr.measure.slurm_client import SlurmOptions
        from ttfr.pipeline import suite  # the run's modules, once the input is known good (analysis: later)
        from ttfr.report import terminal  # noqa: F401 - its import timed here, not in the summary's
    # checked (and its directory made) before the result directory is: a bad one leaves nothing half-written
    executors = placing_groups(args.executors, args.concurrency_executor, args.concurrency_cache_dir,
                               SlurmOptions(args.slurm_partition, args.slurm_time, args.slurm_account,
                                            args.slurm_cpus_per_task),
                               start_patience_s=args.slurm_start_patience,
                               say=lambda text: console.print(text, markup=False, highlight=False))  # fmt: skip
    try:
        return _execute(args, spec, executors, costs, console, suite)
    finally:
        release_groups(executors)


def _execute(args, spec, executors, costs, console: Console, suite) -> int:
    if args.resume:
        named = Named(python=args.python, case_files=tuple(args.case_file), commands=tuple(args.command),
                      prepare=tuple(args.prepare))  # fmt: skip
        result_dir, spec = suite.reopen(args.resume, named)
        console.print(f"resuming {result_dir.root}: workers run {spec.python or sys.executable}", markup=False,
                      highlight=False)  # fmt: skip
    else:
        with costs.phase("result directory, plan.json, manifest"):
            result_dir = suite.start(spec, args.out, ["ttfr", *args.argv])
    from ttfr.report.progress import ProgressDisplay

    progress = ProgressDisplay(console)
    show = run_summary(console, progress, spec)  # the results are written; report.html comes after this
    try:
        outcome = suite.execute(result_dir, spec, executors=executors, progress=progress, html=not args.no_html,
                                costs=costs, shown=show)  # fmt: skip
    finally:
        progress.stop()
    if args.verbose:
        console.print("ttfr's own time:\n  " + "\n  ".join(costs.lines()), markup=False, highlight=False)
    return outcome.exit_code


def _on_slurm(args, spec, console: Console) -> int:
    from ttfr.artifacts.reader import load_finished
    from ttfr.measure.slurm_client import SlurmOptions
    from ttfr.pipeline import slurm
    from ttfr.report import terminal

    if args.executor != "slurm" or args.shards is None:
        raise UsageError("--shards N goes with --executor slurm (and --executor slurm needs --shards N)")
    if args.shard:
        raise UsageError("--executor slurm cuts the plan into --shards N itself: drop --shard")
    options = slurm.SlurmOptions(args.shards, SlurmOptions(args.slurm_partition, args.slurm_time, args.slurm_account))
    slurm.check(options, len(spec.cases))
    root = slurm.run(args.argv[1:], spec.seed, options, args.out, ["ttfr", *args.argv],
                     say=lambda text: console.print(text, markup=False, highlight=False))  # fmt: skip
    result = load_finished(root)
    terminal.print_summary(console, result.suite, result.cases, root)
    return 1 if result.suite.summary.n_failed else 0
