"""The report's Concurrency section (`--concurrency`, issue 29): per case, one row per sharing mode
and group size N (its TTFR percentiles, when all N had a result, compilations per program, bytes
written, blocked and run-queue medians, whether the cache was whole afterwards), the fan-out advice,
then what went wrong in a group, process by process. Every cell is a field of the case's
`concurrency` (analyse/concurrency.py decided them once); report.md and report.html render the same
rows."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ttfr.model.base import present
from ttfr.model.case import CaseResult
from ttfr.model.concurrency import NOT_RUN, Concurrency, ConcurrencyPoint, FanOut, point_label
from ttfr.report.formatting import DASH, code, fmt_bytes, fmt_seconds, one_line, table

TITLE = "Concurrency"
INTRO = (
    "Each compiling case also ran groups of N fresh processes at once, released together by a barrier after "
    "every other run, per sharing mode: cold-shared (one cache directory for all N, empty), warm-shared (one "
    "shared directory, filled first with the case's cache), cold-private (each process its own empty directory). "
    "TTFR: each process's spawn to its first result, over the ok processes of the mode's groups: p50 the median, "
    "p95 by nearest rank (a value one process had, no interpolation), max the slowest. All N have a result: the "
    "group's first spawn to the last process's first result (median over the groups). Dedup: compilations "
    "performed / distinct programs, from each runtime's own cache counters (1: each program compiled once; N: "
    "by every process; 0: every process loaded it), median over the groups. Bytes written: what the group added "
    "to its cache directories (median over the groups). Blocked: the main thread's life (spawn to its last reading) "
    "− its time on a CPU − its run-queue wait, the time it was neither computing nor waiting for a CPU (a lock, "
    "I/O); run-queue wait: the time the main thread, which does the timed work, was runnable but waiting for a CPU "
    "(Linux schedstat: queueing, not compiling); both medians over the processes. Cache whole: after each group, "
    "before anything else touched it, every file of its cache was read back and a fresh process ran on it: "
    "✓ every file readable and the fresh process compiled nothing, ✗ not, ? no verdict (every group's check "
    "must say ✓ for the row's ✓). A warm-shared group that changed no file needs no such process: its own "
    "processes were fresh ones on that very cache, and their counters decide. Private directories have one "
    "writer each: their files are read back, and nothing else is owed (—)."
)
FAN_OUT_INTRO = (
    "Fan-out advice: the time until all N have a result when all N start together on an empty shared cache, "
    "against one warm-up process first (cold-shared at N = 1, else the case's cold-cache TTFR) and then N on "
    "the cache it filled (warm-shared at N). Saving: all together − warm-up first (negative: starting together "
    "was faster)."
)
OVERSUBSCRIBED = "N > cores: queueing for a CPU expected; the run-queue wait column says how much"

POINT_HEADER = ["mode", "N", "groups", "processes", "TTFR p50", "TTFR p95", "TTFR max", "all N have a result", "dedup",
                "bytes written", "blocked (lock, I/O)", "run-queue wait", "cache whole", "cores"]  # fmt: skip
FAN_OUT_HEADER = ["N", "all together", "warm-up (one process)", "then fan-out", "warm-up first, total",
                  "saving (negative: starting together was faster)"]  # fmt: skip


@dataclass
class CaseTables:
    """One case's part of the section: its title, the points, the advice, what went wrong."""

    case: str
    title: str
    header: list[str]
    rows: list[list[str]]
    oversubscribed: bool  # some row has N > usable cores: the table's note says what to expect
    fan_out_header: list[str]
    fan_out_rows: list[list[str]]
    problems: list[str]  # one line per process (or check) where something went wrong


def whole_mark(whole: bool | None) -> str:
    return "?" if whole is None else "✓" if whole else "✗"


def whole_cell(point: ConcurrencyPoint) -> str:
    """Private directories have one writer each: no verdict is owed there unless a file was unreadable."""
    if point.whole is None and point.check_basis == "private":
        return "— (one writer each)"
    return whole_mark(point.whole)


def fmt_ratio(value: float | None) -> str:
    """Compilations per program, to three figures (`1`, `1.5`, `2`)."""
    return DASH if value is None else f"{value:.3g}"


def cores_cell(point: ConcurrencyPoint) -> str:
    if point.oversubscribed is None:
        return "? usable cores unknown"
    return "⚠ N > cores" if point.oversubscribed else "N ≤ cores"


