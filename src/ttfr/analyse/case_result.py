"""A case's runs -> its case result (ttfr.case_result.v2): summaries per cache policy,
cache verification, the result check, status and reason.

Figures of a failed case are null, never 0.0; its runs stay in the artifact as raw data.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

import msgspec

from ttfr.analyse import concurrency, contention, conversions, explain, loops, precompiled, runs, stats
from ttfr.measure import cache, catalog, datasets
from ttfr.measure.plan import EXPLAIN, GROUP_KINDS, MAKE, Plan, case_policies, maker_policy, runs_check
from ttfr.model.base import UNSET, UnsetType, copied
from ttfr.model.case import CASE_SCHEMA, CaseMemory, CaseResult, CommandInfo, Config, Dataset, UnmeasuredRun
from ttfr.model.flags import (
    CACHE_FLAGS,
    Contended,
    ContendedKept,
    ContendedRun,
    CouldNotMeasureCleanly,
    FirstRunOutlier,
    InvalidMeasurement,
    SetAside,
    SharedCacheNotWhole,
    TickQuantised,
    Unsynchronised,
    WarmSharedCompiled,
    WarmupUnstable,
)
from ttfr.model.policy_figures import (
    CacheVerification,
    ColdPolicy,
    ColdSummary,
    figure_runs,
    keeps_contended,
    Policies,
    policies_of,
    PrecompiledPolicy,
    StagesSummary,
    WarmPolicy,
    WarmSummary,
)
from ttfr.model.run_figures import COLD_METRICS, OPTIONAL_METRICS, RunFigures, STAGE_METRICS
from ttfr.model.journal import JournalEntry
from ttfr.model.result_check import Check
from ttfr.model.policies import COLD_CACHE, WARM_CACHE, WARM_PROCESS, WARM_SHARED, precompiled_parts

__all__ = ["CASE_SCHEMA", "build_case_result", "case_results", "cold_summaries", "headline_runs", "summaries_disagree",
           "warm_summary"]  # fmt: skip


def _cache_overview(views: list[RunFigures]) -> CacheVerification:
    ok = [v for v in views if v.outcome == "ok"]
    verdicts = [v.cache.verdict for v in ok]
    flags = sorted({f for v in ok for f in v.cache.flags})
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
    hits = [v.cache.hits for v in ok if v.cache.hits is not UNSET]
    misses = [v.cache.misses for v in ok if v.cache.misses is not UNSET]
    return CacheVerification(
        verdict=verdict,
        flags=flags,
        hits_total=sum(hits) if hits else None,
        misses_total=sum(misses) if misses else None,
        runs_verified=verdicts.count("verified"),
        runs=len(verdicts),
    )


def _cold_policy(views: list[RunFigures], keep_contended: bool = False) -> ColdPolicy:
    flags = []
    ttfr = [v.metrics.ttfr_s if v.outcome == "ok" else None for v in sorted(views, key=lambda v: v.index)]
    outlier = stats.first_run_outlier(ttfr)
    if outlier:
        flags.append(FirstRunOutlier(metric="ttfr_s", value=outlier.value, robust_z=outlier.robust_z))
    cache_overview = _cache_overview(views)
    flags.extend(CACHE_FLAGS[name]() for name in cache_overview.flags)
    flags += _contention_flags(views, "runs", "run", keep_contended)
    flags += loops.count_flags(views)
    summary, stages_summary, loop_summary = cold_summaries(views, keeps_contended(flags))
    return ColdPolicy(runs=views, summary=summary, stages_summary=stages_summary, cache_verification=cache_overview,
                      flags=flags, loop_summary=loop_summary)  # fmt: skip


def _warm_policy(views: list[RunFigures], keep_contended: bool = False) -> WarmPolicy:
    ok = [v for v in views if v.outcome == "ok"]
    flags = []
    unsynced = [v.index for v in ok if v.sync_check.unsynchronised]
    if unsynced:
        flags.append(Unsynchronised(processes=unsynced))
    unstable = [v.index for v in ok if not v.warmup.stable]
    if unstable:
        flags.append(WarmupUnstable(processes=unstable))
    flags += _contention_flags(views, "processes", "process", keep_contended)
    flags += loops.count_flags(views)
    disagreement = contention.process_disagreement([v.samples_s for v in ok])
    if disagreement and disagreement.disagree:
        flags.append(disagreement)
    quantised = [v for v in ok if v.tick and v.tick.quantised]
    if quantised:
        flags.append(TickQuantised(processes=[v.index for v in quantised], tick_s=quantised[0].tick.tick_s))
    return WarmPolicy(procs=views, summary=warm_summary(views, keeps_contended(flags)), flags=flags)


headline_runs = figure_runs  # the one rule (ttfr.model.policy_figures): the runs a policy's figures come from


def _contention_flags(views: list[RunFigures], key: str, noun: str, keep_contended: bool = False) -> list:
    """`contended` with each run's evidence and what the figures use instead; and
    `could_not_measure_cleanly` when too few clean runs were left to give a figure; with
    --keep-contended, `contended_kept` instead (the figures use them all)."""
    ok = [v for v in views if v.outcome == "ok"]
    contended = [v for v in ok if contention.is_contended(v)]
    if not contended:
        return []
    evidence = [ContendedRun(index=v.index, contention=v.contention) for v in contended]
    indexes = {key: [v.index for v in contended]}
    if keep_contended:
        return [Contended(evidence=evidence, **indexes), ContendedKept(**indexes)]
    clean = headline_runs(views)
    set_aside = SetAside(contended=len(contended), clean=len(clean), ok=len(ok)) if clean else UNSET
    flags = [Contended(evidence=evidence, set_aside=set_aside, **indexes)]
    if not clean:
        flags.append(CouldNotMeasureCleanly(contended=len(contended), ok=len(ok), unit=noun))
    return flags


def _summaries(chosen: list[RunFigures], names, of) -> dict:
    return {name: stats.summarize([x for v in chosen if (x := getattr(of(v), name)) not in (None, UNSET)]) for name in names}


# What the worker's process tree showed of compilers before the first result (not components: they overlap the
# first call), summarised beside the components where a run was watched.
COMPILER_FIGURES = ("compiler_runs", "compiler_seen_s")


def cold_summaries(views: list[RunFigures], keep_contended: bool = False):
    """A cold policy's `summary`, `stages_summary` and (a loop workload) `loop_summary`, from its
    clean runs (all ok ones with --keep-contended)."""
    chosen = headline_runs(views, keep_contended)  # none: could not measure cleanly, every figure null
    # a GPU case also times its device's initialisation, a user's case its own import
    names = COLD_METRICS + tuple(n for n in OPTIONAL_METRICS if any(getattr(v.metrics, n) is not UNSET for v in views))
    watched = tuple(n for n in COMPILER_FIGURES if any(getattr(v.resources, n) is not UNSET for v in views))
    summary = ColdSummary(**_summaries(chosen, names, lambda v: v.metrics),
                          **_summaries(chosen, watched, lambda v: v.resources))  # fmt: skip
    stages = StagesSummary(**{k: s for k, s in _summaries(chosen, STAGE_METRICS, lambda v: v.stages).items() if s})
    loop_summary = loops.policy_summary(chosen) if any(v.loop for v in views) else UNSET
    return summary, stages, loop_summary


def warm_summary(views: list[RunFigures], keep_contended: bool = False) -> WarmSummary:
    """The warm regime's `summary`, from its clean processes (all ok ones with --keep-contended)."""
    ok = [v for v in views if v.outcome == "ok"]
    chosen = headline_runs(views, keep_contended)
    return WarmSummary(
        call_s=stats.summarize([v.median_s for v in chosen]),
        samples_per_process=len(ok[0].samples_s) if ok else None,
    )


