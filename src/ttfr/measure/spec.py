"""Run specification: the validated answer to "what should this run measure, and how?".

Everything a user can get wrong is checked here, before any process is spawned.
"""

from __future__ import annotations

import math
import os
import random
import shlex
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path

from ttfr.child.job import FIELDS
from ttfr.errors import UnknownChoice, UsageError, unknown_choice
from ttfr.measure import catalog, datasets, user_cases, user_commands
from ttfr.redaction import redact_argv, redact_text
from ttfr.model.policies import COLD_POLICIES, CONCURRENCY_MODES, POLICIES, POLICY_ALIASES, WARM_PROCESS

# Upper limits of what a run may ask for: generous, but a typo (`--cold-runs 1000000000`)
# is refused before anything starts rather than queueing years of processes.
MAX_COLD_RUNS = 1000  # fresh processes per cold policy and case
MAX_WARM_PROCS = 100  # warm-regime processes per case
MAX_WARM_SAMPLES = 100_000  # samples per warm process
MAX_TIMEOUT_S = 86_400.0  # one day per run
MAX_THREADS = 1024
SEED_LIMIT = 2**32  # seeds are 0 <= seed < 2**32 (NumPy's and every framework's seed range)
MAX_WORKER_PROCESSES = 100_000  # cases x (cold policies x cold runs + warm processes) in one run
WORKER_PYTHON_TIMEOUT_S = 30.0  # the --python pre-check (`import ttfr.child.worker`) must answer within this
# `ttfr ab`: its rounds are each arm's cold runs and warm processes.
MAX_AB_ROUNDS = min(MAX_COLD_RUNS, MAX_WARM_PROCS)
MAX_AB_BUDGET_S = 7 * 86_400.0
MAX_CONCURRENCY = 64  # processes started at once in one group (--concurrency)
MAX_BUDGET_S = MAX_AB_BUDGET_S  # `ttfr run --budget`: the whole run's wall time
_DURATION_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0}


@dataclass(frozen=True)
class Profile:
    name: str
    cold_runs: int  # fresh processes per cold policy
    warm_procs: int  # fresh processes in the warm regime
    warm_samples: int  # samples per warm process
    min_sample_s: float  # one sample lasts at least this long (inner loop calibration)
    max_warmup_s: float
    timeout_s: float
    default_sizes: str  # "smallest" | "all"
    default_dtypes: tuple[str, ...]
    description: str
    concurrency_rounds: int = 1  # --concurrency: groups per (case, sharing mode, N)


