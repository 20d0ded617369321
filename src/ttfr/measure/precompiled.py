"""Precompiled artifacts' mechanisms as a run knows them (issue 39): what each claims its load skips, which
backends offer it, and the check of that claim against what the runtime still compiled.

child/precompiled.py makes and loads each kind inside a worker; this module never imports a runtime.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ttfr.model.base import present
from ttfr.model.policies import precompiled_parts
from ttfr.model.record import RuntimeCounters
from ttfr.model.run_figures import CacheCheck, ClaimCheck, HitMiss


ANY = 2**31  # an allowance with no limit (Mega-Cache: dynamo traces every graph again, by design)
# torch: what the first call may still do is judged by torch's own counters and Inductor's compiler timers
MISSES = "cache misses"  # FX-graph and AOTAutograd cache misses: Inductor's or AOTAutograd's work redone
GRAPHS = "graphs compiled"  # dynamo's unique graphs: the function traced and compiled again
COMPILER = "compiler runs"  # Inductor's compile_file: g++ building a kernel, a header or a vector-ISA probe


def _jax_compiles(counters: RuntimeCounters | None):
    """JAX: each function's executables built (compiled, or loaded from the persistent cache) and XLA's seconds."""
    programs = counters.programs if counters is not None and present(counters.programs) else None
    if programs is None:
        return None
    built = {name: p.compiles for name, p in programs.items() if p.compiles}
    return built, sum(p.backend_s for p in programs.values() if p.compiles)


def _torch_compiles(counters: RuntimeCounters | None):
    """torch: graphs dynamo compiled, FX-graph and AOTAutograd cache misses, Inductor's compiler runs; the seconds
    are torch.compile's in the first call (dynamo's compile_inner and a lazy backward, which hold Inductor's and its
    compiler runs), or the compiler runs' where dynamo did not run (a loaded function probing the CPU's ISA)."""
    table = counters.counters if counters is not None and present(counters.counters) else None
    if table is None:
        return None
    graphs = int(table.get("stats", {}).get("unique_graphs", 0))
    misses = int(table.get("inductor", {}).get("fxgraph_cache_miss", 0))
    misses += int(table.get("aot_autograd", {}).get("autograd_cache_miss", 0))
    runs = counters.compiler_runs_s if present(counters.compiler_runs_s) else {}
    built = {name: n for name, n in ((GRAPHS, graphs), (MISSES, misses), (COMPILER, sum(map(len, runs.values()))))
             if n}  # fmt: skip
    times = counters.compile_times_s if present(counters.compile_times_s) else {}
    traced = float(times.get("_compile.compile_inner", 0.0)) + float(times.get("backward._backward_impl", 0.0))
    return built, traced or float(sum(sum(v) for v in runs.values()))


@dataclass(frozen=True)
class Mechanism:
    name: str
    # what its runtime's counters say the first call still built: ({what: how many}, seconds), None without them
    witness: Callable[[RuntimeCounters | None], tuple[dict[str, int], float] | None]
    skips: str  # what the artifact's load claims to skip, in a few words
    how: str  # how it does (`ttfr list`, every report: `claims`)
    # What the first call may still build and how many times (a program's name -> at most): anything else it
    # builds, or more of these, is compiling what the mechanism claims to skip.
    allowed: dict[str, int] = field(default_factory=dict)
    # The compiler processes the compile it allows may run, by name and how many at most, counted only where that
    # compile ran (jax.export's call wrapper, compiled by XLA: ptxas on a GPU); no other mechanism's load builds
    # code, so any other compiler process in its load is beyond its claim.
    allowed_processes: dict[str, int] = field(default_factory=dict)

    @property
    def claims(self) -> str:
        return f"{self.skips}: {self.how}"


JAX_SERIALIZED = Mechanism(
    "jax_serialized", _jax_compiles, "tracing, lowering and compiling",
    "the serialized executable (jax.experimental.serialize_executable) is loaded "
    "onto the device and runs; no program is built",
)  # fmt: skip
JAX_EXPORT = Mechanism(
    "jax_export", _jax_compiles, "tracing and lowering the function",
    "the exported StableHLO (jax.export) is deserialized and run through "
    "Exported.call, whose small wrapper is traced, lowered and compiled once (one backend compile expected)",
    allowed={"call_exported": 1}, allowed_processes={"ptxas": ANY},
)  # fmt: skip
TORCH_MEGACACHE = Mechanism(
    "torch_megacache", _torch_compiles, "AOTAutograd's and Inductor's work, kernel builds included",
    "torch.compiler.save_cache_artifacts' bytes are loaded into the run's caches (load_cache_artifacts); the first "
    "call runs torch.compile as usual and its FX-graph and AOTAutograd caches hit (dynamo still traces)",
    allowed={GRAPHS: ANY},
)  # fmt: skip
TORCH_AOT_COMPILE = Mechanism(
    "torch_aot_compile", _torch_compiles, "dynamo, AOTAutograd and Inductor",
    "torch.compile(fn, fullgraph=True).aot_compile's function (save_compiled_function) is loaded by "
    "torch.compiler.load_compiled_function and stands for torch.compile(fn); nothing is traced or compiled",
)  # fmt: skip
TORCH_AOTI = Mechanism(
    "torch_aoti", _torch_compiles, "everything but loading",
    "an AOTInductor package (torch.export.export, aoti_compile_and_package: a .pt2) is loaded by aoti_load_package "
    "and stands for torch.compile(fn); inference only",
)  # fmt: skip
MECHANISMS = {m.name: m for m in (JAX_SERIALIZED, JAX_EXPORT, TORCH_MEGACACHE, TORCH_AOT_COMPILE, TORCH_AOTI)}


def check_claim(mechanism: str, counters: RuntimeCounters | None,
                processes: tuple[dict[str, int], float] | None = None) -> ClaimCheck:  # fmt: skip
    """The run's first call against its mechanism's claim, from the runtime's counters right after it (JAX's
    programs: each function traced, built and hit by name) and the compiler processes the worker's tree showed
    from the load's start to the first result (`processes`: by name, and seconds; None: not watched). Only a
    mechanism whose allowed compile may run a compiler (jax.export's wrapper: ptxas on a GPU) allows one; every
    other claims to skip building code. `held` null: no counters to judge by (a compiler process seen is still
    beyond the claim)."""
    declared = MECHANISMS[mechanism]
    found = declared.witness(counters)
    seen = {"processes": processes[0], "processes_s": processes[1]} if processes is not None else {}
    built, seconds = found if found is not None else ({}, None)
    allowed = {name: n for name, n in built.items() if n <= declared.allowed.get(name, 0)}
    beyond = {name: n for name, n in built.items() if name not in allowed}
    spawned = _spawned_beyond(declared, processes[0] if processes else {}, allowed)
    if found is None:
        return ClaimCheck(mechanism=mechanism, held=False if spawned else None, compiled={}, allowed={}, compiles=0,
                          compile_s=None, **seen)  # fmt: skip
    return ClaimCheck(mechanism=mechanism, held=not beyond and not spawned, compiled=beyond, allowed=allowed,
                      compiles=sum(built.values()), compile_s=seconds, **seen)  # fmt: skip


def _spawned_beyond(declared: Mechanism, runs: dict[str, int], allowed: dict[str, int]) -> dict[str, int]:
    """The compiler processes beyond the claim: all of them, but those the mechanism's allowed compile may run,
    where that compile ran."""
    may = declared.allowed_processes if allowed else {}
    return {name: n for name, n in runs.items() if n > may.get(name, 0)}


def verify(policy: str, counts: HitMiss | None, entries_before: int, entries_after: int,
           first: RuntimeCounters | None, processes: tuple[dict[str, int], float] | None = None) -> CacheCheck:  # fmt: skip
    """A precompiled policy's run: its cache directory was what its setting says (emptied, or the template
    restored), and its first call compiled nothing its mechanism claims to skip (`first`: the runtime's counters
    right after it; `processes`: the compiler processes its tree showed during the load and the first call). A
    directory that was not is `flagged`; a load that compiled beyond the claim (or with no counters to tell) is
    `unverified`, with what compiled."""
    mechanism, setting = precompiled_parts(policy)
    claim = check_claim(mechanism, first, processes)
    flags = []
    if setting == "cold-cache" and entries_before:
        flags.append("cold_cache_not_empty")
    if setting == "warm-cache" and not entries_before:
        flags.append("warm_cache_empty")
    if claim.held is False:
        flags.append("artifact_recompiled")
    tree = _spawned_beyond(MECHANISMS[mechanism], processes[0], claim.allowed) if processes else {}
    spawned = f"; its process tree showed {_said(tree)}" if tree else ""
    if claim.held is None:
        note = "the worker reported no counters to check the mechanism's claim by"
    elif claim.held:
        note = f"{mechanism}: nothing compiled beyond what it allows ({_said(claim.allowed) or 'nothing'})"
    else:
        compiled = _said(claim.compiled) or "no program by the runtime's count"
        note = f"{mechanism} claims to skip {MECHANISMS[mechanism].skips}, yet the run compiled {compiled}{spawned}"
    verdict = "flagged" if set(flags) - {"artifact_recompiled"} else "verified" if claim.held else "unverified"
    found = {"hits": counts.hits, "misses": counts.misses, "counters": counts} if counts else {}
    return CacheCheck(verdict=verdict, flags=flags, entries_before=entries_before, entries_after=entries_after,
                      note=note, written=max(entries_after - entries_before, 0), claim=claim, **found)  # fmt: skip


def _said(built: dict[str, int]) -> str:
    return ", ".join(f"{name} x{n}" for name, n in sorted(built.items()))