def summaries_disagree(result: CaseResult) -> list[str]:
    """Where a case file's summaries are not what its own runs give (an edited figure);
    a failed case's figures are null by design and are not recomputed (its groups' are kept: they are)."""
    problems = concurrency_disagrees(result)
    if result.status == "failed":
        return problems
    for name, policy in result.policies.items():
        if name == WARM_PROCESS:
            for proc in policy.procs:
                if proc.outcome == "ok" and proc.median_s != statistics.median(proc.samples_s):
                    problems.append(f"{name} process {proc.index}: median_s is not the median of its samples")
            if policy.summary != warm_summary(policy.procs, policy.keeps_contended):
                problems.append(f"{name}: summary is not what its processes give")
        elif (policy.summary, policy.stages_summary, policy.loop_summary) != cold_summaries(policy.runs, policy.keeps_contended):
            problems.append(f"{name}: summary is not what its runs give")
        elif isinstance(policy, PrecompiledPolicy):
            problems += precompiled.disagreements(name, policy, dict(result.policies.items()))
    if result.conversion is not UNSET:
        again, _flags = conversions.case_conversion(result.conversion.evidence, result.policies)
        if again != result.conversion:
            problems.append("conversion: its figures are not what its evidence and policies give")
    return problems


def concurrency_disagrees(result: CaseResult) -> list[str]:
    """Where a case file's concurrency figures are not what its groups' processes give."""
    if result.concurrency is UNSET:
        return []
    cold = result.figure(COLD_CACHE, "ttfr_s")
    if concurrency.recomputed(result.concurrency, cold.median if cold else None) == result.concurrency:
        return []
    return ["concurrency: its figures are not what its groups' processes give"]


