"""A verified result directory as tidy rows: one row per run (or warm process, or warm
sample) and metric, with the case's coordinates. The CSV export writes them as they are;
the OpenMetrics export summarises from the same case files.

A failed run keeps its rows with an empty value (never 0.0), so a reader sees that it
happened and that it has no figure.

A conversion case (issue 28) adds its case's conversion figures as it holds them
(analyse/conversions.py decided them): kind `conversion`, one row per figure (copied and the
leak verdict as 1/0, the times, rates, memcpy's share; empty where it has none), and kind
`conversion_layout`, per layout of the source `layout_<layout>_copied`, `_refused` and
`_values_ok` (1/0; empty where the layout was not converted), its outcome (ok, refused,
not_applicable) in `outcome`. These rows have no policy, run, round or sample.

A case run with `--explain` (issue 38) adds, per cold policy, its explanation as it holds it: kind
`explain_phase` (metric `<phase>.measured_s`, `.imports_s`, `.modules`), `explain_distribution` (metric
`<phase>.<distribution>`: the largest six and `other`, self seconds adding up to the phase) and
`explain_module` (metric `<phase>.<module>`: the costliest eight, cumulative seconds), and where the
first call compiled, `explain_first_call` (metric `<part>`: the first call's parts by the runtime's
counters — JAX's trace, lower, compile; torch.compile's dynamo and AOTAutograd, inductor, each kind of
compiler run — and `unattributed`, adding up to it); never a row per imported module or compiled
frame. `outcome` is the diagnostic process's.

A case run with `--concurrency` (issue 29) adds its case result's concurrency as it holds it
(analyse/concurrency.py decided it): `policy` names the sharing mode and the group size N as the
flags do (`cold-shared x4`). Kind `concurrency`: per mode and N the point's figures (groups,
processes, ttfr_p50_s, ttfr_p95_s (nearest rank), ttfr_max_s, all_results_s, dedup_ratio,
bytes_written, blocked_s, runq_wait_s, whole and oversubscribed as 1/0). Kind
`concurrency_member`: per process of each group (`round`: the group's index, `run`: its place in
the group, `outcome`: its outcome) ttfr_s, result_after_release_s, start_skew_s, compiles, loads,
blocked_s, runq_wait_s and its cache use as `cache_use_<compiled|loaded|mixed|unknown>` (1 for the
one it was, 0 for the others). Kind `concurrency_check`: per group (`outcome`: the fresh process's)
the cache's files, bytes, unreadable_files, what the fresh process compiled and loaded, whole (1/0).
Kind `concurrency_fan_out`: per N (`policy` `fan-out xN`) the advice: together_s, warm_up_s,
fan_out_s, warm_up_first_s, saving_s (negative: starting together was faster). A figure the case
result does not hold is empty, never 0."""

from __future__ import annotations

from ttfr.analyse import contention
from ttfr.analyse.runs import COLD_METRICS, OPTIONAL_METRICS, STAGE_METRICS
from ttfr.model.base import UNSET, present
from ttfr.model.case import CaseResult, Conversion
from ttfr.model.policy_figures import named
from ttfr.model.run_figures import RunFigures
from ttfr.model.concurrency import Concurrency, point_label
from ttfr.model.policies import WARM_PROCESS

# case_status: the case's verdict; in_figures: whether the run's values enter the case's figures (a contended run
# set aside, or every run of a policy whose figures are withheld, is `false`; a failed run has none).
COLUMNS = ("snapshot", "case", "backend", "workload", "size", "dtype", "case_status", "policy", "kind", "run", "round",
           "sample", "outcome", "contended", "in_figures", "metric", "value", "unit")  # fmt: skip
_RESOURCES = {"peak_rss_bytes": "bytes", "tree_peak_rss_bytes": "bytes", "cpu_user_s": "s", "cpu_sys_s": "s",
              "involuntary_switches": "count", "compiler_runs": "count", "compiler_seen_s": "s"}  # fmt: skip
_CACHE = ("hits", "misses", "entries_before", "entries_after")
# The first call's compile stages whose sum is a run's compile time (JAX: trace, lower, XLA
# compile; torch.compile: dynamo, AOTAutograd, Inductor, backward graphs included).
COMPILE_STAGES = ("trace_s", "lower_s", "compile_s", "dynamo_s", "aot_autograd_s", "inductor_s")


def compile_seconds(run: RunFigures) -> float | None:
    """A run's compile time: the sum of its compile stages (None: none recorded)."""
    stages = [named(run.stages, name) for name in COMPILE_STAGES]
    present = [s for s in stages if s is not None]
    return sum(present) if present else None


