"""A published snapshot's validation pack (`ttfr.validation.v1`, validation.json): every gate of its
result and the gate's outcome, decided from the typed case results (analyse/gates.py)."""

from __future__ import annotations

from typing import Literal

from ttfr.model.base import UNSET, Artifact, Count, UnsetType

VALIDATION_SCHEMA = "ttfr.validation.v1"
GATE_RESULTS = ("pass", "fail", "flagged", "not_applicable")
GateResult = Literal["pass", "fail", "flagged", "not_applicable"]
GateName = Literal["status", "availability", "correctness", "parity_nll", "parity_q0", "finite_differences", "sync_check",
                   "cache_verification", "precompiled_claim", "contention"]  # fmt: skip


class Gate(Artifact):
    """One gate of one case (and policy): what it checks is its name, its outcome is `result`."""

    case: str
    """The case's id."""
    gate: GateName
    """What it checks: the case's `status`, its `availability`, the result check (`correctness`, HistFactory's
    `parity_nll`, `parity_q0`, `finite_differences`), and per policy `sync_check`, `cache_verification` (a
    precompiled policy's: `precompiled_claim`, its artifact and its mechanism's claim) and `contention`."""
    result: GateResult
    """`pass`, `fail`, `flagged` (listed, not a failure: a warned case, a contended run, an unsynchronised warm
    process, a cache flag) or `not_applicable`."""
    detail: str | None
    """What decided it, in words (a reason, an error figure, the flags)."""
    policy: str | UnsetType = UNSET
    """The cache policy of a per-policy gate; absent for the case's own gates."""


class ValidationPack(Artifact):
    schema: Literal["ttfr.validation.v1"]
    """The schema this file follows."""
    snapshot_id: str
    """The published snapshot's id (`ttfr-` and the start of its content digest)."""
    summary: dict[GateResult, Count]
    """Number of gates per outcome (every outcome listed, 0 included)."""
    passed: bool
    """Whether no gate failed (flagged gates are listed, not failures)."""
    gates: list[Gate]
    """Every gate of every case, a case's own gates before its per-policy ones."""
