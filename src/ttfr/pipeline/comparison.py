"""Compare two arms' case results: pair runs by index (a group by its round), judge every (case,
policy) and every concurrency point, and write `comparison.json` (ttfr.comparison.v1) and
`comparison.md`.

Cold policies compare TTFR (`ttfr_s`); warm-process compares each process's median call
time; each concurrency point both arms ran (`--concurrency`: a sharing mode at a group size
N) compares each round's group's time until all N had a result (`all_results_s`) in the cold
regime (its delta from the cold noise floor). Paired comparisons need both arms measured
interleaved in one session (`ttfr ab`); two result directories from separate runs are
compared unpaired only when asked (`--cross-session`), and every such verdict is marked
weak: on this kind of machine, identical code measured in two sessions differed 81-88% of
the time.
"""

from __future__ import annotations

import math
from pathlib import Path

from ttfr.analyse import comparison_stats as comparison
from ttfr.analyse import diagnostics, explain_changes
from ttfr.artifacts.reader import load_finished
from ttfr.artifacts.store import new_stamped_directory, write_bytes_atomic, write_json
from ttfr.errors import UsageError
from ttfr.exit_codes import EXIT_CASE_FAILED, EXIT_OK, EXIT_REGRESSION
from ttfr.model.base import UNSET
from ttfr.model.case import CaseResult
from ttfr.model.comparison import (
    COMPARISON_SCHEMA,
    INCONCLUSIVE,
    NOT_COMPARED,
    REGRESSION,
    WEAK_MARK,
    ArmDiagnostics,
    Comparison,
    ComparisonSummary,
    Estimate,
    Record,
    RecordedArm,
)
from ttfr.model.concurrency import point_label
from ttfr.model.policies import WARM_PROCESS, precompiled_parts

CROSS_SESSION_WARNING = (
    "CROSS-SESSION COMPARISON: A and B were not measured interleaved in one session. On a shared "
    "machine identical code measured in two sessions looks different 81-88% of the time; these "
    "verdicts are weak. Measure with `ttfr ab` for a verdict you can trust."
)


def _values(case: CaseResult, policy: str) -> dict[int, float]:
    """index -> value of the successful runs of one policy (TTFR, or a process's median)."""
    block = case.policies.get(policy)
    runs = block.measured if block else []
    if policy == WARM_PROCESS:
        return {p.index: p.median_s for p in runs if p.outcome == "ok" and p.median_s}
    return {r.index: r.metrics.ttfr_s for r in runs if r.outcome == "ok" and r.metrics.ttfr_s}


def _points(case: CaseResult) -> list[tuple[str, int]]:
    """The concurrency points (sharing mode, group size N) a case ran groups at."""
    together = case.concurrency
    return [] if together is UNSET else [(p.mode, p.n) for p in together.points if p.measured_as is None]


def _group_values(case: CaseResult, mode: str, n: int) -> dict[int, float]:
    """round -> the time until all N members of that round's group had a result (a group with a
    member that failed has none)."""
    together = case.concurrency
    groups = [] if together is UNSET else together.groups
    return {g.index: g.all_results_s for g in groups if (g.mode, g.n) == (mode, n) and g.all_results_s}


def _not_compared(case_a: CaseResult, case_b: CaseResult) -> tuple[str, bool] | None:
    """Why a case is not compared (an arm failed, or warned with nothing measured), and
    whether an arm failed; None when both arms have figures to compare."""
    for side, case in (("A", case_a), ("B", case_b)):
        if case.status == "failed" or (case.status == "warn" and not case.policies.items()):
            return f"arm {side} {case.status}: {case.reason}", case.status == "failed"
    return None


def _streams(case_a: CaseResult, case_b: CaseResult, paired: bool) -> list[tuple[dict, dict | None, dict | None, str]]:
    """(record head, A's values, B's values, why not compared) of every policy, then of every concurrency point
    either arm ran (in A's order; the values of an arm that did not run the point are None, and `why` says so)."""
    streams = []
    shipped = [p for p in case_b.config.policies if precompiled_parts(p) and p not in case_a.config.policies]
    for policy in [*case_a.config.policies, *shipped]:
        regime = "warm" if policy == WARM_PROCESS else "cold"
        head = dict(case=case_a.case, policy=policy, regime=regime, metric="call_s" if regime == "warm" else "ttfr_s",
                    paired=paired)  # fmt: skip
        if precompiled_parts(policy):
            blocks = (case_a.policies.get(policy), case_b.policies.get(policy))
            if not any(blocks):
                continue  # a mechanism this case's backend does not offer (the run's other backends did)
            why = _unshipped(blocks)
            if why:
                streams.append((head, None, None, why))
                continue
        streams.append((head, _values(case_a, policy), _values(case_b, policy), ""))
    points_a, points_b = _points(case_a), _points(case_b)
    for mode, n in points_a + [p for p in points_b if p not in points_a]:
        head = dict(case=case_a.case, policy=mode, concurrency=n, regime="cold", metric="all_results_s", paired=paired)
        values = [_group_values(case, mode, n) if (mode, n) in points else None
                  for case, points in ((case_a, points_a), (case_b, points_b))]  # fmt: skip
        side = "A" if values[0] is None else "B"
        streams.append((head, *values, f"arm {side} ran no {point_label(mode, n)} groups"))
    return streams


