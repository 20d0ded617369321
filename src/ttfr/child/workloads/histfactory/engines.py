"""A problem prepared for each engine: dense arrays for the native JAX/torch engines (their
layout: native_inputs.py), an engine object for pyhf and NextStat."""

from __future__ import annotations

from ttfr.child.workloads.histfactory.native_inputs import dense_inputs
from ttfr.child.workloads.histfactory.problems import Problem


def inputs_for(runtime, problem: Problem):
    """What `runtime.put` receives: dense arrays for JAX/torch, an engine for pyhf/NextStat."""
    framework = runtime.framework
    if framework in ("jax", "torch"):
        return dense_inputs(problem)[1]
    if framework == "pyhf":
        from ttfr.child.workloads.histfactory.pyhf_engine import PyhfEngine

        return PyhfEngine(runtime.pyhf, runtime.variant, problem)
    if framework == "nextstat":
        from ttfr.child.workloads.histfactory.nextstat_engine import NextstatEngine

        return NextstatEngine(runtime.nextstat, problem)
    raise ValueError(f"no HistFactory engine for framework {framework!r}")
