"""Run specification: the validated answer to "what should this run measure, and how?" (RunSpec),
made from what the user asked for (RunRequest) by build_spec, and stored as plan.json.

Everything a user can get wrong is checked before any process is spawned: the limits
(measure/limits.py), the selection (measure/selection.py), the programs a stored plan may run
(measure/resume.py) and the workers' interpreter (measure/worker_probe.py).
"""

from __future__ import annotations

import random
import shlex
from dataclasses import dataclass
from pathlib import Path

from ttfr.errors import UsageError, unknown_choice
from ttfr.measure import catalog, datasets, user_cases, user_commands
from ttfr.measure.limits import (
    MAX_COLD_RUNS,
    MAX_THREADS,
    MAX_TIMEOUT_S,
    MAX_WARM_PROCS,
    MAX_WARM_SAMPLES,
    SEED_LIMIT,
    bounded,
    check_concurrency,
    check_precision,
    check_process_count,
    parse_duration,
    whole,
)
from ttfr.measure.profiles import PROFILES
from ttfr.measure.resume import Named, check_runnable_again, interpreter_path, recorded_cases, unnamed_programs
from ttfr.measure.selection import (
    parse_concurrency,
    command_selection,
    offered_policies,
    parse_policies,
    parse_shard,
    select_cases,
    split_values,
    with_installed_cases,
)
from ttfr.measure.worker_probe import check_worker_python
from ttfr.model.base import UNSET, copied
from ttfr.model.plan import CaseFile, PlanSpec
from ttfr.redaction import redact_argv


@dataclass(frozen=True)
class RunSpec:
    cases: tuple[catalog.Case, ...]
    policies: tuple[str, ...]
    profile: str
    cold_runs: int
    warm_procs: int
    warm_samples: int
    min_sample_s: float
    max_warmup_s: float
    timeout_s: float
    deterministic: bool
    seed: int  # input data seed and round-order seed
    threads: int | None = None
    shard: tuple[int, int] | None = None  # (index, count), 1-based index
    python: str | None = None  # interpreter for workers (default: this one)
    workspace: str | None = None  # a user's HistFactory workspace (absolute path)
    signal: str | None = None  # CHANNEL/SAMPLE of that workspace's signal
    custom_size: int | None = None  # its parameter count
    precision: float | None = None  # --precision: relative 95% CI half-width every statistic should reach
    budget_s: float | None = None  # --budget: wall-time limit of the run (its profile's runs always complete)
    case_files: tuple[tuple[str, str], ...] = ()  # --case-file: (absolute path, sha256) of the users' case files
    # their cases as read when the run was planned: a reader of plan.json knows them without
    # importing the files (running their code)
    file_cases: tuple[user_cases.UserCase, ...] = ()
    keep_contended: bool = False  # --keep-contended: contended runs stay in the figures (flagged as such)
    explain: bool = False  # --explain: a diagnostic process per case and cold policy, after the measured runs
    commands: tuple[user_commands.UserCommand, ...] = ()  # --command: the programs of the `command` cases
    # --shard K/N: every case of the plan the shards share (this shard's are `cases`), so that
    # `ttfr merge` can tell the shards of one plan from slices of different ones
    plan_cases: tuple[str, ...] = ()
    # --concurrency: group sizes N; each compiling case also starts N processes at once per sharing mode
    concurrency: tuple[int, ...] = ()
    concurrency_rounds: int = 1  # groups per (case, sharing mode, N): the profile's

    def command(self, name: str) -> user_commands.UserCommand:
        return next(c for c in self.commands if c.name == name)

    def resume_command(self, root) -> str:
        """The command line that resumes a run of this spec: with the programs it runs named again
        (a resume runs none that its plan.json alone names)."""
        words = ["ttfr", "run", "--resume", str(root)] + (["--python", self.python] if self.python else [])
        words += [word for path, _sha in self.case_files for word in ("--case-file", path)]
        words += [word for c in self.commands for word in ("--command", c.text)]  # redacted, as it is shown
        prepares = dict.fromkeys(shlex.join(redact_argv(c.prepare)) for c in self.commands if c.prepare)
        words += [word for text in prepares for word in ("--prepare", text)]
        return shlex.join(words)

    def recorded(self) -> PlanSpec:
        """This spec as plan.json records it (its `spec`): the cases by id, each case file with the
        cases read from it, each command through the one redaction."""
        return PlanSpec(
            **copied(self, _RECORDED_AS_IS),
            **{name: _float(getattr(self, name)) for name in _RECORDED_FLOATS},
            cases=[c.id for c in self.cases],
            policies=list(self.policies),
            shard=list(self.shard) if self.shard else None,
            case_files=[
                CaseFile(path=path, sha256=sha256, cases=[c.recorded() for c in self.file_cases if c.source == path])
                for path, sha256 in self.case_files
            ],
            commands=[c.recorded() for c in self.commands],
            plan_cases=list(self.plan_cases),
            concurrency=list(self.concurrency),
        )

    @classmethod
    def from_recorded(cls, stored: PlanSpec, named: Named | None = None) -> RunSpec:
        """A stored spec (plan.json's). `named`: what the user named on the command line of a
        command that will run this spec (a resume, a replication): every program the spec names
        must be among them, or it is refused before anything runs (see unnamed_programs); its case
        files are then imported (checked against their recorded sha256). Without `named` (merge,
        export: reading only) nothing is imported: the cases come from the plan's record. Fields a
        later release added are absent (UNSET) from older plans: they take their defaults."""
        recorded = stored.case_files or ()
        case_files = tuple((f.path, f.sha256) for f in recorded)
        commands = tuple(user_commands.UserCommand.from_recorded(c) for c in stored.commands or ())
        python = stored.python or None
        if named is not None:
            check_runnable_again(commands)
            missing = unnamed_programs(python, case_files, commands, named)
            if missing:
                raise UsageError("it names programs you did not name on this command line, and ttfr runs only those: "
                                 + "; ".join(missing))  # fmt: skip
            file_cases = user_cases.read_recorded(case_files, stored.timeout_s)
        else:
            file_cases = [user_cases.UserCase.from_recorded(c, f.path, f.sha256) for f in recorded
                          for c in recorded_cases(f)]  # fmt: skip
        # their workloads, before their case ids are read
        known = catalog.BUILTIN.with_workloads(c.workload() for c in commands)
        known = known.with_workloads(c.workload() for c in file_cases)
        known = with_installed_cases(known, (), stored.cases)
        extra = (stored.custom_size,) if stored.custom_size else ()
        given = (name for name in _RECORDED_AS_IS + _RECORDED_FLOATS if getattr(stored, name) is not UNSET)
        return cls(
            **copied(stored, given),
            cases=tuple(known.parse_case_id(c, extra) for c in stored.cases),
            policies=tuple(stored.policies),
            shard=tuple(stored.shard) if stored.shard else None,
            case_files=case_files,
            file_cases=tuple(file_cases),
            commands=commands,
            plan_cases=tuple(stored.plan_cases or ()),
            concurrency=tuple(stored.concurrency or ()),
        )


