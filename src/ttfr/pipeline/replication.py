"""`ttfr replicate SNAPSHOT [--out DIR]`: run a published snapshot's plan again here and say
what replicated.

The snapshot must verify (its index, every hash, the result inside it). Its spec is run again
with the same seed, cases and policies, under this interpreter. ttfr_replication_report.json
(ttfr.replication_report.v1), beside the new run's artifacts, holds:
- whether the new result validates against its schemas and hashes;
- every case's dataset id and sha256 in both;
- every gate of the snapshot's validation pack (result checks, parity, finite differences,
  availability, cache verification) and the replica's result: replicated or not; sync checks
  and contention (properties of a machine's load) are listed, not required;
- the timings compared as cross-session verdicts (unpaired, marked weak: another session on
  possibly another machine), which never decide the exit code;
- the hardware and runtime differences between the two manifests.
Exit 0 when every required gate replicates and the datasets are equal, 3 when one does not,
2 for a snapshot that does not verify (before anything runs).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import replace
from pathlib import Path

from ttfr.analyse.gates import gates as gates_of
from ttfr.artifacts import snapshot_layout, snapshot_nextstat, snapshot_verify
from ttfr.artifacts.reader import load_finished, read_plan, validate_dir
from ttfr.artifacts.store import write_json
from ttfr.errors import UsageError
from ttfr.exit_codes import EXIT_OK, EXIT_REGRESSION
from ttfr.measure.executors import Executors
from ttfr.measure.resume import NOTHING_NAMED, Named
from ttfr.measure.spec import RunSpec
from ttfr.model.base import UNSET, encode, present
from ttfr.model.comparison import Record
from ttfr.model.manifest import Manifest
from ttfr.model.replication import (
    DatasetAgreement,
    Difference,
    Differences,
    GateAgreement,
    ReplicationReport,
    ReplicationSummary,
    Timing,
    TimingComparison,
)
from ttfr.model.validation import Gate
from ttfr.pipeline import comparison, suite

SCHEMA = "ttfr.replication_report.v1"
REPORT = "ttfr_replication_report.json"  # NextStat's contract takes replication_report.json (snapshot_nextstat.NS_REPLICATION)
REQUIRED_GATES = ("availability", "correctness", "parity_nll", "parity_q0", "finite_differences", "cache_verification")
_HARDWARE = (("cpu", "model"), ("cpu", "usable_cores"), ("memory", "total_bytes"), ("os", "platform"), ("gpu", "present"))


def _policy(gate: Gate) -> str | None:
    return gate.policy if present(gate.policy) else None


def _key(gate: Gate) -> tuple:
    return gate.case, gate.gate, _policy(gate)


def _differences(a: Manifest, b: Manifest) -> Differences:
    hardware = []
    for section, name in _HARDWARE:
        x, y = getattr(getattr(a, section), name), getattr(getattr(b, section), name)
        if x != y:
            hardware.append(Difference(what=f"{section}.{name}", snapshot=x, replica=y))
    if a.python.version != b.python.version:
        hardware.append(Difference(what="python.version", snapshot=a.python.version, replica=b.python.version))
    names = sorted(set(a.runtimes) | set(b.runtimes))
    runtimes = [Difference(what=name, snapshot=a.runtimes.get(name), replica=b.runtimes.get(name))
                for name in names if a.runtimes.get(name) != b.runtimes.get(name)]  # fmt: skip
    harness = [Difference(what="ttfr", snapshot=encode(a.ttfr), replica=encode(b.ttfr))] if a.ttfr != b.ttfr else []
    return Differences(hardware=hardware, runtimes=runtimes, harness=harness)


def _timing(record: Record) -> TimingComparison:
    judged = record.effect is not UNSET
    return TimingComparison(
        case=record.case,
        policy=record.point,  # a concurrency point keeps its N: "cold-shared x8"
        metric=record.metric,
        verdict=record.verdict,
        ratio=record.effect.ratio if judged else None,
        ci=list(record.effect.ci) if judged and record.effect.ci is not None else None,
        explanation=record.explanation,
    )


def report(snapshot_dir: Path, replica_root: Path) -> ReplicationReport:
    """The replication report of a finished replica against its snapshot."""
    original, replica = load_finished(snapshot_dir), load_finished(replica_root)
    problems = validate_dir(replica_root)
    theirs = {_key(g): g for g in gates_of(original.cases)}
    ours = {_key(g): g for g in gates_of(replica.cases)}
    gates = []
    for key, gate in sorted(theirs.items(), key=lambda kv: tuple(str(x) for x in kv[0])):
        mine = ours.get(key)
        gates.append(GateAgreement(case=gate.case, gate=gate.gate, policy=_policy(gate), snapshot=gate.result,
                                   replica=mine.result if mine else "missing", required=gate.gate in REQUIRED_GATES,
                                   replicated=mine is not None and mine.result == gate.result))  # fmt: skip
    for key, gate in sorted(ours.items(), key=lambda kv: tuple(str(x) for x in kv[0])):
        if key not in theirs:  # a gate only the replica has (a case that ran here, not there)
            gates.append(GateAgreement(case=gate.case, gate=gate.gate, policy=_policy(gate), snapshot="missing",
                                       replica=gate.result, required=gate.gate in REQUIRED_GATES, replicated=False))  # fmt: skip
    by_id = {c.case: c for c in replica.cases}
    datasets = []
    for case in original.cases:
        other = by_id[case.case].dataset if case.case in by_id else None
        mine = (case.dataset.id, case.dataset.sha256)
        theirs_now = (other.id, other.sha256) if other else (None, None)
        datasets.append(DatasetAgreement(case=case.case, id=mine[0], replica_id=theirs_now[0], snapshot_sha256=mine[1],
                                         replica_sha256=theirs_now[1], equal=theirs_now == mine))  # fmt: skip
    timing = comparison.compare_cases(original.cases, replica.cases, paired=False)
    failed = [g for g in gates if g.required and not g.replicated]
    unequal = [d for d in datasets if not d.equal]
    replicated = not problems and not failed and not unequal
    summary = ReplicationSummary(
        replicated=replicated,
        required_gates=sum(g.required for g in gates),
        required_replicated=sum(g.required and g.replicated for g in gates),
        not_replicated=[f"{g.case} {g.gate}{' ' + g.policy if g.policy else ''}: {g.snapshot} -> {g.replica}" for g in failed],
        datasets_unequal=[d.case for d in unequal],
        # what replicated may be a failure: the snapshot's own gates that failed (replicated or not)
        snapshot_failed_gates=sum(g.snapshot == "fail" for g in gates),
        exit_code=EXIT_OK if replicated else EXIT_REGRESSION,
    )
    return ReplicationReport(
        schema=SCHEMA,
        snapshot_id=Path(snapshot_dir).resolve().name,
        replica=str(replica_root),
        replicated_at=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        schema_valid=not problems,
        problems=problems[:20],
        datasets=datasets,
        gates=gates,
        timing=Timing(paired=False, warning=comparison.CROSS_SESSION_WARNING, comparisons=[_timing(r) for r in timing]),
        differences=_differences(original.manifest, replica.manifest),
        summary=summary,
    )


def replicate(snapshot_dir: Path, out_parent: Path, command_line=None, executors: Executors | None = None, progress=None,
              named: Named = NOTHING_NAMED):  # fmt: skip
    """Run the snapshot's plan again under `out_parent`; (its result directory, the report).
    The snapshot's case files, commands and --prepare steps run only where `named` (the user's
    command line) names them; its workers run this ttfr's own interpreter."""
    snapshot_dir = Path(snapshot_dir)
    if not (snapshot_dir / snapshot_layout.INDEX).is_file():
        raise UsageError(f"{snapshot_dir} is not a published snapshot (no {snapshot_layout.INDEX}; `ttfr publish` makes one)")
    problems = snapshot_verify.verify(snapshot_dir)
    if problems:
        raise UsageError(f"{snapshot_dir} does not verify, so it is not replicated: " + "; ".join(problems[:3]))
    try:
        stored = RunSpec.from_recorded(read_plan(snapshot_dir).spec, replace(named, python_recorded=False))
    except UsageError as exc:
        raise UsageError(f"{snapshot_dir}'s plan.json: {exc}") from None
    spec = replace(stored, python=None)  # this ttfr's own
    result_dir = suite.start(spec, Path(out_parent), command_line)
    outcome = suite.execute(result_dir, spec, executors, progress)
    if outcome.interrupted:
        return outcome, None
    document = report(snapshot_dir, result_dir.root)
    write_json(result_dir.root / REPORT, document, SCHEMA)
    # NextStat's contract too, for its tools (its verdict is by hash: see the report's notes)
    write_json(result_dir.root / snapshot_nextstat.NS_REPLICATION,
               snapshot_nextstat.nextstat_replication_report(snapshot_dir, result_dir.root, document))  # fmt: skip
    return outcome, document
