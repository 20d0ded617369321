"""JAX compilation-cache event counting, shared by the JAX and pyhf (JAX variant) adapters.
Standard library only: imported by the worker before the runtime is."""

COUNTED_EVENTS = (
    "/jax/compilation_cache/cache_hits",
    "/jax/compilation_cache/cache_misses",
    "/jax/compilation_cache/compile_requests_use_cache",
)
_HIT = "/jax/compilation_cache/cache_hits"
_TRACE = "/jax/core/compile/jaxpr_trace_duration"
_LOWER = "/jax/core/compile/jaxpr_to_mlir_module_duration"
# Fires once per executable built: compiled, or loaded from the persistent cache (then it is
# the load time), after that request's cache-hit event on the same thread.
_BACKEND = "/jax/core/compile/backend_compile_duration"


_STAGE = {_TRACE: "trace_s", _LOWER: "lower_s", _BACKEND: "backend_s"}


def _bare(fun_name):
    """`jit(f)` -> `f`: trace events name the function, lowering and compile events its jit."""
    return fun_name[4:-1] if fun_name.startswith("jit(") and fun_name.endswith(")") else fun_name


class EventCounter:
    """Counts JAX's compilation-cache events, sums its compile-stage durations, and keeps
    per function (the events' `fun_name`) its traces, executables built, persistent-cache
    hits among them, and stage seconds."""

    def __init__(self):
        self.events = {}
        self.durations = {}
        self.functions = {}
        self._hit_pending = False

    def register(self, jax):
        # Registered before anything can compile, so the counts cover the whole run.
        jax.monitoring.register_event_listener(self._on_event)
        jax.monitoring.register_event_duration_secs_listener(self._on_duration)

    def _on_event(self, event, **_kwargs):
        if event in COUNTED_EVENTS:
            self.events[event] = self.events.get(event, 0) + 1
        if event == _HIT:
            self._hit_pending = True

    def _on_duration(self, event, duration, **kwargs):
        self.durations[event] = self.durations.get(event, 0.0) + duration
        if event not in (_TRACE, _LOWER, _BACKEND):
            return
        hit, name = False, kwargs.get("fun_name")
        if event == _BACKEND:
            hit, self._hit_pending = self._hit_pending, False
        if not isinstance(name, str):
            return
        counts = self.functions.setdefault(_bare(name), {"traces": 0, "compiles": 0, "hits": 0, "compile_s": 0.0,
                                                         "trace_s": 0.0, "lower_s": 0.0, "backend_s": 0.0})  # fmt: skip
        counts["compile_s"] += duration
        counts[_STAGE[event]] += duration
        if event == _TRACE:
            counts["traces"] += 1
        elif event == _BACKEND:
            counts["compiles"] += 1
            counts["hits"] += hit

    def function_counts(self, names=None):
        """Totals over the functions named `names` (`vmap(f)` counts as `f`); None: every function."""

        def wanted(name):
            return names is None or any(name == w or name.endswith(f"({w})") for w in names)

        mine = [c for name, c in self.functions.items() if wanted(name)]
        return {
            "compiles": sum(c["compiles"] for c in mine),
            "persistent_hits": sum(c["hits"] for c in mine),
            "traces": sum(c["traces"] for c in mine),
            "compile_s": sum(c["compile_s"] for c in mine),
        }

    def snapshot(self):
        return {"events": dict(self.events), "durations_s": dict(self.durations),
                "programs": {name: dict(counts) for name, counts in self.functions.items()}}  # fmt: skip
