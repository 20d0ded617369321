"""Pure-Python backend: no runtime stack at all (used by the `noop` workload)."""

from ttfr.child import hostinfo


class Runtime:
    framework = "python"
    sync = None  # calls are synchronous

    def __init__(self, job):
        self.job = job
        self.call = None
        self.args = ()

    def import_stack(self):
        pass

    def device_info(self):
        return {"platform": "cpu", "kind": hostinfo.cpu_model() or "unknown", "count": 1}

    def put(self, host_inputs):
        return list(host_inputs)

    def first_call(self, workload, inputs):
        self.call, self.args = workload.python_fn(), tuple(inputs)
        return self.call(*self.args), {}

    def to_host(self, output):
        return []

    def cache_counters(self):
        return None

    def memory(self):
        return {}

    def versions(self):
        return {}
