"""Was a figure measured on a busy machine? Evidence and flags per run and per case.

- `contended`: the worker waited for a CPU *and* something else used one. Two readings,
  both needed:
  * waiting — the time the worker's threads spent runnable without a CPU (run-queue wait,
    /proc/self/task/*/schedstat): above `WAIT_FRACTION` of a warm sample's wall time in more
    than `CONTENDED_SAMPLE_SHARE` of the samples, or of a cold run's process time;
  * a neighbour — the CPU the rest of the machine used meanwhile (/proc/stat busy time minus
    the worker's own CPU time) of at least `OTHERS_CORES` cores on average.
  Waiting alone is not contention: a runtime whose threads outnumber the cores (XLA's pool
  on 2 cores) waits for itself 10-120% of a sample on an idle machine, while its neighbours
  use -0.14..0.11 cores (the 10 ms /proc/stat resolution); a busy loop on one core shows as
  0.91-1.10 (benchmarks/contention.py). Where either reading is missing the other decides,
  and where both are missing, more runnable entities than usable cores belonging to others
  before and after a run (/proc/loadavg) is contention.
- `process_disagreement`: the warm processes' medians differ by more than their
  within-process spread explains (Kruskal-Wallis across processes, p < `DISAGREEMENT_P`)
  and by more than `DISAGREEMENT_RATIO`.
- `tick_quantised`: most samples' wall times sit whole scheduler ticks (1, 4 or 10 ms) apart,
  at two or more grid points: the signature of a thread that waits out a neighbour's slice.

Everything is evidence recorded beside the figures; nothing here removes a value.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from ttfr.model.base import present
from ttfr.model.case import CaseResult
from ttfr.model.flags import CouldNotMeasureCleanly, ProcessDisagreement
from ttfr.model.run_figures import Contention, RunFigures, Tick
from ttfr.model.journal import Host, Rusage
from ttfr.model.record import SampleEvidence, Sched

WAIT_FRACTION = 0.05
CONTENDED_SAMPLE_SHARE = 0.3
OTHERS_CORES = 0.5
DISAGREEMENT_P = 0.01
DISAGREEMENT_RATIO = 1.10
TICKS_S = (0.001, 0.004, 0.010)
TICK_TOLERANCE = 0.025  # of the tick: a random value lands this close to a grid point 5% of the time
TICK_SHARE = 0.6
TICK_MIN_SAMPLES = 5


def _others_runnable(host: Host | None) -> bool:
    """More runnable entities than cores belonged to others before and after the run."""
    if not host or not host.usable_cores:
        return False
    counts = [host.runnable_start, host.runnable_end]
    if not all(counts):
        return False
    # /proc/loadavg counts the reader (ttfr's parent) as running at both readings.
    return all(c[0] - 1 >= host.usable_cores for c in counts)


def by_readings(waited: bool | None, others_cores: float | None) -> bool:
    """Contended by the readings: it waited and its neighbours used a core (either alone where the
    other is missing); never when the neighbours' reading says they were idle."""
    neighbour = None if others_cores is None else others_cores >= OTHERS_CORES
    return bool(waited or (waited is None and neighbour)) and neighbour is not False


def _verdict(waited: bool | None, others_cores: float | None, host: Host | None) -> dict:
    """Contention's verdict from its two readings (the runnable count where both are missing)."""
    by_evidence = by_readings(waited, others_cores)
    # The instantaneous runnable count is the fallback for machines with neither reading.
    by_runnable = waited is None and others_cores is None and _others_runnable(host)
    return {"contended": by_evidence or by_runnable, "waited": waited, "others_cores": others_cores,
            "runnable_cores": host.usable_cores if by_runnable else None}  # Contention's core  # fmt: skip


def warm_waited(samples_contended: int | None, samples_with_evidence: int | None) -> bool | None:
    """A warm process waited: more than CONTENDED_SAMPLE_SHARE of its samples waited for a CPU
    above WAIT_FRACTION of their time (None: no sample had a reading)."""
    if not samples_with_evidence or samples_contended is None:
        return None
    return samples_contended > CONTENDED_SAMPLE_SHARE * samples_with_evidence


def cold_waited(wait_fraction: float | None) -> bool | None:
    """A cold run waited: its threads' run-queue wait was above WAIT_FRACTION of its process time."""
    return None if wait_fraction is None else wait_fraction > WAIT_FRACTION


def warm_process(evidence: SampleEvidence | None, host: Host | None) -> Contention:
    """A warm process's contention evidence and verdict."""
    evidence = evidence or SampleEvidence()
    walls = evidence.wall_s or []
    waits = [w / t for t, w in zip(walls, evidence.runq_wait_s or []) if w is not None and t]
    cpu_wall = [c / t for t, c in zip(walls, evidence.cpu_s or []) if t]
    contended_samples = sum(w > WAIT_FRACTION for w in waits)
    window = evidence.window_ns
    others_cores = None
    if present(evidence.others_cpu_s) and window and window[1] > window[0]:
        others_cores = evidence.others_cpu_s / ((window[1] - window[0]) / 1e9)
    return Contention(
        **_verdict(warm_waited(contended_samples, len(waits)), others_cores, host),
        samples_contended=contended_samples if waits else None,
        samples_with_evidence=len(waits),
        median_wait_fraction=statistics.median(waits) if waits else None,
        max_wait_fraction=max(waits) if waits else None,
        median_cpu_per_wall=statistics.median(cpu_wall) if cpu_wall else None,
    )