def _null_summaries(policy: ColdPolicy | WarmPolicy) -> ColdPolicy | WarmPolicy:
    if isinstance(policy, WarmPolicy):
        summary = WarmSummary(call_s=None, samples_per_process=None)
        return msgspec.structs.replace(policy, summary=summary)
    nulls = {name: None for name in policy.summary.__struct_fields__ if getattr(policy.summary, name) is not UNSET}
    nulled = msgspec.structs.replace(policy, summary=ColdSummary(**nulls), stages_summary=StagesSummary(),
                                     loop_summary=UNSET if policy.loop_summary is UNSET else None)  # fmt: skip
    if isinstance(nulled, PrecompiledPolicy):
        return msgspec.structs.replace(nulled, still_compiled=None, versus={})
    return nulled


def _status(entries: list[JournalEntry], policies: dict, check, stopped: str | None, cross_check: str | None = None):
    for entry in entries:  # (a priming process's: its mechanism cannot take the workload, the policy says so)
        if entry.outcome == "unavailable" and entry.kind != MAKE:
            return "warn", entry.reason
    if check is not None and check.passed is False:
        error = check.max_normalised_error
        if error is None:  # no error figure: what was wrong is the detail (shapes, how many outputs)
            what = check.detail or "no comparable result"
            against = "" if check.reference == CROSS_BACKENDS else f" (against the {check.reference} reference)"
            return "failed", f"result_mismatch: {what}{against}"
        detail = f" ({check.detail})" if check.detail else ""
        return "failed", (
            f"result_mismatch: max normalised error {error:.3g} > tolerance {check.tolerance:.3g} "
            f"against the {check.reference} reference{detail}"
        )
    if stopped:
        return "failed", stopped
    failed_runs, warnings = [], []
    for name, policy in policies.items():
        measured = policy.measured
        bad = [r for r in measured if r.outcome != "ok"]
        if measured and len(bad) == len(measured) and not isinstance(policy, PrecompiledPolicy):
            first = bad[0]
            return "failed", f"every {name} run failed; first: {first.outcome}: {first.reason}"
        if measured and len(bad) == len(measured):  # a precompiled policy: the case's other figures stand
            warnings.append(f"every {name} run failed; first: {bad[0].outcome}: {bad[0].reason}")
            continue
        failed_runs.extend(f"{name}#{r.index} {r.outcome}" for r in bad)
    for name, policy in policies.items():  # an artifact that failed to be made (one a mechanism cannot take: data)
        if isinstance(policy, PrecompiledPolicy) and policy.artifact.state == "failed":
            warnings.append(f"{name}: its artifact was not made ({policy.artifact.reason})")
    if failed_runs:
        warnings.append(f"{len(failed_runs)} run(s) failed and are excluded from the figures: " + "; ".join(failed_runs))
    # a policy whose runs were measured but whose figures are withheld is no ok result
    withheld: dict[str, list[str]] = {}
    for name, policy in policies.items():
        if flag := policy.withheld():
            withheld.setdefault(contention.withheld_reason(flag), []).append(name)
    warnings += [f"figures withheld ({', '.join(names)}): {why}" for why, names in withheld.items()]
    if cross_check:
        warnings.append(cross_check)
    kept = [name for name, policy in policies.items() if policy.keeps_contended]
    if kept:  # the user asked for them: given, and said everywhere (a figure of a busy machine)
        warnings.append(f"figures include contended runs ({', '.join(kept)}; --keep-contended)")
    if warnings:
        return "warn", "; ".join(warnings)
    return "ok", None


