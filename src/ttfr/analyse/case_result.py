"""A case's runs -> its case result (ttfr.case_result.v1): summaries per cache policy,
cache verification, the result check, status and reason.

Figures of a failed case are null, never 0.0; its runs stay in the artifact as raw data.
"""

from __future__ import annotations

import statistics

from ttfr.analyse import contention, loops, runs, stats
from ttfr.measure import cache, catalog, datasets
from ttfr.measure.plan import Plan
from ttfr.model.policies import COLD_CACHE, POLICIES, WARM_CACHE, WARM_PROCESS

CASE_SCHEMA = "ttfr.case_result.v1"


def _summaries(views: list[dict], names, key) -> dict:
    ok = [v for v in views if v["outcome"] == "ok"]
    return {name: stats.summarize([v[key].get(name) for v in ok if v[key].get(name) is not None]) for name in names}


def _cache_overview(views: list[dict]) -> dict:
    verdicts = [v["cache"]["verdict"] for v in views if v["outcome"] == "ok"]
    flags = sorted({f for v in views if v["outcome"] == "ok" for f in v["cache"]["flags"]})
    if not verdicts:
        verdict = "unverified"
    elif "flagged" in verdicts:
        verdict = "flagged"
    elif all(x == "not_applicable" for x in verdicts):
        verdict = "not_applicable"
    elif all(x == "verified" for x in verdicts):
        verdict = "verified"
    else:
        verdict = "unverified"
    hits = [v["cache"].get("hits") for v in views if v["outcome"] == "ok" and v["cache"].get("hits") is not None]
    misses = [v["cache"].get("misses") for v in views if v["outcome"] == "ok" and v["cache"].get("misses") is not None]
    return {
        "verdict": verdict,
        "flags": flags,
        "hits_total": sum(hits) if hits else None,
        "misses_total": sum(misses) if misses else None,
        "runs_verified": verdicts.count("verified"),
        "runs": len(verdicts),
    }


def _cold_policy(views: list[dict]) -> dict:
    flags = []
    ttfr = [v["metrics"]["ttfr_s"] if v["outcome"] == "ok" else None for v in sorted(views, key=lambda v: v["index"])]
    outlier = stats.first_run_outlier(ttfr)
    if outlier:
        flags.append({"flag": "first_run_outlier", "metric": "ttfr_s", **outlier})
    cache_overview = _cache_overview(views)
    flags.extend({"flag": f} for f in cache_overview["flags"])
    flags += _contention_flags(views, "runs", "run")
    flags += loops.count_flags(views)
    return {
        "runs": views,
        **cold_summaries(views),
        "cache_verification": cache_overview,
        "flags": flags,
    }


def _warm_policy(views: list[dict]) -> dict:
    ok = [v for v in views if v["outcome"] == "ok"]
    flags = []
    unsynced = [v["index"] for v in ok if v["sync_check"]["unsynchronised"]]
    if unsynced:
        flags.append({"flag": "unsynchronised", "processes": unsynced})
    unstable = [v["index"] for v in ok if not v["warmup"]["stable"]]
    if unstable:
        flags.append({"flag": "warmup_unstable", "processes": unstable})
    flags += _contention_flags(views, "processes", "process")
    flags += loops.count_flags(views)
    disagreement = contention.process_disagreement([v["samples_s"] for v in ok])
    if disagreement and disagreement["disagree"]:
        flags.append({"flag": "process_disagreement", **disagreement})
    quantised = [v for v in ok if (v.get("tick") or {}).get("quantised")]
    if quantised:
        flags.append({"flag": "tick_quantised", "processes": [v["index"] for v in quantised],
                      "tick_s": quantised[0]["tick"]["tick_s"]})  # fmt: skip
    return {"procs": views, "summary": warm_summary(views), "flags": flags}


def headline_runs(views: list[dict]) -> list[dict]:
    """The ok runs a policy's figures come from. Contended runs stay in the artifact but are
    set aside when at least as many clean ones remain; with fewer, none: a figure measured
    mostly on a busy machine would be a precise-looking wrong number."""
    ok = [v for v in views if v["outcome"] == "ok"]
    clean = [v for v in ok if not contention.is_contended(v)]
    if 2 * len(clean) >= len(ok):
        return clean
    return []


