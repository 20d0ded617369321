"""Noise diagnostics of a series of measurements taken round by round:
first-run outlier, bimodality, drift across rounds, and the host's noise during the runs.
They are written into artifacts and shown in reports; none of them removes a value."""

from __future__ import annotations

import statistics

import numpy as np
from scipy import stats as sps

from ttfr.analyse import stats
from ttfr.model.base import UNSET
from ttfr.model.comparison import Bimodality, Drift, HostNoise, SeriesDiagnostics
from ttfr.model.journal import Host, JournalEntry

DIP_MIN_N = 30
DIP_ALPHA = 0.05
DRIFT_MIN_N = 6
DRIFT_MIN_TOTAL = 0.02  # relative change over the whole run worth reporting
NOISY = {"load_per_core": 1.0, "cpu_pressure_avg10": 10.0, "steal_fraction": 0.02}


def bimodality(values) -> Bimodality | None:
    """Hartigan's dip test (package `diptest`), from 30 values up."""
    x = np.asarray([v for v in values if v is not None], dtype=float)
    if x.size < DIP_MIN_N:
        return None
    import diptest

    dip, p_value = diptest.diptest(x)
    return Bimodality(dip=float(dip), p_value=float(p_value), bimodal=bool(p_value < DIP_ALPHA), n=int(x.size))


def drift(values) -> Drift | None:
    """Theil-Sen slope of the values against their round, as a relative change over the
    run; flagged when its 95% CI excludes 0 and the change exceeds 2%."""
    pairs = [(i, v) for i, v in enumerate(values) if v is not None]
    if len(pairs) < DRIFT_MIN_N:
        return None
    rounds, y = (np.asarray(c, dtype=float) for c in zip(*pairs))
    slope, _intercept, low, high = sps.theilslopes(y, rounds, alpha=0.95)
    level = float(np.median(y))
    if not level:  # a relative change of a zero median has no figure
        return Drift(relative_change=None, ci=None, drifting=False)
    span = rounds[-1] - rounds[0]
    total = slope * span / level
    return Drift(
        relative_change=float(total),
        ci=[float(low * span / level), float(high * span / level)],
        drifting=bool((low > 0 or high < 0) and abs(total) >= DRIFT_MIN_TOTAL),
    )


def series(values) -> SeriesDiagnostics:
    """All value-based diagnostics of one arm's series (in round order)."""
    return SeriesDiagnostics(
        first_run_outlier=stats.first_run_outlier(list(values)), bimodality=bimodality(values), drift=drift(values)
    )


def host_noise(entries: list[JournalEntry], usable_cores: int | None) -> HostNoise:
    """Load, CPU pressure, steal and involuntary switches during the runs, and a warning."""

    def median_of(values):
        values = [v for v in values if v is not None and v is not UNSET]
        return statistics.median(values) if values else None

    hosts = [e.host or Host() for e in entries]
    load = median_of([(h.load_average or [None])[0] for h in hosts])
    summary = {
        "load_average_1m": load,
        "load_per_core": load / usable_cores if load is not None and usable_cores else None,
        "cpu_pressure_avg10": median_of([h.cpu_pressure_avg10 for h in hosts]),
        "steal_fraction": median_of([h.steal_fraction for h in hosts]),
        "involuntary_switches": median_of([e.rusage.involuntary_switches if e.rusage else None for e in entries]),
    }
    reasons = [
        f"{name} {summary[name]:.3g} > {limit:g}"
        for name, limit in NOISY.items()
        if summary.get(name) is not None and summary[name] > limit
    ]
    return HostNoise(**summary, noisy=bool(reasons), why=reasons)
