"""`ttfr compare` of two result directories run with --explain: per case and cold policy, what changed most
between A's and B's diagnostic processes — a phase's imports by distribution, the costliest modules both arms
list, JAX's programs, torch.compile's frames and the first call's parts.

Each arm explains one process, so there is no interval: a change counts when it is at least 20% of the larger
side and at least 2 ms (EXPLAIN_THRESHOLD), the agreement --explain itself claims for its import phase.
A module is compared only where both arms list it among their costliest (a list of eight: one arm's absence
says nothing); distributions, programs, frames and parts are complete lists, so one missing there is 0 s.
"""

from __future__ import annotations

from ttfr.model.base import present
from ttfr.model.comparison import ExplanationChange
from ttfr.model.explanation import Explanation

RELATIVE = 0.20  # of the larger side
FLOOR_S = 0.002  # -X importtime's and a timer's resolution, and a busy machine's jitter, in one process
EXPLAIN_THRESHOLD = f"|B - A| >= {RELATIVE:.0%} of the larger and >= {FLOOR_S * 1e3:.0f} ms"
PER_POLICY = 10


def changes(cases_a, cases_b) -> list[ExplanationChange] | None:
    """The changes, per case (A's order) and cold policy; None where no case was explained in both arms."""
    by_id = {c.case: c for c in cases_b}
    found, explained = [], False
    for case_a in cases_a:
        case_b = by_id.get(case_a.case)
        for policy, _block in case_a.policies.cold():  # the precompiled ones too, where both arms ran them
            a, b = (_explanation(c, policy) for c in (case_a, case_b))
            if a is None or b is None:
                continue
            explained = True
            rows = [ExplanationChange(case=case_a.case, policy=policy, kind=kind, phase=phase, name=name, a_s=va,
                                      b_s=vb, change_s=(vb or 0.0) - (va or 0.0))
                    for kind, phase, name, va, vb in _pairs(a, b) if _changed(va, vb)]  # fmt: skip
            found += sorted(rows, key=lambda r: -abs(r.change_s))[:PER_POLICY]
    return found if explained else None


def _explanation(case, policy) -> Explanation | None:
    block = case.policies.get(policy) if case is not None else None
    explanation = getattr(block, "explanation", None) if block else None
    return explanation if explanation is not None and present(explanation) and explanation.outcome == "ok" else None


def _changed(a: float | None, b: float | None) -> bool:
    change = abs((b or 0.0) - (a or 0.0))
    return change >= FLOOR_S and change >= RELATIVE * max(a or 0.0, b or 0.0)


def _pairs(a: Explanation, b: Explanation):
    """(kind, phase, name, A's seconds, B's seconds) for everything both explanations can be compared on."""
    phases_a, phases_b = ({p.phase: p for p in e.phases} for e in (a, b))
    for phase in [p for p in phases_a if p in phases_b]:
        dist_a, dist_b = ({d.distribution: d.self_s for d in x[phase].distributions} for x in (phases_a, phases_b))
        for name in dict.fromkeys([*dist_a, *dist_b]):
            yield "distribution", phase, name, dist_a.get(name), dist_b.get(name)
        mods_a, mods_b = ({m.module: m.cumulative_s for m in x[phase].top_modules} for x in (phases_a, phases_b))
        for name in [m for m in mods_a if m in mods_b]:
            yield "module", phase, name, mods_a[name], mods_b[name]
    progs_a, progs_b = ({p.name: p.trace_s + p.lower_s + p.compile_s for p in (e.programs or [])} for e in (a, b))
    for name in dict.fromkeys([*progs_a, *progs_b]):
        yield "program", None, name, progs_a.get(name), progs_b.get(name)
    frames_a, frames_b = (_frames(e) for e in (a, b))
    for name in dict.fromkeys([*frames_a, *frames_b]):
        yield "frame", None, name, frames_a.get(name), frames_b.get(name)
    parts_a, parts_b = ({p.part: p.s for p in e.first_call.parts} if present(e.first_call) else {} for e in (a, b))
    for name in dict.fromkeys([*parts_a, *parts_b]):
        yield "first_call_part", None, name, parts_a.get(name), parts_b.get(name)


def _frames(explanation: Explanation) -> dict[str, float]:
    """Each compiled frame's seconds by its function (a backward graph by the forward's compile id), recompiles of
    one function summed."""
    found: dict[str, float] = {}
    for frame in explanation.frames if present(explanation.frames) else []:
        name = frame.function if frame.forward else f"backward of {frame.compile_id}"
        found[name] = found.get(name, 0.0) + (frame.compile_s or 0.0)
    return found
