"""`ttfr selftest`: what this machine can resolve, measured on it.

- A/A: comparisons of identical arms (cold: the no-op case's TTFR; warm: a spin call),
  each `rounds` paired rounds in ABBA order through real worker processes, judged like
  `ttfr ab` judges one comparison (alpha 0.01). A gate false alarm is a `regression`
  verdict (what makes `ttfr ab` exit 3); a significant difference in either direction is
  reported beside it.
- Injected slowdowns (warm): arm B does +5/+10/+20% real extra work in the measured call
  (TTFR_SPIN_EXTRA); the injected ratio itself is measured in a fresh process beside every
  comparison (the two loops interleaved, the median over all comparisons is the truth),
  and we report how often the gate detected it and how often the reported CI covered it.
Every rate carries its Clopper-Pearson 95% interval: 200 comparisons resolve a rate to
about +-1.5 points, 60 to about +-8.
The result is stored per machine; `ttfr ab` takes its noise floor (the 95th percentile of
|B/A - 1| over the A/A comparisons) into delta = max(3%/5%, 2 x noise floor).
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import msgspec
from scipy import stats as sps

from ttfr.analyse import comparison_stats as comparison
from ttfr.errors import MeasurementFailed
from ttfr.model.base import decode
from ttfr.model.comparison import REGRESSION, Effect
from ttfr.model.selftest import (
    SELFTEST_SCHEMA,
    IdenticalArms,
    InjectedSlowdown,
    PowerCheck,
    Rate,
    RoundsForPower,
    SelfTest,
)
from ttfr.analyse import runs
from ttfr.artifacts import manifest
from ttfr.artifacts.store import validate, write_json
from ttfr.child.job import WARM, Job
from ttfr.pipeline import interleaved
from ttfr.measure import catalog
from ttfr.measure.spawn import ensure_worker_bytecode, run_worker

SCHEMA = SELFTEST_SCHEMA
SPIN_SIZE = 40  # thousand iterations: ~1-2 ms per call on this kind of machine
LEVELS = (0.05, 0.10, 0.20)


def store_path() -> Path:
    root = os.environ.get("TTFR_STATE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "ttfr")
    return Path(root) / f"selftest-{manifest.machine_id() or 'unknown'}.json"


def load_stored() -> SelfTest | None:
    """This machine's stored self-test, or None (missing, stale or broken: ignored)."""
    try:
        data = json.loads(store_path().read_text())
        validate(data, SCHEMA)
        return decode(data, SelfTest)
    except Exception:  # noqa: BLE001 - a missing, stale or broken file is ignored
        return None


def load_noise_floor() -> dict | None:
    """This machine's stored noise floor, or None (ttfr ab then uses the fixed minimums)."""
    stored = load_stored()
    return dict(stored.noise_floor) if stored else None


def rounds_advice(stored: SelfTest | None, rounds: int, precision: float | None) -> str | None:
    """A note before `ttfr ab` runs fixed rounds that this machine's self-test says are too
    few to detect +10% with 80% power (None when they suffice, or nothing is known)."""
    if precision is not None or not stored:
        return None
    short = [(regime, need) for regime, need in sorted((stored.rounds_for_power or {}).items())
             if need.rounds and need.rounds > rounds and need.precision is not None]  # fmt: skip
    if not short:
        return None
    parts = [f"{regime} ≈ {need.rounds} (--precision {need.precision:.3f})" for regime, need in short]
    return (f"note: ttfr selftest found that detecting +10% with 80% power here takes more than --rounds {rounds}: "
            f"{'; '.join(parts)} paired rounds; --precision adds rounds until then")  # fmt: skip


def _job(workload: str, size: int, mode: str) -> Job:
    job = Job(mode=mode, adapter=catalog.BACKENDS["python"].adapter, workload=workload, size=size, dtype="float64")
    if mode == WARM:
        job = job.replace(samples=9, min_sample_s=0.002, max_warmup_s=0.1)
    return job