PROFILES = {
    p.name: p
    for p in (
        Profile("quick", 2, 2, 10, 0.005, 1.0, 300.0, "smallest", ("float32",),
                "smallest sizes, f32, 2 cold runs per policy: a first look in minutes"),
        Profile("standard", 10, 5, 20, 0.01, 2.0, 600.0, "all", ("float32",),
                "all catalogued sizes, f32, 10 cold runs (order-statistic CI at 98%)", concurrency_rounds=3),
        Profile("publish", 20, 10, 30, 0.02, 5.0, 900.0, "all", ("float32", "float64"),
                "every catalogued case, 20 cold runs, 10 warm processes", concurrency_rounds=5),
    )
}  # fmt: skip


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

    def to_json(self) -> dict:
        data = asdict(self)
        data["cases"] = [c.id for c in self.cases]
        data["policies"] = list(self.policies)
        data["shard"] = list(self.shard) if self.shard else None
        data.pop("file_cases")
        data["case_files"] = [
            {"path": path, "sha256": sha256, "cases": [c.to_json() for c in self.file_cases if c.source == path]}
            for path, sha256 in self.case_files
        ]
        data["commands"] = [c.to_json() for c in self.commands]
        data["plan_cases"] = list(self.plan_cases)
        data["concurrency"] = list(self.concurrency)
        return data

    @classmethod
    def from_json(cls, data: dict, named: Named | None = None) -> RunSpec:
        """A stored spec (plan.json's). `named`: what the user named on the command line of a
        command that will run this spec (a resume, a replication): every program the spec names
        must be among them, or it is refused before anything runs (see unnamed_programs); its case
        files are then imported (checked against their recorded sha256). Without `named` (merge,
        export: reading only) nothing is imported: the cases come from the plan's record."""
        data = dict(data)
        recorded = data.get("case_files") or ()
        data["case_files"] = tuple((f["path"], f["sha256"]) for f in recorded)
        data["commands"] = tuple(user_commands.UserCommand.from_json(c) for c in data.get("commands") or ())
        if named is not None:
            _runnable_again(data["commands"])
            missing = unnamed_programs(data, named)
            if missing:
                raise UsageError("it names programs you did not name on this command line, and ttfr runs only those: "
                                 + "; ".join(missing))  # fmt: skip
            file_cases = user_cases.read_recorded(data["case_files"], data.get("timeout_s"))
        else:
            file_cases = [user_cases.UserCase.from_json(c, f["path"], f["sha256"]) for f in recorded
                          for c in _recorded_cases(f)]  # fmt: skip
        data["file_cases"] = tuple(file_cases)
        # their workloads, before their case ids are read
        known = catalog.BUILTIN.with_workloads(c.workload() for c in data["commands"])
        known = known.with_workloads(c.workload() for c in file_cases)
        known = _installed_cases_if_unknown(known, (), data["cases"])
        extra = (data["custom_size"],) if data.get("custom_size") else ()
        data["cases"] = tuple(known.parse_case_id(c, extra) for c in data["cases"])
        data["policies"] = tuple(data["policies"])
        data["shard"] = tuple(data["shard"]) if data.get("shard") else None
        data["plan_cases"] = tuple(data.get("plan_cases") or ())
        data["concurrency"] = tuple(data.get("concurrency") or ())
        return cls(**data)


@dataclass(frozen=True)
class Named:
    """The programs a user named on a command line (`--python`, `--case-file`, `--command`,
    `--prepare`): the only ones a stored plan may run. ttfr never runs a program because a file
    (plan.json, a result directory, a snapshot) names it: checking it by running it is running it."""

    python: str | None = None
    case_files: tuple[str, ...] = ()
    commands: tuple[str, ...] = ()
    prepare: tuple[str, ...] = ()
    python_recorded: bool = True  # False: the spec's python is not used (a replication runs this ttfr's own)


NOTHING_NAMED = Named()


def interpreter_path(python: str) -> str:
    """An interpreter as the user named it, made absolute (found on PATH if a bare name) but with
    its symlinks kept: every virtual environment's bin/python links to one base interpreter, and
    which environment it is, is the link's own location."""
    return os.path.abspath(os.path.expanduser(shutil.which(python) or python))


def _same_interpreter(recorded: str, given: str | None) -> bool:
    return given is not None and os.path.abspath(recorded) == interpreter_path(given)


def _same_file(recorded: str, given: str) -> bool:
    return os.path.realpath(recorded) == os.path.realpath(os.path.expanduser(given))


def _split_or_none(text: str):
    try:
        return shlex.split(text)
    except ValueError:
        return None


def unnamed_programs(data: dict, named: Named) -> list[str]:
    """What a stored spec would run that `named` does not name, each with the option that names it."""
    missing = []
    python = data.get("python")
    if named.python_recorded and python is not None and not _same_interpreter(python, named.python):
        missing.append(f"the workers' interpreter {python} (add --python {shlex.quote(python)})")
    if named.python_recorded and python is None and named.python is not None:
        missing.append(f"--python {named.python}: its workers ran ttfr's own interpreter (drop --python)")
    for path, _sha in data["case_files"]:
        if not any(_same_file(path, given) for given in named.case_files):
            missing.append(f"the case file {path} (add --case-file {shlex.quote(path)})")
    commands = [_split_or_none(text) for text in named.commands]
    prepares = [_split_or_none(text) for text in named.prepare]
    for command in data["commands"]:
        text = shlex.join(command.argv)
        if list(command.argv) not in commands:
            missing.append(f"the command `{text}` (add --command {shlex.quote(text)})")
        if command.prepare and list(command.prepare) not in prepares:
            prepare = shlex.join(command.prepare)
            missing.append(f"the --prepare step `{prepare}` (add --prepare {shlex.quote(prepare)})")
        if os.path.realpath(command.cwd) != os.path.realpath(os.getcwd()):
            missing.append(f"the command `{text}` runs in {command.cwd} (run ttfr from there)")
        elif moved := user_commands.program_moved(command):  # PATH finds another program by that name now
            missing.append(moved)
    return missing