_SETTINGS = ("profile", "cold_runs", "warm_procs", "warm_samples", "min_sample_s", "max_warmup_s", "timeout_s", "seed",
             "threads", "deterministic", "keep_contended")  # fmt: skip


def _config(spec) -> Config:
    return Config(
        **copied(spec, _SETTINGS),
        policies=list(spec.policies),
        # --precision adds runs beyond cold_runs / warm_procs where they buy the most precision
        precision=spec.precision if spec.precision is not None else UNSET,
        budget_s=spec.budget_s if spec.precision is not None else UNSET,
    )


def _command(case: catalog.Case, spec) -> CommandInfo | UnsetType:
    """What a command case ran: the program, as plan.json records it (redacted)."""
    if not case.workload_info.command:
        return UNSET
    recorded = spec.command(case.workload).recorded()
    return CommandInfo(**copied(recorded, ("argv", "cwd", "first_result", "mark", "prepare", "stop_at_first_result")))


def build_case_result(case: catalog.Case, plan: Plan, entries: list[JournalEntry],
                      disagreement: Disagreement | None = None) -> CaseResult:  # fmt: skip
    """`disagreement`: how the case's backends' results contradict each other (a case without a
    reference; see unreferenced_disagreements): results of different sizes are its failed check,
    results of different norms a warning."""
    spec = plan.spec
    base = {
        "schema": CASE_SCHEMA,
        "case": case.id,
        "backend": case.backend,
        "workload": case.workload,
        "size": case.size,
        "dtype": case.dtype,
        "config": _config(spec),
        "sync_policy": case.sync_policy,
        "device": None,
        "versions": {},
        "correctness": None,
        "limitations": [*cache.LIMITATIONS, *case.backend_info.limitations],
    }
    base.update(command=_command(case, spec))  # a keyword, not a table keyed by the `command` backend
    dataset_id = datasets.dataset_id(case, spec.seed)
    if case.id in plan.unavailable:
        return CaseResult(**base, status="warn", reason=plan.unavailable[case.id], dataset=Dataset(id=dataset_id, sha256=None),
                          policies=Policies(), memory=CaseMemory(), flags=[], unmeasured_runs=[])  # fmt: skip

    entries = sorted(entries, key=lambda e: (e.round, e.index))
    # groups of concurrent cold starts (--concurrency) are figures of their own, apart from the policies'
    grouped = [e for e in entries if e.kind in GROUP_KINDS]
    entries = [e for e in entries if e.kind not in GROUP_KINDS]
    checked = [e for e in entries if e.record and e.record.check]
    check, reference_digest = _result_check(checked, entries, disagreement)
    base["correctness"] = check
    memory = _memory_and_device(entries, base)
    policies = precompiled.with_versus(_explained(_policies(case, spec, entries, reference_digest), entries))
    unmeasured = [UnmeasuredRun(kind=e.kind, outcome=e.outcome, reason=e.reason) for e in entries if not e.measured]
    # a diagnostic process that failed leaves its explanation saying so, not the case failed
    stopped = next((f"{e.kind} run {e.outcome}: {e.reason}" for e in entries
                    if not e.measured and e.outcome != "ok" and e.kind not in (EXPLAIN, MAKE)), None)  # fmt: skip
    status, reason = _status(entries, policies, check, stopped,
                             disagreement.why if disagreement and not disagreement.fails else None)  # fmt: skip

    cold = policies.get(COLD_CACHE) or policies.get(WARM_CACHE)
    if cold:
        rss = [r.resources.peak_rss_bytes for r in cold.runs if r.outcome == "ok"]
        memory["peak_rss_bytes"] = stats.summarize([v for v in rss if v is not None])
    flags = _policy_flags(policies)
    # a conversion route: its checking process's evidence, and the figures and flags it gives
    evidence = next((e.record.conversion for e in checked if e.outcome == "ok" and e.record.conversion), None)
    conversion, conversion_flags = conversions.case_conversion(evidence, policies) if status != "failed" else (UNSET, [])
    together, group_flags = _concurrency(grouped, case, policies, status)
    flags += conversion_flags + group_flags
    if status == "failed":
        policies = {name: _null_summaries(policy) for name, policy in policies.items()}
        memory["peak_rss_bytes"] = None
    sha256 = checked[0].record.dataset_sha256 if checked else None
    return CaseResult(
        **base,
        status=status,
        reason=reason,
        dataset=Dataset(id=dataset_id, sha256=sha256 or None),
        policies=policies_of(policies),
        memory=CaseMemory(**memory),
        flags=flags,
        unmeasured_runs=unmeasured,
        conversion=conversion,
        concurrency=together,
        threadpools=_threadpools(entries),
        advice=explain.advice(policies) if spec.explain else UNSET,
    )


