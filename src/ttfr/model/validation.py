"""A published snapshot's validation pack (`ttfr.validation.v1`, validation.json): every gate of its
result and the gate's outcome, decided from the typed case results (analyse/gates.py)."""

from __future__ import annotations

from typing import Annotated, Literal

from msgspec import Meta

from ttfr.model.base import UNSET, Artifact, Count, UnsetType

VALIDATION_SCHEMA = "ttfr.validation.v1"
GATE_RESULTS = ("pass", "fail", "flagged", "not_applicable")
GateResult = Literal["pass", "fail", "flagged", "not_applicable"]
GateName = Literal["status", "availability", "correctness", "parity_nll", "parity_q0", "finite_differences", "sync_check",
                   "cache_verification", "contention"]  # fmt: skip


class Gate(Artifact):
    """One gate of one case (and policy): what it checks is its name, its outcome is `result`."""

    case: str
    gate: GateName
    result: GateResult  # flagged: listed, not a failure (a contended run, an unsynchronised warm process)
    detail: str | None  # what decided it, in words (a reason, an error figure, the flags)
    policy: str | UnsetType = UNSET  # the cache policy of a per-policy gate


class ValidationPack(Artifact):
    schema: Literal["ttfr.validation.v1"]
    snapshot_id: str
    summary: dict[GateResult, Count]  # gates per outcome
    passed: Annotated[bool, Meta(description="no gate failed (flagged gates are listed, not failures)")]
    gates: list[Gate]