def _runnable_again(commands) -> None:
    """A stored command runs again (a resume, a replication) only as it ran: not one whose secret the
    plan does not hold (`<redacted>` is not the command that ran), nor one whose program or files changed."""
    for command in commands:
        if command.redacted:
            raise UsageError(f"command {command.name} held a secret, which plan.json does not record, so it cannot be "
                             "run again: start a new run (pass secrets through the environment)")  # fmt: skip
        changed = user_commands.changed_files(command)
        if changed:
            raise UsageError(f"command {command.name}'s {changed[0]} changed or is gone since the run started (sha256 "
                             "in plan.json): restore it, or start a new run")  # fmt: skip


def _recorded_cases(recorded: dict) -> list[dict]:
    """A plan's record of a case file's cases; plans before 0.1.2 have none, and reading them would
    mean importing the file."""
    if "cases" not in recorded:
        raise UsageError(f"plan.json names the case file {recorded['path']} without its cases (ttfr before 0.1.2): "
                         "reading them would run the file; run the cases again with this ttfr")  # fmt: skip
    return recorded["cases"]


def _installed_cases_if_unknown(known: catalog.Catalog, workloads, case_ids) -> catalog.Catalog:
    """Installed packages' cases (entry-point group `ttfr.cases`) are imported only when a
    run names a workload or case id that nothing else provides: a broken or heavy package
    never touches a run that does not use it."""
    names = set(known.names())
    if any(w not in names for w in workloads) or not all(known.knows_case_id(c) for c in case_ids):
        return known.with_workloads(c.workload() for c in user_cases.read((), installed=True))
    return known


def _split(values, option: str | None = None, choices=()):
    """Accept repeated flags and comma-separated lists alike (a bare string is one value).

    A value that names nothing (`--cases ""`, a shell variable that expanded to nothing)
    is an error naming the option, never "everything"."""
    if isinstance(values, (str, int)):
        values = [values]
    out = []
    for value in values or ():
        names = [v.strip() for v in str(value).split(",") if v.strip()]
        if not names and option:
            listed = f"; valid: {', '.join(choices)}" if choices else ""
            raise UsageError(f"{option} was given an empty value {str(value)!r}: name at least one{listed}")
        out.extend(names)
    return out


def parse_policies(values) -> tuple[str, ...]:
    names = _split(values, "--cache-policy", [*POLICIES, *POLICY_ALIASES, "all"])
    if not names or names == ["all"]:
        return POLICIES
    chosen = []
    for name in names:
        policy = POLICY_ALIASES.get(name, name)
        if policy not in POLICIES:
            raise unknown_choice("cache policy", name, list(POLICIES) + list(POLICY_ALIASES) + ["all"])
        if policy not in chosen:
            chosen.append(policy)
    return tuple(p for p in POLICIES if p in chosen)


def _parse_int(text, what):
    try:
        return int(text)
    except ValueError:
        raise UsageError(f"{what} must be a whole number, got {text!r}") from None