# RunSpec's fields plan.json records as they are (the rest are converted by RunSpec.recorded), and
# those it records as floats (`600.0` for a budget given as 600, as plan.json's floats decode)
_RECORDED_AS_IS = ("profile", "cold_runs", "warm_procs", "warm_samples", "deterministic", "seed", "threads", "python",
                   "workspace", "signal", "custom_size", "keep_contended", "concurrency_rounds", "explain")  # fmt: skip
_RECORDED_FLOATS = ("min_sample_s", "max_warmup_s", "timeout_s", "precision", "budget_s")


def _float(value: float | None) -> float | None:
    return None if value is None else float(value)


@dataclass(frozen=True)
class RunRequest:
    """What a user asked for, as given (the command line, `ttfr ab`, a test): every option of a
    run before it is checked. build_spec checks it all (exit code 2, before anything runs) and
    makes the RunSpec that is planned and recorded."""

    profile: str = "quick"
    cases: object = ()  # comma lists, repeated options, or sequences of them: as the command line gives them
    backends: object = ()
    workloads: object = ()
    sizes: object = ()
    dtypes: object = ()
    policies: object = ()
    cold_runs: object = None
    warm_procs: object = None
    warm_samples: object = None
    timeout: object = None
    deterministic: bool = False
    seed: object = None
    threads: object = None
    shard: str | None = None
    python: str | None = None
    workspace: object = None
    workspace_presets: object = ()
    signal: str | None = None
    precision: object = None
    budget: object = None
    case_files: object = ()
    # `ttfr run --command`: the programs, their names and how their first result is taken
    commands: object = ()
    command_names: object = ()
    first_result: str | None = None
    first_result_mark: bool = False
    prepare: object = ()
    command_path: str | None = None  # the PATH a command's program is looked up on (an arm's, in `ttfr ab`)
    stop_at_first_result: bool = False
    keep_contended: bool = False
    concurrency: object = ()
    explain: bool = False


