"""Export a result directory to the NextStat ML-suite contracts
(`nextstat.ml_benchmark_result.v1` per case, `nextstat.ml_benchmark_suite_result.v1`).

Where the contract cannot say "no figure", ttfr never writes a 0.0 in its place:
- a cold run enters `timing.cold.runs` only when it has all four figures (import, first
  call, second call, total); failed runs are counted in the case's `reason` instead;
- a summary (`import_s`, `ttfr_s`, ...) is written only when there are figures;
- the suite index lists only cases with both a cold TTFR and a warm call median (the
  contract requires both numbers); every case still gets its own file and is counted.
One NextStat case carries one cache policy: the cold figures come from
`cold-process/cold-cache` (or the policy given), the warm ones from `warm-process`; the
warm distribution is every sample of every warm process, as NextStat's `calls_s` expects
(ttfr's own headline is the median of per-process medians).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np

from ttfr.analyse.contention import withheld_reason
from ttfr.artifacts.reader import load_finished
from ttfr.artifacts.store import StorageError, write_json
from ttfr.errors import UsageError
from ttfr.model.case import CaseResult
from ttfr.model.policy_figures import ColdPolicy
from ttfr.model.run_figures import RunFigures
from ttfr.model.manifest import Manifest
from ttfr.model.policies import COLD_CACHE, WARM_CACHE, WARM_PROCESS, cache_state, is_cold, precompiled_parts

RESULT_SCHEMA = "nextstat.ml_benchmark_result.v1"
SUITE_SCHEMA = "nextstat.ml_benchmark_suite_result.v1"
SUITE_FILE = "suite_result.json"
# NextStat's names for ttfr's cache policies (its seed suite's `process_cold`: a fresh process, the
# JAX cache directory wiped)
CACHE_POLICY_NAMES = {COLD_CACHE: "process_cold", WARM_CACHE: "process_warm_cache"}


def cache_policy_name(policy: str) -> str:
    """The cold policy as NextStat's free-string `cache_policy` says it: a precompiled one names its mechanism
    after the cache it starts on (`process_cold+precompiled:jax_export`)."""
    parts = precompiled_parts(policy)
    if parts:
        return f"{CACHE_POLICY_NAMES[cache_state(policy)]}+precompiled:{parts[0]}"
    return CACHE_POLICY_NAMES[policy]


def nextstat_run(metrics) -> dict | None:
    """One cold run in NextStat's meanings (suites/ml/run.py): all in-process, from the worker's
    start. `import_s` is loading the backend up to the first call (ttfr's import, a GPU's device
    init, your import and setup: NextStat's loader imports and builds the inputs), `ttfr_s` =
    import_s + first_call_s, `total_s` = that + second_call_s. ttfr's own spawn-to-first-result
    (interpreter start included) stays in ttfr's case file: NextStat's contract has no field for
    it (docs/guide/artifacts.md: field mapping)."""
    parts = (metrics.import_s, metrics.setup_s, metrics.first_call_s, metrics.second_call_s)
    if any(v is None for v in parts):
        return None
    optional = [v for v in (metrics.device_init_s, metrics.user_import_s, metrics.artifact_load_s) if isinstance(v, float)]
    loading = metrics.import_s + sum(optional) + metrics.setup_s
    ttfr = loading + metrics.first_call_s
    return {"import_s": loading, "first_call_s": metrics.first_call_s, "second_call_s": metrics.second_call_s,
            "ttfr_s": ttfr, "total_s": ttfr + metrics.second_call_s}  # fmt: skip


def nextstat_config_sha256(config: dict) -> str:
    """NextStat's dataset hash of a generated case: its config, as suites/ml/suite.py hashes it."""
    return hashlib.sha256((json.dumps(config, sort_keys=True, separators=(",", ":")) + "\n").encode()).hexdigest()


def _min_median_p95(values) -> dict | None:
    if not values:
        return None
    x = np.asarray(values, dtype=float)
    return {"min": float(x.min()), "median": float(np.median(x)), "p95": float(np.percentile(x, 95))}


def _cold_runs(case: CaseResult, policy: str) -> list[RunFigures]:
    """The runs of the cold policy a NextStat case carries (none when the case did not run it)."""
    block = case.policies.get(policy)
    return block.runs if isinstance(block, ColdPolicy) else []


def _figure_runs(case: CaseResult, policy: str) -> list[RunFigures]:
    """The runs ttfr's own figures of the policy come from: a contended run set aside, or every run
    of a policy whose figures are withheld, is no figure here either (a failed case has none)."""
    block = case.policies.get(policy)
    return block.figure_runs() if block and case.status != "failed" else []


def _cold_timing(case: CaseResult, policy: str) -> dict:
    runs = _figure_runs(case, policy) if isinstance(case.policies.get(policy), ColdPolicy) else []
    complete = [mapped for r in runs if (mapped := nextstat_run(r.metrics))]
    cold = {
        "n_runs": len(complete),
        "runs": [
            {key: run[key] for key in ("import_s", "first_call_s", "second_call_s", "total_s")} | {"status": "ok", "reason": ""}
            for run in complete
        ],  # fmt: skip
    }
    for name in ("import_s", "first_call_s", "ttfr_s", "total_s"):
        summary = _min_median_p95([run[name] for run in complete])
        if summary:
            cold[name] = summary
    return cold


def _warm_timing(case: CaseResult) -> dict:
    block = case.policies.get(WARM_PROCESS)
    if not block or case.status == "failed":
        reason = "warm-process not measured" if not block else case.reason
        return {"n_iters": 0, "calls_s": [], "status": "failed" if block else "warn", "reason": reason}
    withheld = block.withheld()
    samples = [s for p in _figure_runs(case, WARM_PROCESS) for s in p.samples_s]
    warm = {"n_iters": len(samples), "calls_s": samples, "status": "ok" if samples else "warn" if withheld else "failed",
            "reason": f"figures withheld: {withheld_reason(withheld)}" if withheld else ""}  # fmt: skip
    summary = _min_median_p95(samples)
    if summary:
        warm["call_s"] = summary
    return warm


def _meta(manifest: Manifest, case: CaseResult) -> dict:
    runtimes = manifest.runtimes
    versions = case.versions
    return {
        "python": manifest.python.version,
        "platform": manifest.os.platform,
        "numpy_version": runtimes.get("numpy") or "not installed",
        "jax_version": versions.get("jax") or runtimes.get("jax") or "not installed",
    }


def case_record(case: CaseResult, manifest: Manifest, deterministic: bool, cold_policy: str) -> dict:
    """One case in NextStat's contract and meanings (docs/guide/artifacts.md: field mapping): ttfr's own figures and
    its inputs' hash stay in its case file."""
    cold = _cold_timing(case, cold_policy)
    status, reason = case.status, case.reason
    block = case.policies.get(cold_policy)
    if precompiled_parts(cold_policy) and case.status != "failed" and (block is None or block.artifact.state != "made"):
        # no figure of this policy here: said, never an `ok` case without one
        why = f"{block.artifact.state}: {block.artifact.reason}" if block else "its backend offers no such mechanism"
        status, reason = "warn", f"{cold_policy}: {why}" + (f"; {reason}" if reason else "")
    failed_runs = [r for r in _cold_runs(case, cold_policy) if r.outcome != "ok"]
    if failed_runs and case.status != "failed":
        reason = (reason + "; " if reason else "") + f"{len(failed_runs)} cold run(s) failed and are not listed"
    figures = len(_figure_runs(case, cold_policy)) if case.status != "failed" else None
    set_aside = len([r for r in _cold_runs(case, cold_policy) if r.outcome == "ok"]) - (figures or 0)
    if figures is not None and set_aside:  # contended runs ttfr's figures leave out: not listed as figures either
        reason = (reason + "; " if reason else "") + f"{set_aside} contended cold run(s) set aside are not listed"
    device = case.device
    config = {
        "backend": case.backend,
        "workload": case.workload,
        "n": case.size,
        "dtype": case.dtype,
        # what was asked for, as NextStat's config says it (so its dataset hash does not follow the
        # machine's load); what was kept is timing.cold.n_runs and timing.warm.n_iters
        "cold_runs": case.config.cold_runs,
        "warm_iters": case.config.warm_procs * case.config.warm_samples if WARM_PROCESS in case.config.policies else 0,
        "cache_policy": cache_policy_name(cold_policy),
    }
    return {
        "schema_version": RESULT_SCHEMA,
        "suite": "ml",
        "case": case.case,
        "deterministic": deterministic,
        "status": status,
        "reason": reason,
        "meta": _meta(manifest, case),
        # NextStat's dataset of a generated case: its id and its config's hash (ttfr's id and the
        # inputs' own hash are in ttfr's case file)
        "dataset": {"id": f"generated:ml:{case.case}", "sha256": nextstat_config_sha256(config)},
        "config": config,
        "device": {"platform": device.platform, "kind": device.kind, "count": device.count} if device else None,
        "timing": {"cold": cold, "warm": _warm_timing(case)},
    }


def export(source: Path, dest: Path, cold_policy: str = COLD_CACHE) -> list[Path]:
    if not is_cold(cold_policy):
        raise UsageError(f"--cold-policy must be {COLD_CACHE}, {WARM_CACHE} or precompiled/MECHANISM/SETTING (one the "
                         f"run measured); got {cold_policy!r}")  # fmt: skip
    verified = load_finished(source)
    measured = [p for p in verified.suite.policies if is_cold(p)]
    if cold_policy not in measured:  # a precompiled one the run did not measure would export empty cases as ok
        raise UsageError(f"--cold-policy {cold_policy}: the run did not measure it; its cold policies: "
                         f"{', '.join(measured)}")  # fmt: skip
    result_dir = verified.result_dir
    dest = Path(dest)
    if dest.resolve() == result_dir.root.resolve() or result_dir.root.resolve() in dest.resolve().parents:
        raise UsageError(f"export destination {dest} is inside the result directory {source}: it would overwrite "
                         "the measurements; choose a directory outside it")  # fmt: skip
    if dest.exists() and not dest.is_dir():
        raise UsageError(f"export destination {dest} exists and is not a directory; name a directory (new or existing)")
    try:
        return write_export(verified, dest, cold_policy)
    except OSError as exc:
        raise StorageError(f"{exc.filename or dest}: cannot be written ({exc.strerror}); the export in {dest} is "
                           "incomplete: fix that and export again") from None  # fmt: skip


NEXTSTAT_DTYPES = ("float32", "float64")  # what its ml contract's config.dtype allows


def left_out(cases: list[CaseResult]) -> dict[str, str]:
    """The cases NextStat's ml contract cannot hold, and why: a command (`ttfr run --command`: the
    contract describes a workload on a dataset, and a program has neither), a dtype it does not know
    (a conversion route's bfloat16)."""
    why = {}
    for case in cases:
        if case.command:
            why[case.case] = "a command: NextStat's ml contract describes a workload on a dataset, which a program is not"
        elif case.dtype not in NEXTSTAT_DTYPES:
            why[case.case] = f"{case.dtype}: NextStat's ml contract knows {' and '.join(NEXTSTAT_DTYPES)} only"
    return why


def write_export(verified, dest: Path, cold_policy: str = COLD_CACHE) -> list[Path]:
    """The export of a result already loaded and verified (`export` checks its destination first)."""
    # Every file name comes from a case id, each checked by the reader against the id grammar.
    suite, manifest = verified.suite, verified.manifest
    outside = left_out(verified.cases)
    if outside and len(outside) == len(verified.cases):
        raise UsageError(f"{verified.result_dir.root} holds no case NextStat's ml contract can hold; nothing to export: "
                         + "; ".join(f"{case}: {why}" for case, why in outside.items()))  # fmt: skip
    cases = [c for c in verified.cases if c.case not in outside]
    # Every record first: a case that cannot be exported stops the export before any file is written.
    records = [(case, case_record(case, manifest, suite.deterministic, cold_policy)) for case in cases]
    written, refs = [], []
    counts = {"ok": 0, "warn": 0, "failed": 0}
    worst = None
    for case, record in records:
        path = dest / f"{case.case}.json"
        digest = write_json(path, record)
        written.append(path)
        counts[record["status"]] += 1
        ttfr = record["timing"]["cold"].get("ttfr_s")
        call = record["timing"]["warm"].get("call_s")
        if ttfr and call:
            refs.append({
                "case": case.case, "path": path.name, "sha256": digest, "status": record["status"],
                "cold_ttfr_median_s": ttfr["median"], "warm_call_median_s": call["median"],
            })  # fmt: skip
            if worst is None or ttfr["median"] > worst[1]:
                worst = (case.case, ttfr["median"])
    index = {
        "schema_version": SUITE_SCHEMA,
        "suite": "ml",
        "deterministic": suite.deterministic,
        "meta": {"python": manifest.python.version, "platform": manifest.os.platform},
        "cases": refs,
        "summary": {
            "n_cases": len(cases),
            "n_ok": counts["ok"],
            "n_warn": counts["warn"],
            "n_failed": counts["failed"],
            "worst_case": worst[0] if worst else "none",
        },
    }
    written.append(dest / SUITE_FILE)
    write_json(dest / SUITE_FILE, index)
    return written