def rows(snapshot: str, cases: list[CaseResult]):
    """Yield one dict per (run, metric) of every case (COLUMNS are its keys)."""
    for case in cases:
        where = {"snapshot": snapshot, "case": case.case, "backend": case.backend, "workload": case.workload,
                 "size": case.size, "dtype": case.dtype, "case_status": case.status}  # fmt: skip
        for policy, block in case.policies.items():
            # a failed case has no figures: none of its runs enters one
            used = {run.index for run in block.figure_runs()} if case.status != "failed" else set()
            for run in block.measured:
                run_where = {**where, "policy": policy, "in_figures": _flag(run, run.index in used)}
                yield from (_process_rows if policy == WARM_PROCESS else _run_rows)(run_where, run)
        for policy, block in case.policies.items():
            yield from _explanation_rows(where, policy, block)
        if present(case.conversion):
            yield from _conversion_rows(where, case.conversion)
        if present(case.concurrency):
            yield from _concurrency_rows(where, case.concurrency)


def _row(where: dict, item: RunFigures, kind: str, metric: str, value, unit: str, sample="") -> dict:
    return {**where, "kind": kind, "run": item.index, "round": item.round, "sample": sample,
            "outcome": item.outcome, "contended": _flag(item, contention.is_contended(item)), "metric": metric,
            "value": "" if value is None else value, "unit": unit}  # fmt: skip


def _flag(item: RunFigures, value: bool) -> str:
    """true / false for an ok run; empty for a failed one (it has no figures to judge)."""
    if item.outcome != "ok":
        return ""
    return "true" if value else "false"


def _recorded(struct, names):
    """(name, value) of the fields a record holds, in `names`' order: an absent one (UNSET) is
    left out, a null one kept (its row says there was no figure)."""
    for name in names:
        value = getattr(struct, name, UNSET)
        if value is not UNSET:
            yield name, value


def _run_rows(where: dict, run: RunFigures):
    for name, value in _recorded(run.metrics, (*COLD_METRICS, *OPTIONAL_METRICS)):
        yield _row(where, run, "cold_run", name, value, "s")
    for name, value in _recorded(run.stages, STAGE_METRICS):
        yield _row(where, run, "cold_run", f"stage_{name}", value, "s")
    compile_s = compile_seconds(run)
    if compile_s is not None:
        yield _row(where, run, "cold_run", "compile_s", compile_s, "s")
    for name, value in _recorded(run.resources, _RESOURCES):
        yield _row(where, run, "cold_run", name, value, _RESOURCES[name])
    for name, value in _recorded(run.cache, _CACHE):
        yield _row(where, run, "cold_run", f"cache_{name}", value, "count")


def _process_rows(where: dict, proc: RunFigures):
    yield _row(where, proc, "warm_process", "call_s", named(proc, "median_s"), "s")
    for position, sample in enumerate(proc.samples_s or []):
        yield _row(where, proc, "warm_sample", "call_s", sample, "s", sample=position)
    for name, value in _recorded(proc.resources, _RESOURCES):
        yield _row(where, proc, "warm_process", name, value, _RESOURCES[name])


def _explanation(block):
    """A cold policy's explanation (None: no --explain, or a warm policy, which has none)."""
    explanation = getattr(block, "explanation", UNSET)
    return explanation if present(explanation) else None


def explained_distributions(block):
    """(phase, distribution row) of a cold policy's explanation (none without --explain, or where its
    diagnostic process failed): the largest six and `other`, as the case result holds them."""
    explanation = _explanation(block)
    for phase in explanation.phases if explanation else []:
        for row in phase.distributions:
            yield phase.phase, row


def _explanation_rows(where: dict, policy: str, block):
    """--explain: per phase its measured median, traced imports and module count (kind `explain_phase`, metric
    `<phase>.<figure>`), each distribution row's seconds (kind `explain_distribution`, metric
    `<phase>.<distribution>`), each costliest module's cumulative seconds (kind `explain_module`, metric
    `<phase>.<module>`)."""
    explanation = _explanation(block)
    if explanation is None:
        return
    for phase in explanation.phases:
        for name, value, unit in (("measured_s", phase.measured_s, "s"), ("imports_s", phase.imports_s, "s"),
                                  ("modules", phase.modules, "count")):  # fmt: skip
            yield _case_row(where, "explain_phase", f"{phase.phase}.{name}", value, unit, explanation.outcome, policy)
        for row in phase.distributions:
            yield _case_row(where, "explain_distribution", f"{phase.phase}.{row.distribution}", row.self_s, "s",
                            explanation.outcome, policy)  # fmt: skip
        for module in phase.top_modules:
            yield _case_row(where, "explain_module", f"{phase.phase}.{module.module}", module.cumulative_s, "s",
                            explanation.outcome, policy)  # fmt: skip
    for part in explained_first_call(block):
        yield _case_row(where, "explain_first_call", part.part, part.s, "s", explanation.outcome, policy)


def explained_first_call(block):
    """A cold policy's explained first-call parts, as the case result holds them (none where nothing compiled)."""
    explanation = _explanation(block)
    if explanation and present(explanation.first_call):
        yield from explanation.first_call.parts


def _bit(value: bool | None) -> int | None:
    return None if value is None else int(value)