def _unshipped(blocks) -> str:
    """Why a precompiled policy is not compared: an arm did not run it, or its artifact was not made there
    (unsupported, failed); empty when both loaded one."""
    for side, block in zip("AB", blocks):
        if block is None:
            return f"arm {side} did not run this policy"
        if block.artifact.state != "made":
            return f"arm {side}'s artifact {block.artifact.state}: {block.artifact.reason}"
    return ""


def _measured(a: dict[int, float], b: dict[int, float], paired: bool) -> tuple[dict, Estimate]:
    """Both arms' summaries and diagnostics (the record's fields) and the estimate of B/A, from
    each arm's values by index (a run's, or a group's round)."""
    from ttfr.analyse import stats

    fields = {}
    if paired:
        indices = sorted(set(a) & set(b))
        xs, ys = [a[i] for i in indices], [b[i] for i in indices]
        fields["excluded_rounds"] = sorted((set(a) | set(b)) - set(indices))
        estimate = comparison.paired([math.log(v) for v in xs], [math.log(v) for v in ys])
    else:
        xs, ys = [a[i] for i in sorted(a)], [b[i] for i in sorted(b)]
        estimate = comparison.unpaired([math.log(v) for v in xs], [math.log(v) for v in ys])
    fields.update(
        a=stats.summarize(xs), b=stats.summarize(ys),
        diagnostics=ArmDiagnostics(a=diagnostics.series([a[i] for i in sorted(a)]),
                                   b=diagnostics.series([b[i] for i in sorted(b)])),
    )  # fmt: skip
    return fields, estimate


def compare_cases(cases_a, cases_b, *, paired: bool, noise_floor=None, correction="holm") -> list[Record]:
    """Judged comparison records for every case and policy both arms have, and every concurrency
    point of theirs (in A's order), judged together (one Holm correction over them all)."""
    by_id = {c.case: c for c in cases_b}
    slots: list[Record | tuple[dict, int]] = []  # a record, or a measured one's fields and its estimate's place
    estimates, deltas = [], []
    for case_a in cases_a:
        case_b = by_id.get(case_a.case)
        if case_b is None:
            continue
        why_not = _not_compared(case_a, case_b)
        for head, a, b, why in _streams(case_a, case_b, paired):
            if why_not is not None:
                slots.append(Record(**head, verdict=NOT_COMPARED, explanation=why_not[0], failed=why_not[1]))
                continue
            if a is None or b is None:  # a point one arm never ran (its case stopped first), an artifact not made
                slots.append(Record(**head, verdict=NOT_COMPARED, failed=False, explanation=why))
                continue
            fields, estimate = _measured(a, b, paired)
            slots.append(({**head, **fields}, len(estimates)))
            estimates.append(estimate)
            deltas.append(comparison.delta_for(head["regime"], (noise_floor or {}).get(head["regime"])))
    judged = comparison.judge(estimates, deltas, correction) if estimates else []
    return [
        slot if isinstance(slot, Record) else Record(
            **slot[0], effect=judged[slot[1]], explanation=judged[slot[1]].explanation,
            verdict=judged[slot[1]].verdict + ("" if paired else WEAK_MARK),
        )
        for slot in slots
    ]  # fmt: skip


def precise_enough(records: list[Record], precision: float) -> bool:
    """Every compared statistic's CI half-width (relative) is at most `precision`."""
    intervals = [r.effect.ci for r in records if r.effect is not UNSET and r.effect.ci]
    if not intervals:
        return False
    return all(math.expm1(comparison.log_half_width(ci)) <= precision for ci in intervals)


