"""`ttfr history`: results read and verified, ordered (by date or a package's version), split into
series that never mix machines, their steps found, the newest segment gated, and the history
written as history.json (ttfr.history.v1), history.md, history.html and history.csv."""

from __future__ import annotations

import datetime as dt
import math
import os
import statistics
from pathlib import Path

import ttfr
from ttfr.analyse import explain_changes, history_steps
from ttfr.artifacts import history_sources
from ttfr.artifacts.history_sources import NEXTSTAT_PREFIX, WARM_FIGURE, ReadResult
from ttfr.artifacts.store import new_stamped_directory, write_bytes_atomic, write_json
from ttfr.errors import UsageError
from ttfr.exit_codes import EXIT_OK, EXIT_REGRESSION
from ttfr.model.base import UNSET
from ttfr.model.history import (
    HISTORY_SCHEMA,
    Change,
    Gate,
    History,
    LeftOut,
    Method,
    Newest,
    Noise,
    Point,
    Series,
    Source,
    Step,
)

# The figures the gate judges: a component's step is reported, TTFR's and the warm call's fail CI.
GATED = ("ttfr_s", WARM_FIGURE, NEXTSTAT_PREFIX + "ttfr_s", NEXTSTAT_PREFIX + WARM_FIGURE)
DATE = "date"


def _version(value: str):
    from packaging.version import InvalidVersion, Version

    try:
        return Version(value)
    except InvalidVersion:
        return None


def order(results: list[ReadResult], by: str | None) -> list[ReadResult]:
    """The results in order: by date, or by the version of package `by` (then by date). UsageError when some result
    has no such package or a version that cannot be ordered, naming them and the packages every result has."""
    if not by:
        return sorted(results, key=lambda r: (r.created_at, r.id))
    lacking = [r.path for r in results if by not in r.versions]
    unordered = [f"{r.path} ({r.versions[by]})" for r in results if by in r.versions and _version(r.versions[by]) is None]
    if lacking or unordered:
        common = sorted(set.intersection(*(set(r.versions) for r in results))) if results else []
        what = (f"{len(lacking)} result(s) record no {by}: {', '.join(lacking[:3])}" if lacking else
                f"{by}'s version cannot be ordered in {', '.join(unordered[:3])}")  # fmt: skip
        raise UsageError(f"--by {by}: {what}; every result records: {', '.join(common) or 'no package in common'}")
    return sorted(results, key=lambda r: (_version(r.versions[by]), r.created_at, r.id))


def _label(result: ReadResult, by: str | None) -> str:
    return f"{by} {result.versions[by]}" if by else result.created_at


def _source(result: ReadResult, by: str | None, previous: ReadResult | None) -> Source:
    return Source(id=result.id, kind=result.kind, path=result.path, created_at=result.created_at,
                  machine=result.fingerprint, label=_label(result, by), ttfr_version=result.ttfr_version,
                  manifest=result.manifest, changed=changes(previous.manifest, result.manifest) if previous else [])  # fmt: skip


def _sources(ordered: list[ReadResult], by: str | None) -> list[Source]:
    """Each result as a source, with what changed since the previous one on its machine."""
    last: dict[str, ReadResult] = {}
    sources = []
    for result in ordered:
        sources.append(_source(result, by, last.get(result.fingerprint)))
        last[result.fingerprint] = result
    return sources


def changes(before: dict[str, str], after: dict[str, str]) -> list[Change]:
    """Every manifest value that differs, by key."""
    keys = sorted(set(before) | set(after))
    return [Change(key=k, before=before.get(k), after=after.get(k)) for k in keys if before.get(k) != after.get(k)]


def _gap(result: ReadResult, key: tuple[str, str, str]) -> str:
    case, policy, _ = key
    if case not in result.cases:
        return "this case was not measured in this result"
    return result.cases[case] or f"{policy} was not measured in this result"


def _explained(before: ReadResult, after: ReadResult, key: tuple[str, str, str]) -> list | None:
    """What moved between the --explain processes either side of a step, for its case and policy (None: a side has
    no explanation of it)."""
    case, policy, _figure = key
    sides = [r.explained.get(case) for r in (before, after)]
    if None in sides:
        return None
    moved = explain_changes.changes([sides[0]], [sides[1]])
    if moved is None or not any(p == policy for p, _block in sides[0].policies.cold()):
        return None
    return [row for row in moved if row.policy == policy]


