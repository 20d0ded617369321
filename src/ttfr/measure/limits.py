"""What a run may ask for: the upper limits of its counts, times and sizes, and the checks that
refuse a value outside them (exit 2, naming the limit) before anything starts."""

from __future__ import annotations

import math

from ttfr.errors import UsageError
from ttfr.model.policies import CONCURRENCY_MODES, WARM_PROCESS, is_cold, precompiled_parts

# Upper limits of what a run may ask for: generous, but a typo (`--cold-runs 1000000000`)
# is refused before anything starts rather than queueing years of processes.
MAX_COLD_RUNS = 1000  # fresh processes per cold policy and case
MAX_WARM_PROCS = 100  # warm-regime processes per case
MAX_WARM_SAMPLES = 100_000  # samples per warm process
MAX_TIMEOUT_S = 86_400.0  # one day per run
MAX_THREADS = 1024
SEED_LIMIT = 2**32  # seeds are 0 <= seed < 2**32 (NumPy's and every framework's seed range)
MAX_WORKER_PROCESSES = 100_000  # cases x (cold policies x cold runs + warm processes) in one run
# `ttfr ab`: its rounds are each arm's cold runs and warm processes.
MAX_AB_ROUNDS = min(MAX_COLD_RUNS, MAX_WARM_PROCS)
MAX_AB_BUDGET_S = 7 * 86_400.0
MAX_CONCURRENCY = 64  # processes started at once in one group (--concurrency)
MAX_BUDGET_S = MAX_AB_BUDGET_S  # `ttfr run --budget`: the whole run's wall time
_DURATION_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0}


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


def check_process_count(cases, policies, cold_runs: int, warm_procs: int) -> None:
    """At most MAX_WORKER_PROCESSES measured worker processes in one run (a precompiled policy counts for the cases
    whose backend offers its mechanism)."""
    n_cases = len(cases)

    def runs(case) -> int:
        cold = [p for p in policies if is_cold(p) and (not precompiled_parts(p)
                                                       or precompiled_parts(p)[0] in case.backend_info.precompiled)]  # fmt: skip
        return cold_runs * len(cold) + (warm_procs if WARM_PROCESS in policies else 0)

    counts = [runs(case) for case in cases]
    total, per_case = sum(counts), max(counts, default=0)
    if total > MAX_WORKER_PROCESSES:
        raise UsageError(
            f"this run would start {total} worker processes ({n_cases} cases, up to {per_case} runs each), above the limit "
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