def _result_check(checked: list[JournalEntry], entries: list[JournalEntry], disagreement: Disagreement | None):
    """The case's check (a failed one first; the cross-backend disagreement's where it fails the
    case) and the digest every run's result is compared with (the ok checking process's, else the
    first ok run's)."""
    check = checked[0].record.check if checked else None
    failed_checks = [e.record.check for e in checked if e.record.check.passed is False]
    if failed_checks:
        check = failed_checks[0]
    reference_digest = next(
        (e.record.digest or None for e in checked if e.outcome == "ok"),
        next((e.record.digest or None for e in entries if e.outcome == "ok" and e.record), None),
    )
    if disagreement and disagreement.fails and check is not None:  # the check's verdict: nothing else says it
        check = Check(reference=CROSS_BACKENDS, max_normalised_error=None, tolerance=check.tolerance, passed=False,
                      detail=disagreement.why)  # fmt: skip
    return check, reference_digest


def _memory_and_device(entries: list[JournalEntry], base: dict) -> dict:
    """The case's device and versions (into `base`) and its memory fields, from its ok records."""
    records = [e.record for e in entries if e.record and e.outcome == "ok"]
    if not records:
        return {}
    first = records[0]
    base["device"] = first.device or None
    base["versions"] = first.versions or {}
    # a warm process's memory where there is one: its device peaks' steady state is the warm regime's
    measured = next((r for r in records if r.warm and r.memory), first).memory
    if not measured:
        return {}
    return {k: v for k in measured.__struct_fields__ if (v := getattr(measured, k)) is not UNSET}


def _policies(case: catalog.Case, spec, entries: list[JournalEntry], reference_digest) -> dict:
    """Each policy the spec runs, from its measured entries."""
    ran = [e for e in entries if e.outcome == "ok"]
    # a program whose runs never wrote into (or found anything in) its cache directories
    uncached = bool(case.workload_info.command and ran) and not any(
        e.cache_dir.entries_before or e.cache_dir.entries_after for e in ran)  # fmt: skip
    policies = {}
    for policy in case_policies(case, spec):
        measured = [e for e in entries if e.measured and e.policy == policy]
        if policy == WARM_PROCESS:
            policies[policy] = _warm_policy([runs.warm_view(e, case, reference_digest) for e in measured], spec.keep_contended)
            continue
        views = [runs.run_view(e, case, reference_digest, uncached) for e in measured]
        policies[policy] = _cold_policy(views, spec.keep_contended)
        if parts := precompiled_parts(policy):  # with its artifact, from the (last) process that made it
            maker = [e for e in entries if e.kind == MAKE and e.policy == maker_policy(parts[0])]
            policies[policy] = precompiled.precompiled_policy(policy, policies[policy], maker[-1] if maker else None)
    return policies


def _explained(policies: dict, entries: list[JournalEntry]) -> dict:
    """--explain: each cold policy with its diagnostic process's explanation, and the flag it raises."""
    diagnostics = {e.policy: e for e in entries if e.kind == EXPLAIN}
    for name in [n for n in policies if n in diagnostics]:
        explanation, flags = explain.explain(diagnostics[name], policies[name])
        policies[name] = msgspec.structs.replace(policies[name], explanation=explanation,
                                                 flags=[*policies[name].flags, *flags])  # fmt: skip
    return policies


def _policy_flags(policies: dict) -> list:
    """Every policy's flags on the case, named by their policy, and an invalid measurement's."""
    flags = []
    for name, policy in policies.items():
        flags.extend(msgspec.structs.replace(flag, policy=name) for flag in policy.flags)
        if any(r.outcome == "invalid-measurement" for r in policy.measured):
            flags.append(InvalidMeasurement(policy=name))
    return flags