def select_cases(
    known: catalog.Catalog,
    profile: Profile,
    case_ids=(),
    backends=(),
    workloads=(),
    sizes=(),
    dtypes=(),
    hf_sizes=(),
    custom_size=None,
) -> tuple[catalog.Case, ...]:
    """`hf_sizes`: HistFactory preset sizes chosen with --workspace-preset; `custom_size`: the
    parameter count of the --workspace file, whose cases are `custom` ones (neither: the
    profile's preset sizes). `--sizes N` on a HistFactory workload picks the --workspace file
    when it has N parameters, and the preset of N parameters unless only the file was meant
    (N is the file's count and that preset was not named with --workspace-preset)."""
    case_ids = _split(case_ids, "--cases", ["case ids from `ttfr list`"])
    backends = _split(backends, "--backends", catalog.BACKENDS)
    workloads = catalog.expand_workloads(_split(workloads, "--workloads", known.names()))
    sizes = _split(sizes, "--sizes", ["whole numbers (see `ttfr list`)"])
    dtypes = _split(dtypes, "--dtypes", catalog.DTYPES)
    extra = (custom_size,) if custom_size else ()
    if case_ids:
        if backends or workloads or sizes or dtypes:
            raise UsageError("--cases names whole case ids; do not combine it with --backends/--workloads/--sizes/--dtypes")
        cases = []
        for case_id in case_ids:
            try:
                cases.append(known.parse_case_id(case_id, extra))
            except UnknownChoice as exc:  # short: ~400 ids would bury the point; no typo of ours is likely yours
                hint = ("A case of your own needs the file that defines it: --case-file FILE "
                        "(its ids: `ttfr list --case-file FILE --user-only`).")  # fmt: skip
                raise unknown_choice("case id", case_id, exc.choices, limit=8, hint="" if exc.is_typo() else hint) from None
        return tuple(sorted(set(cases)))
    for name in backends:
        if name not in catalog.BACKENDS:
            raise unknown_choice("backend", name, catalog.BACKENDS)
    for name in workloads:
        if name not in known.workloads:
            raise unknown_choice("workload", name, known.names())
    for name in dtypes:
        if catalog.DTYPES.get(name, name) not in catalog.DTYPES.values():
            raise unknown_choice("dtype", name, list(catalog.DTYPES) + list(catalog.DTYPES.values()))
    size_values = [_parse_int(s, "--sizes") for s in sizes]
    dtype_values = [catalog.DTYPES.get(d, d) for d in dtypes]
    chosen_backends = backends or [name for name, b in catalog.BACKENDS.items() if not (b.diagnostic or b.opt_in)]
    chosen_workloads = workloads or [w for w, info in known.workloads.items() if info.default and not info.diagnostic]
    cases = set()
    for w_name in chosen_workloads:
        workload = known.workloads[w_name]
        for b_name in chosen_backends:
            if not catalog.supports(catalog.BACKENDS[b_name], workload):
                continue
            hf = w_name in catalog.HF_WORKLOADS
            if size_values:
                w_sizes = []
                for size in size_values:
                    if hf and size == custom_size:
                        w_sizes.append((size, True))
                        if size not in hf_sizes:
                            continue
                    catalog.check_size(workload, size, extra)
                    w_sizes.append((size, False))
            elif hf and (hf_sizes or custom_size):
                w_sizes = [(size, False) for size in hf_sizes] + ([(custom_size, True)] if custom_size else [])
            else:
                defaults = workload.sizes[:1] if profile.default_sizes == "smallest" else workload.sizes
                w_sizes = [(size, False) for size in defaults]
            w_dtypes = [d for d in (dtype_values or profile.default_dtypes) if d in workload.dtypes]
            if not w_dtypes and not dtype_values:
                w_dtypes = list(workload.dtypes[:1])
            for size, custom in w_sizes:
                for dtype in w_dtypes:
                    cases.add(catalog.Case(b_name, w_name, size, dtype, custom, info=workload))
    if not cases and dtype_values:
        offered = {w: [d for d in dtype_values if d in known.workloads[w].dtypes] for w in chosen_workloads}
        if not any(offered.values()):  # the dtypes, not the backends, left nothing
            listed = "; ".join(f"{w}: {', '.join(catalog.DTYPE_SHORT[d] for d in known.workloads[w].dtypes)}"
                               for w in chosen_workloads)  # fmt: skip
            asked = ", ".join(catalog.DTYPE_SHORT[d] for d in dtype_values)
            raise UsageError(f"no chosen workload is offered in --dtypes {asked} (bf16: the conversion routes only); "
                             f"dtypes offered: {listed}")  # fmt: skip
    if not cases:
        runs = "; ".join(
            f"{w}: " + ", ".join(b.name for b in catalog.BACKENDS.values() if catalog.supports(b, known.workloads[w]))
            for w in chosen_workloads
        )
        raise UsageError(f"no chosen backend ({', '.join(chosen_backends)}) runs the chosen workloads; backends that do: {runs}")
    idle = [b for b in backends if not any(c.backend == b for c in cases)]
    if idle:  # a backend asked for by name that would silently run nothing
        users = [w for w in chosen_workloads if known.workloads[w].source]
        why = (" (a case file's case runs only where it has a builder: @case.numpy, @case.jax, @case.torch)"
               if users else "")  # fmt: skip
        raise UsageError(f"--backends {', '.join(idle)}: runs none of the chosen workloads "
                         f"({', '.join(chosen_workloads)}){why}; drop it, or choose workloads it runs (`ttfr list`)")  # fmt: skip
    return tuple(sorted(cases))


