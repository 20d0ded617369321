"""NextStat's Rust core (PyPI CPU wheel): synchronous, no persistent compilation cache."""

from ttfr import hostinfo


class Runtime:
    framework = "nextstat"
    sync = None

    def __init__(self, job):
        self.job = job
        self.call = None
        self.args = ()
        self.engine = None

    def import_stack(self):
        import nextstat

        self.nextstat = nextstat

    def device_info(self):
        return {"platform": "cpu", "kind": hostinfo.cpu_model() or "unknown", "count": 1}

    def put(self, engine):
        self.engine = engine
        return engine

    def first_call(self, workload, engine):
        self.call, self.args = workload.engine_build(self, engine)
        return self.call(*self.args), {}

    def to_host(self, output):
        return self.engine.to_host(output)

    def cache_counters(self):
        return None

    def memory(self):
        return {}

    def versions(self):
        import importlib.metadata

        return {"nextstat": importlib.metadata.version("nextstat")}