def series_of(
    results: list[ReadResult], key: tuple[str, str, str], machine: str, fail_above: float | None, by: str | None = None
) -> Series:
    """One series: a point per result (a gap where it gives no figure), its steps, its newest segment."""
    points, valid = [], []
    for result in results:
        figure = result.figures.get(key)
        if figure is None or figure.gap or not figure.runs_s:
            points.append(dict(source=result.id, runs_s=[], median_s=None, segment=None,
                               gap=figure.gap if figure and figure.gap else _gap(result, key)))  # fmt: skip
        else:
            runs = [float(v) for v in figure.runs_s]
            points.append(dict(source=result.id, runs_s=runs, median_s=statistics.median(runs),
                               gap=None, segment=None))  # fmt: skip
            valid.append(len(points) - 1)
    detection = history_steps.detect([points[i]["runs_s"] for i in valid])
    for i, segment in zip(valid, detection.segments):
        points[i]["segment"] = segment
    steps = []
    for found in detection.steps:
        at, before = valid[found.at], valid[found.at - 1]
        after_result = results[at]
        explained = _explained(results[before], after_result, key)
        steps.append(Step(at=at, source=after_result.id, created_at=after_result.created_at, label=_label(after_result, by),
                          before_s=math.exp(found.before), after_s=math.exp(found.after),
                          ratio=math.exp(found.after - found.before), ci=list(found.ci),
                          ci_level=history_steps.CI_LEVEL,
                          changed=changes(results[before].manifest, after_result.manifest),
                          explained=UNSET if explained is None else explained))  # fmt: skip
    newest = Newest(step=None, ratio=None, fails=False)
    if steps:
        last = steps[-1]
        fails = fail_above is not None and key[2] in GATED and last.ci[0] > 1 + fail_above
        newest = Newest(step=len(steps) - 1, ratio=last.ratio, fails=fails)
    case, policy, figure = key
    return Series(case=case, policy=policy, figure=figure, machine=machine, points=[Point(**p) for p in points],
                  noise=Noise(within_rel=detection.within_rel, between_rel=detection.between_rel,
                              penalty=detection.penalty),
                  steps=steps, newest=newest,
                  status="detected" if len(valid) >= history_steps.MIN_POINTS else "too_short")  # fmt: skip


def _method() -> Method:
    import ruptures

    return Method(
        library=f"ruptures {ruptures.__version__.lstrip('v')}",
        search="Pelt (exact), weighted L2 cost on log medians, minimum segment 1 point",
        penalty_rule=f"per step, the F(1, n-2) quantile at {history_steps.FALSE_STEP:.0%} / (n-1), in units of each "
                     "point's variance (its runs' median's plus the series' between-session scatter, at least "
                     f"{history_steps.SESSION_FLOOR_REL:.1%})",
        min_points=history_steps.MIN_POINTS, ci_level=history_steps.CI_LEVEL, bootstrap=history_steps.BOOTSTRAP,
        seed=history_steps.SEED,
    )  # fmt: skip


def build(results: list[ReadResult], left_out: list[LeftOut], *, by: str | None, figures: list[str],
          cases: list[str] | None, fail_above: float | None, now: str | None = None) -> History:  # fmt: skip
    """The history of the results (already read), their series split by machine."""
    ordered = order(results, by)
    machines = {r.fingerprint: r.machine for r in ordered}
    series = []
    for machine in machines:
        on_machine = [r for r in ordered if r.fingerprint == machine]
        keys = sorted({k for r in on_machine for k in r.figures})
        for key in keys:
            figure = key[2].removeprefix(NEXTSTAT_PREFIX)
            if figure not in figures or (cases and key[0] not in cases):
                continue
            series.append(series_of(on_machine, key, machine, fail_above, by))
    failing = [f"{s.case} · {s.policy} · {s.figure} · {s.machine}" for s in series if s.newest.fails]
    return History(
        schema=HISTORY_SCHEMA, created_at=now or dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        ttfr_version=ttfr.__version__, order_by=by or DATE, figures=list(figures), machines=machines,
        sources=_sources(ordered, by), left_out=list(left_out), series=series, method=_method(),
        gate=Gate(fail_above=fail_above, failing=failing, exit_code=EXIT_REGRESSION if failing else EXIT_OK),
    )  # fmt: skip


def read_sources(paths: list[Path], registry: Path | None, root: Path | None) -> tuple[list[ReadResult], list[LeftOut]]:
    """The results of the paths and the registry's snapshots (UsageError: nothing to read)."""
    all_paths = list(paths) + (history_sources.registry_snapshots(registry, root) if registry else [])
    if not all_paths:
        raise UsageError("name result directories or snapshots (PATH...), or a NextStat registry (--registry FILE)")
    results, left_out = history_sources.read_all(all_paths)
    return results, left_out


def write(history: History, out_parent: Path) -> Path:
    """history.json, history.md, history.csv and history.html in a new directory under `out_parent`."""
    from ttfr.artifacts.export import history_csv
    from ttfr.report import history_md, html

    try:
        out = new_stamped_directory(Path(out_parent), "history")
    except OSError as exc:
        raise UsageError(f"--out {out_parent}: cannot create the history directory ({exc.strerror}); choose a "
                         "writable folder") from None  # fmt: skip
    write_json(out / "history.json", history, HISTORY_SCHEMA)
    write_bytes_atomic(out / "history.md", history_md.render(history).encode())
    write_bytes_atomic(out / "history.csv", history_csv.render(history).encode())
    write_bytes_atomic(out / "history.html", html.render_history(history, links(history, out)).encode())
    return out


def links(history: History, out: Path) -> dict[str, str]:
    """Each source's address from the history's directory: its report.html where it has one, else its folder."""
    found = {}
    for source in history.sources:
        folder = Path(source.path).resolve()
        target = folder / "report.html" if (folder / "report.html").is_file() else folder
        found[source.id] = os.path.relpath(target, out.resolve())
    return found