def build_spec(request: RunRequest) -> RunSpec:
    r = request
    profile, deterministic, python = r.profile, r.deterministic, r.python
    workspace, keep_contended = r.workspace, r.keep_contended
    concurrency = parse_concurrency(r.concurrency)
    if profile not in PROFILES:
        raise unknown_choice("profile", profile, PROFILES)
    prof = PROFILES[profile]
    selected = _select_cases(r, prof)
    chosen, shard_pair, user, timeout = selected.chosen, selected.shard, selected.user, selected.timeout
    user_command_list, case_files, from_files = selected.commands, selected.case_files, selected.from_files
    plan_cases = tuple(c.id for c in selected.unsharded) if shard_pair else ()
    seed = _seed(r, shard_pair)
    threads = None if r.threads is None else whole(r.threads, "--threads", 1, MAX_THREADS)
    cold_runs = prof.cold_runs if r.cold_runs is None else whole(r.cold_runs, "--cold-runs", 1, MAX_COLD_RUNS)
    warm_procs = prof.warm_procs if r.warm_procs is None else whole(r.warm_procs, "--warm-procs", 1, MAX_WARM_PROCS)
    warm_samples = (prof.warm_samples if r.warm_samples is None
                    else whole(r.warm_samples, "--warm-samples", 3, MAX_WARM_SAMPLES))  # fmt: skip
    # a precompiled policy where a chosen backend offers its mechanism (one named that none offers: exit 2)
    chosen_policies = offered_policies(parse_policies(selected.policies), selected.unsharded, r.policies)
    precision, budget_s = _precision_and_budget(r)
    check_process_count(chosen, chosen_policies, cold_runs, warm_procs)
    # the whole plan's cases, not this shard's: every shard of one plan is planned alike (ttfr merge checks)
    check_concurrency(selected.unsharded, concurrency, prof.concurrency_rounds)
    if precision is not None and keep_contended:
        raise UsageError("--precision adds clean runs until the figures are precise, and --keep-contended keeps the "
                         "contended ones in the figures: choose one")  # fmt: skip
    if python is not None:
        python = interpreter_path(python)  # as found now: a resume must name this one, not whatever PATH finds then
        check_worker_python(python)
    return RunSpec(
        plan_cases=plan_cases,
        commands=tuple(c for c in user_command_list if any(case.workload == c.name for case in chosen)),
        case_files=tuple(f for f in case_files if any(c.workload_info.source == f[0] for c in chosen)),
        file_cases=tuple(c for c in from_files if any(c.source == case.workload_info.source for case in chosen)),
        cases=chosen,
        policies=chosen_policies,
        profile=profile,
        cold_runs=cold_runs,
        warm_procs=warm_procs,
        warm_samples=warm_samples,
        min_sample_s=prof.min_sample_s,
        max_warmup_s=prof.max_warmup_s,
        timeout_s=float(timeout),
        deterministic=bool(deterministic),
        seed=int(seed),
        threads=threads,
        shard=shard_pair,
        python=python,
        workspace=str(Path(workspace).resolve()) if workspace else None,
        signal="/".join(user.signal) if user else None,
        custom_size=user.size if user else None,
        precision=precision,
        budget_s=budget_s,
        keep_contended=bool(keep_contended),
        explain=bool(r.explain),
        concurrency=concurrency,
        concurrency_rounds=prof.concurrency_rounds,
    )


@dataclass(frozen=True)
class _Selection:
    """What a request's case options select: this shard's cases and the whole plan's, the
    `--command` programs and case files they may come from, the user's workspace, the policies
    as given (or as a run of commands sets them) and the timeout the case files were read under."""

    chosen: tuple[catalog.Case, ...]  # this shard's cases (every case without --shard)
    unsharded: tuple[catalog.Case, ...]
    shard: tuple[int, int] | None
    commands: tuple[user_commands.UserCommand, ...]
    from_files: list[user_cases.UserCase]
    case_files: tuple[tuple[str, str], ...]  # (path, sha256) of each file that gave a case
    user: datasets.Workspace | None  # --workspace (None: presets only)
    policies: object  # still to be parsed
    timeout: float


