"""What torch.compile did in --explain's diagnostic process's first call, as its worker read it
(child/torch_explain.py): the compiled frames, dynamo's graph breaks with the user's file:line, and
each run of the C++ compiler. Part of the worker's record; analysis makes the explanation of it."""

from __future__ import annotations

from typing import Literal

from ttfr.model.base import UNSET, Count, Open, Seconds, UnsetType

COMPILER_RUN_KINDS = ("kernel", "isa_probe", "isa_load_probe", "header")
CompilerRunKind = Literal[COMPILER_RUN_KINDS]  # type: ignore[valid-type]


class TorchFrame(Open):
    """One graph dynamo compiled (a function, the rest of one after a graph break, a recompile), or a backward
    graph AOTAutograd compiled lazily, from `torch._dynamo.utils.get_compilation_metrics()`."""

    compile_id: str | None = None
    """Dynamo's id of the compile, `frame/attempt` (`0/1`: frame 0's first recompile)."""
    function: str | None = None
    """The compiled code object's name (`torch_dynamo_resume_in_f_at_12`: the rest of `f` after a graph break at
    line 12); null for a backward graph."""
    file: str | None = None
    """The file of the compiled code; null for a backward graph."""
    line: Count | None = None
    """The compiled code's first line in that file."""
    forward: bool = True
    """False for a backward graph compiled at the first backward pass."""
    compile_s: Seconds | None = None
    """Seconds dynamo spent on the frame from start to compiled code (tracing, AOTAutograd, Inductor and its
    compiler runs); for a backward graph, its AOTAutograd and Inductor seconds."""
    inductor_s: Seconds | None = None
    """Seconds Inductor spent on the graph (its compiler runs included)."""
    graph_ops: Count | None = None
    """Operations in the captured graph (a count)."""
    guards: Count | None = None
    """Guards dynamo installed for it (a count)."""
    recompile_reason: str | None = None
    """For a recompile: the guard that failed, as dynamo says it (`tensor 'x' size mismatch at index 0. expected
    64, actual 32`)."""
    break_reasons: list[str] = []
    """The graph-break reasons that made dynamo restart the frame, verbatim."""
    fx_cache_hits: Count | None = None
    """Inductor FX graph cache hits for it (a count)."""
    fx_cache_misses: Count | None = None
    """Inductor FX graph cache misses for it (a count)."""
    autograd_cache_hits: Count | None = None
    """AOTAutograd cache hits for it (a count)."""
    autograd_cache_misses: Count | None = None
    """AOTAutograd cache misses for it (a count)."""
    start_us: Count | None = None
    """When dynamo started on it, on the wall clock (microseconds since the epoch, as dynamo stamps it)."""
    end_us: Count | None = None
    """When it ended, on the same clock."""


class TorchGraphBreak(Open):
    """A graph break, from dynamo's own graph-break log."""

    file: str
    """The user's file the break is in."""
    line: Count
    """The line in that file."""
    reason: str
    """Dynamo's reason, verbatim (its explanation and hints)."""


class CompilerRun(Open):
    """One run of the C++ compiler (or an ISA probe's load), timed at Inductor's build hook."""

    kind: CompilerRunKind
    """What asked for it: `kernel` (the user's graph), `isa_probe` (a test build for a vector instruction set),
    `isa_load_probe` (loading that build in a subprocess) or `header` (the precompiled header)."""
    s: Seconds
    """Its seconds."""
    start_us: Count | None = None
    """When it started, on the wall clock dynamo stamps frames with (microseconds since the epoch)."""
    end_us: Count | None = None
    """When it ended, on the same clock."""


class TorchCompileEvidence(Open):
    """torch.compile's first call in the diagnostic process."""

    frames: list[TorchFrame] = []
    """Every frame and backward graph compiled in the first call, in order."""
    graph_breaks: list[TorchGraphBreak] = []
    """Every graph break dynamo logged, in order."""
    compiler_runs: list[CompilerRun] = []
    """Every compiler run and ISA load probe in this process, in order."""
    cache_bypasses: list[str] = []
    """Why the FX graph cache or the AOTAutograd cache was bypassed, in torch's words ("Bypassing FX Graph Cache
    because '...'"), in order; empty where neither was."""
    build_guards_s: float | None = None
    """Seconds dynamo spent building its guards up to the end of the first call (`compile_times`' `build_guards` row);
    null where the table has none."""
    kernels: Count | None = None
    """Kernels Inductor generated (`torch._inductor.metrics.generated_kernel_count`); null where it was not loaded."""
    unavailable: dict[str, str] | UnsetType = UNSET
    """What could not be read, by part, with why (e.g. kernels built in Inductor's worker processes)."""
