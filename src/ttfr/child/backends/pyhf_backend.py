"""pyhf 0.7 with its NumPy, JAX or PyTorch tensor backend (job word `variant`).

`pyhf.set_backend` belongs to the timed import phase (it initialises the backend); the
workspace and model are built in the timed setup by the workload's engine. The import
phase imports no other ttfr module: what it would cost is ttfr's, not pyhf's.

pyhf's fits run at FIT_TOLERANCE: SciPy's default (ftol 1e-6) stops ~2e-4 short in q0 at
184 parameters, which fails the parity gate and makes finite differences of q0 noise.
"""

from ttfr.child.backends import EngineRuntime
from ttfr.child.backends.jax_events import EventCounter

FIT_TOLERANCE = 1e-10


def set_backend(pyhf, variant: str) -> None:
    """pyhf's tensor backend in float64 with ttfr's fit tolerance."""
    pyhf.set_backend(variant, pyhf.optimize.scipy_optimizer(tolerance=FIT_TOLERANCE), precision="64b")


class Runtime(EngineRuntime):
    framework = "pyhf"

    def __init__(self, job):
        super().__init__(job)
        self.variant = job.variant
        self.events = EventCounter() if self.variant == "jax" else None

    def import_stack(self):
        import pyhf

        if self.variant == "jax":
            import jax

            jax.config.update("jax_enable_x64", True)
            self.events.register(jax)
            self.sync = jax.block_until_ready
        set_backend(pyhf, self.variant)
        self.pyhf = pyhf

    def cache_counters(self):
        return self.events.snapshot() if self.events else None

    def compile_counts(self, functions):
        """With the JAX backend: what pyhf's jit compiled (a loop's timeline), else None."""
        return self.events.function_counts(functions) if self.events else None

    def versions(self):
        info = {"pyhf": self.pyhf.__version__}
        if self.variant == "jax":
            import jax

            info["jax"] = jax.__version__
        elif self.variant == "pytorch":
            import torch

            info["torch"] = torch.__version__
        return info