def _case_row(where: dict, kind: str, metric: str, value, unit: str, outcome: str = "", policy: str = "", run_index="",
              round_index="") -> dict:  # fmt: skip
    return {**where, "policy": policy, "kind": kind, "run": run_index, "round": round_index, "sample": "", "outcome": outcome,
            "contended": "", "in_figures": "", "metric": metric, "value": "" if value is None else value,
            "unit": unit}  # fmt: skip


def _conversion_rows(where: dict, conversion: Conversion):
    """The case's conversion figures, as its case result holds them."""
    evidence = conversion.evidence
    figures = (
        ("copied", _bit(evidence.copied), "bool"),
        ("first_call_s", conversion.first_call_s, "s"),
        ("call_s", conversion.call_s, "s"),
        ("bytes_per_s", conversion.bytes_per_s, "bytes/s"),
        ("memcpy_bytes_per_s", conversion.memcpy_bytes_per_s, "bytes/s"),
        ("memcpy_fraction", conversion.memcpy_fraction, "ratio"),
        ("below_half_memcpy", _bit(conversion.below_half_memcpy), "bool"),
        ("memcpy_s", evidence.memcpy_s, "s"),
        ("memcpy_fresh_s", evidence.memcpy_fresh_s, "s"),
        ("leak_grows", _bit(evidence.leak.grows), "bool"),
        ("leak_growth_per_call_bytes", evidence.leak.growth_per_call_bytes, "bytes"),
        ("leak_calls", evidence.leak.calls, "count"),
    )
    for metric, value, unit in figures:
        yield _case_row(where, "conversion", metric, value, unit)
    for layout in evidence.layouts:
        converted = layout.outcome == "ok"
        for metric, value in (("copied", _bit(layout.copied) if converted else None),
                              ("refused", int(layout.outcome == "refused")),
                              ("unusable", int(layout.outcome == "unusable")),
                              ("values_ok", _bit(layout.values_ok) if converted else None)):  # fmt: skip
            yield _case_row(where, "conversion_layout", f"layout_{layout.layout}_{metric}", value, "bool", layout.outcome)


CACHE_USES = ("compiled", "loaded", "mixed", "unknown")


def _concurrency_rows(where: dict, concurrency: Concurrency):
    """The case's concurrency: each point's figures, each member's and each check's, the advice."""
    # a point measured as another mode's (cold-private x1 is cold-shared x1's run) would count its processes twice
    for p in (p for p in concurrency.points if p.measured_as is None):
        arm = p.label
        figures = (
            ("groups", p.groups, "count"),
            ("processes", p.processes, "count"),
            ("ttfr_p50_s", p.ttfr_p50_s, "s"),
            ("ttfr_p95_s", p.ttfr_p95_s, "s"),
            ("ttfr_max_s", p.ttfr_max_s, "s"),
            ("all_results_s", p.all_results_s, "s"),
            ("dedup_ratio", p.dedup_ratio, "ratio"),
            ("bytes_written", p.bytes_written, "bytes"),
            ("blocked_s", p.blocked_s, "s"),
            ("runq_wait_s", p.runq_wait_s, "s"),
            ("whole", _bit(p.whole), "bool"),
            ("oversubscribed", _bit(p.oversubscribed), "bool"),
        )
        for metric, value, unit in figures:
            yield _case_row(where, "concurrency", metric, value, unit, policy=arm)
    for group in concurrency.groups:
        arm = point_label(group.mode, group.n)
        for m in group.members:
            figures = (
                ("ttfr_s", m.ttfr_s, "s"),
                ("result_after_release_s", m.result_after_release_s, "s"),
                ("start_skew_s", m.start_skew_s, "s"),
                *((f"cache_use_{use}", int(m.cache_use == use), "bool") for use in CACHE_USES),
                ("compiles", m.compiles, "count"),
                ("loads", m.loads, "count"),
                ("blocked_s", m.blocked_s, "s"),
                ("runq_wait_s", m.runq_wait_s, "s"),
            )
            for metric, value, unit in figures:
                yield _case_row(where, "concurrency_member", metric, value, unit, m.outcome, arm, m.member, group.index)
        check = group.check
        for metric, value, unit in (("files", check.files, "count"), ("bytes", check.bytes, "bytes"),
                                    ("unreadable_files", len(check.unreadable), "count"),
                                    ("compiles", check.compiles, "count"), ("loads", check.loads, "count"),
                                    ("whole", _bit(check.whole), "bool")):  # fmt: skip
            yield _case_row(where, "concurrency_check", metric, value, unit, check.outcome, arm, round_index=group.index)
    for advice in concurrency.fan_out:
        for metric in ("together_s", "warm_up_s", "fan_out_s", "warm_up_first_s", "saving_s"):
            yield _case_row(
                where, "concurrency_fan_out", metric, getattr(advice, metric), "s", policy=point_label("fan-out", advice.n)
            )
