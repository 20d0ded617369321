"""A replication report (`ttfr.replication_report.v1`, ttfr_replication_report.json): a published
snapshot's plan run again (`ttfr replicate`), and what replicated."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from msgspec import Meta

from ttfr.model.base import UNSET, Artifact, Count, Sha256, UnsetType

REPLICATION_SCHEMA = "ttfr.replication_report.v1"
Outcome = Literal["pass", "fail", "flagged", "not_applicable", "missing"]  # missing: that side has no such gate


class DatasetAgreement(Artifact):
    case: str
    id: str  # the snapshot's dataset id
    replica_id: str | None  # None: the replica has no such case
    snapshot_sha256: Sha256 | None
    replica_sha256: Sha256 | None
    equal: bool


class GateAgreement(Artifact):
    case: str
    gate: str
    policy: str | None
    snapshot: Outcome
    replica: Outcome
    required: Annotated[bool, Meta(description=(
        "a gate of the result (checks, parity, finite differences, availability, cache verification); sync checks "
        "and contention are properties of the machine's load"))]  # fmt: skip
    replicated: bool


class TimingComparison(Artifact):
    """One figure of the snapshot against the replica's (cross-session, unpaired: weak)."""

    case: str
    policy: str  # a concurrency point keeps its N: "cold-shared x8"
    metric: str
    verdict: str
    ratio: float | None  # replica over snapshot (Hodges-Lehmann)
    ci: list[float] | None
    explanation: str


class Timing(Artifact):
    paired: Literal[False]
    warning: str
    comparisons: list[TimingComparison]


class Difference(Artifact):
    what: str  # cpu.model, python.version, a runtime's name, ttfr
    snapshot: Any
    replica: Any


class Differences(Artifact):
    hardware: list[Difference]
    runtimes: list[Difference]
    harness: list[Difference]


class ReplicationSummary(Artifact):
    replicated: bool  # no problem, every required gate replicated, every dataset equal
    required_gates: Count
    required_replicated: Count
    not_replicated: list[str]  # each required gate that did not, in words
    datasets_unequal: list[str]  # their cases
    exit_code: Literal[0, 3]
    # what replicated may be a failure: the snapshot's own failed gates (reports before 0.1.1 lack it)
    snapshot_failed_gates: Count | UnsetType = UNSET


class ReplicationReport(Artifact):
    schema: Literal["ttfr.replication_report.v1"]
    snapshot_id: str
    replica: str  # the replica's result directory
    replicated_at: str  # UTC, ISO 8601
    schema_valid: bool  # the replica's result directory validated
    problems: list[str]  # its validation problems (the first 20)
    datasets: list[DatasetAgreement]
    gates: list[GateAgreement]
    timing: Timing
    differences: Differences
    summary: ReplicationSummary
