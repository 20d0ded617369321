"""--explain for torch.compile, in the diagnostic process only: what the first call compiled and why.

- Frames: `torch._dynamo.utils.get_compilation_metrics()`, one row per compiled frame (a function,
  the rest of one after a graph break, a recompile) and per lazily compiled backward graph, with
  its compile seconds, its FX graph and AOTAutograd cache outcomes and its recompile reason.
- Graph breaks: dynamo's own `graph_breaks` log records ("Graph break in user code at FILE:LINE",
  "Graph Break Reason: ..."), kept verbatim (the worker's parent redacts every record's text).
- Spans: `torch.compile(fn)` (`wrap`) and each of dynamo's compiles (`compile`, from its start and
  end callbacks) are marked on stderr among -X importtime's lines, so an import is charged to the
  span it happened in, and the first call's other imports to its first execution.
- Compiler runs: each run of the C++ compiler, timed at Inductor's build hook
  (`cpp_builder._run_compile_cmd`) and told apart by what asked for it: the vector-ISA probes
  (`VecISA.check_build`), the precompiled header, or a kernel; and each ISA probe's dlopen in a
  subprocess (`VecISA._probe_load`). The hooks are set as Inductor's modules load (an import
  hook), so no module is imported earlier than the run would import it. Kernels build on
  Inductor's compile threads, so their runs can overlap.
- On a GPU, Triton's kernels: each kernel's compile in Inductor's worker processes as the runtime itself
  counts it (`async_compile._add_triton_kernel_info`, its `compile_time_us`), and each run of ptxas within it,
  timed by a wrapper the workers run (child/ptxas_timing.py).

Standard library only at import: the worker imports this before torch.
"""

import contextlib
import importlib.abc
import logging
import os
import re
import sys
import time

_BUILDER = "torch._inductor.cpp_builder"
_VEC_ISA = "torch._inductor.cpu_vec_isa"
_CALLBACKS = "torch._dynamo.callback"
_ASYNC_COMPILE = "torch._inductor.async_compile"
SPAN_MARKER = b"ttfr-span "  # as measure/import_trace.py reads it
_BREAK = re.compile(r"Graph break (?:\([^)]*\) )?in user code at (?P<file>.+?):(?P<line>\d+)\n"
                    r"Graph Break Reason: (?P<reason>.*?)(?:\nUser code traceback:|\Z)", re.S)  # fmt: skip
MAX_REASON = 2000  # characters of one reason kept (a break's hints can run long)
MAX_ROWS = 200  # frames, breaks or compiler runs kept: a model recompiling in a loop makes thousands


# The loggers that say why the FX graph cache or the AOTAutograd cache was bypassed (at INFO: "Bypassing FX Graph
# Cache because '...'", "Bypassing autograd cache due to: ...")
CACHE_LOGGERS = ("torch._inductor.codecache", "torch._functorch._aot_autograd.autograd_cache")


class _Logs(logging.Handler):
    """Keeps the messages of dynamo's graph-break log, and the caches' bypass reasons."""

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.breaks = []
        self.bypasses = []

    def emit(self, record):
        if record.name.endswith("__graph_breaks") and len(self.breaks) < MAX_ROWS:
            self.breaks.append(record.getMessage())
        elif record.name in CACHE_LOGGERS and len(self.bypasses) < MAX_ROWS:
            text = record.getMessage()
            if text.startswith("Bypassing"):
                self.bypasses.append(text[:MAX_REASON])


class _PatchingLoader(importlib.abc.Loader):
    """Delegates to the module's own loader, then patches the module (the loader itself is left as it was)."""

    def __init__(self, loader, patch):
        self.loader, self.patch = loader, patch

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        self.loader.exec_module(module)
        self.patch(module)

    def __getattr__(self, name):  # get_source, get_data, resource readers: the module's own loader's
        return getattr(self.loader, name)


