"""NumPy backend: eager, synchronous, no compilation cache."""

from ttfr.child import hostinfo


class Runtime:
    framework = "numpy"
    sync = None  # NumPy returns finished arrays

    def __init__(self, job):
        self.job = job
        self.call = None
        self.args = ()

    def import_stack(self):
        import numpy

        self.np = numpy

    def device_info(self):
        return {"platform": "cpu", "kind": hostinfo.cpu_model() or "unknown", "count": 1}

    def put(self, host_inputs):
        return list(host_inputs)

    def first_call(self, workload, inputs):
        self.call, self.args = workload.numpy_fn(self.np), tuple(inputs)
        return self.call(*self.args), {}

    def to_host(self, output):
        return [self.np.array(x, copy=True) for x in output]

    def cache_counters(self):
        return None

    def memory(self):
        return {}

    def versions(self):
        return {"numpy": self.np.__version__}