def _parse_shard(text):
    if text is None:
        return None
    index, sep, count = str(text).partition("/")
    if not sep:
        raise UsageError(f"--shard takes K/N (e.g. 1/4), got {text!r}")
    i, n = _parse_int(index, "--shard K"), _parse_int(count, "--shard N")
    if not 1 <= i <= n:
        raise UsageError(f"--shard K/N needs 1 <= K <= N, got {text!r}")
    return i, n


def bounded(value, what: str, minimum: float, maximum: float) -> float:
    """A finite number in [minimum, maximum], else UsageError naming both limits."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise UsageError(f"{what} must be a finite number in {minimum:g}..{maximum:g}, got {value!r}")
    return _within(value, what, minimum, maximum, repr(value))


def whole(value, what: str, minimum: int, maximum: int) -> int:
    """A whole number in [minimum, maximum] (a float like 3.0 is accepted), else UsageError."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise UsageError(f"{what} must be a whole number >= {minimum}, got {value!r} (at most {maximum})")
    return _within(value, what, minimum, maximum, str(value))


def _within(value, what: str, minimum, maximum, shown: str):
    low, high = (f"{x:g}" if isinstance(x, float) else str(x) for x in (minimum, maximum))
    if value < minimum:
        raise UsageError(f"{what} must be >= {low}, got {value!r} (at most {high})")
    if value > maximum:
        raise UsageError(f"{what} {shown} is above the limit of {high}; valid: {low}..{high}")
    return value


def check_process_count(n_cases: int, policies, cold_runs: int, warm_procs: int) -> None:
    """At most MAX_WORKER_PROCESSES measured worker processes in one run."""
    per_case = sum(cold_runs for p in policies if p in COLD_POLICIES) + (warm_procs if WARM_PROCESS in policies else 0)
    total = n_cases * per_case
    if total > MAX_WORKER_PROCESSES:
        raise UsageError(
            f"this run would start {total} worker processes ({n_cases} cases x {per_case} runs each), above the limit "
            f"of {MAX_WORKER_PROCESSES}: choose fewer cases (--shard K/N splits them) or fewer --cold-runs/--warm-procs"
        )


def check_concurrency(cases, sizes: tuple[int, ...], rounds: int) -> None:
    """--concurrency: some selected case must compile in ttfr's worker (a group shares a compilation
    cache), and its groups count against the process limit (N members and a check each)."""
    if not sizes:
        return
    grouped = [c for c in cases if c.runs_groups]
    if not grouped:
        raise UsageError("--concurrency starts groups of cold processes that share a compilation cache, and none of "
                         "the selected cases compiles in ttfr's worker (jax_jit_*, torch_compile_*, pyhf_jax): "
                         "select one of those")  # fmt: skip
    total = len(grouped) * len(CONCURRENCY_MODES) * rounds * sum(n + 1 for n in sizes)
    if total > MAX_WORKER_PROCESSES:
        raise UsageError(f"--concurrency {','.join(map(str, sizes))} would start {total} worker processes in groups "
                         f"({len(grouped)} compiling cases x {len(CONCURRENCY_MODES)} sharing modes x {rounds} round(s)), "
                         f"above the limit of {MAX_WORKER_PROCESSES}: choose fewer cases or smaller groups")  # fmt: skip


