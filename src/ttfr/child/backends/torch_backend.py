"""PyTorch backend: eager or `torch.compile`, on CPU or CUDA.

For `torch.compile` the first call is split with `torch._dynamo.utils.compile_times`
(an internal API, so every figure is derived defensively and the raw table is kept):
dynamo = compile_inner - call_user_compiler; inductor = compile_fx_inner (forward and the
lazily compiled backward) + AOTAutogradCache.inductor_load (a cache hit's load);
AOTAutograd = the rest of call_user_compiler; Triton autotuning = the autotuner's benchmarking
of a kernel's configs at its first launch (and the build of the config it chose), which
happens inside the first execution on CUDA; first execution = what remains of the first call
once wrapping, dynamo, the lazy backward and autotuning are taken out.
"""

import time

from ttfr.child import hostinfo
from ttfr.child.job import ARTIFACT_LOAD, ARTIFACT_MAKE
from ttfr.child.backends import torch_cuda_device


# Triton's CachingAutotuner at a kernel's first launch (torch/_inductor/runtime/triton_heuristics.py)
_AUTOTUNE_TIMERS = (
    "CachingAutotuner.benchmark_all_configs",
    "CachingAutotuner.coordinate_descent_tuning",
    "CachingAutotuner.combo_sequential_autotune",
    "CachingAutotuner.slow_precompile_config",
)


# Inductor's timers around a compiler's run (torch/_inductor/cpp_builder.py: each g++ call)
COMPILER_TIMERS = ("compile_file",)


def _split_compile_times(table, first_call_s, wrap_s):
    if "_compile.compile_inner" not in table:
        return {}
    dynamo_total = table["_compile.compile_inner"]
    user_compiler = table.get("OutputGraph.call_user_compiler", 0.0)
    inductor_all = table.get("compile_fx_inner", 0.0)
    backward_inductor = table.get("compile_fx.<locals>.bw_compiler", 0.0)
    backward_total = table.get("backward._backward_impl", backward_inductor)
    cache_load = table.get("AOTAutogradCache.inductor_load", 0.0)
    forward_inductor = inductor_all - backward_inductor
    autotuned = [name for name in _AUTOTUNE_TIMERS if name in table]
    autotune = sum(table[name] for name in autotuned)
    split = {
        "dynamo_s": max(0.0, dynamo_total - user_compiler),
        "aot_autograd_s": max(0.0, user_compiler - forward_inductor - cache_load) + max(0.0, backward_total - backward_inductor),
        "inductor_s": inductor_all + cache_load,
        "first_execute_s": max(0.0, first_call_s - wrap_s - dynamo_total - backward_total - autotune),
    }
    if "backward._backward_impl" in table or "compile_fx.<locals>.bw_compiler" in table:
        split["backward_compile_s"] = backward_total  # only when a backward graph was compiled
    if autotuned:  # only where a kernel had configs to choose from (Triton; C++ kernels have none)
        split["autotune_s"] = autotune
    return split


