"""The report's Commands section: each `ttfr run --command` program, how its first result was
taken, its time to first result per cache policy, what it did after that, and what it wrote
into the cache directories ttfr pointed it at."""

from __future__ import annotations

import shlex

from ttfr.model.case import CaseResult, CommandInfo
from ttfr.model.policy_figures import ColdPolicy, ColdSummary
from ttfr.model.policies import COLD_CACHE, WARM_CACHE
from ttfr.report.formatting import COMPILERS_COLUMN, DASH, code, compilers_seen, fmt_seconds, fmt_summary, table, watched


def _first_result(command: CommandInfo) -> str:
    if command.first_result is not None:
        return f"output line matching {code(command.first_result)}"
    return "`ttfr_mark.first_result()`" if command.mark else "process exit"


def _after_first(summary: ColdSummary | None) -> str:
    """Median process time minus median TTFR: what the program did after its first result."""
    if not summary or not summary.ttfr_s or not summary.process_s:
        return DASH
    return fmt_seconds(max(summary.process_s.median - summary.ttfr_s.median, 0.0))


def compilers(case: CaseResult) -> str:
    """The compiler runs the program's process tree showed before its first result, per cache policy (`cold 1 (seen
    50 ms), warm none`): where its runs were watched."""
    blocks = [(label, case.policies.get(policy)) for label, policy in (("cold", COLD_CACHE), ("warm", WARM_CACHE))]
    parts = [f"{label} {compilers_seen(block.summary)}" for label, block in blocks if block and watched([block.summary])]
    return ", ".join(parts) or DASH


def any_watched(cases: list[CaseResult]) -> bool:
    """Whether any command's runs were watched: the compiler column is drawn then."""
    return watched(b.summary for c in cases for b in (c.policies.get(COLD_CACHE), c.policies.get(WARM_CACHE)) if b)


def _written(block: ColdPolicy) -> str:
    """The cache files the policy's runs found and left, per directory (medians over ok runs)."""
    runs = [r for r in block.runs if r.outcome == "ok"]
    if not runs:
        return DASH
    parts = []
    for name in sorted({d for r in runs for d in (r.cache.by_directory or {})}):
        pairs = sorted(tuple(r.cache.by_directory.get(name, (0, 0))) for r in runs)
        before, after = pairs[len(pairs) // 2]
        parts.append(f"{name} {before}→{after}")
    verification = block.cache_verification
    flags = verification.flags
    return f"{verification.verdict}{' (' + ', '.join(flags) + ')' if flags else ''}: " + (", ".join(parts) or "no files")


def section(cases: list[CaseResult]) -> list[str]:
    commands = [c for c in cases if c.command]
    if not commands:
        return []
    rows, caches = [], []
    trees = any_watched(commands)
    for case in commands:
        command = case.command
        cold = case.policies.get(COLD_CACHE)
        warm = case.policies.get(WARM_CACHE)
        rows.append([
            f"`{case.case}`",
            code(shlex.join(command.argv)),
            _first_result(command),
            fmt_summary(case.figure(COLD_CACHE, "ttfr_s")),
            fmt_summary(case.figure(WARM_CACHE, "ttfr_s")),
            _after_first((cold or warm).summary if cold or warm else None),
            *([compilers(case)] if trees else []),
        ])  # fmt: skip
        caches.append([f"`{case.case}`", *(_written(b) if b else DASH for b in (cold, warm))])
    header = ["case", "command", "first result", "TTFR, cold cache", "TTFR, warm cache", "after first result",
              *([COMPILERS_COLUMN] if trees else [])]  # fmt: skip
    return [
        "## Commands", "",
        "Each program started fresh per run, timed from its spawn to its first result (medians with their 95% "
        "order-statistic CI); *after first result* is the rest of its process life. Its compile and import stages "
        "are not split: a command is a black box.", "",
        *table(header, rows), "",
        "Cache directories ttfr set (JAX_COMPILATION_CACHE_DIR, TORCHINDUCTOR_CACHE_DIR, TRITON_CACHE_DIR, ...): "
        "files before→after a run (median run). Cold cache is verified when they start empty and the program "
        "writes into them; warm cache when they start from the template and it writes nothing new.", "",
        *table(["case", "cold cache", "warm cache"], caches), "",
    ]  # fmt: skip