def _concurrency(grouped: list[JournalEntry], case: catalog.Case, policies: dict, status: str):
    """The case's --concurrency groups (UNSET: none) and the flags they raise."""
    cores = next((e.host.usable_cores for e in grouped if e.host and e.host.usable_cores), None)
    # a failed case's figures are withheld: its advice does not lean on them (as a reader recomputes it)
    cold_ttfr = policies[COLD_CACHE].figure("ttfr_s") if COLD_CACHE in policies and status != "failed" else None
    together = concurrency.case_concurrency(grouped, case, cold_ttfr.median if cold_ttfr else None, cores)
    if together is UNSET:
        return together, []
    flags = []
    broken = [g.label for g in together.groups if g.check.whole is False]
    if broken:
        flags.append(SharedCacheNotWhole(groups=broken))
    # a warm-shared group whose processes compiled is no warm figure: said, never silent
    missed = [g.label for g in together.groups
              if g.mode == WARM_SHARED and any(m.cache_use in ("compiled", "mixed") for m in g.members)]  # fmt: skip
    if missed:
        flags.append(WarmSharedCompiled(groups=missed))
    return together, flags


def _threadpools(entries: list[JournalEntry]):
    """The pools the case's checking process recorded (only it runs threadpoolctl, after its
    timing: a cold process never pays for the import), whatever the check found: a failed
    check is where a reader most wants to know the BLAS setup."""
    recorded = [e.record.threadpools for e in entries
                if runs_check(e.kind, e.index) and e.record and e.record.threadpools is not UNSET]  # fmt: skip
    return recorded[0] if recorded else UNSET


def case_results(plan: Plan, entries: list[JournalEntry], skip=()) -> list[CaseResult]:
    """The case result of every case of the plan (but `skip`), from its journal entries."""
    by_case: dict[str, list[JournalEntry]] = {}
    for entry in entries:
        by_case.setdefault(entry.case, []).append(entry)
    disagreements = unreferenced_disagreements(plan.spec.cases, by_case)
    return [build_case_result(case, plan, by_case.get(case.id, []), disagreements.get(case.id))
            for case in sorted(plan.spec.cases) if case.id not in skip]  # fmt: skip


CROSS_BACKENDS = "the case's other backends"  # the check of a case without a reference, when its backends disagree


@dataclass(frozen=True)
class Disagreement:
    fails: bool  # results of different sizes: a failed check; different norms: a warning
    why: str


def unreferenced_disagreements(cases, by_case: dict[str, list[JournalEntry]]) -> dict[str, Disagreement]:
    """A user's case without a reference is not checked, but its backends can still contradict each
    other (from each checking process's digest): results of different sizes fail the check of every
    backend of the case; L2 norms further apart than the case's tolerance are a warning (that
    tolerance is meant for a max-normalised error, and builders may legitimately differ, e.g. in
    their random numbers). Case id -> the disagreement, for every backend of such a case."""
    groups: dict[tuple, list] = {}
    for case in cases:
        if not case.workload_info.source:
            continue
        checked = next((e for e in by_case.get(case.id, []) if e.outcome == "ok" and e.record and e.record.check), None)
        digest = checked.record.digest if checked else None
        if checked is None or checked.record.check.state != "not_checked" or not digest or digest.sum_sq is None:
            continue
        groups.setdefault((case.workload, case.size, case.dtype), []).append((case, digest, checked.record.check.tolerance))
    out = {}
    for members in groups.values():
        if len(members) < 2:
            continue
        counts = {digest.count for _case, digest, _tol in members}
        norms = [math.sqrt(max(digest.sum_sq, 0.0)) for _case, digest, _tol in members]
        tolerance = max(tol for _case, _digest, tol in members)
        if len(counts) > 1:
            said = ", ".join(f"{case.backend} {digest.count}" for case, digest, _tol in members)
            found = Disagreement(True, f"the backends' results differ in size (values: {said}), and the case has no "
                                       "@case.reference to say which is right: add one, or make the builders agree")  # fmt: skip
        elif max(norms) - min(norms) > tolerance * max(max(norms), 1e-30):
            said = ", ".join(f"{case.backend} {norm:.6g}" for (case, _d, _t), norm in zip(members, norms))
            found = Disagreement(False, f"not checked, and the backends' results differ (L2 norms: {said}; more than "
                                        f"{tolerance:.3g} apart): add a @case.reference to know which is right")  # fmt: skip
        else:
            continue
        for case, _digest, _tol in members:
            out[case.id] = found
    return out
