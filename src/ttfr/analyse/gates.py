"""Every gate of a result and its outcome (pass, fail, flagged, not_applicable): what a snapshot's
validation pack lists and a replication compares, decided from the typed case results."""

from __future__ import annotations

import msgspec

from ttfr.model.base import UNSET
from ttfr.model.case import CaseResult
from ttfr.model.policies import WARM_PROCESS
from ttfr.model.policy_figures import PrecompiledPolicy
from ttfr.model.validation import GATE_RESULTS, Gate, ValidationPack

RESULTS = GATE_RESULTS
_STATUS = {"ok": "pass", "warn": "flagged", "failed": "fail"}
_VERIFICATION = {"verified": "pass", "flagged": "flagged", "not_applicable": "not_applicable"}


def _set_fields(struct) -> list[tuple[str, object]]:
    """(name as the artifact spells it, value) of a record's fields that are there, in order."""
    pairs = [(f.encode_name, getattr(struct, f.name)) for f in msgspec.structs.fields(struct)]
    return [(name, value) for name, value in pairs if value is not UNSET]


def _check_gates(case: CaseResult) -> list[Gate]:
    """The result check's gates: correctness, then HistFactory parity and finite differences."""
    check = case.correctness
    if check is None:
        why = "no result check (a command's exit code is its check)" if case.command else "no check ran"
        return [Gate(case=case.case, gate="correctness", result="not_applicable", detail=why)]
    if check.state == "not_checked":  # no reference to compare with: not a pass
        return [Gate(case=case.case, gate="correctness", result="not_applicable",
                     detail="no reference: the result was not checked")]  # fmt: skip
    out = [Gate(case=case.case, gate="correctness", result="pass" if check.passed else "fail",
                detail=check.detail or f"max normalised error {check.max_normalised_error}")]  # fmt: skip
    for name, parity in _set_fields(check.parity) if check.parity else []:
        out.append(Gate(case=case.case, gate=f"parity_{name}", result="pass" if parity.passed else "fail",
                        detail=f"against {check.reference}"))  # fmt: skip
    if check.fd:
        fd = check.fd
        out.append(Gate(case=case.case, gate="finite_differences", result="pass" if fd.passed else "fail",
                        detail=f"normalised error {fd.normalised_error} (tolerance {fd.tolerance})"))  # fmt: skip
    return out


def _policy_gates(case: CaseResult) -> list[Gate]:
    """Per policy: the warm processes' sync check or the cache's verification, and contention."""
    out = []
    for policy, block in case.policies.items():
        if policy == WARM_PROCESS:
            procs = [p for p in block.procs if p.outcome == "ok"]
            unsynced = [p.index for p in procs if p.sync_check and p.sync_check.unsynchronised]
            detail = f"unsynchronised processes {unsynced}" if unsynced else f"{len(procs)} processes"
            out.append(Gate(case=case.case, gate="sync_check", policy=policy, detail=detail,
                            result=("flagged" if unsynced else "pass") if procs else "not_applicable"))  # fmt: skip
        elif isinstance(block, PrecompiledPolicy):
            out.append(_artifact_gate(case, policy, block))
        else:
            verification = block.cache_verification
            out.append(Gate(case=case.case, gate="cache_verification", policy=policy,
                            result=_VERIFICATION.get(verification.verdict, "fail"),
                            detail=", ".join(verification.flags) or verification.verdict))  # fmt: skip
        contended = [f.name for f in block.flags if f.name in ("contended", "could_not_measure_cleanly")]
        out.append(Gate(case=case.case, gate="contention", policy=policy, result="flagged" if contended else "pass",
                        detail="; ".join(contended) or "no contended run"))  # fmt: skip
    return out


def _artifact_gate(case: CaseResult, policy: str, block: PrecompiledPolicy) -> Gate:
    """A precompiled policy's: its artifact unsupported is data (not_applicable); not made, fail; a load that
    compiled beyond its mechanism's claim is a finding, flagged with what (the figure stands, unverified); a cache
    that was not what the setting says, flagged; every claim held, pass."""
    verification = block.cache_verification
    if block.artifact.state != "made":
        result = "not_applicable" if block.unsupported else "fail"
        return Gate(case=case.case, gate="precompiled_claim", policy=policy, result=result,
                    detail=f"{block.artifact.state}: {block.artifact.reason}")  # fmt: skip
    if verification.runs == 0:
        return Gate(case=case.case, gate="precompiled_claim", policy=policy, result="fail", detail="no ok run")
    result = "pass" if verification.verdict == "verified" else "flagged"
    compiled = block.still_compiled
    what = f"still compiled {', '.join(compiled.what)}" if compiled and compiled.runs_beyond_claim else ""
    return Gate(
        case=case.case,
        gate="precompiled_claim",
        policy=policy,
        result=result,
        detail="; ".join(x for x in (", ".join(verification.flags), what) if x) or verification.verdict,
    )


def gates(cases: list[CaseResult]) -> list[Gate]:
    """Every gate of a result and its outcome: pass, fail, flagged or not_applicable."""
    out = []
    for case in cases:
        # the case itself: a failed case (every run failed, a gate run failed, its check failed) fails
        out.append(Gate(case=case.case, gate="status", result=_STATUS[case.status], detail=case.reason or case.status))
        if case.status == "warn" and not case.policies.items():
            out.append(Gate(case=case.case, gate="availability", result="not_applicable", detail=case.reason))
            continue
        out += _check_gates(case) + _policy_gates(case)
    return out


def validation_pack(snapshot_id: str, cases: list[CaseResult]) -> ValidationPack:
    """A snapshot's validation pack: its gates, counted per outcome; passed when none failed."""
    checks = gates(cases)
    return ValidationPack(schema="ttfr.validation.v1", snapshot_id=snapshot_id,
                          summary={result: sum(g.result == result for g in checks) for result in RESULTS},
                          passed=not any(g.result == "fail" for g in checks), gates=checks)  # fmt: skip
