"""What two `ttfr run --deterministic` runs must agree on: the result with its measurements taken out."""

import json

# What two `--deterministic` runs may legitimately disagree on: every clock reading, every
# resource or host reading, and everything computed from them. Each name below is a key of
# a case result (cases/*.json); `deterministic_view` replaces its value with a placeholder
# (keeping the key, so the structure is still compared). Anything not listed here must be
# byte-identical between the two runs.
MEASURED_SUBTREES = {
    "metrics",  # a run's interpreter/import/setup/first/second-call/ttfr/process seconds (clock marks)
    "stages",  # a run's compile-stage seconds (wrap/trace/lower/compile/...); which stages exist is compared
    "resources",  # rusage: peak RSS, CPU user/sys seconds, involuntary context switches
    "host",  # load average, CPU pressure, steal fraction, wall-clock start time
    "warmup",  # a warm process's warm-up call times and whether they had settled (`stable`)
    "sync_check",  # medians of trailing-sync fractions and doubling ratios, and `unsynchronised`/`problems` from them
    "contention",  # run-queue wait and CPU-per-wall fractions, runnable-task counts, and `contended` from them
    "tick",  # whether a warm process's sample walls sit on scheduler-tick multiples
}
SUMMARY_STATISTICS = {"min", "max", "median", "median_ci", "p95", "mean", "std", "mad"}  # of timings or RSS; "n" is kept
MEASURED_SCALARS = {
    "median_s",  # a warm process's median sample
    "inner_loops",  # calls per sample, calibrated against the clock
}
MEASURED_SAMPLE_LISTS = {"samples_s"}  # timings; their COUNT is fixed by --warm-samples and is compared
TIMING_FLAGS = {
    "first_run_outlier",  # a cold policy's first ttfr_s > 3.5 robust sigmas from the rest
    "unsynchronised",  # from sync_check (a timing ratio crossing a threshold)
    "warmup_unstable",  # from warmup.stable
    "contended",  # from run-queue waits and runnable-task counts
    "process_disagreement",  # from the warm processes' samples (Kruskal-Wallis and a median ratio)
    "tick_quantised",  # from sample wall times
    "could_not_measure_cleanly",  # from `contended`
}


def deterministic_view(value, key=None):
    """A case result with every measured (timing-, resource- or host-derived) value replaced
    by a placeholder and every timing-derived flag dropped: what must not change between runs."""
    if key is None and isinstance(value, dict) and "status" in value and "reason" in value:  # a case result
        value = {**value, "status": "<verdict>", "reason": busy_or_ok(value["status"], value["reason"])}
    if key in ("summary", "stages_summary", "loop_summary") and isinstance(value, dict):
        # A figure is null when its runs were set aside as contended, which a busy machine decides:
        # which statistics exist is measured too (a count like samples_per_process is not).
        return (
            {k: v if isinstance(v, int) and not isinstance(v, bool) else "<measured>" for k, v in value.items()}
            if key == "summary"
            else "<measured>"
        )
    if key == "resources" and isinstance(value, dict):
        # whether the process tree's peak RSS is known depends on it exceeding ttfr's own at the
        # time (a child's ru_maxrss starts there): measured, like the value
        return {k: "<measured>" for k in value}
    if key in MEASURED_SUBTREES:
        return _placeholders(value)
    if key in SUMMARY_STATISTICS or key in MEASURED_SCALARS:
        return "<measured>"
    if key in MEASURED_SAMPLE_LISTS:
        return f"<{len(value)} samples>"
    if key == "flags" and isinstance(value, list):
        value = [f for f in value if not (isinstance(f, dict) and f.get("flag") in TIMING_FLAGS)]
    if isinstance(value, dict):
        return {k: deterministic_view(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [deterministic_view(v) for v in value]
    return value


def _placeholders(value):
    """Keep a measured subtree's keys (its shape is deterministic), not its values."""
    if isinstance(value, dict):
        return {k: _placeholders(v) for k, v in value.items()}
    return None if value is None else "<measured>"


def journal_view(root):
    """Run order and each run's deterministic facts (outcome, result digest) from journal.jsonl."""
    entries = map(json.loads, (root / "journal.jsonl").read_text().splitlines())
    return [(e["task"], e["outcome"], e["reason"], (e.get("record") or {}).get("digest")) for e in entries]


def busy_or_ok(status: str, reason: str | None) -> tuple:
    """A case's verdict with what contention decides taken out: ok, or warn because a busy machine
    left too few clean runs for a figure, are one verdict (contention is a timing)."""
    if status == "ok" or (status == "warn" and (reason or "").startswith("figures withheld (")
                          and " were contended" in reason):  # fmt: skip
        return ("ok or busy", None)
    return (status, reason)


def suite_view(suite):
    return {
        "seed": suite["seed"],
        "state": suite["state"],
        "deterministic": suite["deterministic"],
        "policies": suite["policies"],
        "cases": [(c["case"], *busy_or_ok(c["status"], c["reason"]), c["path"]) for c in suite["cases"]],
        "datasets": suite["datasets"],
        # which case is slowest is a timing, and how many are ok or warn is contention's
        "counts": {k: v for k, v in suite["summary"].items() if k in ("n_cases", "n_failed", "n_pending", "failed")},
    }


def differing_paths(a, b, path: str = "") -> list[str]:
    """Where two views differ, as `policies.warm-process.procs[0].flags: [...] != [...]` lines (what a failed
    determinism check shows: the whole dicts are too large for pytest's diff to say)."""
    if isinstance(a, dict) and isinstance(b, dict):
        keys = sorted(set(a) | set(b), key=str)
        return [
            line
            for key in keys
            for line in differing_paths(a.get(key, "<absent>"), b.get(key, "<absent>"), f"{path}.{key}".lstrip("."))
        ]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [line for i, (x, y) in enumerate(zip(a, b)) for line in differing_paths(x, y, f"{path}[{i}]")]
    return [] if a == b else [f"{path}: {str(a)[:300]} != {str(b)[:300]}"]