def summarise(records: list[Record], fail_on: str) -> ComparisonSummary:
    counts: dict[str, int] = {}
    for record in records:
        counts[record.base_verdict] = counts.get(record.base_verdict, 0) + 1
    regressions = [r.label for r in records if r.base_verdict == REGRESSION]
    inconclusive = [r.label for r in records if r.base_verdict == INCONCLUSIVE]
    failed = sorted({r.case for r in records if r.failed is True})
    gate_failures = regressions + (inconclusive if fail_on == "inconclusive" else [])
    exit_code = EXIT_REGRESSION if gate_failures else EXIT_CASE_FAILED if failed else EXIT_OK
    return ComparisonSummary(counts=counts, regressions=regressions, inconclusive=inconclusive, failed=failed,
                             fail_on=fail_on, gate="fail" if gate_failures else "pass", exit_code=exit_code)  # fmt: skip


def write_comparison(root: Path, cases_a, cases_b, *, paired: bool, arms, session, correction, fail_on,
                     noise_floor=None, entries=(), rounds=None, usable_cores=None, warning=None) -> Comparison:  # fmt: skip
    from ttfr.child import hostinfo
    from ttfr.report import comparison_md

    records = compare_cases(cases_a, cases_b, paired=paired, noise_floor=noise_floor, correction=correction)
    explained = explain_changes.changes(cases_a, cases_b)  # None: no case explained in both arms
    document = Comparison(
        schema=COMPARISON_SCHEMA,
        paired=paired,
        session=session,
        arms=list(arms),
        correction=correction,
        noise_floor=noise_floor,
        rounds=rounds,
        warning=warning,
        host_noise=diagnostics.host_noise(list(entries), usable_cores or hostinfo.usable_cpus()),
        comparisons=records,
        summary=summarise(records, fail_on),
        explained=UNSET if explained is None else explained,
    )
    write_json(Path(root) / "comparison.json", document, COMPARISON_SCHEMA)
    write_bytes_atomic(Path(root) / "comparison.md", comparison_md.render(document).encode())
    _write_comparison_html(Path(root), document)
    return document


def _write_comparison_html(root: Path, document: Comparison) -> None:
    """comparison.html beside comparison.md; a figure that cannot be drawn is a warning (the
    verdicts are written by then)."""
    import sys

    from ttfr.report import html

    try:
        write_bytes_atomic(root / "comparison.html", html.render_comparison(document).encode("utf-8"))
    except Exception as exc:  # noqa: BLE001 - matplotlib's failures are many; the verdicts are safe
        print(f"ttfr: warning: {root / 'comparison.html'} could not be rendered ({type(exc).__name__}: {exc})",
              file=sys.stderr)  # fmt: skip


def _new_comparison_dir(parent: Path) -> Path:
    """compare-<UTC stamp>-<random>: two comparisons in one second get two directories."""
    try:
        return new_stamped_directory(parent, "compare")
    except OSError as exc:
        raise UsageError(f"--out {parent}: cannot create the comparison directory ({exc.strerror}); "
                         "choose a writable folder") from None  # fmt: skip


def compare_dirs(a: Path, b: Path, out_parent: Path, *, cross_session: bool, correction: str, fail_on: str):
    """Compare two finished result directories; the comparison goes to a new directory under
    `out_parent`. Returns (that directory, the comparison document)."""
    results = [load_finished(path) for path in (a, b)]
    manifests = [r.manifest for r in results]
    (session_a, machine_a), (session_b, machine_b) = ((m.session_id, m.machine_id) for m in manifests)
    same_session = session_a is not None and session_a == session_b
    if not same_session and not cross_session:
        where = "different machines" if machine_a != machine_b else "two separate sessions"
        raise UsageError(
            f"{a} and {b} were measured in {where}: a paired verdict needs both arms interleaved in one "
            "session (use `ttfr ab`), or pass --cross-session for a weak, unpaired comparison"
        )
    cases = [r.cases for r in results]
    arms = [RecordedArm(name=name, python=m.python.worker_executable, env={}) for name, m in zip("AB", manifests)]
    warning = None if same_session else CROSS_SESSION_WARNING
    if not same_session and machine_a != machine_b:
        warning += " The two results also come from different machines."
    policies_a = {c.case: c.sync_policy for c in cases[0]}
    waits = sorted(c.case for c in cases[1] if policies_a.get(c.case, c.sync_policy) != c.sync_policy)
    if waits:  # e.g. a newer ttfr runs an engine's CPU computations inline
        note = (f"How the timed calls wait for their results differs between A and B for {', '.join(waits)} "
                "(sync_policy): part of their difference is the harness's, not the code's.")  # fmt: skip
        warning = f"{warning} {note}" if warning else note
    out = _new_comparison_dir(Path(out_parent))
    document = write_comparison(out, cases[0], cases[1], paired=same_session, arms=arms,
                                session=session_a if same_session else None, correction=correction, fail_on=fail_on,
                                warning=warning)  # fmt: skip
    return out, document
