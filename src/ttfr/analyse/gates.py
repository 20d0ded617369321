"""Every gate of a result and its outcome (pass, fail, flagged, not_applicable): what a snapshot's
validation pack lists and a replication compares, decided from the typed case results."""

from __future__ import annotations

import msgspec

from ttfr.model.base import UNSET
from ttfr.model.case import CaseResult
from ttfr.model.policies import WARM_PROCESS

RESULTS = ("pass", "fail", "flagged", "not_applicable")


def _set_fields(struct) -> list[tuple[str, object]]:
    """(name as the artifact spells it, value) of a record's fields that are there, in order."""
    pairs = [(f.encode_name, getattr(struct, f.name)) for f in msgspec.structs.fields(struct)]
    return [(name, value) for name, value in pairs if value is not UNSET]


def gates(cases: list[CaseResult]) -> list[dict]:
    """Every gate of a result and its outcome: pass, fail, flagged or not_applicable."""
    out = []
    for case in cases:
        # the case itself: a failed case (every run failed, a gate run failed, its check failed) fails
        status = {"ok": "pass", "warn": "flagged", "failed": "fail"}[case.status]
        out.append({"case": case.case, "gate": "status", "result": status, "detail": case.reason or case.status})
        check = case.correctness
        if case.status == "warn" and not case.policies.items():
            out.append({"case": case.case, "gate": "availability", "result": "not_applicable", "detail": case.reason})
            continue
        if check is None:
            out.append(
                {
                    "case": case.case,
                    "gate": "correctness",
                    "result": "not_applicable",
                    "detail": "no result check (a command's exit code is its check)" if case.command else "no check ran",
                }
            )
        elif check.state == "not_checked":  # no reference to compare with: not a pass
            out.append({"case": case.case, "gate": "correctness", "result": "not_applicable",
                        "detail": "no reference: the result was not checked"})  # fmt: skip
        else:
            out.append(
                {
                    "case": case.case,
                    "gate": "correctness",
                    "result": "pass" if check.passed else "fail",
                    "detail": check.detail or f"max normalised error {check.max_normalised_error}",
                }
            )
            for name, parity in _set_fields(check.parity) if check.parity else []:
                out.append(
                    {
                        "case": case.case,
                        "gate": f"parity_{name}",
                        "result": "pass" if parity.passed else "fail",
                        "detail": f"against {check.reference}",
                    }
                )
            if check.fd:
                fd = check.fd
                out.append(
                    {
                        "case": case.case,
                        "gate": "finite_differences",
                        "result": "pass" if fd.passed else "fail",
                        "detail": f"normalised error {fd.normalised_error} (tolerance {fd.tolerance})",
                    }
                )
        for policy, block in case.policies.items():
            if policy == WARM_PROCESS:
                procs = [p for p in block.procs if p.outcome == "ok"]
                unsynced = [p.index for p in procs if p.sync_check and p.sync_check.unsynchronised]
                out.append(
                    {
                        "case": case.case,
                        "gate": "sync_check",
                        "policy": policy,
                        "result": ("flagged" if unsynced else "pass") if procs else "not_applicable",
                        "detail": f"unsynchronised processes {unsynced}" if unsynced else f"{len(procs)} processes",
                    }
                )
            else:
                verification = block.cache_verification
                verdict = verification.verdict
                result = {"verified": "pass", "flagged": "flagged", "not_applicable": "not_applicable"}.get(verdict, "fail")
                out.append(
                    {
                        "case": case.case,
                        "gate": "cache_verification",
                        "policy": policy,
                        "result": result,
                        "detail": ", ".join(verification.flags) or verdict,
                    }
                )
            contended = [f.name for f in block.flags if f.name in ("contended", "could_not_measure_cleanly")]
            out.append(
                {
                    "case": case.case,
                    "gate": "contention",
                    "policy": policy,
                    "result": "flagged" if contended else "pass",
                    "detail": "; ".join(contended) or "no contended run",
                }
            )
    return out