def _contention_flags(views: list[dict], key: str, noun: str) -> list[dict]:
    """`contended` with each run's evidence and what the figures use instead; and
    `could_not_measure_cleanly` when too few clean runs were left to give a figure."""
    nouns = {"run": "runs", "process": "processes"}[noun]
    ok = [v for v in views if v["outcome"] == "ok"]
    contended = [v for v in ok if contention.is_contended(v)]
    if not contended:
        return []
    evidence = [f"{noun} {v['index']}: " + "; ".join(v["contention"]["reasons"]) for v in contended]
    flags = [{"flag": "contended", key: [v["index"] for v in contended], "evidence": evidence}]
    clean = headline_runs(views)
    if clean:
        flags[0]["set_aside"] = f"{len(contended)} contended {nouns if len(contended) > 1 else noun} set aside: " \
                                f"the figures use the {len(clean)} clean of {len(ok)}"  # fmt: skip
    else:
        flags.append({"flag": "could_not_measure_cleanly",
                      "reason": f"{len(contended)} of {len(ok)} {nouns} were contended: no figure is given; "
                                "rerun on a quieter machine (see Machine health)"})  # fmt: skip
    return flags


def _cold_metrics(views: list[dict]) -> tuple[str, ...]:
    """The cold metrics a policy's runs have (a user's case also times its own import)."""
    extra = any(runs.USER_IMPORT in v["metrics"] for v in views)
    return runs.COLD_METRICS + ((runs.USER_IMPORT,) if extra else ())


def cold_summaries(views: list[dict]) -> dict:
    """A cold policy's `summary` and `stages_summary`, from its clean runs."""
    chosen = headline_runs(views)  # none: could not measure cleanly, every figure null
    result = {
        "summary": _summaries(chosen, _cold_metrics(views), "metrics"),
        "stages_summary": {k: s for k, s in _summaries(chosen, runs.STAGE_METRICS, "stages").items() if s},
    }
    if any(v.get("loop") for v in views):  # a loop workload: its timeline and compile counts
        result["loop_summary"] = loops.policy_summary(chosen)
    return result


def warm_summary(views: list[dict]) -> dict:
    """The warm regime's `summary`, from its clean processes."""
    ok = [v for v in views if v["outcome"] == "ok"]
    chosen = headline_runs(views)
    return {
        "call_s": stats.summarize([v["median_s"] for v in chosen]),
        "samples_per_process": len(ok[0]["samples_s"]) if ok else None,
    }


def summaries_disagree(result: dict) -> list[str]:
    """Where a case file's summaries are not what its own runs give (an edited figure);
    a failed case's figures are null by design and are not recomputed."""
    if result["status"] == "failed":
        return []
    problems = []
    for name, policy in result["policies"].items():
        if name == WARM_PROCESS:
            for proc in policy["procs"]:
                if proc["outcome"] == "ok" and proc.get("median_s") != statistics.median(proc["samples_s"]):
                    problems.append(f"{name} process {proc['index']}: median_s is not the median of its samples")
            if policy["summary"] != warm_summary(policy["procs"]):
                problems.append(f"{name}: summary is not what its processes give")
        elif {k: policy.get(k) for k in ("summary", "stages_summary", "loop_summary") if k in policy} != cold_summaries(
            policy["runs"]
        ):
            problems.append(f"{name}: summary is not what its runs give")
    return problems


def _null_summaries(policy: dict) -> None:
    if "summary" in policy:
        policy["summary"] = {k: None for k in policy["summary"]}
    if "stages_summary" in policy:
        policy["stages_summary"] = {}
    if "loop_summary" in policy:
        policy["loop_summary"] = None


def _status(entries: list[dict], policies: dict, check: dict | None, stopped: str | None):
    for entry in entries:
        if entry["outcome"] == "unavailable":
            return "warn", entry["reason"]
    if check is not None and not check.get("passed"):
        error = check.get("max_normalised_error")
        shown = "n/a" if error is None else f"{error:.3g}"
        detail = f" ({check['detail']})" if check.get("detail") else ""
        return "failed", (
            f"result_mismatch: max normalised error {shown} > tolerance {check['tolerance']:.3g} "
            f"against the {check['reference']} reference{detail}"
        )
    if stopped:
        return "failed", stopped
    failed_runs = []
    for name, policy in policies.items():
        runs = policy.get("runs") or policy.get("procs") or []
        bad = [r for r in runs if r["outcome"] != "ok"]
        if runs and len(bad) == len(runs):
            first = bad[0]
            return "failed", f"every {name} run failed; first: {first['outcome']}: {first['reason']}"
        failed_runs.extend(f"{name}#{r['index']} {r['outcome']}" for r in bad)
    if failed_runs:
        return "warn", f"{len(failed_runs)} run(s) failed and are excluded from the figures: " + "; ".join(failed_runs)
    return "ok", None


