"""`ttfr export --format F DIR DEST`: one verified result directory, one exporter per format
(hyperfine's pattern). NextStat's contracts are a directory of files; the others are one
file: DEST, or inside DEST when it is a directory `ttfr.prom` (openmetrics, prometheus: the
latest snapshot's figures) or `<snapshot id>.csv`."""

from __future__ import annotations

from pathlib import Path

from ttfr.artifacts.reader import load_finished
from ttfr.artifacts.store import StorageError
from ttfr.errors import UsageError

FORMATS = ("nextstat-v1", "openmetrics", "prometheus", "csv")
_SUFFIX = {"openmetrics": ".prom", "prometheus": ".prom", "csv": ".csv"}


def export(fmt: str, source: Path, dest: Path, cold_policy: str) -> list[Path]:
    """Write DIR's figures in `fmt` to DEST; the files written."""
    if fmt not in FORMATS:
        raise UsageError(f"unknown export format {fmt!r}; valid: {', '.join(FORMATS)}")
    if fmt == "nextstat-v1":
        from ttfr.artifacts.export import nextstat

        return nextstat.export(source, dest, cold_policy)
    verified = load_finished(source)
    root, dest = verified.result_dir.root.resolve(), Path(dest)
    # In a directory: a node_exporter textfile directory keeps one ttfr.prom (the latest export
    # replaces it; one file per snapshot would expose the same series twice); a CSV per snapshot.
    name = f"ttfr{_SUFFIX[fmt]}" if fmt != "csv" else f"{verified.result_dir.root.name}.csv"
    target = dest / name if dest.is_dir() else dest
    if target.resolve() == root or root in target.resolve().parents:
        raise UsageError(f"export destination {dest} is inside the result directory {source}: the export is not one "
                         "of its artifacts; choose a path outside it")  # fmt: skip
    if not target.parent.is_dir():
        raise UsageError(f"export destination {dest}: directory {target.parent} does not exist")
    try:
        if fmt == "csv":
            from ttfr.artifacts.export import csv_long

            return [csv_long.export(verified, target)]
        from ttfr.artifacts.export import openmetrics

        return [openmetrics.export(verified, target, fmt)]
    except OSError as exc:
        raise StorageError(f"{exc.filename or target}: cannot be written ({exc.strerror})") from None
