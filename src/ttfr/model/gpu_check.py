"""The compact summary `make gpu-check` writes beside its report: pass or fail per GPU row with the
reason, the stack it ran on and its time against the estimate printed before it started. A few
kilobytes, since a short GPU allocation may hand back only small files."""

from __future__ import annotations

from typing import Annotated, Literal

from msgspec import Meta

from ttfr.model.base import Artifact, Count, Seconds

GPU_CHECK_SCHEMA = "ttfr.gpu_check_summary.v1"
REASON_CHARS = 300  # a reason is cut to this: the summary stays small whatever a library says
Reason = Annotated[str, Meta(min_length=1, max_length=REASON_CHARS)]
Verdict = Literal["pass", "fail"]


class Row(Artifact):
    """One GPU case of one of the check's runs, or one of its other steps (`pytest -m gpu`)."""

    run: str
    """The check's run it belongs to: arrays, tf32, conversions, histfactory, loops, or pytest."""
    row: str
    """The GPU case's id in that run's results (or the step's name: "pytest -m gpu")."""
    verdict: Verdict
    """pass: the case keeps every promise of a GPU row (ok, result check passed, caches verified, device phases and
    peaks recorded; pytest's row: exit 0, or 5 with nothing collected); fail otherwise."""
    reasons: list[Reason] = []
    """Why it failed: its first 3 problems, each cut to 300 characters, and a line counting the rest; empty
    exactly when it passed."""


class Run(Artifact):
    """One `ttfr run` of the check (or `pytest -m gpu`): its command, exit code and wall time."""

    run: str
    """The run's label: arrays, tf32, conversions, histfactory, loops, or pytest."""
    command: str
    """The command it ran (`ttfr run ...` with its options, or `pytest -m gpu`)."""
    exit_code: int | None
    """The command's exit code; null: it did not finish within the check's 1800 s limit (timed out)."""
    wall_s: Seconds
    """The run's wall time, from its start to its exit, in seconds."""
    processes_planned: Count
    """The number of worker processes ttfr's planner laid out for the run, as if a GPU were there (0 for
    pytest)."""


class GpuCheckSummary(Artifact):
    schema: Literal["ttfr.gpu_check_summary.v1"]
    """The artifact's format and version: always "ttfr.gpu_check_summary.v1"."""
    mode: Literal["quick", "full"]
    """Which check ran: quick (every GPU row at least once, one process per policy) or full (the whole check)."""
    stamp: str
    """When the summary was written, in UTC as YYYYMMDDTHHMMSSZ; the report beside it is gpu-check-<stamp>.md."""
    verdict: Verdict
    """pass: every row passed and nothing else went wrong (problems is empty); fail otherwise."""
    gpu: str | None
    """The first device's name as nvidia-smi gives it in the last run's manifest; null where it did not say."""
    driver: str | None
    """The NVIDIA driver's version from the last run's manifest; null where it did not say."""
    versions: dict[str, str]
    """The packages the rows ran on -> version: every installed runtime and GPU-stack package in the last run's
    manifest (torch, jax, jaxlib, the CUDA plugin, triton, ...)."""
    processes_planned: Count
    """The number of worker processes its `ttfr run`s planned, summed (pytest's not included)."""
    estimated_s: Seconds
    """The time the check was estimated to take on one H100-class GPU, printed before it started, in seconds
    (benchmarks/gpu_check.py says how)."""
    wall_s: Seconds
    """The check's wall time, from its first run's start to pytest's end, in seconds."""
    runs: list[Run]
    """Each run of the check, in the order they ran, pytest last."""
    rows: list[Row]
    """Each GPU case of every run, and pytest's row."""
    problems: list[Reason]
    """What failed outside any row (a run without a result or whose results do not verify, the manifest's
    missing driver, CUDA or ptxas record): the first 12 and a line counting the rest."""