def _select_cases(r: RunRequest, prof) -> _Selection:
    """The cases of the request, its commands' and case files' among them, this shard's slice."""
    cases, policies, workloads, case_files = r.cases, r.policies, r.workloads, r.case_files
    user_command_list = user_commands.parse(
        r.commands, r.command_names, r.first_result, r.first_result_mark, r.prepare,
        path_env=r.command_path, stop_at_first_result=r.stop_at_first_result,
    )  # fmt: skip
    known = catalog.BUILTIN.with_workloads(c.workload() for c in user_command_list)
    if user_command_list:
        cases, policies = command_selection(
            user_command_list, policies, cases=cases, backends=r.backends, workloads=workloads, sizes=r.sizes,
            dtypes=r.dtypes, case_files=case_files, workspace=r.workspace, workspace_presets=r.workspace_presets,
            signal=r.signal, python=r.python, warm_procs=r.warm_procs, warm_samples=r.warm_samples,
        )  # fmt: skip
    case_files = (case_files,) if isinstance(case_files, (str, Path)) else tuple(case_files or ())
    if any(not str(f).strip() for f in case_files):
        raise UsageError("--case-file was given an empty value: name a Python file that defines ttfr.cases.Case objects")
    timeout = prof.timeout_s if r.timeout is None else bounded(r.timeout, "--timeout", 0.1, MAX_TIMEOUT_S)
    from_files = [c for c in user_cases.read(case_files, installed=False, timeout_s=timeout) if c.from_file]
    known = known.with_workloads(c.workload() for c in from_files)
    known = with_installed_cases(known, split_values(workloads), split_values(cases))
    if case_files and not (cases or workloads):  # your files' cases, not the default suite
        workloads = [c.name for c in from_files]
    case_files = tuple(dict.fromkeys((c.source, c.sha256) for c in from_files))
    user = _user_workspace(r.workspace, r.signal)
    hf_sizes = datasets.preset_sizes(split_values(r.workspace_presets, "--workspace-preset", catalog.HF_PRESET_SIZES))
    custom_size = user.size if user else None
    chosen = select_cases(known, prof, cases, r.backends, workloads, r.sizes, r.dtypes, hf_sizes, custom_size)
    shard_pair = parse_shard(r.shard)
    unsharded = chosen
    if shard_pair:
        index, count = shard_pair
        chosen = tuple(c for position, c in enumerate(chosen) if position % count == index - 1)
        if not chosen:
            raise UsageError(f"shard {index}/{count} holds no case: the selection has fewer cases than shards")
    return _Selection(chosen, unsharded, shard_pair, user_command_list, from_files, case_files, user, policies, timeout)


def _user_workspace(workspace, signal) -> datasets.Workspace | None:
    """The user's workspace (--workspace, with its --signal), read and checked; None: none given."""
    for option, value in (("--workspace", workspace), ("--signal", signal)):
        if value is not None and not str(value).strip():
            raise UsageError(f"{option} was given an empty value: name a pyhf workspace file / its CHANNEL/SAMPLE")
    if signal and not workspace:
        raise UsageError("--signal names a sample of the file given with --workspace; presets choose their own")
    return datasets.load_user_workspace(workspace, signal) if workspace else None


def _seed(r: RunRequest, shard_pair: tuple[int, int] | None) -> int:
    """--seed, or a fresh one (0 with --deterministic); the shards of one plan must be given theirs."""
    seed = r.seed
    if seed is None and shard_pair and not r.deterministic:
        raise UsageError(f"--shard {r.shard} runs one slice of a plan that other shards run too: give every shard the "
                         "same --seed N (or --deterministic): they share its data and order, and can be merged")  # fmt: skip
    if seed is None:
        seed = 0 if r.deterministic else random.SystemRandom().randrange(2**31)
    return whole(seed, "--seed", 0, SEED_LIMIT - 1)


def _precision_and_budget(r: RunRequest) -> tuple[float | None, float | None]:
    """--precision and --budget, checked against each other and --deterministic."""
    precision = check_precision(r.precision)
    budget_s = parse_duration(r.budget)
    if budget_s is not None and precision is None:
        raise UsageError("--budget limits the runs --precision adds: give --precision too (e.g. --precision 0.05 --budget 10m)")
    if precision is not None and r.deterministic:
        raise UsageError("--deterministic promises the same JSON on every run but for timings, and --precision adds "
                         "runs according to timings: drop one (--seed N alone fixes the data and the order)")  # fmt: skip
    return precision, budget_s
