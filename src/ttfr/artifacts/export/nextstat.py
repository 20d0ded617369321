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

from pathlib import Path

import msgspec
import numpy as np

from ttfr.artifacts.reader import load_finished
from ttfr.artifacts.store import StorageError, write_json
from ttfr.child.workloads import dataset_sha256
from ttfr.errors import UsageError
from ttfr.measure import catalog
from ttfr.model.base import encode
from ttfr.model.case import CaseResult, ColdPolicy, RunFigures
from ttfr.model.policies import COLD_POLICIES, COLD_CACHE, WARM_CACHE, WARM_PROCESS

RESULT_SCHEMA = "nextstat.ml_benchmark_result.v1"
SUITE_SCHEMA = "nextstat.ml_benchmark_suite_result.v1"
SUITE_FILE = "suite_result.json"
EXPORT_POLICIES = COLD_POLICIES  # which cold policy a NextStat case carries
_COLD_FIELDS = {"import_s": "import_s", "first_call_s": "first_call_s", "second_call_s": "second_call_s", "total_s": "process_s"}


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
    complete = [r for r in runs if all(getattr(r.metrics, m) is not None for m in _COLD_FIELDS.values())]
    cold = {
        "n_runs": len(complete),
        "runs": [
            {**{name: getattr(r.metrics, metric) for name, metric in _COLD_FIELDS.items()}, "status": "ok", "reason": ""}
            for r in complete
        ],
    }
    for name, metric in (
        ("import_s", "import_s"),
        ("first_call_s", "first_call_s"),
        ("ttfr_s", "ttfr_s"),
        ("total_s", "process_s"),
    ):
        summary = _min_median_p95([getattr(r.metrics, metric) for r in complete])
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
            "reason": f"figures withheld: {withheld}" if withheld else ""}  # fmt: skip
    summary = _min_median_p95(samples)
    if summary:
        warm["call_s"] = summary
    return warm


def _meta(manifest: dict, case: CaseResult) -> dict:
    runtimes = manifest["runtimes"]
    versions = case.versions
    return {
        "python": manifest["python"]["version"],
        "platform": manifest["os"]["platform"],
        "numpy_version": runtimes.get("numpy") or "not installed",
        "jax_version": versions.get("jax") or runtimes.get("jax") or "not installed",
    }


def _warm_iters(case: CaseResult) -> int:
    """Every sample of every warm process, ok or not."""
    block = case.policies.get(WARM_PROCESS)
    return sum(len(p.samples_s or []) for p in block.procs) if block else 0


def case_record(
    case: CaseResult, manifest: dict, deterministic: bool, cold_policy: str, known: catalog.Catalog = catalog.BUILTIN
) -> dict:
    """`known`: the run's catalogue (a user's case that never ran is hashed with its own inputs)."""
    dataset = encode(case.dataset)
    if not dataset["sha256"]:  # the case never ran: hash the inputs it would have used (ttfr's own workloads)
        info = known.workloads[case.workload]
        dataset["sha256"] = dataset_sha256(info.child_module, case.size, case.dtype, case.config.seed)
    cold = _cold_timing(case, cold_policy)
    reason = case.reason
    failed_runs = [r for r in _cold_runs(case, cold_policy) if r.outcome != "ok"]
    if failed_runs and case.status != "failed":
        reason = (reason + "; " if reason else "") + f"{len(failed_runs)} cold run(s) failed and are not listed"
    figures = len(_figure_runs(case, cold_policy)) if case.status != "failed" else None
    set_aside = len([r for r in _cold_runs(case, cold_policy) if r.outcome == "ok"]) - (figures or 0)
    if figures is not None and set_aside:  # contended runs ttfr's figures leave out: not listed as figures either
        reason = (reason + "; " if reason else "") + f"{set_aside} contended cold run(s) set aside are not listed"
    device = case.device
    return {
        "schema_version": RESULT_SCHEMA,
        "suite": "ml",
        "case": case.case,
        "deterministic": deterministic,
        "status": case.status,
        "reason": reason,
        "meta": _meta(manifest, case),
        "dataset": dataset,
        "config": {
            "backend": case.backend,
            "workload": case.workload,
            "n": case.size,
            "dtype": case.dtype,
            "cold_runs": cold["n_runs"],
            "warm_iters": _warm_iters(case),
            "cache_policy": cold_policy,
        },
        "device": {"platform": device.platform, "kind": device.kind, "count": device.count} if device else None,
        "timing": {"cold": cold, "warm": _warm_timing(case)},
    }


