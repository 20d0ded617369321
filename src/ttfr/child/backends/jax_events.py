"""JAX compilation-cache event counting, shared by the JAX and pyhf (JAX variant) adapters.
Standard library only: imported by the worker before the runtime is."""

COUNTED_EVENTS = (
    "/jax/compilation_cache/cache_hits",
    "/jax/compilation_cache/cache_misses",
    "/jax/compilation_cache/compile_requests_use_cache",
)


class EventCounter:
    """Counts JAX's compilation-cache events and sums its compile-stage durations."""

    def __init__(self):
        self.events = {}
        self.durations = {}

    def register(self, jax):
        # Registered before anything can compile, so the counts cover the whole run.
        jax.monitoring.register_event_listener(self._on_event)
        jax.monitoring.register_event_duration_secs_listener(self._on_duration)

    def _on_event(self, event, **_kwargs):
        if event in COUNTED_EVENTS:
            self.events[event] = self.events.get(event, 0) + 1

    def _on_duration(self, event, duration, **_kwargs):
        self.durations[event] = self.durations.get(event, 0.0) + duration

    def snapshot(self):
        return {"events": dict(self.events), "durations_s": dict(self.durations)}
