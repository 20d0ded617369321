"""The run profiles (`--profile`): run counts, sample lengths and default cases of a run."""

from __future__ import annotations

from dataclasses import dataclass


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