def _value(result, mode: str) -> float | None:
    if result.outcome != "ok":
        return None
    if mode == "warm":
        return statistics.median(result.record.warm.samples_s)
    return runs.run_metrics(result.spawn_ns, result.reaped_ns, result.record).ttfr_s


def paired_series(regime: str, extra: float, rounds: int, python: str, phase: int) -> tuple[list, list]:
    """`rounds` paired measurements, A then B or B then A in ABBA order."""
    mode = "warm" if regime == "warm" else "cold"
    workload, size = ("spin", SPIN_SIZE) if regime == "warm" else ("noop", 1)
    env_a = dict(os.environ, TTFR_SPIN_EXTRA="0")
    env_b = dict(os.environ, TTFR_SPIN_EXTRA=repr(extra))

    def measure(env):
        return lambda: _value(run_worker(_job(workload, size, mode), env, 60.0, python=python), mode)

    pairs = interleaved.paired_rounds(rounds, phase, measure(env_a), measure(env_b))
    kept = [(a, b) for a, b in pairs if a is not None and b is not None]
    return [a for a, _ in kept], [b for _, b in kept]


def measured_ratio_fresh(extra: float, python: str) -> float | None:
    """`spin.measured_ratio` in a fresh process of the arms' interpreter: the truth is sampled
    across processes and across the run's time, like the comparisons it is checked against."""
    code = f"from ttfr.child.workloads import spin; print(repr(spin.measured_ratio({SPIN_SIZE}, {extra!r})))"
    try:
        done = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=60)
        return float(done.stdout.strip()) if done.returncode == 0 else None
    except (subprocess.TimeoutExpired, OSError, ValueError):  # a process that hung or could not say: no truth from it
        return None


def rate(count: int, total: int) -> Rate:
    """A proportion with its exact (Clopper-Pearson) 95% interval."""
    if total == 0:
        return Rate(count=0, total=0, rate=None, ci95=None)
    interval = sps.binomtest(count, total).proportion_ci(confidence_level=0.95, method="exact")
    return Rate(count=int(count), total=int(total), rate=count / total, ci95=[float(interval.low), float(interval.high)])


def _judge(a, b, regime: str) -> Effect:
    effect = comparison.paired([math.log(v) for v in a], [math.log(v) for v in b])
    return comparison.judge([effect], [comparison.delta_for(regime)], correction="none")[0]


def _measured(judged: list[Effect], what: str, python: str) -> list[Effect]:
    """The comparisons that had paired runs to judge; none at all is a failed self-test, said so."""
    measured = [j for j in judged if j.ratio is not None]
    if not measured:
        raise MeasurementFailed(f"every {what} comparison lacked paired runs: the workers of {python} failed or timed "
                                "out in each round, so there is nothing to calibrate")  # fmt: skip
    return measured


def _aa_summary(judged: list[Effect]) -> IdenticalArms:
    alarms = sum(j.verdict == REGRESSION for j in judged)
    significant = sum(j.p_gate < j.gate_alpha for j in judged)
    deviations = sorted(abs(j.ratio - 1.0) for j in judged)
    floor = deviations[min(len(deviations) - 1, int(math.ceil(0.95 * len(deviations))) - 1)]
    detectable = [j.smallest_detectable for j in judged if j.smallest_detectable is not None]
    return IdenticalArms(
        comparisons=len(judged), false_alarms=int(alarms), false_alarm_rate=alarms / len(judged),
        false_alarm=rate(alarms, len(judged)), significant_either_way=rate(significant, len(judged)),
        noise_floor_p95=floor,
        median_ci_half_width=statistics.median(math.expm1(comparison.log_half_width(j.ci)) for j in judged),
        median_smallest_detectable=statistics.median(detectable) if detectable else None,
    )  # fmt: skip


