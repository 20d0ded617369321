"""What torch.compile did in --explain's diagnostic process's first call, as its worker read it
(child/torch_explain.py): the compiled frames, dynamo's graph breaks with the user's file:line, and
each run of the C++ compiler (on a GPU: Triton's kernels and each run of ptxas).
Part of the worker's record; analysis makes the explanation of it."""

from __future__ import annotations

from typing import Literal

from ttfr.model.base import UNSET, Count, Open, Seconds, UnsetType

# in the order an overlap is charged: a moment two kinds of run share counts once, for the first
COMPILER_RUN_KINDS = ("kernel", "ptxas", "isa_probe", "isa_load_probe", "header", "ptxas_version")
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
    """One run of the C++ compiler (or an ISA probe's load), timed at Inductor's build hook; or one run of ptxas
    in Inductor's worker processes, timed by the wrapper at `TRITON_PTXAS_PATH` (child/ptxas_timing.py)."""

    kind: CompilerRunKind
    """What asked for it: `kernel` (the user's graph), `isa_probe` (a test build for a vector instruction set),
    `isa_load_probe` (loading that build in a subprocess) or `header` (the precompiled header); `ptxas` (a Triton
    kernel's PTX to machine code) or `ptxas_version` (Triton asking ptxas its version)."""
    s: Seconds
    """Its seconds."""
    built: str | None = None
    """What it built, where the run says: for ptxas, the kernel (the PTX's `.entry`) and its target
    (`triton_poi_fused_add_0 (sm_90a)`); null for the C++ compiler's runs."""
    failed: bool = False
    """True where the run exited non-zero (ptxas)."""
    start_us: Count | None = None
    """When it started, on the wall clock dynamo stamps frames with (microseconds since the epoch)."""
    end_us: Count | None = None
    """When it ended, on the same clock."""


class TritonKernel(Open):
    """One Triton kernel Inductor compiled, as Inductor counts it (`async_compile._add_triton_kernel_info`)."""

    name: str
    """Inductor's name for it (`triton_poi_fused_add_0`), the `.entry` ptxas builds."""
    compile_s: Seconds | None = None
    """Seconds its compile took where it ran (a worker process: Triton's whole pipeline, ptxas included, or a
    load from Triton's cache), by Inductor's own `compile_time_us`; null where torch gave none."""


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
    triton_kernels: list[TritonKernel] = []
    """Every Triton kernel compiled in the first call (a GPU), in the order their results arrived."""
    kernels: Count | None = None
    """Kernels Inductor generated (`torch._inductor.metrics.generated_kernel_count`); null where it was not loaded."""
    unavailable: dict[str, str] | UnsetType = UNSET
    """What could not be read, by part, with why (e.g. kernels built in Inductor's worker processes)."""
