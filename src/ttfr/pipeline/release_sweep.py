"""`ttfr history --releases PKG=LO..HI --cases ...`: the same cases measured in one environment per
release of a package, interleaved across the releases in rounds within one session (`ttfr ab`'s two
arms generalised to K: each round runs every stream once in every release, the releases' order
rotated and reversed from round to round, with a seeded phase per stream, so a machine's drift
spreads evenly), each release's runs written as a result directory of its own, and the history over
them ordered by the package's version.

A release whose environment does not resolve, install or import ttfr's worker is a point with its
reason (uv's or the interpreter's words), never a crash."""

from __future__ import annotations

import datetime as dt
import os
import random
import time
from dataclasses import dataclass, replace
from pathlib import Path

from ttfr.artifacts import history_sources
from ttfr.artifacts.history_sources import ReadResult
from ttfr.artifacts.snapshot_layout import lock_file
from ttfr.artifacts.store import new_stamped_directory
from ttfr.errors import MeasurementFailed, UsageError
from ttfr.measure import catalog, release_envs
from ttfr.measure.executors import REAL, Executors
from ttfr.measure.plan import EXPLAIN
from ttfr.measure.scheduler import NullProgress
from ttfr.measure.releases import Releases
from ttfr.measure.spawn import ensure_worker_bytecode
from ttfr.measure.spec import RunSpec
from ttfr.measure.worker_probe import check_worker_python
from ttfr.model.history import LeftOut
from ttfr.pipeline.interleaved import Arm, ArmRun, final_results, rounds_of


@dataclass(frozen=True)
class SweepSpec:
    run: RunSpec  # the cases, policies and profile (every stream gets `rounds` runs)
    releases: Releases
    rounds: int
    env_cache: Path
    allow_large: bool = False


@dataclass(frozen=True)
class SweepOutcome:
    root: Path
    results: list[ReadResult]
    left_out: list[LeftOut]
    envs: list[release_envs.Env]
    elapsed_s: float
    interrupted: bool
    rounds: int  # the rounds completed (every release measured in each)


def needs(run: RunSpec) -> list[str]:
    """The packages the chosen cases' backends import."""
    return list(dict.fromkeys(p for case in run.cases for p in catalog.BACKENDS[case.backend].requires))


def check(spec: SweepSpec) -> None:
    """Refused before anything is built: a large package without --allow-large, too few rounds, the swept package
    not one the cases import."""
    package = spec.releases.package
    large = catalog.swept_package(package).large
    if large and not spec.allow_large:
        raise UsageError(f"--releases {spec.releases.asked}: {large}; {len(spec.releases.versions)} environments would "
                         "be built: pass --allow-large to build them anyway")  # fmt: skip
    if spec.rounds < 2:
        raise UsageError(f"--rounds {spec.rounds}: a sweep needs at least 2 rounds (each point's spread)")
    imported = needs(spec.run)
    if package not in [*imported, *release_envs.ALWAYS]:
        raise UsageError(f"--releases {spec.releases.asked}: none of the chosen cases imports {package}; they import "
                         f"{', '.join(imported) or 'only the standard library'}")  # fmt: skip


def arm_order(k: int, round_index: int, phase: int) -> list[int]:
    """The releases' order in a round: rotated by the round (and the stream's phase), reversed every other
    round, so each release runs at every position equally often over 2k rounds."""
    start = (round_index + phase) % k
    order = [(start + j) % k for j in range(k)]
    return order if round_index % 2 == 0 else order[::-1]


def build_envs(spec: SweepSpec, say) -> list[release_envs.Env]:
    """One environment per release (reused where built before), each checked to import ttfr's worker."""
    built = []
    lock = lock_file()
    for version in spec.releases.versions:
        started = time.monotonic()
        env = release_envs.ensure(spec.releases.package, version, needs(spec.run), spec.env_cache, lock)
        if env.state == "ready":
            try:
                check_worker_python(env.python, {}, option=f"the {spec.releases.package} {version} environment")
            except UsageError as exc:
                env = replace(env, state="failed", reason=str(exc))
        how = "reused" if env.reused else f"built in {time.monotonic() - started:.1f} s"
        size = f", {env.bytes / 2**20:.0f} MiB" if env.bytes else ""
        say(f"{spec.releases.package} {version}: {env.state} ({how}{size})" +
            (f": {env.reason}" if env.reason else ""))  # fmt: skip
        built.append(env)
    return built


