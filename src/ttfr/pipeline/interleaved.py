"""`ttfr ab`: the same cases under two arms, interleaved in one session.

An arm is an interpreter (or a virtualenv) plus environment overrides; for commands
(`--command`), the program's environment with that interpreter's directory first on PATH, or
an arm's own program (`--a-command` / `--b-command`, one case). Both arms get the
same plan (same seed, cases, policies); each is an ordinary result directory (`A/`, `B/`,
with its own journal, caches and artifacts). They run task by task: for each (case,
policy) stream, round j runs A's and B's j-th run back to back, in ABBA order across rounds
(with a seeded phase per stream), and the streams of a round in a seeded shuffle; with
`--concurrency`, each (case, sharing mode, N) is a stream too, its j-th group in round j (every
round has one, whatever the profile's number of groups). Paired rounds are what makes a verdict
trustworthy on a shared machine.

Adaptive sampling: with a precision target, rounds are added (between min and max rounds,
within a time budget) until every comparison's CI half-width is at most the target; the
stopping rule never looks at significance.
"""

from __future__ import annotations

import datetime as dt
import os
import random
import time
from dataclasses import dataclass, replace
from pathlib import Path


from ttfr import cases as cases_api
from ttfr.analyse.case_result import case_results
from ttfr.artifacts.result_dir import snapshot_id
from ttfr.artifacts.store import new_directory
from ttfr.errors import UsageError
from ttfr.exit_codes import EXIT_INTERRUPTED
from ttfr.measure import user_commands
from ttfr.measure.executors import REAL, Executors
from ttfr.measure.journal import Journal
from ttfr.measure.plan import EXPLAIN, GROUP, MAKE, PRIME, build_plan
from ttfr.measure.scheduler import NullProgress, Scheduler
from ttfr.measure.spawn import ensure_worker_bytecode
from ttfr.measure.spec import RunSpec
from ttfr.measure.user_commands import UserCommand
from ttfr.measure.worker_probe import check_worker_python
from ttfr.model.base import UNSET, copied, encode
from ttfr.model.case import CaseResult
from ttfr.model.comparison import Comparison, Record, RecordedArm, Rounds
from ttfr.model.journal import JournalEntry
from ttfr.model.manifest import Arm as ArmRecord
from ttfr.pipeline import comparison
from ttfr.pipeline.suite import dataset_fields, record_spec, start, write_results
from ttfr.redaction import redact_argv, redact_env


@dataclass(frozen=True)
class Arm:
    name: str
    python: str
    env: tuple[tuple[str, str], ...] = ()
    # Commands (`ttfr ab --command`): the arm's own program (--a-command / --b-command), and the
    # directory put first on PATH for its commands (--a/--b given: as if that venv were activated).
    command: UserCommand | None = None
    path_first: str | None = None

    @property
    def environment(self) -> dict:
        return dict(self.env)

    def command_env(self, base: dict) -> dict:
        """`base` with this arm's interpreter directory first on PATH (commands only)."""
        if not self.path_first:
            return base
        env = {**base, "PATH": os.pathsep.join(p for p in (self.path_first, base.get("PATH")) if p)}
        venv = Path(self.path_first).parent
        if (venv / "pyvenv.cfg").is_file():
            env["VIRTUAL_ENV"] = str(venv)
        return env

    def recorded(self) -> ArmRecord:
        """The arm as recorded (plan, manifests, comparison): secrets keep their names only."""
        return ArmRecord(name=self.name, python=self.python, env=redact_env(self.environment),
                         command=self.command.text if self.command is not None else UNSET,
                         path_first=self.path_first or UNSET)  # fmt: skip


def resolve_python(value: str | None) -> str:
    import sys

    if not value:
        return sys.executable
    path = Path(value)
    if path.is_dir():
        for candidate in (path / "bin" / "python", path / "bin" / "python3"):
            if candidate.exists():
                return str(candidate)
        raise UsageError(f"{value} is a directory but not a virtualenv (no bin/python)")
    return str(path)


