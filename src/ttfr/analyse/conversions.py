"""A conversion case's figures (issue 28), decided once from its checking process's evidence and its
policies' summaries: the rate of a route that copied against this machine's memcpy of the same bytes,
and the flags its evidence raises (a leak, wrong values on a layout, copy evidence that disagrees)."""

from __future__ import annotations

from ttfr.model.base import UNSET, UnsetType
from ttfr.model.case import Conversion
from ttfr.model.flags import ConversionLeak, ConversionWrongValues, CopyEvidenceDisagrees
from ttfr.model.policies import COLD_CACHE, WARM_PROCESS
from ttfr.model.conversion_evidence import ConversionEvidence

HALF = 0.5  # the report names the copying routes below half of memcpy's rate


def _median(policies: dict, policy: str, metric: str) -> float | None:
    block = policies.get(policy)
    summary = block.figure(metric) if block else None
    return summary.median if summary else None


def case_conversion(evidence: ConversionEvidence | None, policies: dict) -> tuple[Conversion | UnsetType, list]:
    """The case's Conversion and its flags; UNSET and none where no process gathered evidence."""
    if evidence is None:
        return UNSET, []
    call_s = _median(policies, WARM_PROCESS, "call_s")
    memcpy_rate = evidence.bytes / evidence.memcpy_s if evidence.memcpy_s > 0 else None  # too fast to time: no rate
    copying = evidence.copied is True and call_s is not None and call_s > 0
    fraction = evidence.memcpy_s / call_s if copying and memcpy_rate is not None else None
    conversion = Conversion(
        evidence=evidence,
        first_call_s=_median(policies, COLD_CACHE, "first_call_s"),
        call_s=call_s,
        memcpy_bytes_per_s=memcpy_rate,
        bytes_per_s=evidence.bytes / call_s if copying else None,
        memcpy_fraction=fraction,
        below_half_memcpy=fraction < HALF if fraction is not None else None,
    )
    return conversion, evidence_flags(evidence)


def evidence_flags(evidence: ConversionEvidence) -> list:
    flags = []
    leak = evidence.leak
    if leak.grows and leak.growth_per_call_bytes is not None:
        flags.append(ConversionLeak(calls=leak.calls, growth_per_call_bytes=leak.growth_per_call_bytes))
    converted = [row for row in evidence.layouts if row.outcome == "ok"]
    wrong = [row.layout for row in converted if row.values_ok is False]
    if wrong:
        flags.append(ConversionWrongValues(layouts=wrong))
    torn = [row.layout for row in converted if row.copied is None and row.shares_memory is not None
            and row.write_through is not None]  # fmt: skip
    if torn:
        flags.append(CopyEvidenceDisagrees(layouts=torn))
    return flags
