"""--explain's evidence: the raw trace of one diagnostic process (`ImportTrace`, journaled
as it was read from `python -X importtime`), and what analysis makes of it for a cold policy
(`Explanation`, in the case file): each phase's imports by distribution and module, against
the phase's measured median.
"""

from __future__ import annotations

from typing import Literal

from ttfr.model.base import UNSET, Artifact, Count, Fraction, Seconds, UnsetType

# The spans of a process's life an import can fall in, in order, as the worker marks them.
PHASES = ("interpreter", "import", "device_init", "user_import", "setup", "artifact_load", "first_call", "second_call",
          "after")  # fmt: skip
Phase = Literal[PHASES]  # type: ignore[valid-type]
UNATTRIBUTED = "unattributed"  # a module no installed distribution (nor the standard library) owns


class TracedImport(Artifact):
    """One module's first import, as `-X importtime` reported it."""

    module: str
    """The module's dotted name."""
    phase: Phase
    """The phase of the process it was imported in (between the worker's marks)."""
    depth: Count
    """How deep in the import tree it was imported: 0 is an import the phase's own code made; 1 an import that
    module made while it was being imported, and so on (a count of levels)."""
    self_s: Seconds
    """Seconds spent importing this module itself, its own imports excluded."""
    cumulative_s: Seconds
    """Seconds spent importing this module and every module it imported first."""
    span: Literal["wrap", "compile"] | None = None
    """torch.compile's diagnostic process: the span of the phase it was imported in — `wrap` (torch.compile(fn)),
    `compile` (one of dynamo's compiles); null outside both (for the first call: its first execution)."""


class ImportTrace(Artifact):
    """Every module a diagnostic process imported, in order, with the distribution of each top-level
    package (absent: the runtime gave none)."""

    imports: list[TracedImport]
    """Each module's first import, in the order the interpreter reported them (a module after the modules it
    imported)."""
    distributions: dict[str, list[str | None]] | UnsetType = UNSET
    """Each imported top-level package's installed distribution and version, `[name, version]`: `python` for the
    standard library; a package no distribution installs is absent."""


class DistributionTime(Artifact):
    """A distribution's share of a phase's imports."""

    distribution: str
    """The installed distribution (`jaxlib`, `torch`, `python` for the standard library), `unattributed` for
    modules no distribution owns, or `other` for the rest beyond the table."""
    version: str | None
    """Its installed version; null for `unattributed`, `other`, or a distribution without one."""
    self_s: Seconds
    """Seconds its modules spent importing themselves in the phase (their self times summed)."""
    modules: Count
    """How many of its modules were first imported in the phase (a count)."""


class ModuleTime(Artifact):
    """One of a phase's costliest imports."""

    module: str
    """The module's dotted name."""
    distribution: str
    """The distribution it belongs to (`unattributed`: none)."""
    self_s: Seconds
    """Seconds spent importing this module itself."""
    cumulative_s: Seconds
    """Seconds spent importing it with every module it imported first."""
    imported_by: str | None
    """The module whose import first imported it; null for an import the phase's own code made."""
    span: Literal["wrap", "compile"] | None = None
    """torch.compile's diagnostic process: the span it was imported in (`wrap`: torch.compile(fn); `compile`: one of
    dynamo's compiles); null outside both (in the first call: its first execution)."""


class PhaseImports(Artifact):
    """One phase of the cold start: its measured median and the imports the diagnostic process made in it."""

    phase: Phase
    """The phase (`import`, `setup`, `first_call`, ...), as the case's components name it without `_s`."""
    measured_s: Seconds | None
    """The phase's median over the policy's runs (seconds; the component of the same name); null where the policy
    has no figure for it (withheld, or not a measured component)."""
    imports_s: Seconds
    """Seconds the diagnostic process spent importing in the phase: its top-level imports' cumulative times
    summed."""
    share: float | None
    """imports_s as a fraction of measured_s (a ratio: above 1 when the traced process was slower); null without
    a measured figure."""
    modules: Count
    """How many modules were first imported in the phase (a count)."""
    distributions: list[DistributionTime]
    """The distributions whose modules cost the most self time in the phase, largest first, then `other` for the
    rest: the rows add up to imports_s."""
    top_modules: list[ModuleTime]
    """The phase's costliest modules by cumulative time, largest first (at most 8)."""


class CompiledProgram(Artifact):
    """One program the first call compiled (JAX: a jitted function), as the runtime's events name it."""

    name: str
    """The function's name as the runtime reports it (`jit(f)` as `f`)."""
    traces: Count
    """How many times the first call traced it (a count)."""
    executables: Count
    """How many executables the first call built for it, compiled or loaded (a count)."""
    trace_s: Seconds
    """Seconds spent tracing it."""
    lower_s: Seconds
    """Seconds spent lowering it."""
    compile_s: Seconds
    """Seconds the compiler spent on it (on a persistent-cache hit: loading it)."""
    persistent_cache: Literal["hit", "written", "not_written", "miss"]
    """What the persistent cache did with it: `hit` (loaded), `written` (compiled and stored), `not_written`
    (compiled, stored nowhere), or `miss` where the runtime's unnamed events cannot say which of its misses were
    stored."""
    default_settings_skip: bool | None
    """Whether JAX's default settings (`jax_persistent_cache_min_compile_time_secs` = 1.0 s; ttfr sets 0) would
    never store it, as it compiled in under a second; null for a hit (no compile time to judge)."""