class _PatchOnLoad(importlib.abc.MetaPathFinder):
    """Runs `patch(module)` right after the named module executes, wherever it is first imported."""

    def __init__(self, patches):
        self.patches = patches

    def find_spec(self, name, path=None, target=None):
        if name not in self.patches:  # (it stays on sys.meta_path: the import system is iterating over it)
            return None
        patch = self.patches.pop(name)
        spec = _next_spec(self, name, path, target)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        spec.loader = _PatchingLoader(spec.loader, patch)
        return spec


def _next_spec(finder, name, path, target):
    """The spec the finders after `finder` give."""
    for other in list(sys.meta_path):
        if other is finder or not hasattr(other, "find_spec"):
            continue
        spec = other.find_spec(name, path, target)
        if spec is not None:
            return spec
    return None


class CompileExplainer:
    """Collects the evidence above from before torch is imported until the first call has returned. Nothing here
    may fail the process: a hook that cannot be set, or evidence that cannot be read, is `unavailable` with why."""

    def __init__(self, on_gpu=False):
        self.on_gpu = on_gpu
        self.runs = []
        self.triton_kernels = []
        self.ptxas = None
        self.dropped_runs = 0
        self.dropped_kernels = 0
        self.logs = _Logs()
        self.unavailable = {}
        self.finder = None
        self.first_call_us = None  # the first call's start on the wall clock dynamo stamps frames with

    def install(self):
        patches = {_BUILDER: self._hook_builder, _VEC_ISA: self._hook_isa, _CALLBACKS: self._hook_callbacks}
        if self.on_gpu:  # Triton's kernels: the runtime's per-kernel figure, and ptxas's runs in its workers
            patches[_ASYNC_COMPILE] = self._hook_triton_kernels
            from ttfr.child.ptxas_timing import PtxasTimer

            self.ptxas = PtxasTimer()
            self.ptxas.install()
        patches = {name: self._guarded(name, hook) for name, hook in patches.items()}
        for name in list(patches):
            if name in sys.modules:
                patches.pop(name)(sys.modules[name])
        if patches:
            self.finder = _PatchOnLoad(patches)
            sys.meta_path.insert(0, self.finder)

    def _guarded(self, name, hook):
        def patch(module):
            try:
                hook(module)
            except Exception as error:  # another torch than this was written for: that part is unavailable
                self.unavailable[name] = f"its hook could not be set ({type(error).__name__}: {error})"[:300]

        return patch

    def start(self, torch):
        """After `import torch`: dynamo's graph-break log on, into this process's memory (and stderr)."""
        try:
            torch._logging.set_logs(graph_breaks=True)
            logging.getLogger("torch._dynamo").addHandler(self.logs)
        except Exception as error:
            self.unavailable["graph_breaks"] = f"dynamo's graph-break log could not be read ({error})"[:300]
        for name in CACHE_LOGGERS:  # their INFO records reach this handler (an unmeasured process: its stderr may show them)
            cache_log = logging.getLogger(name)
            cache_log.addHandler(self.logs)
            if cache_log.getEffectiveLevel() > logging.INFO:
                cache_log.setLevel(logging.INFO)

    def first_call_starts(self):
        self.first_call_us = time.time_ns() // 1000

    @contextlib.contextmanager
    def span(self, name):
        """Marks a span on stderr among -X importtime's lines (`ttfr-span <name>+` ... `<name>-`, each on a line of
        its own even after a partial line): the imports between are charged to it (measure/import_trace.py)."""
        os.write(2, b"\n" + SPAN_MARKER + name.encode() + b"+\n")
        try:
            yield
        finally:
            os.write(2, b"\n" + SPAN_MARKER + name.encode() + b"-\n")

    def _hook_callbacks(self, module):
        """Dynamo's compile start and end (the outermost, a lazy backward's too) mark the `compile` span."""
        handler = module.callback_handler
        handler.register_start_callback(lambda *_: os.write(2, b"\n" + SPAN_MARKER + b"compile+\n"))
        handler.register_end_callback(lambda *_: os.write(2, b"\n" + SPAN_MARKER + b"compile-\n"))

    def _hook_builder(self, module):
        run = module._run_compile_cmd

        def timed(cmd_line, cwd):
            kind = _asker(sys._getframe(1))
            with self._timed(kind):
                return run(cmd_line, cwd)

        module._run_compile_cmd = timed

    def _hook_triton_kernels(self, module):
        """Each Triton kernel's compile as Inductor counts it (`compile_time_us`: in a worker process, or in this one
        with one compile thread), when its result reaches this process."""
        add = module._add_triton_kernel_info

        def counted(kernel_name, info):
            if len(self.triton_kernels) < MAX_ROWS:
                us = info.get("compile_time_us") if isinstance(info, dict) else None
                self.triton_kernels.append({"name": str(kernel_name)[:200], "compile_s": _microseconds(us),
                                            "at_us": time.time_ns() // 1000})  # fmt: skip
            else:
                self.dropped_kernels += 1
            return add(kernel_name, info)

        module._add_triton_kernel_info = counted

    def _hook_isa(self, module):
        probe = module.VecISA._probe_load
        explainer = self

        def timed(isa, *args, **kwargs):
            with explainer._timed("isa_load_probe"):
                return probe(isa, *args, **kwargs)

        module.VecISA._probe_load = timed

    @contextlib.contextmanager
    def _timed(self, kind):
        """A run's seconds, and its span on the wall clock dynamo stamps its frames with (time.time_ns, in us): a
        run inside a frame's span is part of that frame's compile."""
        start, wall = time.perf_counter_ns(), time.time_ns()
        try:
            yield
        finally:
            seconds = (time.perf_counter_ns() - start) / 1e9
            if len(self.runs) < MAX_ROWS:
                self.runs.append({"kind": kind, "s": seconds, "start_us": wall // 1000,
                                  "end_us": wall // 1000 + int(seconds * 1e6)})  # fmt: skip
            else:
                self.dropped_runs += 1

    def evidence(self, on_gpu):
        """What the first call compiled (frames and runs from its start on), read after it."""
        unavailable = dict(self.unavailable)
        pending = [name for name in (self.finder.patches if self.finder else ()) if name in sys.modules]
        for name in pending:  # loaded past the hook (another finder first): its runs are not timed
            unavailable[name] = "loaded without its hook (another import finder ran first)"
        try:
            from torch._dynamo.utils import get_compilation_metrics

            frames = [_frame(m) for m in get_compilation_metrics() if not getattr(m, "is_runtime", False)]
        except Exception as error:
            frames = []
            unavailable["frames"] = f"dynamo's compilation metrics could not be read ({error})"[:300]
        since = self.first_call_us
        frames = [f for f in frames if since is None or f["start_us"] is None or f["start_us"] >= since][:MAX_ROWS]
        runs = [r for r in self.runs if since is None or r["start_us"] >= since]
        breaks = [b for b in (_graph_break(text) for text in self.logs.breaks) if b]
        for name in ("torch._dynamo", *CACHE_LOGGERS):
            logging.getLogger(name).removeHandler(self.logs)
        metrics = sys.modules.get("torch._inductor.metrics")
        if self.dropped_runs:
            unavailable["compiler_runs"] = f"only the first {MAX_ROWS} runs are kept: {self.dropped_runs} more ran"
        triton = [k for k in self.triton_kernels if since is None or k["at_us"] >= since]
        if self.dropped_kernels:
            unavailable["triton_kernels"] = f"only the first {MAX_ROWS} kernels are kept: {self.dropped_kernels} more"
        if on_gpu:
            # the CPU ISA probe is a CPU kernel's: a CUDA case never runs it, so its hook is no part missing
            # (torch 2.11 on an H200 has no VecISA._probe_load)
            unavailable.pop(_VEC_ISA, None)
            runs += self._ptxas_runs(since, triton, unavailable, room=max(0, MAX_ROWS - len(runs)))
        return {"frames": frames, "graph_breaks": breaks, "compiler_runs": runs, "cache_bypasses": list(self.logs.bypasses),
                "kernels": getattr(metrics, "generated_kernel_count", None) if metrics else None,
                "triton_kernels": [{"name": k["name"], "compile_s": k["compile_s"]} for k in triton],
                "unavailable": unavailable}  # fmt: skip

    def _ptxas_runs(self, since, triton, unavailable, room):
        """ptxas's runs from the first call on; where none reached the wrapper although Triton compiled kernels, why
        that may be (never a zero taken for a figure)."""
        if self.ptxas is None or self.ptxas.unavailable:
            unavailable["ptxas_runs"] = self.ptxas.unavailable if self.ptxas else "not set up"
            return []
        try:
            runs = self.ptxas.runs(since)
        except Exception as error:  # noqa: BLE001 - an unreadable log is a part missing, not a failed process
            unavailable["ptxas_runs"] = f"the wrapper's log could not be read ({type(error).__name__}: {error})"[:300]
            return []
        if len(runs) > room:  # kept are counted; the rest said, never a lower figure without a word
            unavailable["ptxas_runs"] = f"only the first {room} runs are kept: {len(runs) - room} more ran"
            return runs[:room]
        if triton and not any(r["kind"] == "ptxas" for r in runs):
            unavailable["ptxas_runs"] = (f"no ptxas run reached the wrapper at {', '.join(self.ptxas.wrapped)} while "
                                         f"Triton compiled {len(triton)} kernels: they came from Triton's cache, or "
                                         "Triton ran another ptxas")  # fmt: skip
        return runs


def _asker(frame):
    """What asked for a C++ build: an ISA probe, the precompiled header, else a kernel."""
    while frame is not None:
        name = frame.f_code.co_name
        if name == "check_build":
            return "isa_probe"
        if name == "_precompile_header":
            return "header"
        frame = frame.f_back
    return "kernel"


def _seconds(value):
    return float(value) if isinstance(value, (int, float)) else None


def _microseconds(value):
    return value / 1e6 if isinstance(value, (int, float)) else None


def _count(value):
    return int(value) if isinstance(value, int) else None


def _frame(m):
    reasons = sorted(str(r)[:MAX_REASON] for r in (getattr(m, "restart_reasons", None) or ()))
    return {
        "compile_id": getattr(m, "compile_id", None),
        "function": getattr(m, "co_name", None),
        "file": getattr(m, "co_filename", None),
        "line": _count(getattr(m, "co_firstlineno", None)),
        "forward": getattr(m, "is_forward", True) is not False,
        # a backward graph's compile (AOTAutograd and Inductor) is its own cumulative figure
        "compile_s": _seconds(getattr(m, "entire_frame_compile_time_s", None))
        if getattr(m, "is_forward", True) is not False
        else _microseconds(getattr(m, "backward_cumulative_compile_time_us", None)),
        "inductor_s": _seconds(getattr(m, "inductor_compile_time_s", None)),
        "graph_ops": _count(getattr(m, "graph_op_count", None)),
        "guards": _count(getattr(m, "guard_count", None)),
        "recompile_reason": getattr(m, "recompile_reason", None),
        "break_reasons": reasons[:8],
        "fx_cache_hits": _count(getattr(m, "inductor_fx_local_cache_hit_count", None)),
        "fx_cache_misses": _count(getattr(m, "inductor_fx_local_cache_miss_count", None)),
        "autograd_cache_hits": _count(getattr(m, "aotautograd_local_cache_hit_count", None)),
        "autograd_cache_misses": _count(getattr(m, "aotautograd_local_cache_miss_count", None)),
        "start_us": _count(getattr(m, "start_time_us", None)),
        "end_us": _count(getattr(m, "end_time_us", None)),
    }


def _graph_break(text):
    found = _BREAK.search(text)
    if not found:
        return None
    return {"file": found["file"], "line": int(found["line"]), "reason": found["reason"].strip()[:MAX_REASON]}
