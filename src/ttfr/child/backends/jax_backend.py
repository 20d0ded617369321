"""JAX backend (`jax.jit`) on CPU or GPU, with the first call split by AOT stage.

The first call runs `jax.jit(f).trace(*args).lower().compile()` and then executes the
`Compiled` object, timing each stage; AOT and the ordinary jit call share one executable
cache, so later calls go through `jit(f)(*args)` (the user's path) and compile nothing.
"""

import time

from ttfr.child import hostinfo
from ttfr.child.backends import jax_gpu_devices
from ttfr.child.backends.jax_events import EventCounter

_MEMORY_FIELDS = (
    "argument_size_in_bytes",
    "output_size_in_bytes",
    "temp_size_in_bytes",
    "alias_size_in_bytes",
    "generated_code_size_in_bytes",
)


class Runtime:
    framework = "jax"

    def __init__(self, job):
        self.job = job
        self.on_gpu = job.device == "gpu"
        self.counter = EventCounter()
        self.call = None
        self.args = ()
        self.compiled = None
        self.loaded = None  # a precompiled policy's loaded executable (child/precompiled.py)
        self.sync = None
        self.ready = None
        # a GPU's context and memory pool are made in a timed phase of their own (the worker's device_init)
        self.init_device = self._init_gpu if self.on_gpu else None
        self.device_peak = self._device_peak if self.on_gpu else None  # a CPU has no device memory to read
        self.cache_log = None

    def explain_cache(self):
        """--explain: what JAX said of its caches in the first call (None: not asked)."""
        return self.cache_log.messages if self.cache_log else None

    def import_stack(self):
        import jax

        self.jax = jax
        if self.job.dtype == "float64":
            jax.config.update("jax_enable_x64", True)
        # full float32 arithmetic, as torch keeps it (catalog: matmul_precision): XLA's GPU default is TF32,
        # which the declared TF32 variant asks for by name
        jax.config.update("jax_default_matmul_precision", "tensorfloat32" if self.job.variant == "tf32" else "highest")
        if self.job.inline_cpu and not self.on_gpu:  # before the CPU client exists
            jax.config.update("jax_cpu_enable_async_dispatch", False)
        self.counter.register(jax)
        if self.job.explain:  # --explain's process: JAX's own words on its caches (read in the first call)
            from ttfr.child.jax_cache_log import CacheLog  # only here: every measured process pays the module

            self.cache_log = CacheLog.start_for(jax)
        self.sync = jax.block_until_ready
        self.ready = self._ready
        if not self.on_gpu:  # the CPU client is part of the stack's import, as it always was
            self.devices = jax.devices("cpu")
            self.device = self.devices[0]

    def _init_gpu(self):
        """JAX creates a context on every visible GPU (the worker sees one) when its backends are
        first asked for, and reserves its memory pool (XLA_PYTHON_CLIENT_PREALLOCATE) at the first
        transfer: both here, rather than spread over import and setup."""
        import numpy

        self.devices = jax_gpu_devices(self.jax)
        self.device = self.devices[0]
        self.jax.device_put(numpy.zeros(1, numpy.float32), self.device).block_until_ready()

    def _device_peak(self):
        """The device's peak bytes in use so far. XLA cannot reset its peak, so each reading is
        cumulative from the process's start (said in the record: peaks_reset False)."""
        stats = self.device.memory_stats()
        return stats.get("peak_bytes_in_use") if stats else None

    def _ready(self, output):
        """Has every array of `output` finished? Never waits (the warm sync check's probe)."""
        return all(leaf.is_ready() for leaf in self.jax.tree_util.tree_leaves(output) if hasattr(leaf, "is_ready"))

    def device_info(self):
        kind = self.device.device_kind
        if not self.on_gpu and kind == "cpu":
            kind = hostinfo.cpu_model() or kind
        return {"platform": self.device.platform, "kind": kind, "count": len(self.devices)}

    def put(self, host_inputs):
        arrays = [self.jax.device_put(x, self.device) for x in host_inputs]
        return self.jax.block_until_ready(arrays)

    def first_call(self, workload, inputs):
        if not self.cache_log:
            return self._first_call(workload, inputs)
        self.cache_log.start()
        try:
            return self._first_call(workload, inputs)
        finally:  # a first call that raised keeps what JAX said up to it
            self.cache_log.stop()

    def load_precompiled(self, loaded):
        """A precompiled policy's run: the first call runs this (a loaded executable) instead of compiling."""
        self.loaded = loaded

    def _first_call(self, workload, inputs):
        clock = time.perf_counter_ns
        t0 = clock()
        # A workload may build its function from its inputs (and call it with other arguments).
        build = getattr(workload, "jax_build", None)
        function, inputs = build(self.jax, inputs) if build else (workload.jax_fn(self.jax), inputs)
        if self.loaded is not None:  # nothing to trace, lower or compile: what was loaded runs, and every later call
            t1 = clock()
            output = self.jax.block_until_ready(self.loaded(*inputs))
            self.call, self.args = self.loaded, tuple(inputs)
            if hasattr(self.loaded, "memory_analysis"):  # a loaded executable (an exported function has none)
                self.compiled = self.loaded
            return output, {"wrap_s": (t1 - t0) / 1e9, "first_execute_s": (clock() - t1) / 1e9}
        # A user's case may hand over a function it jitted itself (its own jit options).
        jitted = function if hasattr(function, "trace") and hasattr(function, "lower") else self.jax.jit(function)
        t1 = clock()
        traced = jitted.trace(*inputs)
        t2 = clock()
        lowered = traced.lower()
        t3 = clock()
        compiled = lowered.compile()
        t4 = clock()
        output = self.jax.block_until_ready(compiled(*inputs))
        t5 = clock()
        self.call, self.args, self.compiled = jitted, tuple(inputs), compiled
        stages = {
            "wrap_s": (t1 - t0) / 1e9,
            "trace_s": (t2 - t1) / 1e9,
            "lower_s": (t3 - t2) / 1e9,
            "compile_s": (t4 - t3) / 1e9,
            "first_execute_s": (t5 - t4) / 1e9,
        }
        return output, stages

    def to_host(self, output):
        import numpy

        return [numpy.array(x, copy=True) for x in self.jax.tree_util.tree_leaves(output)]

    def cache_counters(self):
        return self.counter.snapshot()

    def compile_counts(self, functions):
        """Executables built (compiled or loaded from the persistent cache), hits, traces and
        stage seconds of the named functions (a loop workload's own)."""
        return self.counter.function_counts(functions)

    def memory(self):
        result = {}
        analysis = self.compiled.memory_analysis() if self.compiled is not None else None
        if analysis is not None:
            result["compiled"] = {f: getattr(analysis, f) for f in _MEMORY_FIELDS if hasattr(analysis, f)}
        peak = self.device_peak() if self.device_peak else None
        if peak is not None:
            result["device_peak_bytes"] = peak
            result["device_peaks_reset"] = False
        return result

    def versions(self):
        import jaxlib

        return {"jax": self.jax.__version__, "jaxlib": jaxlib.__version__}
