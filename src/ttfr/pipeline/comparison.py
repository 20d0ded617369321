"""Compare two arms' case results: pair runs by index, judge every (case, policy), and
write `comparison.json` (ttfr.comparison.v1) and `comparison.md`.

Cold policies compare TTFR (`ttfr_s`); warm-process compares each process's median call
time. Paired comparisons need both arms measured interleaved in one session (`ttfr ab`);
two result directories from separate runs are compared unpaired only when asked
(`--cross-session`), and every such verdict is marked weak: on this kind of machine,
identical code measured in two sessions differed 81-88% of the time.
"""

from __future__ import annotations

import math
from pathlib import Path

from ttfr.analyse import comparison_stats as comparison
from ttfr.analyse import diagnostics
from ttfr.artifacts.reader import load_finished
from ttfr.artifacts.store import new_stamped_directory, write_bytes_atomic, write_json
from ttfr.errors import UsageError
from ttfr.exit_codes import EXIT_CASE_FAILED, EXIT_OK, EXIT_REGRESSION
from ttfr.model.base import encode
from ttfr.model.case import CaseResult
from ttfr.model.policies import WARM_PROCESS

SCHEMA = "ttfr.comparison.v1"
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


def _record(case_a: CaseResult, case_b: CaseResult, policy: str, paired: bool) -> tuple[dict, dict | None]:
    regime = "warm" if policy == WARM_PROCESS else "cold"
    record = {"case": case_a.case, "policy": policy, "regime": regime,
              "metric": "call_s" if regime == "warm" else "ttfr_s", "paired": paired}  # fmt: skip
    for side, case in (("a", case_a), ("b", case_b)):
        if case.status == "failed" or (case.status == "warn" and not case.policies.items()):
            record.update(verdict="not_compared", explanation=f"arm {side.upper()} {case.status}: {case.reason}",
                          failed=case.status == "failed")  # fmt: skip
            return record, None
    a, b = _values(case_a, policy), _values(case_b, policy)
    if paired:
        indices = sorted(set(a) & set(b))
        xs, ys = [a[i] for i in indices], [b[i] for i in indices]
        record["excluded_rounds"] = sorted((set(a) | set(b)) - set(indices))
        effect = comparison.paired([math.log(v) for v in xs], [math.log(v) for v in ys])
    else:
        xs, ys = [a[i] for i in sorted(a)], [b[i] for i in sorted(b)]
        effect = comparison.unpaired([math.log(v) for v in xs], [math.log(v) for v in ys])
    from ttfr.analyse import stats

    record.update(
        a=encode(stats.summarize(xs)), b=encode(stats.summarize(ys)),
        diagnostics={"a": diagnostics.series([a[i] for i in sorted(a)]), "b": diagnostics.series([b[i] for i in sorted(b)])},
    )  # fmt: skip
    return record, effect


def compare_cases(cases_a, cases_b, *, paired: bool, noise_floor=None, correction="holm") -> list[dict]:
    """Judged comparison records for every case and policy both arms have."""
    by_id = {c.case: c for c in cases_b}
    pending, records = [], []
    for case_a in cases_a:
        case_b = by_id.get(case_a.case)
        if case_b is None:
            continue
        for policy in case_a.config.policies:
            record, effect = _record(case_a, case_b, policy, paired)
            records.append(record)
            if effect is not None:
                floor = (noise_floor or {}).get(record["regime"])
                pending.append((record, effect, comparison.delta_for(record["regime"], floor)))
    judged = comparison.judge([e for _, e, _ in pending], [d for _, _, d in pending], correction) if pending else []
    for (record, _effect, _delta), verdict in zip(pending, judged):
        record["effect"] = verdict
        record["verdict"] = verdict["verdict"] if paired else verdict["verdict"] + comparison.WEAK_MARK
        record["explanation"] = verdict["explanation"]
    return records


def precise_enough(records: list[dict], precision: float) -> bool:
    """Every compared statistic's CI half-width (relative) is at most `precision`."""
    compared = [r for r in records if r.get("effect") and r["effect"].get("ci")]
    if not compared:
        return False
    return all(math.expm1(comparison.log_half_width(r["effect"]["ci"])) <= precision for r in compared)


def summarise(records: list[dict], fail_on: str) -> dict:
    counts: dict[str, int] = {}
    for record in records:
        counts[comparison.base_verdict(record)] = counts.get(comparison.base_verdict(record), 0) + 1
    regressions = [f"{r['case']} ({r['policy']})" for r in records if comparison.base_verdict(r) == comparison.REGRESSION]
    inconclusive = [f"{r['case']} ({r['policy']})" for r in records if comparison.base_verdict(r) == comparison.INCONCLUSIVE]
    failed = sorted({r["case"] for r in records if r.get("failed")})
    gate_failures = regressions + (inconclusive if fail_on == "inconclusive" else [])
    exit_code = EXIT_REGRESSION if gate_failures else EXIT_CASE_FAILED if failed else EXIT_OK
    return {"counts": counts, "regressions": regressions, "inconclusive": inconclusive, "failed": failed,
            "fail_on": fail_on, "gate": "fail" if gate_failures else "pass", "exit_code": exit_code}  # fmt: skip


def write_comparison(root: Path, cases_a, cases_b, *, paired: bool, arms, session, correction, fail_on,
                     noise_floor=None, entries=(), rounds=None, usable_cores=None, warning=None) -> dict:  # fmt: skip
    from ttfr.child import hostinfo
    from ttfr.report import comparison_md

    records = compare_cases(cases_a, cases_b, paired=paired, noise_floor=noise_floor, correction=correction)
    document = {
        "schema": SCHEMA,
        "paired": paired,
        "session": session,
        "arms": list(arms),
        "correction": correction,
        "noise_floor": noise_floor,
        "rounds": rounds,
        "warning": warning,
        "host_noise": diagnostics.host_noise(list(entries), usable_cores or hostinfo.usable_cpus()),
        "comparisons": records,
        "summary": summarise(records, fail_on),
    }
    write_json(Path(root) / "comparison.json", document, SCHEMA)
    write_bytes_atomic(Path(root) / "comparison.md", comparison_md.render(document).encode())
    _write_comparison_html(Path(root), document)
    return document


def _write_comparison_html(root: Path, document: dict) -> None:
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
    (session_a, machine_a), (session_b, machine_b) = ((m.get("session_id"), m.get("machine_id")) for m in manifests)
    same_session = session_a is not None and session_a == session_b
    if not same_session and not cross_session:
        where = "different machines" if machine_a != machine_b else "two separate sessions"
        raise UsageError(
            f"{a} and {b} were measured in {where}: a paired verdict needs both arms interleaved in one "
            "session (use `ttfr ab`), or pass --cross-session for a weak, unpaired comparison"
        )
    cases = [r.cases for r in results]
    arms = [{"name": name, "python": m["python"]["worker_executable"], "env": {}} for name, m in zip("AB", manifests)]
    warning = None if same_session else CROSS_SESSION_WARNING
    if not same_session and machine_a != machine_b:
        warning += " The two results also come from different machines."
    out = _new_comparison_dir(Path(out_parent))
    document = write_comparison(out, cases[0], cases[1], paired=same_session, arms=arms,
                                session=session_a if same_session else None, correction=correction, fail_on=fail_on,
                                warning=warning)  # fmt: skip
    return out, document
