"""`ttfr export --format F DIR DEST`: one verified result directory, one exporter per format
(hyperfine's pattern), each an entry of EXPORTERS: its name, what it writes, and how. NextStat's
contracts are a directory of files; the others are one file: DEST, or inside DEST when it is a
directory `ttfr.prom` (openmetrics, prometheus: the latest snapshot's figures) or
`<snapshot id>.csv`. The command's choices and help are this table's."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ttfr.artifacts.reader import VerifiedResult, load_finished
from ttfr.artifacts.store import StorageError
from ttfr.errors import UsageError


@dataclass(frozen=True)
class Exporter:
    name: str
    description: str  # what it writes, for whom (the command's --help)
    # the file's name when DEST is a directory (from the result directory's name); None: DEST is a
    # directory of files, written by `write_directory`
    file_in_directory: Callable[[str], str] | None
    write: Callable  # (source, dest, cold_policy) -> files, for a directory; (verified, target) -> file otherwise
    # the cases it cannot hold, and why (said as warnings: a case left out is never silent); None: it holds every case
    left_out: Callable[[VerifiedResult], dict[str, str]] | None = None


def _nextstat_export(source: Path, dest: Path, cold_policy: str) -> list[Path]:
    from ttfr.artifacts.export import nextstat

    return nextstat.export(source, dest, cold_policy)


def _nextstat_left_out(verified: VerifiedResult) -> dict[str, str]:
    from ttfr.artifacts.export import nextstat

    return nextstat.left_out(verified.cases)


def _openmetrics(fmt: str) -> Callable:
    def write(verified: VerifiedResult, target: Path) -> Path:
        from ttfr.artifacts.export import openmetrics

        return openmetrics.export(verified, target, fmt)

    return write


def _csv(verified: VerifiedResult, target: Path) -> Path:
    from ttfr.artifacts.export import csv_long

    return csv_long.export(verified, target)


# A node_exporter textfile directory keeps one ttfr.prom (the latest export replaces it; one file
# per snapshot would expose the same series twice); a CSV per snapshot.
EXPORTERS = {
    e.name: e
    for e in (
        Exporter("nextstat-v1", "a directory of NextStat contract files (nextstat.ml_benchmark_*.v1)", None,
                 _nextstat_export, _nextstat_left_out),
        Exporter("openmetrics", "OpenMetrics text, for scrapers and node_exporter's textfile collector",
                 lambda _root: "ttfr.prom", _openmetrics("openmetrics")),
        Exporter("prometheus", "Prometheus' classic text exposition (the same figures)", lambda _root: "ttfr.prom",
                 _openmetrics("prometheus")),
        Exporter("csv", "a tidy CSV: a row per run and metric", lambda root: f"{root}.csv", _csv),
    )
}  # fmt: skip
FORMATS = tuple(EXPORTERS)


def export(fmt: str, source: Path, dest: Path, cold_policy: str) -> list[Path]:
    """Write DIR's figures in `fmt` to DEST; the files written."""
    exporter = EXPORTERS.get(fmt)
    if exporter is None:
        raise UsageError(f"unknown export format {fmt!r}; valid: {', '.join(FORMATS)}")
    if exporter.file_in_directory is None:
        return exporter.write(source, dest, cold_policy)
    verified = load_finished(source)
    root, dest = verified.result_dir.root.resolve(), Path(dest)
    target = dest / exporter.file_in_directory(verified.result_dir.root.name) if dest.is_dir() else dest
    if target.resolve() == root or root in target.resolve().parents:
        raise UsageError(f"export destination {dest} is inside the result directory {source}: the export is not one "
                         "of its artifacts; choose a path outside it")  # fmt: skip
    if not target.parent.is_dir():
        raise UsageError(f"export destination {dest}: directory {target.parent} does not exist")
    try:
        return [exporter.write(verified, target)]
    except OSError as exc:
        raise StorageError(f"{exc.filename or target}: cannot be written ({exc.strerror})") from None


def left_out(fmt: str, source: Path) -> dict[str, str]:
    """The cases the format `fmt` could not hold, and why (the directory is read again only for a format
    that may leave some out)."""
    exporter = EXPORTERS[fmt]
    return exporter.left_out(load_finished(source)) if exporter.left_out else {}