def check_precision(precision) -> float | None:
    """--precision: a relative CI half-width in (0, 1), or None."""
    number = isinstance(precision, (int, float)) and not isinstance(precision, bool)
    if precision is not None and not (number and math.isfinite(precision) and 0 < precision < 1):
        raise UsageError(f"--precision is a relative CI half-width in (0, 1), e.g. 0.05; got {precision!r}")
    return None if precision is None else float(precision)


def parse_duration(value, option: str = "--budget", maximum: float = MAX_BUDGET_S) -> float | None:
    """`600`, `600s`, `10m`, `1.5h` -> seconds (1 s .. maximum); None stays None."""
    if value is None:
        return None
    if isinstance(value, str):
        text = value.strip().lower()
        scale = _DURATION_UNITS.get(text[-1:]) if text else None
        number = text[:-1] if scale else text
        try:
            seconds = float(number) * (scale or 1.0)
        except ValueError:
            raise UsageError(f"{option} is a duration like 600, 600s, 10m or 1.5h; got {value!r}") from None
        try:
            return bounded(seconds, option, 1.0, maximum)
        except UsageError:  # worded in what the user typed, not in converted seconds
            raise UsageError(f"{option} {value!r} is not a duration of 1 s to {maximum / 86_400:g} days "
                             "(e.g. 600, 600s, 10m, 1.5h)") from None  # fmt: skip
    return bounded(value, option, 1.0, maximum)


def check_ab_limits(rounds, min_rounds, precision=None, budget=None) -> float | None:
    """`ttfr ab`'s --rounds/--min-rounds/--precision/--budget, each within its limit (before
    anything is written); returns the budget in seconds. Its rounds are each arm's cold runs
    and warm processes per case."""
    whole(rounds, "--rounds", 2, MAX_AB_ROUNDS)
    whole(min_rounds, "--min-rounds", 2, MAX_AB_ROUNDS)
    check_precision(precision)
    return parse_duration(budget, "--budget", MAX_AB_BUDGET_S)


# Imports the worker and checks that its job takes every field this ttfr may send (a user's
# case fields, say): an older ttfr there would fail every run instead of the check.
_OLDER_WORKER = 86  # an exit code no interpreter uses for anything else
_WORKER_PROBE = (
    "import sys, ttfr.child.worker\n"
    "from ttfr.child.job import FIELDS\n"
    f"missing = sorted(set({sorted(name for name, _kind, _default in FIELDS)!r}) - {{f[0] for f in FIELDS}})\n"
    f"sys.exit(print(', '.join(missing), file=sys.stderr) or {_OLDER_WORKER} if missing else 0)\n"
)


def check_worker_python(python: str, env: dict | None = None, option: str = "--python") -> None:
    """The interpreter given for workers must exist and import this ttfr's worker, in the
    environment its workers get (`env`: what is added to ours), within
    WORKER_PYTHON_TIMEOUT_S. It runs under the supervisor, like a worker: in a session of its
    own, its whole process group killed when it does not answer or leaves anything behind, and
    registered with the sweeper meanwhile, so it dies with a ttfr killed outright."""
    import os
    import tempfile

    from ttfr.measure.supervisor import supervise

    environment = {**os.environ, **(env or {})}
    with tempfile.TemporaryFile() as output:
        ended = supervise([python, "-c", _WORKER_PROBE], environment, None, WORKER_PYTHON_TIMEOUT_S, output)
        if isinstance(ended, str):  # no such program; a NUL byte in the path
            raise UsageError(f"{option} {python!r} cannot be run: {ended.split(': ', 1)[-1]}") from None
        if ended.timed_out:
            raise UsageError(
                f"{option} {python!r} did not answer within {WORKER_PYTHON_TIMEOUT_S:g} s (running "
                "`import ttfr.child.worker`); it and every process it started were killed"
            )
        output.seek(0, os.SEEK_END)
        output.seek(max(0, output.tell() - 8192))
        # The interpreter's own words, as any recorded output: through the one redaction.
        last_lines = redact_text(output.read().decode("utf-8", "replace"), environment).strip().splitlines()
    if ended.exit_code == _OLDER_WORKER:
        raise UsageError(
            f"{option} {python!r} has an older ttfr worker: its jobs lack fields this ttfr sends "
            f"({(last_lines or ['?'])[-1]}); install this ttfr into that environment"
        )
    if ended.exit_code != 0:
        last = (last_lines or ["no output"])[-1]
        raise UsageError(
            f"{option} {python!r} cannot import ttfr's worker, ttfr.child.worker ({last}): install a ttfr with the "
            "same worker protocol into that environment (ttfr before the stage packages had ttfr.worker)"
        )