class CompiledFrame(Artifact):
    """One graph torch.compile's first call compiled (dynamo's frame, or a backward graph), with what its caches did."""

    compile_id: str | None
    """Dynamo's id, `frame/attempt` (`0/1`: frame 0's first recompile); a backward graph shares its forward's."""
    function: str | None
    """The compiled code's name (`torch_dynamo_resume_in_f_at_12`: the rest of `f` after a graph break at line 12);
    null for a backward graph."""
    file: str | None
    """The file of the compiled code; null for a backward graph."""
    line: Count | None
    """The compiled code's first line in that file (a line number, its position in the file); null for a backward graph."""
    forward: bool
    """False for a backward graph, compiled at the first backward pass."""
    compile_s: Seconds | None
    """Seconds from dynamo's start on the frame to its compiled code (tracing, AOTAutograd, Inductor); for a backward
    graph its AOTAutograd and Inductor seconds."""
    inductor_s: Seconds | None
    """Seconds Inductor spent on it, its compiler runs included."""
    fx_graph_cache: Literal["hit", "miss", "partial"] | None
    """What Inductor's FX graph cache did: `hit`, `miss` (compiled and stored), `partial` (some of its graphs hit);
    null where the runtime did not say (the cache off, or a graph Inductor did not compile)."""
    autograd_cache: Literal["hit", "miss", "partial"] | None
    """What the AOTAutograd cache did, as for fx_graph_cache."""
    recompile_reason: str | None
    """For a recompile, the guard that failed, as dynamo says it; null for a first compile."""


class GraphBreak(Artifact):
    """A graph break in the first call, where dynamo says it is and why."""

    file: str
    """The user's file the break is in."""
    line: Count
    """The line in that file (a line number, its position in the file)."""
    summary: str
    """The reason in one line: dynamo's `Explanation:` line where it gives one, else its first line past the
    preamble."""
    reason: str
    """Dynamo's reason, verbatim (redacted)."""


class FirstCallPart(Artifact):
    """One part of the diagnostic process's first call."""

    part: str
    """What it is: torch.compile's `torch.compile(fn)` (its wrap stage: mostly imports), `dynamo and AOTAutograd`,
    `inductor`, a kind of compiler run inside the compile (`compiler: kernel`, `compiler: isa_probe`,
    `compiler: isa_load_probe`, `compiler: header`) or after it (`compiler: isa_load_probe, after the compile`),
    `imports, first execution` (the first call's imports outside torch.compile(fn) and dynamo's compiles); JAX's
    `jax.jit(fn)` (its wrap stage), its programs' `trace`, `lower`, `compile` and its `first execution` (the execute
    stage); or `unattributed`, what no counter names (execution, dispatch)."""
    s: Seconds
    """Its seconds."""
    share: Fraction
    """s as a fraction of the first call's traced seconds (0-1; 0 for a first call of no measurable length)."""
    runs: Count | None
    """For a compiler run kind, how many runs (a count); null for the others."""


class TritonKernelBuilt(Artifact):
    """One Triton kernel the first call compiled (a GPU), with the ptxas runs that built it."""

    kernel: str
    """Inductor's name for it, or `other` for the kernels past the costliest (their figures summed)."""
    kernels: Count
    """How many kernels the row holds (1, or the `other` row's count)."""
    compile_s: Seconds | None
    """Seconds its compile took in Inductor's worker process (Triton's whole pipeline, ptxas included), by
    Inductor's own count; the workers compile in parallel, inside the frames' Inductor seconds. Null where torch
    gave none."""
    ptxas_s: Seconds | None
    """Seconds of the ptxas runs that built it (timed one by one); null where no ptxas run named it (a kernel
    from Triton's cache, or ptxas not timed: see `unavailable`)."""
    ptxas_runs: Count
    """How many ptxas runs built it."""


class FirstCallExplained(Artifact):
    """The diagnostic process's first call, split by the runtime's own counters into parts that add up to it."""

    traced_s: Seconds
    """The diagnostic process's first call (seconds, from its marks)."""
    parts: list[FirstCallPart]
    """Its parts, the last `unattributed`: they add up to traced_s. A compiler run's
    seconds are inside Inductor's (shown apart from the rest of Inductor's); kernels built on parallel threads can
    overlap, so where they add up to more than Inductor's seconds, Inductor's own part is 0."""
    attributed_fraction: Fraction
    """The share of traced_s the named parts explain (0-1)."""
    imports_s: Seconds
    """Seconds of imports first made during the first call (they happen inside the parts above, mostly the
    compile)."""
    kernels: Count | None
    """Kernels Inductor generated (a count; torch.compile); null elsewhere."""
    stage: str | None
    """The measured first-call stage the compile parts are checked against: `compile_s` for JAX,
    `dynamo_s+aot_autograd_s+inductor_s` (their sum, run by run) for torch.compile; null where none was measured."""
    stage_traced_s: Seconds | None
    """The diagnostic process's figure for that stage from the runtime's counters (the programs' compile seconds, or
    the frames' compile seconds, forward and backward)."""
    stage_measured_s: Seconds | None
    """The stage's median over the policy's runs; outside their range widened by 25% the explanation is flagged
    `explanation_disagrees`."""
    guards: Count | None = None
    """Guards dynamo built for the graphs of the first call (the frames' guard counts summed; torch.compile); null
    elsewhere."""
    build_guards_s: Seconds | None = None
    """Seconds dynamo spent building them (inside dynamo's part; torch.compile); null where not reported."""
    triton_kernels: list[TritonKernelBuilt] = []
    """The Triton kernels compiled in the first call (torch.compile on a GPU), costliest first, at most ten and an
    `other` row; empty where none was."""
    triton_compile_s: Seconds | None = None
    """All of their compile seconds, worker time summed (more than the wall time where workers ran in parallel);
    null where no kernel had a figure."""