def _unavailable(result: ReadResult) -> dict:
    """A case that failed in one release of a sweep (an API the release lacks, say) is unavailable there: the others
    ran it."""
    release = result.id.replace("-", " ", 1)
    figures = {}
    for key, figure in result.figures.items():
        if figure.gap and figure.gap.startswith("failed: "):
            figure = replace(figure, gap=f"unavailable in {release}: {figure.gap.removeprefix('failed: ')}")
        figures[key] = figure
    return figures


def _failed_release(spec: SweepSpec, env: release_envs.Env, machine, now: str, root: Path) -> ReadResult:
    package = spec.releases.package
    why = f"{package} {env.version} could not be measured: {env.reason}"
    return ReadResult(id=f"{package}-{env.version}", kind="release", path=str(root / f"{package}-{env.version}"),
                      created_at=now, machine=machine, ttfr_version=None, versions={package: env.version},
                      manifest={f"runtime.{package}": env.version}, figures={},
                      cases={case.id: why for case in spec.run.cases})  # fmt: skip


def execute(spec: SweepSpec, out_parent: Path, command_line=None, progress=None, executors: Executors | None = None,
            say=print) -> SweepOutcome:  # fmt: skip
    """Build the environments, measure the releases interleaved, and read each release's result directory back
    (verified, as every reader does)."""
    check(spec)
    envs = build_envs(spec, say)
    ready = [env for env in envs if env.state == "ready"]
    if not ready:
        raise MeasurementFailed("no release's environment could be built: " +
                                "; ".join(f"{e.version}: {e.reason}" for e in envs))  # fmt: skip
    run = replace(spec.run, cold_runs=spec.rounds, warm_procs=spec.rounds)
    try:
        root = new_stamped_directory(Path(out_parent), "sweep")
    except OSError as exc:
        raise UsageError(f"--out {out_parent}: cannot create the sweep directory ({exc.strerror})") from None
    session = os.urandom(8).hex()
    executors = executors or REAL
    package = spec.releases.package
    arms = [ArmRun(Arm(f"{package}-{env.version}", env.python), root, run, session, command_line,
                   progress or NullProgress(), executors) for env in ready]  # fmt: skip
    if executors.starts_workers:
        ensure_worker_bytecode()
    rounds = rounds_of(arms[0].plan, run.seed)
    if progress is not None:
        every = [t for t in arms[0].plan.tasks for _ in arms]
        progress.start(len(every), every)
    started, completed, interrupted = time.monotonic(), 0, False
    try:
        for round_index, tasks in enumerate(rounds):
            for task in tasks:
                phase = random.Random(f"{run.seed}:phase:{task.case.id}|{task.policy or task.kind}").randrange(len(arms))
                for k in arm_order(len(arms), round_index, phase):
                    arms[k].scheduler.run_task(task)
            completed = round_index + 1
        for task in (t for t in arms[0].plan.tasks if t.kind == EXPLAIN):  # --explain: after the rounds, unmeasured
            for arm in arms:
                arm.scheduler.run_task(task)
    except KeyboardInterrupt:
        interrupted = True
    elapsed_s = time.monotonic() - started
    final_results(arms, completed, write=True)
    for arm in arms:
        arm.dir.unlock()
    results, left_out = history_sources.read_all([arm.dir.root for arm in arms])
    resolved = {f"{package}-{env.version}": env.resolution for env in ready}
    # what uv resolved in each release's environment: what changed at a step beyond the swept package
    results = [replace(r, manifest=r.manifest | {f"resolved.{k}": v for k, v in resolved.get(r.id, {}).items()},
                       figures=_unavailable(r)) for r in results]  # fmt: skip
    if results:
        now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        results += [_failed_release(spec, env, results[0].machine, now, root) for env in envs if env.state != "ready"]
    return SweepOutcome(root, results, left_out, envs, elapsed_s, interrupted, completed)