def _command_selection(commands, policies, **others) -> tuple[list[str], tuple[str, ...]]:
    """The case ids and policies of a run of `--command`s. Such a run measures its commands only,
    under the cold policies (a program has no warm regime: ttfr cannot call into it)."""
    options = {"case_files": "--case-file", "workspace_presets": "--workspace-preset"}  # the CLI's own names
    given = [name for name, value in others.items() if value not in (None, (), [], "")]
    chosen = [options.get(name, f"--{name.replace('_', '-')}") for name in given]
    if chosen:
        raise UsageError(f"--command measures programs, not ttfr's cases: drop {', '.join(chosen)} (run those "
                         "separately; --threads, --cache-policy and the run counts apply to commands)")  # fmt: skip
    chosen_policies = parse_policies(policies) if policies else COLD_POLICIES
    if WARM_PROCESS in chosen_policies:  # asked for by name (or `all`)
        given = ",".join(_split(policies))
        raise UsageError(f"--cache-policy {given} includes {WARM_PROCESS}, but a command has no warm regime (ttfr "
                         f"cannot call into a program); choose from {', '.join(COLD_POLICIES)}")  # fmt: skip
    return [user_commands.case_of(c).id for c in commands], chosen_policies


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


def parse_concurrency(values) -> tuple[int, ...]:
    """--concurrency: group sizes, each a whole number 1..MAX_CONCURRENCY, in the order given, once each."""
    sizes = []
    for word in _split(values, "--concurrency"):
        if not word.isdigit() or not 1 <= int(word) <= MAX_CONCURRENCY:
            raise UsageError(f"--concurrency takes group sizes from 1 to {MAX_CONCURRENCY}, e.g. 1,2,4,8; got {word!r}")
        if int(word) not in sizes:
            sizes.append(int(word))
    return tuple(sizes)