def _injected(level: float, judged: list[Effect], truths: list[float]) -> InjectedSlowdown:
    """How often a slowdown of `level` (truly `truths`, as fresh processes measured it) was caught."""
    truth = statistics.median(truths)
    detected = sum(j.verdict == REGRESSION for j in judged)
    significant = sum(j.p_gate < j.gate_alpha and j.ratio > 1 for j in judged)
    covered = sum(j.ci[0] <= truth <= j.ci[1] for j in judged)
    return InjectedSlowdown(
        nominal=level, measured_ratio=truth, measured_ratio_range=[min(truths), max(truths)],
        truth_processes=len(truths), comparisons=len(judged),
        detected_as_regression=detected / len(judged), detected=rate(detected, len(judged)),
        significant_slowdown=significant / len(judged),
        ci_coverage=covered / len(judged), coverage=rate(covered, len(judged)),
        median_estimate=statistics.median(j.ratio for j in judged),
    )  # fmt: skip


def run(aa: int = 40, per_level: int = 20, rounds: int = 20, python: str | None = None, progress=None) -> SelfTest:
    python = python or sys.executable
    ensure_worker_bytecode()
    say = progress or (lambda _message: None)
    started = time.monotonic()
    created_at = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    identical = {}
    for regime in ("cold", "warm"):
        judged = []
        for i in range(aa):
            say(f"A/A {regime} {i + 1}/{aa}")
            judged.append(_judge(*paired_series(regime, 0.0, rounds, python, i % 4), regime))
        identical[regime] = _aa_summary(_measured(judged, f"A/A {regime}", python))
    injected = []
    for level in LEVELS:
        judged, truths = [], []
        for i in range(per_level):
            say(f"+{level:.0%} warm {i + 1}/{per_level}")
            truths.append(measured_ratio_fresh(level, python))
            judged.append(_judge(*paired_series("warm", level, rounds, python, i % 4), "warm"))
        truths = [t for t in truths if t is not None]
        if not truths:
            raise MeasurementFailed(f"could not measure the injected +{level:.0%} in a fresh process of {python}")
        injected.append(_injected(level, _measured(judged, f"+{level:.0%}", python), truths))
    alpha = comparison.GATE_ALPHA_CASE
    return SelfTest(
        schema=SCHEMA, created_at=created_at, machine_id=manifest.machine_id(), rounds=rounds, alpha=alpha,
        aa=identical, injected=injected,
        noise_floor={regime: summary.noise_floor_p95 for regime, summary in identical.items()},
        rounds_for_power=rounds_for_power(identical, injected, rounds, alpha),
        elapsed_s=time.monotonic() - started,
    )  # fmt: skip


POWER_EFFECT = 0.10  # the slowdown `ttfr selftest` says how many rounds `ttfr ab` needs to detect


def rounds_for_power(identical: dict[str, IdenticalArms], injected: list[InjectedSlowdown], rounds: int,
                     alpha: float) -> dict[str, RoundsForPower]:  # fmt: skip
    """Per regime: the paired rounds `ttfr ab` needs on this machine to call a +10% slowdown a
    regression 80% of the time (alpha 0.01, delta from this noise floor), modelled from the A/A
    intervals (`identical`, at `rounds`); for warm, the model's power at the self-test's rounds for
    the injected +10%, beside the rate it measured (a check of the model)."""

    def need(regime: str, effect: float) -> RoundsForPower:
        arms = identical[regime]
        return comparison.rounds_for_power(
            math.log1p(arms.median_ci_half_width), rounds, effect,
            comparison.delta_for(regime, arms.noise_floor_p95), alpha=alpha)  # fmt: skip

    found = {regime: need(regime, POWER_EFFECT) for regime in identical}
    measured = next((x for x in injected if x.nominal == POWER_EFFECT), None)
    if measured and "warm" in identical:
        effect = measured.measured_ratio - 1.0
        check = PowerCheck(injected_effect=effect, modelled_power=need("warm", effect).power_at_measured_rounds,
                           measured=measured.detected)  # fmt: skip
        found["warm"] = msgspec.structs.replace(found["warm"], check=check)
    return found


def store(result: SelfTest) -> Path:
    path = store_path()
    write_json(path, result, SCHEMA)
    return path
