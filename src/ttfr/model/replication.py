"""A replication report (`ttfr.replication_report.v1`, ttfr_replication_report.json): a published
snapshot's plan run again (`ttfr replicate`), and what replicated."""

from __future__ import annotations

from typing import Any, Literal

from ttfr.model.base import UNSET, Artifact, Count, Sha256, UnsetType

REPLICATION_SCHEMA = "ttfr.replication_report.v1"
Outcome = Literal["pass", "fail", "flagged", "not_applicable", "missing"]  # missing: that side has no such gate


class DatasetAgreement(Artifact):
    case: str
    """The id of a case of the snapshot."""
    id: str
    """The snapshot's dataset id for the case: the id its inputs are published under
    (`<workload>-<size>-<dtype>-seed<n>`, or `histfactory-<preset>-<size>p-seed<n>`)."""
    replica_id: str | None
    """The replica's dataset id for the case; null: the replica has no such case."""
    snapshot_sha256: Sha256 | None
    """The sha256 of the snapshot's inputs as its checking process hashed them; null: no process checked."""
    replica_sha256: Sha256 | None
    """The sha256 of the replica's inputs; null: the replica has no such case, or no process checked."""
    equal: bool
    """Whether the dataset id and the sha256 are the same in both (two nulls count as the same)."""


class GateAgreement(Artifact):
    case: str
    """The case's id."""
    gate: str
    """The gate's name, as the validation pack names it (status, availability, correctness, parity_nll, parity_q0,
    finite_differences, sync_check, cache_verification, contention)."""
    policy: str | None
    """The cache policy of a per-policy gate; null for the case's own gates."""
    snapshot: Outcome
    """The gate's outcome in the snapshot: pass, fail, flagged, not_applicable, or missing (the snapshot has no such
    gate)."""
    replica: Outcome
    """The gate's outcome in the replica, as for the snapshot (missing: the replica has no such gate)."""
    required: bool
    """Whether it must replicate: a gate of the result (availability, correctness, parity_nll, parity_q0,
    finite_differences, cache_verification); status, sync_check and contention are listed only (the last two are
    properties of the machine's load)."""
    replicated: bool
    """Whether the replica's outcome is the snapshot's (never where either side is missing)."""


class TimingComparison(Artifact):
    """One figure of the snapshot against the replica's (cross-session, unpaired: weak)."""

    case: str
    """The case's id."""
    policy: str
    """The cache policy compared, or a concurrency point with its group size N (e.g. "cold-shared x8")."""
    metric: str
    """The figure compared per run: ttfr_s (a cold run's time to first result), call_s (a warm process's median call)
    or all_results_s (a concurrency group's time until all N had a result)."""
    verdict: str
    """regression, improvement, equivalent or inconclusive with ` (weak)` appended; not_compared when a side failed or
    measured nothing."""
    ratio: float | None
    """The Hodges-Lehmann estimate of replica over snapshot, a ratio of times (1.10: the replica took 10% longer); null
    when not compared or with fewer than 2 values."""
    ci: list[float] | None
    """The ratio's 95% interval [low, high] (Mann-Whitney), as ratios; null where ratio is."""
    explanation: str
    """The verdict in one line: the change with its interval and why, or why it was not compared."""


class Timing(Artifact):
    paired: Literal[False]
    """Always false: the snapshot and the replica were measured in different sessions, so no run is paired."""
    warning: str
    """The cross-session warning, in words: identical code measured in two sessions often looks different, so these
    verdicts are weak and never decide the exit code."""
    comparisons: list[TimingComparison]
    """One comparison per case and policy (and concurrency point) both sides have, in the snapshot's case order."""


class Difference(Artifact):
    what: str
    """What differs: a manifest field (cpu.model, cpu.usable_cores, memory.total_bytes, os.platform, gpu.present,
    python.version), a runtime package's name, or `ttfr`."""
    snapshot: Any
    """The snapshot's value, as its manifest records it (`ttfr`: its version and git checkout; null: none
    recorded, or a runtime not installed)."""
    replica: Any
    """The replica's value, as for the snapshot."""


class Differences(Artifact):
    hardware: list[Difference]
    """The machine's fields that differ: CPU model and usable cores, total memory, OS platform, whether a GPU is
    present, and the Python version."""
    runtimes: list[Difference]
    """Each runtime package whose installed version differs (null: not installed on that side)."""
    harness: list[Difference]
    """ttfr itself where its version or git checkout differs (one entry, `ttfr`); empty where they are the same."""


class ReplicationSummary(Artifact):
    replicated: bool
    """True when the replica validated, every required gate replicated and every dataset is equal."""
    required_gates: Count
    """Number of required gates listed (the snapshot's and any only the replica has)."""
    required_replicated: Count
    """Number of required gates that replicated."""
    not_replicated: list[str]
    """Each required gate that did not replicate, in words: `<case> <gate> [<policy>]: <snapshot> -> <replica>`."""
    datasets_unequal: list[str]
    """The ids of the cases whose dataset id or sha256 differs."""
    exit_code: Literal[0, 3]
    """`ttfr replicate`'s exit code: 0 replicated, 3 not."""
    snapshot_failed_gates: Count | UnsetType = UNSET
    """Number of the snapshot's own gates that failed, replicated or not (what replicated may be a failure); absent
    in reports before ttfr 0.1.1."""


class ReplicationReport(Artifact):
    schema: Literal["ttfr.replication_report.v1"]
    """The artifact's format and version: always "ttfr.replication_report.v1"."""
    snapshot_id: str
    """The id of the snapshot replicated (`ttfr-` and 20 hex digits of its content digest), its directory's name."""
    replica: str
    """The path of the replica's result directory (under --out): the snapshot's plan run again here."""
    replicated_at: str
    """When the report was written, after the replica finished: UTC, ISO 8601 to the second."""
    schema_valid: bool
    """Whether the replica's result directory validated (schemas, hashes, its runs against its plan)."""
    problems: list[str]
    """The replica's validation problems, in words (the first 20); empty when schema_valid."""
    datasets: list[DatasetAgreement]
    """Each of the snapshot's cases: its dataset id and sha256 beside the replica's."""
    gates: list[GateAgreement]
    """Every gate of the snapshot's result beside the replica's outcome, then each gate only the replica has."""
    timing: Timing
    """The timings compared across the two sessions: unpaired and weak, never deciding the exit code."""
    differences: Differences
    """What differs between the two manifests: hardware, runtime versions and ttfr."""
    summary: ReplicationSummary
    """Whether it replicated, in counts, and the exit code."""
