"""A verified result directory as tidy rows: one row per run (or warm process, or warm
sample) and metric, with the case's coordinates. The CSV export writes them as they are;
the OpenMetrics export summarises from the same case files.

A failed run keeps its rows with an empty value (never 0.0), so a reader sees that it
happened and that it has no figure."""

from __future__ import annotations

from ttfr.analyse import contention
from ttfr.analyse.runs import COLD_METRICS, STAGE_METRICS, USER_IMPORT
from ttfr.model.policies import WARM_PROCESS

COLUMNS = ("snapshot", "case", "backend", "workload", "size", "dtype", "policy", "kind", "run", "round", "sample",
           "outcome", "contended", "metric", "value", "unit")  # fmt: skip
_RESOURCES = {"peak_rss_bytes": "bytes", "tree_peak_rss_bytes": "bytes", "cpu_user_s": "s", "cpu_sys_s": "s",
              "involuntary_switches": "count"}  # fmt: skip
_CACHE = ("hits", "misses", "entries_before", "entries_after")
# The first call's compile stages whose sum is a run's compile time (JAX: trace, lower, XLA
# compile; torch.compile: dynamo, AOTAutograd, Inductor, backward graphs included).
COMPILE_STAGES = ("trace_s", "lower_s", "compile_s", "dynamo_s", "aot_autograd_s", "inductor_s")


def compile_seconds(run: dict) -> float | None:
    """A run's compile time: the sum of its compile stages (None: none recorded)."""
    stages = [run.get("stages", {}).get(name) for name in COMPILE_STAGES]
    present = [s for s in stages if s is not None]
    return sum(present) if present else None


def rows(snapshot: str, cases: list[dict]):
    """Yield one dict per (run, metric) of every case (COLUMNS are its keys)."""
    for case in cases:
        where = {"snapshot": snapshot, "case": case["case"], "backend": case["backend"], "workload": case["workload"],
                 "size": case["size"], "dtype": case["dtype"]}  # fmt: skip
        for policy, block in case["policies"].items():
            if policy == WARM_PROCESS:
                for proc in block.get("procs", []):
                    yield from _process_rows({**where, "policy": policy}, proc)
            else:
                for run in block.get("runs", []):
                    yield from _run_rows({**where, "policy": policy}, run)


def _row(where: dict, item: dict, kind: str, metric: str, value, unit: str, sample="") -> dict:
    return {**where, "kind": kind, "run": item["index"], "round": item["round"], "sample": sample,
            "outcome": item["outcome"], "contended": _contended(item), "metric": metric,
            "value": "" if value is None else value, "unit": unit}  # fmt: skip


def _contended(item: dict) -> str:
    if item.get("outcome") != "ok":
        return ""
    return "true" if contention.is_contended(item) else "false"


def _run_rows(where: dict, run: dict):
    metrics = run["metrics"]
    for name in (*COLD_METRICS, USER_IMPORT):
        if name in metrics:
            yield _row(where, run, "cold_run", name, metrics[name], "s")
    for name in STAGE_METRICS:
        if name in run.get("stages", {}):
            yield _row(where, run, "cold_run", f"stage_{name}", run["stages"][name], "s")
    compile_s = compile_seconds(run)
    if compile_s is not None:
        yield _row(where, run, "cold_run", "compile_s", compile_s, "s")
    resources = run.get("resources") or {}
    for name, unit in _RESOURCES.items():
        if name in resources:
            yield _row(where, run, "cold_run", name, resources[name], unit)
    cache = run.get("cache") or {}
    for name in _CACHE:
        if name in cache:
            yield _row(where, run, "cold_run", f"cache_{name}", cache[name], "count")


def _process_rows(where: dict, proc: dict):
    yield _row(where, proc, "warm_process", "call_s", proc.get("median_s"), "s")
    for position, sample in enumerate(proc.get("samples_s") or []):
        yield _row(where, proc, "warm_sample", "call_s", sample, "s", sample=position)
    resources = proc.get("resources") or {}
    for name, unit in _RESOURCES.items():
        if name in resources:
            yield _row(where, proc, "warm_process", name, resources[name], unit)
