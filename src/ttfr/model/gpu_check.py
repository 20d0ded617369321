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

    run: str  # the check's run: arrays, tf32, conversions, histfactory, loops, pytest
    row: str  # the case id (or the step's name)
    verdict: Verdict
    reasons: list[Reason] = []  # empty exactly when it passed


class Run(Artifact):
    """One `ttfr run` of the check (or `pytest -m gpu`): its command, exit code and wall time."""

    run: str
    command: str
    exit_code: int | None  # None: it did not finish (timed out)
    wall_s: Seconds
    processes_planned: Count


class GpuCheckSummary(Artifact):
    schema: Literal["ttfr.gpu_check_summary.v1"]
    mode: Literal["quick", "full"]
    stamp: str  # UTC, YYYYMMDDTHHMMSSZ: the report's file is gpu-check-<stamp>.md
    verdict: Verdict  # pass: every row passed and nothing else went wrong
    gpu: str | None  # the device's name (nvidia-smi), None where it did not say
    driver: str | None
    versions: dict[str, str]  # the runtimes the rows ran on (torch, jax, jaxlib, the CUDA plugin, triton)
    processes_planned: Count
    estimated_s: Seconds  # printed before the check started (benchmarks/gpu_check.py says how)
    wall_s: Seconds
    runs: list[Run]
    rows: list[Row]
    problems: list[Reason]  # what failed outside any row (a run without a result, the manifest)
