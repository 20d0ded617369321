"""history.csv: every point of every series as one tidy row (a gap is a row with its reason and no
figure), the step that starts its segment on the point after it; for `pandas.read_csv`."""

from __future__ import annotations

import csv
import io

from ttfr.model.history import History

COLUMNS = ["machine", "case", "policy", "figure", "index", "source", "created_at", "label", "median_s", "runs", "gap",
           "segment", "step_ratio", "step_ci_low", "step_ci_high"]  # fmt: skip


def rows(history: History) -> list[dict]:
    sources = {s.id: s for s in history.sources}
    out = []
    for series in history.series:
        steps = {step.at: step for step in series.steps}
        for index, point in enumerate(series.points):
            source = sources[point.source]
            step = steps.get(index)
            out.append({
                "machine": series.machine, "case": series.case, "policy": series.policy, "figure": series.figure,
                "index": index, "source": point.source, "created_at": source.created_at, "label": source.label,
                "median_s": "" if point.median_s is None else repr(point.median_s), "runs": len(point.runs_s),
                "gap": point.gap or "", "segment": "" if point.segment is None else point.segment,
                "step_ratio": repr(step.ratio) if step else "", "step_ci_low": repr(step.ci[0]) if step else "",
                "step_ci_high": repr(step.ci[1]) if step else "",
            })  # fmt: skip
    return out


def render(history: History) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows(history))
    return out.getvalue()