def build_spec(request: RunRequest) -> RunSpec:
    r = request
    profile, cases, backends, workloads, sizes, dtypes = r.profile, r.cases, r.backends, r.workloads, r.sizes, r.dtypes
    policies, cold_runs, warm_procs, warm_samples, timeout = r.policies, r.cold_runs, r.warm_procs, r.warm_samples, r.timeout
    deterministic, seed, threads, shard, python = r.deterministic, r.seed, r.threads, r.shard, r.python
    workspace, workspace_presets, signal, precision, budget = r.workspace, r.workspace_presets, r.signal, r.precision, r.budget
    commands, command_names, first_result, prepare = r.commands, r.command_names, r.first_result, r.prepare
    first_result_mark, command_path, stop_at_first_result = r.first_result_mark, r.command_path, r.stop_at_first_result
    keep_contended = r.keep_contended
    concurrency = parse_concurrency(r.concurrency)
    case_files = r.case_files
    if profile not in PROFILES:
        raise unknown_choice("profile", profile, PROFILES)
    prof = PROFILES[profile]
    user_command_list = user_commands.parse(commands, command_names, first_result, first_result_mark, prepare,
                                            path_env=command_path, stop_at_first_result=stop_at_first_result)  # fmt: skip
    known = catalog.BUILTIN.with_workloads(c.workload() for c in user_command_list)
    if user_command_list:
        cases, policies = _command_selection(
            user_command_list, policies, cases=cases, backends=backends, workloads=workloads, sizes=sizes, dtypes=dtypes,
            case_files=case_files, workspace=workspace, workspace_presets=workspace_presets, signal=signal, python=python,
            warm_procs=warm_procs, warm_samples=warm_samples,
        )  # fmt: skip
    case_files = (case_files,) if isinstance(case_files, (str, Path)) else tuple(case_files or ())
    if any(not str(f).strip() for f in case_files):
        raise UsageError("--case-file was given an empty value: name a Python file that defines ttfr.cases.Case objects")
    timeout = prof.timeout_s if timeout is None else bounded(timeout, "--timeout", 0.1, MAX_TIMEOUT_S)
    from_files = [c for c in user_cases.read(case_files, installed=False, timeout_s=timeout) if c.from_file]
    known = known.with_workloads(c.workload() for c in from_files)
    known = _installed_cases_if_unknown(known, _split(workloads), _split(cases))
    if case_files and not (cases or workloads):  # your files' cases, not the default suite
        workloads = [c.name for c in from_files]
    case_files = tuple(dict.fromkeys((c.source, c.sha256) for c in from_files))
    for option, value in (("--workspace", workspace), ("--signal", signal)):
        if value is not None and not str(value).strip():
            raise UsageError(f"{option} was given an empty value: name a pyhf workspace file / its CHANNEL/SAMPLE")
    if signal and not workspace:
        raise UsageError("--signal names a sample of the file given with --workspace; presets choose their own")
    user = datasets.load_user_workspace(workspace, signal) if workspace else None
    hf_sizes = datasets.preset_sizes(_split(workspace_presets, "--workspace-preset", catalog.HF_PRESET_SIZES))
    chosen = select_cases(known, prof, cases, backends, workloads, sizes, dtypes, hf_sizes, user.size if user else None)
    shard_pair = _parse_shard(shard)
    plan_cases = tuple(c.id for c in chosen) if shard_pair else ()
    unsharded = chosen
    if shard_pair:
        index, count = shard_pair
        chosen = tuple(c for position, c in enumerate(chosen) if position % count == index - 1)
        if not chosen:
            raise UsageError(f"shard {index}/{count} holds no case: the selection has fewer cases than shards")

    if seed is None and shard_pair and not deterministic:
        raise UsageError(f"--shard {shard} runs one slice of a plan that other shards run too: give every shard the "
                         "same --seed N (or --deterministic): they share its data and order, and can be merged")  # fmt: skip
    if seed is None:
        seed = 0 if deterministic else random.SystemRandom().randrange(2**31)
    seed = whole(seed, "--seed", 0, SEED_LIMIT - 1)
    if threads is not None:
        threads = whole(threads, "--threads", 1, MAX_THREADS)
    cold_runs = prof.cold_runs if cold_runs is None else whole(cold_runs, "--cold-runs", 1, MAX_COLD_RUNS)
    warm_procs = prof.warm_procs if warm_procs is None else whole(warm_procs, "--warm-procs", 1, MAX_WARM_PROCS)
    warm_samples = prof.warm_samples if warm_samples is None else whole(warm_samples, "--warm-samples", 3, MAX_WARM_SAMPLES)
    chosen_policies = parse_policies(policies)
    precision = check_precision(precision)
    budget_s = parse_duration(budget)
    if budget_s is not None and precision is None:
        raise UsageError("--budget limits the runs --precision adds: give --precision too (e.g. --precision 0.05 --budget 10m)")
    if precision is not None and deterministic:
        raise UsageError("--deterministic promises the same JSON on every run but for timings, and --precision adds "
                         "runs according to timings: drop one (--seed N alone fixes the data and the order)")  # fmt: skip
    check_process_count(len(chosen), chosen_policies, cold_runs, warm_procs)
    # the whole plan's cases, not this shard's: every shard of one plan is planned alike (ttfr merge checks)
    check_concurrency(unsharded, concurrency, prof.concurrency_rounds)
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
        concurrency=concurrency,
        concurrency_rounds=prof.concurrency_rounds,
    )