def parse_env(items, option: str = "--a-env/--b-env") -> tuple[tuple[str, str], ...]:
    pairs = []
    for item in items or ():
        key, sep, value = str(item).partition("=")
        if not sep or not key or not key.replace("_", "").isalnum():
            raise UsageError(f"{option} {redact_argv([item])[0]!r} is not KEY=VALUE (e.g. {option} XLA_FLAGS=--flag)")
        pairs.append((key, value))
    return tuple(pairs)


def make_arm(name: str, python: str | None, env_items, commands: bool = False, command: UserCommand | None = None) -> Arm:
    """An arm; `commands`: the run measures commands, whose programs the arm's interpreter
    does not run (it goes first on PATH instead, and need not have ttfr)."""
    arm = Arm(name, resolve_python(python), parse_env(env_items, f"--{name.lower()}-env"), command)
    if not commands:
        check_worker_python(arm.python, arm.environment, option=f"--{name.lower()}")
    elif python:
        if not os.access(arm.python, os.X_OK) or Path(arm.python).is_dir():
            raise UsageError(f"--{name.lower()} {python}: not an interpreter or a virtualenv")
        arm = replace(arm, path_first=str(Path(arm.python).parent))
    return arm


def arms_path(*pythons) -> str:
    """PATH with the given arms' interpreter directories first (where a command's `python` is found)."""
    dirs = [str(Path(resolve_python(p)).parent) for p in pythons if p]
    return os.pathsep.join([*dirs, os.environ.get("PATH", "")])


def arm_commands(a_command, b_command, names=(), first_result=None, mark=False, prepare=(), path_env=None,
                 stop_at_first_result=False) -> tuple:  # fmt: skip
    """`--a-command X --b-command Y`: one case whose program differs by arm; its name is
    --command-name, else the programs' common script name, else `<a>_vs_<b>`."""
    if bool(a_command) != bool(b_command):
        raise UsageError("--a-command and --b-command go together: give both (or --command for the same program in "
                         "both arms)")  # fmt: skip
    if len(names) > 1:
        raise UsageError("--a-command/--b-command make one case: give at most one --command-name")
    a_argv = user_commands.split(a_command, "--a-command", path_env)
    b_argv = user_commands.split(b_command, "--b-command", path_env)
    if not names:
        a_name, b_name = user_commands.slug(a_argv), user_commands.slug(b_argv)
        name = a_name if a_name == b_name else f"{a_name}_vs_{b_name}"[: cases_api.MAX_NAME].strip("_")
        names = [name]
    a, b = (user_commands.parse([text], names, first_result, mark, prepare, path_env=path_env,
                                stop_at_first_result=stop_at_first_result) for text in (a_command, b_command))  # fmt: skip
    return a[0], b[0]


@dataclass(frozen=True)
class AbSpec:
    run: RunSpec  # cases, policies, profile settings, seed (python/env come from the arms)
    arms: tuple[Arm, Arm]
    min_rounds: int
    max_rounds: int
    precision: float | None  # CI half-width target (relative), or None for max_rounds rounds
    budget_s: float | None
    correction: str = "holm"
    fail_on: str = "regression"
    noise_floor: dict | None = None  # from `ttfr selftest` on this machine


def validate(ab: AbSpec) -> None:
    (a, b) = ab.arms

    def identity(arm):
        return arm.python, arm.env, arm.command and arm.command.argv, arm.path_first

    if identity(a) == identity(b):
        raise UsageError(
            "the two arms are identical: give --a/--b interpreters, --a-env/--b-env settings or --a-command/--b-command "
            "programs that differ "
            "(`ttfr selftest` runs A/A comparisons)"
        )
    if not 2 <= ab.min_rounds <= ab.max_rounds:
        raise UsageError(f"need 2 <= --min-rounds ({ab.min_rounds}) <= --max-rounds ({ab.max_rounds})")
    if ab.precision is not None and not 0 < ab.precision < 1:
        raise UsageError(f"--precision is a relative half-width in (0, 1), e.g. 0.05; got {ab.precision}")
    if ab.correction not in ("holm", "none"):
        raise UsageError(f"--correction must be holm or none, got {ab.correction!r}")
    if ab.fail_on not in ("regression", "inconclusive"):
        raise UsageError(f"--fail-on must be regression or inconclusive, got {ab.fail_on!r}")


