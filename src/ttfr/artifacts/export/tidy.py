"""A verified result directory as tidy rows: one row per run (or warm process, or warm
sample) and metric, with the case's coordinates. The CSV export writes them as they are;
the OpenMetrics export summarises from the same case files.

A failed run keeps its rows with an empty value (never 0.0), so a reader sees that it
happened and that it has no figure."""

from __future__ import annotations

from ttfr.analyse import contention
from ttfr.analyse.runs import COLD_METRICS, OPTIONAL_METRICS, STAGE_METRICS
from ttfr.model.base import UNSET
from ttfr.model.case import CaseResult, RunFigures, named
from ttfr.model.policies import WARM_PROCESS

# case_status: the case's verdict; in_figures: whether the run's values enter the case's figures (a contended run
# set aside, or every run of a policy whose figures are withheld, is `false`; a failed run has none).
COLUMNS = ("snapshot", "case", "backend", "workload", "size", "dtype", "case_status", "policy", "kind", "run", "round",
           "sample", "outcome", "contended", "in_figures", "metric", "value", "unit")  # fmt: skip
_RESOURCES = {"peak_rss_bytes": "bytes", "tree_peak_rss_bytes": "bytes", "cpu_user_s": "s", "cpu_sys_s": "s",
              "involuntary_switches": "count"}  # fmt: skip
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