def export(source: Path, dest: Path, cold_policy: str = COLD_CACHE) -> list[Path]:
    if cold_policy not in EXPORT_POLICIES:
        raise UsageError(f"--cold-policy must be one of {COLD_CACHE}, {WARM_CACHE}; got {cold_policy!r}")
    verified = load_finished(source)
    result_dir = verified.result_dir
    dest = Path(dest)
    if dest.resolve() == result_dir.root.resolve() or result_dir.root.resolve() in dest.resolve().parents:
        raise UsageError(f"export destination {dest} is inside the result directory {source}: it would overwrite "
                         "the measurements; choose a directory outside it")  # fmt: skip
    if dest.exists() and not dest.is_dir():
        raise UsageError(f"export destination {dest} exists and is not a directory; name a directory (new or existing)")
    try:
        return _write_export(verified, dest, cold_policy)
    except OSError as exc:
        raise StorageError(f"{exc.filename or dest}: cannot be written ({exc.strerror}); the export in {dest} is "
                           "incomplete: fix that and export again") from None  # fmt: skip


def _inputs_of_others(cases: list[CaseResult]) -> dict[tuple, str]:
    """The inputs' hash of each (workload, size, dtype, seed) that some case ran: one backend's
    inputs are every backend's."""
    return {(c.workload, c.size, c.dtype, c.config.seed): c.dataset.sha256 for c in cases if c.dataset.sha256}


def left_out(cases: list[CaseResult]) -> dict[str, str]:
    """Cases the export leaves out, and why. Command cases (`ttfr run --command`): NextStat's ml
    contract describes a workload on a dataset, and a program has neither. A user's case that ran
    on no backend at all: its inputs' hash would mean running its case file's code, which a
    reader of a result directory never does."""
    ran = _inputs_of_others(cases)
    out = {}
    for case in cases:
        if case.command:
            out[case.case] = "a program, not a workload on a dataset"
        elif (not case.dataset.sha256 and case.workload not in catalog.BUILTIN.workloads
              and (case.workload, case.size, case.dtype, case.config.seed) not in ran):  # fmt: skip
            out[case.case] = "your case ran on no backend: its inputs' hash needs its case file's code run"
    return out


def commands_left_out(cases: list[CaseResult]) -> list[str]:
    """Command cases (see left_out)."""
    return [c.case for c in cases if c.command]


def _write_export(verified, dest: Path, cold_policy: str) -> list[Path]:
    # Every file name comes from a case id, each checked by the reader against the id grammar.
    suite, manifest = verified.suite, verified.manifest
    commands = commands_left_out(verified.cases)
    if commands and len(commands) == len(verified.cases):
        raise UsageError(f"{verified.result_dir.root} holds only command cases ({', '.join(commands)}): NextStat's ml "
                         "contract describes a workload on a dataset, which a program is not; nothing to export")  # fmt: skip
    skipped = left_out(verified.cases)
    cases = [c for c in verified.cases if c.case not in skipped]
    ran = _inputs_of_others(verified.cases)
    # A user's case that never ran (no GPU) has the inputs of its backends that did.
    cases = [c if c.dataset.sha256 or c.workload in catalog.BUILTIN.workloads else
             msgspec.structs.replace(c, dataset=msgspec.structs.replace(
                 c.dataset, sha256=ran[(c.workload, c.size, c.dtype, c.config.seed)])) for c in cases]  # fmt: skip
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
        "meta": {"python": manifest["python"]["version"], "platform": manifest["os"]["platform"]},
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