def rounds_of(plan, seed: int) -> list[list]:
    """Tasks grouped by index (= round); round 0 puts each case's template producer and artifact makers first
    (a precompiled run before its maker would make the artifact again, unjournaled, then load another). A round's
    groups (--concurrency) come after its single runs, so that round 0's are after each case's gate:
    a case that fails it stops before any group of it runs."""
    by_index: dict[int, list] = {}
    for task in plan.tasks:
        if task.kind != EXPLAIN:  # after the rounds, however many ran (_explain)
            by_index.setdefault(task.index, []).append(task)
    rounds = []
    for index in sorted(by_index):
        tasks = sorted(by_index[index], key=lambda t: t.key)
        random.Random(f"{seed}:ab:{index}").shuffle(tasks)
        tasks.sort(key=lambda t: (t.kind == GROUP, not (index == 0 and (t.makes_template or t.kind in (PRIME, MAKE)))))
        rounds.append(tasks)
    return rounds


def a_first(round_index: int, phase: int) -> bool:
    """ABBA order: A runs first in rounds 0 and 3 of every 4 (shifted by `phase`): AB, BA, BA, AB."""
    return (round_index + phase) % 4 in (0, 3)


def paired_rounds(rounds: int, phase: int, measure_a, measure_b) -> list[tuple]:
    """(A's value, B's value) of `rounds` rounds, each arm measured once per round in ABBA order
    (`measure_a()`, `measure_b()`: one measurement each; whatever they return, None included)."""
    pairs = []
    for round_index in range(rounds):
        if a_first(round_index, phase):
            a = measure_a()
            b = measure_b()
        else:
            b = measure_b()
            a = measure_a()
        pairs.append((a, b))
    return pairs


def _abba_first(task, round_index: int, seed: int) -> int:
    """0 if A runs first in this round for this stream, else 1 (a seeded phase per stream)."""
    phase = random.Random(f"{seed}:phase:{task.case.id}|{task.policy or task.kind}").randrange(4)
    return 0 if a_first(round_index, phase) else 1


def min_rounds_for(min_rounds: int, max_rounds: int, precision: float | None) -> int:
    """Without a precision target every round runs; with one, stopping may begin at
    `min_rounds` (never above the maximum)."""
    return min(min_rounds, max_rounds) if precision else max_rounds


class ArmRun:
    def __init__(self, arm: Arm, root: Path, spec: RunSpec, session: str, command_line, progress, executors: Executors):
        self.arm = arm
        self.spec = replace(spec, python=arm.python, commands=(arm.command,) if arm.command else spec.commands)
        self.dir = start(self.spec, root, command_line, name=arm.name, session_id=session, arm=arm.recorded())

        base_env = {**os.environ, **arm.environment}
        if self.spec.commands:
            base_env = arm.command_env(base_env)
        self.plan = build_plan(self.spec)
        self.scheduler = Scheduler(self.plan, Journal(self.dir.journal), self.dir.scratch, executors, progress=progress,
                                   base_env=base_env, dataset_fields=dataset_fields(self.dir))  # fmt: skip


@dataclass
class AbOutcome:
    root: Path
    comparison: Comparison
    interrupted: bool

    @property
    def exit_code(self) -> int:
        if self.interrupted:
            return EXIT_INTERRUPTED
        return self.comparison.summary.exit_code


