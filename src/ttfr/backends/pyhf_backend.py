"""pyhf 0.7 with its NumPy, JAX or PyTorch tensor backend (job word `variant`).

`pyhf.set_backend` belongs to the timed import phase (it initialises the backend); the
workspace and model are built in the timed setup by the workload's engine.
"""

from ttfr import hostinfo
from ttfr.backends.jax_backend import EventCounter


class Runtime:
    framework = "pyhf"

    def __init__(self, job):
        self.job = job
        self.variant = job["variant"]
        self.sync = None
        self.call = None
        self.args = ()
        self.engine = None
        self.events = EventCounter() if self.variant == "jax" else None

    def import_stack(self):
        import pyhf

        if self.variant == "jax":
            import jax

            jax.config.update("jax_enable_x64", True)
            self.events.register(jax)
            self.sync = jax.block_until_ready
        from ttfr.workloads.histfactory.pyhf_engine import set_backend

        set_backend(pyhf, self.variant)
        self.pyhf = pyhf

    def device_info(self):
        return {"platform": "cpu", "kind": hostinfo.cpu_model() or "unknown", "count": 1}

    def put(self, engine):
        self.engine = engine
        return engine

    def first_call(self, workload, engine):
        self.call, self.args = workload.engine_build(self, engine)
        output = self.call(*self.args)
        if self.sync is not None:
            self.sync(output)
        return output, {}

    def to_host(self, output):
        return self.engine.to_host(output)

    def cache_counters(self):
        return self.events.snapshot() if self.events else None

    def memory(self):
        return {}

    def versions(self):
        info = {"pyhf": self.pyhf.__version__}
        if self.variant == "jax":
            import jax

            info["jax"] = jax.__version__
        elif self.variant == "pytorch":
            import torch

            info["torch"] = torch.__version__
        return info