class Explanation(Artifact):
    """Where a cold policy's imports went (`ttfr run --explain`), from one unmeasured diagnostic process run
    with `-X importtime` on the policy's cache."""

    outcome: str
    """How the diagnostic process ended (`ok`, or its failure: then no phase is explained), or `not_applicable`: a
    --command that is no Python program reports no import."""
    reason: str | None
    """Why it failed, or why imports do not apply; null when ok."""
    phases: list[PhaseImports]
    """Each phase that imported anything, in the order of a process's life (empty when the process failed)."""
    traced_import_s: Seconds | None
    """The diagnostic process's own import phase, measured by its marks (seconds): against the policy's median,
    what tracing the imports cost (or that it ran on a different machine state)."""
    traced_ttfr_s: Seconds | None
    """The diagnostic process's own time to first result (spawn to its first result, seconds, with -X importtime's
    cost in it): outside the policy's runs' range widened by 25% it explains another run, flagged
    `explanation_disagrees` (phase `ttfr`)."""
    import_ratio: float | None
    """The traced import phase's imports over the policy's measured `import_s` median (a ratio: 1.0 is all of it
    explained); beyond ±20% the explanation is flagged `explanation_disagrees`."""
    unattributed_fraction: Fraction | None
    """The fraction of the import phase's traced import time no distribution owns (a share, 0-1)."""
    programs: list[CompiledProgram] | UnsetType = UNSET
    """The programs the diagnostic process's first call compiled, costliest first (JAX); absent where the runtime
    names none (NumPy, eager torch, torch.compile: see frames)."""
    frames: list[CompiledFrame] | UnsetType = UNSET
    """torch.compile: every frame and backward graph the first call compiled, in order; absent elsewhere."""
    graph_breaks: list[GraphBreak] | UnsetType = UNSET
    """torch.compile: every graph break in the first call, in order; absent elsewhere."""
    first_call: FirstCallExplained | UnsetType = UNSET
    """The diagnostic process's first call split into the runtime's parts (JAX's programs, torch.compile's frames and
    compiler runs), the rest unattributed; absent where nothing was compiled."""
    unavailable: dict[str, str] | UnsetType = UNSET
    """Parts the runtime did not expose here, with why (e.g. Triton's kernels, built in worker processes)."""
    cache_bypasses: list[str] | UnsetType = UNSET
    """torch.compile: why the FX graph cache or the AOTAutograd cache was bypassed in the first call, in torch's
    words; absent where neither was."""
    cache_log: list[str] | UnsetType = UNSET
    """The runtime's own words about its caches in the first call, verbatim (JAX's `jax_explain_cache_misses`: a
    tracing cache miss and why, a persistent-cache miss or hit, a program written or not and why)."""


class Advice(Artifact):
    """One thing this run's own evidence says would shorten the case's cold start (`--explain`), with its size."""

    kind: Literal["warm_cache", "default_cache_skip", "import_share", "graph_break", "recompile"]
    """What the evidence is: `warm_cache` — the saving the warm-cache policy measured against the cold one;
    `default_cache_skip` — a program JAX's default settings would never store, so a user's own job compiles it in
    every process; `import_share` — a distribution whose imports are a large share of the cold start; `graph_break`
    — a graph break in the user's code, whose resumed graph torch.compile compiled apart; `recompile` — a function
    torch.compile compiled again in the first call, with the guard that failed."""
    subject: str
    """What it is about: the policy pair, the program's name, the distribution (with its version), the graph break's
    reason in one line, or the recompiled function with its reason."""
    saving_s: Seconds
    """The size in seconds: the median saving measured, the program's trace, lower and compile time, the
    distribution's import time, or the compile seconds of the graphs the break or the recompile added."""
    share_of_ttfr: float | None
    """saving_s as a fraction of the case's cold-cache TTFR median (a ratio); null without that figure."""
    interval_s: list[float] | None
    """For a measured saving, a conservative interval of it in seconds (the cold median's low bound less the warm
    one's high bound, and the reverse); null for the others, which are one process's figures."""
    location: str | None = None
    """For a graph break or a recompile, the user's `file:line`; null for the others."""