def execute(ab: AbSpec, out_parent: Path, command_line=None, progress=None, executors: Executors | None = None) -> AbOutcome:
    validate(ab)
    # every stream has a run per round: a concurrency point (--concurrency) a group per round, not the profile's few
    run = replace(ab.run, cold_runs=ab.max_rounds, warm_procs=ab.max_rounds, concurrency_rounds=ab.max_rounds)
    now = dt.datetime.now(dt.timezone.utc)
    root = Path(out_parent) / snapshot_id(now, encode(run.recorded()), run.deterministic)
    new_directory(root)
    session = os.urandom(8).hex()  # provenance, like a timestamp: never derived from the seed
    executors = executors or REAL
    arms = [ArmRun(a, root, run, session, command_line, progress or NullProgress(), executors) for a in ab.arms]
    if executors.starts_workers:
        ensure_worker_bytecode()
    plan = arms[0].plan
    rounds = rounds_of(plan, run.seed)
    if progress is not None:
        both = [t for t in plan.tasks for _ in arms]
        progress.start(len(both), both)
    started = time.monotonic()
    completed, interrupted, stop_reason = 0, False, "max_rounds"
    try:
        for round_index, tasks in enumerate(rounds):
            for task in tasks:
                first = _abba_first(task, round_index, run.seed)
                for side in (first, 1 - first):
                    arms[side].scheduler.run_task(task)
                _sync_stops(arms, task.case.id)
            completed = round_index + 1
            if completed >= ab.min_rounds:
                if ab.precision is not None and comparison.precise_enough(_partial(arms, ab, completed), ab.precision):
                    stop_reason = "precision"
                    break
                if ab.budget_s is not None and time.monotonic() - started > ab.budget_s:
                    stop_reason = "budget"
                    break
    except KeyboardInterrupt:
        interrupted, stop_reason = True, "interrupted"
    elapsed_s = time.monotonic() - started  # the rounds' time: the diagnostic processes after them are not rounds
    if not interrupted:
        try:
            _explain(plan, arms)
        except KeyboardInterrupt:  # the rounds ended as they did: their stop reason and time stand
            interrupted = True
    return AbOutcome(root, _finish(ab, arms, completed, stop_reason, session, elapsed_s), interrupted)


def _explain(plan, arms) -> None:
    """--explain: each case's diagnostic processes, after the last round that ran (whichever stopped them), in
    each arm (A, then B: unmeasured, so no order to balance), never beside a measured run."""
    for task in (t for t in plan.tasks if t.kind == EXPLAIN):
        for arm in arms:
            arm.scheduler.run_task(task)


def _sync_stops(arms, case_id: str) -> None:
    """A case stopped in one arm (unavailable, failed gate) stops in the other too."""
    for arm, other in ((arms[0], arms[1]), (arms[1], arms[0])):
        if case_id in arm.scheduler.stopped and case_id not in other.scheduler.stopped:
            other.scheduler.stop_case(case_id, f"stopped in arm {arm.arm.name}: {arm.scheduler.stopped[case_id]}")


def final_results(arms, completed: int, write: bool) -> tuple[list[list[CaseResult]], list[JournalEntry]]:
    """Case results of each arm over the first `completed` rounds (written when `write`),
    and every journal entry of both arms."""
    results, all_entries = [], []
    for arm in arms:
        rounds = max(completed, 1)
        spec = replace(arm.spec, cold_runs=rounds, warm_procs=rounds, concurrency_rounds=rounds)
        plan = build_plan(spec)
        journal_entries = Journal(arm.dir.journal).entries()
        all_entries += journal_entries
        entries = [e for e in journal_entries if e.index < completed]
        if write:
            record_spec(arm.dir, spec)
            _suite, cases = write_results(arm.dir, plan, entries)
        else:
            cases = case_results(plan, entries)
        results.append(cases)
    return results, all_entries


def _partial(arms, ab: AbSpec, completed: int) -> list[Record]:
    (cases_a, cases_b), _entries = final_results(arms, completed, write=False)
    return comparison.compare_cases(cases_a, cases_b, paired=True, noise_floor=ab.noise_floor, correction=ab.correction)


def _finish(ab: AbSpec, arms, completed: int, stop_reason: str, session: str, elapsed_s: float) -> Comparison:
    (cases_a, cases_b), entries = final_results(arms, completed, write=True)
    for arm in arms:
        arm.dir.unlock()  # taken when the arm's directory was created
    recorded = [RecordedArm(**copied(a.arm.recorded(), RecordedArm.__struct_fields__)) for a in arms]  # its plan's, as is
    return comparison.write_comparison(
        arms[0].dir.root.parent, cases_a, cases_b, paired=True, arms=recorded,
        session=session, correction=ab.correction, fail_on=ab.fail_on, noise_floor=ab.noise_floor, entries=entries,
        rounds=Rounds(completed=completed, min=ab.min_rounds, max=ab.max_rounds, precision=ab.precision,
                      budget_s=ab.budget_s, stopped_by=stop_reason, elapsed_s=elapsed_s),
    )  # fmt: skip