def build_case_result(case: catalog.Case, plan: Plan, entries: list[dict]) -> dict:
    spec = plan.spec
    backend = case.backend_info
    base = {
        "schema": CASE_SCHEMA,
        "case": case.id,
        "backend": case.backend,
        "workload": case.workload,
        "size": case.size,
        "dtype": case.dtype,
        "config": {
            "profile": spec.profile,
            "policies": list(spec.policies),
            "cold_runs": spec.cold_runs,
            "warm_procs": spec.warm_procs,
            "warm_samples": spec.warm_samples,
            "min_sample_s": spec.min_sample_s,
            "max_warmup_s": spec.max_warmup_s,
            "timeout_s": spec.timeout_s,
            "seed": spec.seed,
            "threads": spec.threads,
            "deterministic": spec.deterministic,
            # --precision adds runs beyond cold_runs / warm_procs where they buy the most precision
            **({"precision": spec.precision, "budget_s": spec.budget_s} if spec.precision is not None else {}),
        },
        "sync_policy": backend.sync_policy,
        "dataset": {"id": datasets.dataset_id(case, spec.seed), "sha256": None},
        "device": None,
        "versions": {},
        "correctness": None,
        "policies": {},
        "memory": {},
        "flags": [],
        "unmeasured_runs": [],
        "limitations": [*cache.LIMITATIONS, *backend.limitations],
    }
    if case.workload_info.command:  # what the case ran: the program, as plan.json records it (redacted)
        recorded = spec.command(case.workload).to_json()
        keys = ("argv", "cwd", "first_result", "mark", "prepare", "stop_at_first_result")
        base["command"] = {key: recorded[key] for key in keys}
    if case.id in plan.unavailable:
        base.update(status="warn", reason=plan.unavailable[case.id])
        return base

    entries = sorted(entries, key=lambda e: (e["round"], e["index"]))
    checked = [e for e in entries if (e.get("record") or {}).get("check")]
    check = checked[0]["record"]["check"] if checked else None
    failed_checks = [e["record"]["check"] for e in checked if not e["record"]["check"]["passed"]]
    if failed_checks:
        check = failed_checks[0]
    reference_digest = next(
        (e["record"].get("digest") for e in checked if e["outcome"] == "ok"),
        next((e["record"].get("digest") for e in entries if e["outcome"] == "ok" and e.get("record")), None),
    )
    records = [e["record"] for e in entries if e.get("record") and e["outcome"] == "ok"]
    if records:
        base["device"] = records[0].get("device")
        base["versions"] = records[0].get("versions") or {}
        base["memory"].update(records[0].get("memory") or {})
    if checked and checked[0]["record"].get("dataset_sha256"):
        base["dataset"]["sha256"] = checked[0]["record"]["dataset_sha256"]
    base["correctness"] = check

    policies = {}
    for policy in POLICIES:
        if policy not in spec.policies:
            continue
        measured = [e for e in entries if e["measured"] and e["policy"] == policy]
        if policy == WARM_PROCESS:
            policies[policy] = _warm_policy([runs.warm_view(e, case, reference_digest) for e in measured])
        else:
            policies[policy] = _cold_policy([runs.run_view(e, case, reference_digest) for e in measured])
    base["unmeasured_runs"] = [
        {"kind": e["kind"], "outcome": e["outcome"], "reason": e["reason"]} for e in entries if not e["measured"]
    ]
    stopped = next(
        (f"{e['kind']} run {e['outcome']}: {e['reason']}" for e in entries if not e["measured"] and e["outcome"] != "ok"),
        None,
    )
    status, reason = _status(entries, policies, check, stopped)
    base.update(status=status, reason=reason, policies=policies)

    cold = policies.get(COLD_CACHE) or policies.get(WARM_CACHE)
    if cold:
        rss = [r["resources"]["peak_rss_bytes"] for r in cold["runs"] if r["outcome"] == "ok"]
        base["memory"]["peak_rss_bytes"] = stats.summarize([v for v in rss if v is not None])
    for name, policy in policies.items():
        base["flags"].extend({"policy": name, **flag} for flag in policy["flags"])
        if any(r["outcome"] == "invalid-measurement" for r in policy.get("runs", policy.get("procs", []))):
            base["flags"].append({"policy": name, "flag": "invalid_measurement"})
    if status == "failed":
        for policy in policies.values():
            _null_summaries(policy)
        base["memory"]["peak_rss_bytes"] = None
    return base


def case_results(plan: Plan, entries: list[dict], skip=()) -> list[dict]:
    """The case result of every case of the plan (but `skip`), from its journal entries."""
    by_case: dict[str, list[dict]] = {}
    for entry in entries:
        by_case.setdefault(entry["case"], []).append(entry)
    return [build_case_result(case, plan, by_case.get(case.id, [])) for case in sorted(plan.spec.cases) if case.id not in skip]
