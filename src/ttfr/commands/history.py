"""`ttfr history PATH...`: results in series (by date or a package's version, never mixing machines),
the steps in each and what changed at them; exit 3 when a newest segment is a step up beyond
--fail-above."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from ttfr.errors import UsageError
from ttfr.exit_codes import EXIT_INTERRUPTED

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
    sweep = history.add_argument_group("a sweep over a package's releases")
    sweep.add_argument("--releases", metavar="PKG=LO..HI",
                       help="measure --cases in one uv environment per release of PKG (a range LO..HI, or a list "
                            "V1,V2,...), interleaved in rounds, and make their history by PKG's version")  # fmt: skip
    sweep.add_argument("--cache-policy", metavar="A,B", help="the sweep's cache policies (default: all three standard)")
    sweep.add_argument("--rounds", type=int, default=5, metavar="N",
                       help="rounds of the sweep: each stream's runs in each release (default 5)")  # fmt: skip
    sweep.add_argument("--profile", default="quick", choices=("quick", "standard", "publish"),
                       help="the sweep's per-run timeout and warm samples, as for `ttfr run`")  # fmt: skip
    sweep.add_argument("--env-cache", type=Path, metavar="DIR",
                       help="where the releases' environments are kept and reused (default: ~/.cache/ttfr/envs)")  # fmt: skip
    sweep.add_argument("--explain", action="store_true",
                       help="after the rounds, one unmeasured diagnostic process per release, case and cold policy (as "
                            "`ttfr run --explain`): each step lists the modules and programs that moved")  # fmt: skip
    sweep.add_argument("--allow-large", action="store_true",
                       help="build environments of a package whose wheels pull several GB (torch)")  # fmt: skip
    sweep.add_argument("--prune-envs", action="store_true", help="remove every environment in --env-cache, and say "
                       "how much was freed")  # fmt: skip
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


def _prune(console: Console, cache: Path) -> None:
    from ttfr.measure import release_envs

    removed, freed = release_envs.prune(cache)
    console.print(f"removed {removed} environment(s) from {cache}, {freed / 2**20:.0f} MiB freed", markup=False,
                  highlight=False)  # fmt: skip


def _sweep(args, console: Console, cases: list[str] | None, cache: Path):
    """--releases: the sweep's results (its own directory under --out), read back verified."""
    from ttfr.measure import catalog, releases
    from ttfr.measure.spec import RunRequest, build_spec
    from ttfr.pipeline import release_sweep
    from ttfr.report.progress import ProgressDisplay

    if args.paths or args.registry:
        raise UsageError("--releases measures its own results: name no PATH or --registry with it")
    if not cases:
        raise UsageError("--releases measures the cases you name: give --cases ID,... (`ttfr list` shows them)")
    large = catalog.swept_package(releases.parse(args.releases)[0]).large
    if large and not args.allow_large:  # before the index is even asked
        raise UsageError(f"--releases {args.releases}: {large}: pass --allow-large to build them anyway")
    run = build_spec(RunRequest(profile=args.profile, cases=args.cases, policies=args.cache_policy or (),
                                explain=args.explain))  # fmt: skip
    spec = release_sweep.SweepSpec(run=run, releases=releases.choose(args.releases), rounds=args.rounds,
                                   env_cache=cache, allow_large=args.allow_large)  # fmt: skip
    release_sweep.check(spec)
    progress = ProgressDisplay(console)
    try:
        outcome = release_sweep.execute(spec, args.out, ["ttfr", *args.argv], progress=progress,
                                        executors=args.executors,
                                        say=lambda line: console.print(line, markup=False, highlight=False))  # fmt: skip
    finally:
        progress.stop()
    stopped = f"; interrupted: the history holds the {outcome.rounds} complete round(s)" if outcome.interrupted else ""
    console.print(f"{len(spec.releases.versions)} releases, {outcome.rounds} of {spec.rounds} rounds in "
                  f"{outcome.elapsed_s:.0f} s{stopped}", highlight=False)  # fmt: skip
    return outcome.results, outcome.left_out, outcome.root, spec.releases.package, outcome.interrupted


def handle(args, console: Console) -> int:
    from ttfr.measure.release_envs import default_cache
    from ttfr.pipeline import history
    from ttfr.report import terminal

    fail_above = percent(args.fail_above)
    chosen = figures(args.figure)
    cases = [c.strip() for c in args.cases.split(",") if c.strip()] if args.cases else None
    if args.root and not args.registry:
        raise UsageError("--root says where a registry's snapshots are: give --registry FILE too")
    cache = args.env_cache or default_cache()
    if args.prune_envs:
        _prune(console, cache)
        if not (args.paths or args.registry or args.releases):
            return 0
    if args.explain and not args.releases:
        raise UsageError("--explain runs diagnostic processes in a --releases sweep; results named by PATH bring the "
                         "explanations they were run with (`ttfr run --explain`)")  # fmt: skip
    by, out_parent, interrupted = args.by, args.out, False
    if args.releases:
        if args.by:
            raise UsageError("--releases orders its history by the swept package's version: give no --by with it")
        results, left_out, out_parent, by, interrupted = _sweep(args, console, cases, cache)
        cases = None  # the sweep measured only them
    else:
        results, left_out = history.read_sources(args.paths, args.registry, args.root)
    if not results:
        reasons = "; ".join(f"{item.path}: {item.reason}" for item in left_out[:3])
        raise UsageError(f"no result could be read ({reasons})")
    document = history.build(results, left_out, by=by, figures=chosen, cases=cases, fail_above=fail_above)
    if cases and not document.series:
        raise UsageError(f"--cases {args.cases}: no such case in these results; they hold "
                         f"{', '.join(sorted({k[0] for r in results for k in r.figures})) or 'none'}")  # fmt: skip
    out = history.write(document, out_parent)
    terminal.show_history(console, document, out)
    return EXIT_INTERRUPTED if interrupted else document.gate.exit_code