class Runtime:
    framework = "torch"

    def __init__(self, job):
        self.job = job
        self.on_gpu = job.device == "gpu"
        self.compiles = job.compile
        self.call = None
        self.args = ()
        self.sync = None
        self.compile_table = None
        # a GPU's context, allocator and cuBLAS handle are made in a timed phase of their own (device_init)
        self.init_device = self._init_gpu if self.on_gpu else None
        self.device_peak = self._device_peak if self.on_gpu else None  # a CPU has no device memory to read
        self._process_peak = 0  # the largest peak read before a reset (device_peak)
        self.explainer = None  # --explain's process: what torch.compile did in the first call
        # A precompiled policy (child/precompiled.py): what a run loaded (a callable that stands for torch.compile's;
        # None: the mechanism fills torch's caches and the first call compiles from them), and in the priming
        # process the functions the workload compiled with the arguments of their first call (what aot_compile and
        # AOTInductor take).
        self.loaded = None
        self.artifact_loaded = False
        self.compiled_sources: list[list] = []
        if job.explain and job.compile:
            from ttfr.child.torch_explain import CompileExplainer

            self.explainer = CompileExplainer(self.on_gpu)

    def import_stack(self):
        if self.explainer:  # before torch: Inductor's build hooks are set as its modules load
            self.explainer.install()
        import torch

        self.torch = torch
        if self.explainer:
            self.explainer.start(torch)
        # full float32 matmuls, said rather than assumed (catalog: matmul_precision), on CPU and CUDA alike;
        # 'high' (TF32) only for the declared TF32 variant
        torch.set_float32_matmul_precision("high" if self.job.variant == "tf32" else "highest")
        self.device = torch.device("cpu")
        self.dtype = getattr(torch, self.job.dtype)

    def _init_gpu(self):
        """torch makes its CUDA context at the first tensor on the device (else in setup) and cuBLAS
        its handle and workspace at the first matmul (else in the first call): both here, timed."""
        torch = self.torch
        self.device = torch_cuda_device(torch)
        torch.cuda.current_blas_handle()
        torch.cuda.synchronize()
        self.sync = self._cuda_sync

    def _cuda_sync(self, _output):
        self.torch.cuda.synchronize()

    def device_info(self):
        if self.on_gpu:
            cuda = self.torch.cuda
            return {"platform": "gpu", "kind": cuda.get_device_name(0), "count": cuda.device_count()}
        return {"platform": "cpu", "kind": hostinfo.cpu_model() or "unknown", "count": 1}

    def put(self, host_inputs):
        tensors = [self.torch.from_numpy(x).to(self.device) for x in host_inputs]
        if self.sync:
            self.sync(tensors)
        return tensors

    def first_call(self, workload, inputs):
        clock = time.perf_counter_ns
        wrap_ns = 0
        torch = self.torch

        def compile_fn(fn):
            nonlocal wrap_ns
            start = clock()
            if self.explainer:  # --explain: the imports torch.compile(fn) makes are charged to it
                with self.explainer.span("wrap"):
                    compiled = self.compile(fn)
            else:
                compiled = self.compile(fn)
            wrap_ns += clock() - start
            return compiled

        if self.explainer:
            self.explainer.first_call_starts()
        t0 = clock()
        call, args = workload.torch_build(torch, compile_fn if self.compiles else (lambda fn: fn), inputs)
        output = call(*args)
        if self.sync:
            self.sync(output)
        t1 = clock()
        self.call, self.args = call, tuple(args)
        first_call_s, wrap_s = (t1 - t0) / 1e9, wrap_ns / 1e9
        if not self.compiles:
            return output, {"first_execute_s": first_call_s}
        from torch._dynamo.utils import compile_times

        names, values = compile_times(repr="csv", aggregate=True)
        self.compile_table = {n: float(v) for n, v in zip(names, values)}
        stages = {"wrap_s": wrap_s}
        stages.update(_split_compile_times(self.compile_table, first_call_s, wrap_s))
        if "first_execute_s" not in stages:  # nothing traced (a loaded function ran): the call is its execution
            stages["first_execute_s"] = max(0.0, first_call_s - wrap_s)
        return output, stages

    def compile(self, fn, **options):
        """torch.compile(fn, **options), as the run needs it. A precompiled policy's run: what its artifact loaded
        stands for it (a user's case builds its function in setup, before the load: the choice waits for the first
        call); a mechanism that filled torch's caches loads nothing, and torch.compile runs on them. The priming
        process: the function and its first call's arguments are kept for the mechanism."""
        torch = self.torch
        if not self._stands_for_compile():  # none, or Mega-Cache (it fills the caches torch.compile reads)
            return torch.compile(fn, **options)
        if self.job.artifact_action == ARTIFACT_LOAD and not self.artifact_loaded:
            chosen = []

            def loaded_or_compiled(*args, **kwargs):
                if not chosen:
                    chosen.append(self.loaded if self.loaded is not None else torch.compile(fn, **options))
                return chosen[0](*args, **kwargs)

            return loaded_or_compiled
        if self.loaded is not None:
            return self.loaded
        compiled = torch.compile(fn, **options)
        return self._captured(fn, compiled, options) if self.job.artifact_action == ARTIFACT_MAKE else compiled

    def _stands_for_compile(self) -> bool:
        """The run's mechanism loads a function that stands for torch.compile(fn) (or, making one, needs the
        function and its arguments)."""
        if not self.job.precompiled:
            return False
        from ttfr.child.precompiled import MECHANISMS

        return MECHANISMS[self.job.precompiled].stands_for_compile

    def _captured(self, fn, compiled, options):
        """The priming process of a precompiled policy: the function and its first call's arguments, kept for the
        mechanism that compiles it again ahead of time (an unmeasured process: the wrapper costs nothing measured)."""
        source = [fn, None, options]
        self.compiled_sources.append(source)

        def first_arguments_kept(*args, **kwargs):
            if source[1] is None:
                source[1] = (args, kwargs)
            return compiled(*args, **kwargs)

        return first_arguments_kept

    def load_precompiled(self, loaded):
        """A precompiled policy's run: the callable the workload's torch.compile(fn) gets instead (None: the
        mechanism filled torch's caches, and torch.compile runs as usual on them)."""
        self.loaded = loaded
        self.artifact_loaded = True

    def to_host(self, output):
        return [t.detach().cpu().numpy().copy() for t in output]

    def cache_counters(self):
        if not self.compiles:
            return None
        from torch._dynamo.utils import counters

        from torch._dynamo.utils import compilation_time_metrics

        wanted = ("inductor", "aot_autograd", "stats", "graph_break", "frames")
        return {
            "counters": {k: {str(n): int(c) for n, c in counters[k].items()} for k in wanted if k in counters},
            "compile_times_s": self.compile_table or {},
            # each run of the C++ compiler Inductor timed (g++: a kernel, a header, a vector-ISA probe), its seconds
            "compiler_runs_s": {
                name: [float(v) for v in compilation_time_metrics.get(name, [])]
                for name in COMPILER_TIMERS
                if compilation_time_metrics.get(name)
            },  # fmt: skip
        }

    def explain_compile(self):
        """--explain: the first call's compiled frames, graph breaks and compiler runs, read after its mark (None: not
        compiled)."""
        if not self.explainer:
            return None
        evidence = self.explainer.evidence(self.on_gpu)
        evidence["build_guards_s"] = (self.compile_table or {}).get("build_guards")  # inside dynamo's time
        return evidence

    def compile_counts(self, _functions):
        """Graphs dynamo compiled, frames it traced, persistent-cache (FX graph / AOT
        autograd) hits, and compile seconds so far (a loop workload's timeline). Dynamo
        counts every compiled function of the process: a loop's own are all there are."""
        if not self.compiles:
            return None
        from torch._dynamo.utils import compilation_time_metrics, compile_times, counters

        names, values = compile_times(repr="csv", aggregate=True)
        table = {n: float(v) for n, v in zip(names, values)}
        # A backward graph compiled lazily, at the first .backward(), is timed outside
        # compile_inner; one compiled with the forward (dynamic shapes) is inside it.
        backward = table.get("backward._backward_impl", 0.0)
        # A graph with a backward served from the cache counts one AOT-autograd hit and an FX
        # graph hit for each of its forward and backward: count graphs, not artifacts.
        autograd_hits = int(counters["aot_autograd"].get("autograd_cache_hit", 0))
        packaged = compilation_time_metrics.get("AotCodeCompiler.compile", [])  # AOTInductor packages built
        return {
            "compiles": int(counters["stats"].get("unique_graphs", 0)) + len(packaged),
            "persistent_hits": autograd_hits or int(counters["inductor"].get("fxgraph_cache_hit", 0)),
            "traces": int(counters["frames"].get("total", 0)),
            "compile_s": table.get("_compile.compile_inner", 0.0) + backward + float(sum(packaged)),
        }

    def _device_peak(self):
        """The device's peak allocated bytes since the last reading, which resets it: the first
        call's compile and autotuning buffers apart from the steady state."""
        cuda = self.torch.cuda
        peak = int(cuda.max_memory_allocated())
        cuda.reset_peak_memory_stats()
        self._process_peak = max(self._process_peak, peak)
        return peak

    def memory(self):
        if not self.on_gpu:
            return {}
        self.device_peak()
        return {"device_peak_bytes": self._process_peak, "device_peaks_reset": True}

    def versions(self):
        info = {"torch": self.torch.__version__, "torch_threads": self.torch.get_num_threads()}
        if self.on_gpu:
            info["torch_cuda"] = self.torch.version.cuda
        return info
