"""JAX backend (`jax.jit`) on CPU or GPU, with the first call split by AOT stage.

The first call runs `jax.jit(f).trace(*args).lower().compile()` and then executes the
`Compiled` object, timing each stage; AOT and the ordinary jit call share one executable
cache, so later calls go through `jit(f)(*args)` (the user's path) and compile nothing.
"""

import time

from ttfr.child import hostinfo
from ttfr.child.backends import gpu_unusable
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
        self.sync = None
        self.ready = None

    def import_stack(self):
        import jax

        self.jax = jax
        if self.job.dtype == "float64":
            jax.config.update("jax_enable_x64", True)
        # full float32 arithmetic, as torch keeps it (catalog: matmul_precision): XLA's GPU default is TF32
        jax.config.update("jax_default_matmul_precision", "highest")
        if self.job.inline_cpu and not self.on_gpu:  # before the CPU client exists
            jax.config.update("jax_cpu_enable_async_dispatch", False)
        self.counter.register(jax)
        platform = "gpu" if self.on_gpu else "cpu"
        try:
            self.devices = jax.devices(platform)
        except RuntimeError as exc:
            if self.on_gpu:
                raise gpu_unusable("JAX", exc) from exc
            raise
        self.device = self.devices[0]
        self.sync = jax.block_until_ready
        self.ready = self._ready

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
        clock = time.perf_counter_ns
        t0 = clock()
        # A workload may build its function from its inputs (and call it with other arguments).
        build = getattr(workload, "jax_build", None)
        function, inputs = build(self.jax, inputs) if build else (workload.jax_fn(self.jax), inputs)
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
        stats = self.device.memory_stats()  # None on CPU
        if stats and "peak_bytes_in_use" in stats:
            result["device_peak_bytes"] = stats["peak_bytes_in_use"]
        return result

    def versions(self):
        import jaxlib

        return {"jax": self.jax.__version__, "jaxlib": jaxlib.__version__}
