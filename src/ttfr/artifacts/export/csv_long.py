"""`ttfr export --format csv DIR DEST`: every run's figures as one tidy CSV (one row per run
and metric; see export/tidy.py), for `pandas.read_csv(DEST)` and spreadsheets."""

from __future__ import annotations

import csv
import io
from pathlib import Path

from ttfr.artifacts.export import tidy
from ttfr.artifacts.reader import VerifiedResult
from ttfr.artifacts.store import write_bytes_atomic


def render(verified: VerifiedResult) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=tidy.COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(tidy.rows(verified.result_dir.root.name, verified.cases))
    return out.getvalue()


def export(verified: VerifiedResult, dest: Path) -> Path:
    write_bytes_atomic(dest, render(verified).encode("utf-8"))
    return dest