def cold_run(sched: Sched | None, process_s: float | None, host: Host | None, rusage: Rusage | None = None) -> Contention:
    """A cold run's contention evidence: its threads' run-queue wait against its process time,
    and the CPU its neighbours used from spawn to reap."""
    fraction = None
    if sched and present(sched.runq_wait_s) and process_s:
        fraction = sched.runq_wait_s / process_s
    others_cores = None
    busy = host.machine_busy_s if host else None
    own = [rusage.user_s, rusage.sys_s] if rusage else [None]
    if present(busy) and process_s and all(present(v) for v in own):
        others_cores = (busy - sum(own)) / process_s
    return Contention(**_verdict(cold_waited(fraction), others_cores, host), wait_fraction=fraction)


def withheld_reason(flag: CouldNotMeasureCleanly) -> str:
    """Why a policy's figures are withheld, as its case's reason and every output say it."""
    units = {"run": "runs", "process": "processes"}[flag.unit]
    return (f"{flag.contended} of {flag.ok} {units} were contended: no figure is given; rerun on a quieter "
            "machine (see Machine health)")  # fmt: skip


def process_disagreement(samples_by_process: list[list[float]]) -> ProcessDisagreement | None:
    """Do the warm processes measure different things? None below two processes."""
    groups = [[s for s in g if s is not None and math.isfinite(s)] for g in samples_by_process]
    groups = [g for g in groups if len(g) >= 3]
    if len(groups) < 2:
        return None
    from scipy import stats as sps

    medians = [statistics.median(g) for g in groups]
    if min(medians) <= 0:
        return None
    ratio = max(medians) / min(medians)
    try:
        p_value = float(sps.kruskal(*groups).pvalue)
    except ValueError:  # every value identical
        p_value = 1.0
    if math.isnan(p_value):
        p_value = 1.0
    return ProcessDisagreement(
        disagree=bool(p_value < DISAGREEMENT_P and ratio > DISAGREEMENT_RATIO),
        p_value=p_value,
        max_over_min_median=ratio,
        process_medians_s=medians,
    )


def tick_quantised(samples_s: list[float], sample_wall_s: list[float] | None = None) -> Tick | None:
    """Do the samples' wall times sit on a grid of scheduler ticks? Judged on each sample's
    whole timed loop (what a tick quantises), as offsets from the shortest one: a thread that
    repeatedly waits out a neighbour's time slice lands whole ticks apart (20, 24, 28 ms)."""
    walls = [w for w in (sample_wall_s or samples_s) if w is not None and math.isfinite(w)]
    if len(walls) < TICK_MIN_SAMPLES:
        return None
    for tick in sorted(TICKS_S, reverse=True):
        candidates = [w for w in walls if w >= 2 * tick]
        if len(candidates) < TICK_MIN_SAMPLES:
            continue
        base = min(candidates)
        steps = [(w - base) / tick for w in candidates]
        on_grid = [round(step) for step in steps if abs(step - round(step)) <= TICK_TOLERANCE]
        share = len(on_grid) / len(walls)
        # Two grid points at least, each held by two samples: noise around one value is not a grid.
        held = [k for k in set(on_grid) if on_grid.count(k) >= 2]
        if share >= TICK_SHARE and len(held) >= 2:
            return Tick(quantised=True, tick_s=tick, share=share, steps=sorted(held))
    return Tick(quantised=False, tick_s=None, share=None, steps=[])


def is_contended(run: RunFigures) -> bool:
    """Whether a run or warm process carries a `contended` verdict."""
    return bool(run.contention and run.contention.contended)


ADVICE = (
    "close other work while measuring",
    "on a small machine, `--threads 1` keeps BLAS-heavy cases off a busy core",
    "`ttfr selftest` measures what noise this machine adds to a comparison",
)


@dataclass(frozen=True)
class MachineHealth:
    """How many measured runs and warm processes were contended, in which cases, and the most CPU
    their neighbours used: the end-of-run health line and the report's section."""

    runs: int
    contended: int
    cases: list[str]
    max_others_cores: float | None
    advice: list[str]


def machine_health(case_results: list[CaseResult]) -> MachineHealth:
    total = contended = 0
    cases, worst = [], None
    for result in case_results:
        hit = False
        for run in result.policies.all_runs():
            evidence = run.contention
            if run.outcome != "ok" or not evidence:
                continue
            total += 1
            if evidence.contended:
                contended += 1
                hit = True
                cores = evidence.others_cores
                if cores is not None and (worst is None or cores > worst):
                    worst = cores
        if hit:
            cases.append(result.case)
    return MachineHealth(runs=total, contended=contended, cases=cases, max_others_cores=worst,
                         advice=list(ADVICE) if contended else [])  # fmt: skip


def health_line(health: MachineHealth) -> str | None:
    """One line for the end of a run, or None when nothing was contended."""
    if not health.contended:
        return None
    worst = health.max_others_cores
    neighbours = f"; other work used up to {worst:.1f} cores while workers waited" if worst is not None else ""
    return (f"machine health: {health.contended} of {health.runs} measured runs contended in "
            f"{len(health.cases)} case(s){neighbours}. Advice: {'; '.join(health.advice)}.")  # fmt: skip