def point_row(point: ConcurrencyPoint) -> list[str]:
    return [
        point.mode if point.measured_as is None else f"{point.mode} (= {point_label(point.measured_as, point.n)})",
        str(point.n), str(point.groups), str(point.processes), fmt_seconds(point.ttfr_p50_s),
        fmt_seconds(point.ttfr_p95_s), fmt_seconds(point.ttfr_max_s), fmt_seconds(point.all_results_s),
        fmt_ratio(point.dedup_ratio), fmt_bytes(point.bytes_written), fmt_seconds(point.blocked_s),
        fmt_seconds(point.runq_wait_s), whole_cell(point), cores_cell(point),
    ]  # fmt: skip


def fan_out_row(advice: FanOut) -> list[str]:
    return [str(advice.n), fmt_seconds(advice.together_s), fmt_seconds(advice.warm_up_s), fmt_seconds(advice.fan_out_s),
            fmt_seconds(advice.warm_up_first_s), fmt_seconds(advice.saving_s)]  # fmt: skip


def problems(concurrency: Concurrency) -> list[str]:
    """Per group, each process that was not ok or whose output held warnings, and a check that did
    not find the cache whole (or could not tell)."""
    lines = []
    for group in concurrency.groups:
        label = group.label
        for member in group.members:
            if member.outcome != "ok":
                reason = f": {one_line(member.reason)}" if member.reason else ""
                lines.append(f"{label}, process {member.member}: {member.outcome}{reason}")
            if member.messages:
                said = "; ".join(one_line(m) for m in member.messages)
                lines.append(f"{label}, process {member.member} said: {said}")
        check = group.check
        if check.whole is True or (check.basis == "private" and check.whole is None):
            continue
        if check.outcome == NOT_RUN:
            parts = ["its cache was never checked (the run ended after the group)"]
        elif check.unreadable:
            unreadable = "; ".join(map(one_line, check.unreadable))
            parts = [f"{len(check.unreadable)} of its {check.files} file(s) unreadable ({unreadable})"]
        else:
            parts = [f"its {check.files} file(s) ({fmt_bytes(check.bytes)}) all readable"]
        if check.basis == "private":
            pass  # no process ran on private directories: their files are the whole check
        elif check.basis == "members":
            parts.append("it changed no file, and its own processes (fresh ones on that cache) compiled "
                         + ("? (not all of them ran ok with counters)" if check.compiles is None else
                            f"{check.compiles} and loaded {check.loads}"))  # fmt: skip
        elif check.compiles is not None:
            parts.append(f"the fresh process after it compiled {check.compiles} and loaded {check.loads}")
        else:
            parts.append(f"the fresh process after it: {check.outcome}, no cache counters")
        verdict = "✗ cache not whole" if check.whole is False else "? no verdict on the cache"
        lines.append(f"{label}: {verdict} afterwards: {'; '.join(parts)}")
    return lines


def _where(together: Concurrency) -> str:
    """Where the groups ran: this machine's usable cores, or the Slurm nodes (--concurrency-executor slurm)."""
    if not together.nodes:
        return f"{together.usable_cores if together.usable_cores is not None else '?'} usable cores"
    nodes = together.nodes
    shown = ", ".join(nodes[:6]) + (f" and {len(nodes) - 6} more" if len(nodes) > 6 else "")
    return f"groups as Slurm job arrays on {shown}; start skew on the nodes' wall clocks"


def case_tables(cases: list[CaseResult], mark: Callable[[str], str] = code) -> list[CaseTables]:
    """The section's parts, one per case with `concurrency` ([]: none has)."""
    result = []
    for case in cases:
        if not present(case.concurrency):
            continue
        together = case.concurrency
        result.append(CaseTables(
            case=case.case,
            title=f"{mark(case.case)} ({_where(together)})",
            header=POINT_HEADER,
            rows=[point_row(point) for point in together.points],
            oversubscribed=any(point.oversubscribed for point in together.points),
            fan_out_header=FAN_OUT_HEADER,
            fan_out_rows=[fan_out_row(advice) for advice in together.fan_out],
            problems=problems(together),
        ))  # fmt: skip
    return result


NOTHING_WRONG = "Every process of every group ran ok with no warning in its output, and every cache was whole afterwards."


def section(cases: list[CaseResult]) -> list[str]:
    parts = case_tables(cases)
    if not parts:
        return []
    lines = [f"## {TITLE}", "", INTRO, "", FAN_OUT_INTRO, ""]
    for part in parts:
        lines += [f"### {part.title}", "", *table(part.header, part.rows), ""]
        if part.oversubscribed:
            lines += [f"⚠ {OVERSUBSCRIBED}.", ""]
        if part.fan_out_rows:
            lines += ["Fan-out advice:", "", *table(part.fan_out_header, part.fan_out_rows), ""]
        else:
            lines += ["Fan-out advice: no group size ran both cold-shared and warm-shared.", ""]
        lines += ["What went wrong:", "", *(f"- {line}" for line in part.problems), ""] if part.problems else [NOTHING_WRONG, ""]
    return lines
