"""Conversions between runtimes (issue 28): the route's libraries are imported in the timed import
phase (NumPy, and PyTorch and/or JAX as the route needs), a GPU's context in device_init; the
workload (`convert`) builds the source in setup and the call is the route itself.

A route into JAX waits on `block_until_ready` (device_put is asynchronous), one into CUDA memory
on `torch.cuda.synchronize()`; NumPy and CPU torch conversions return finished arrays.
"""

from ttfr.child import hostinfo
from ttfr.child.backends import Unavailable, device_out_of_memory, first_line, jax_gpu_devices, torch_cuda_device
from ttfr.child.conversion_routes import ROUTES


class Runtime:
    framework = "interop"

    def __init__(self, job):
        self.job = job
        self.route = ROUTES.get(job.strategy)  # checked when the stack is imported
        self.on_gpu = job.device == "gpu"
        self.framework = "interop_gpu" if self.on_gpu else "interop"  # the host<->device routes are the GPU's
        self.np = self.torch = self.jax = None
        self.device = self.jax_device = None
        self.call, self.args, self.sync = None, (), None
        self.init_device = self._init_gpu if self.on_gpu else None

    def import_stack(self):
        if self.route is None:
            raise ValueError(f"no conversion route {self.job.strategy!r}; routes: {', '.join(ROUTES)}")
        import numpy

        self.np = numpy
        libraries = self.route.libraries
        if self.job.dtype == "bfloat16":
            import ml_dtypes  # noqa: F401 - NumPy's bfloat16 (a missing one is a missing dependency)
        if "torch" in libraries:
            import torch

            self.torch = torch
            self.device = torch.device("cpu")
        if "jax" in libraries:
            import jax

            self.jax = jax
            if self.job.dtype == "float64":
                jax.config.update("jax_enable_x64", True)
            if not self.on_gpu:
                self.jax_device = jax.devices("cpu")[0]
        kinds = (self.route.source, self.route.destination)
        if any(k.startswith("jax") for k in kinds):
            self.sync = self._block
        if any(k in ("torch_cuda", "torch_pinned") for k in kinds):
            self.sync = self._cuda_sync if self.sync is None else self._both

    def _init_gpu(self):
        if self.torch is not None:
            self.device = torch_cuda_device(self.torch)
        if self.jax is not None:
            self.jax_device = jax_gpu_devices(self.jax)[0]

    def _block(self, output):
        self.jax.block_until_ready(output)

    def _cuda_sync(self, _output):
        self.torch.cuda.synchronize()

    def _both(self, output):
        self._block(output)
        self._cuda_sync(output)

    def device_info(self):
        if self.on_gpu and self.torch is not None:
            return {"platform": "gpu", "kind": self.torch.cuda.get_device_name(0), "count": 1}
        if self.on_gpu and self.jax_device is not None:
            return {"platform": "gpu", "kind": self.jax_device.device_kind, "count": 1}
        return {"platform": "cpu", "kind": hostinfo.cpu_model() or "unknown", "count": 1}

    def put(self, sources):
        if self.sync is not None:
            self.sync(sources)
        return sources

    def first_call(self, workload, inputs):
        self.call, self.args = workload.route_call(self, inputs[0]), (inputs[0],)
        try:
            output = self.call(*self.args)
        except MemoryError:
            raise
        except Exception as exc:  # noqa: BLE001 - a route is one library call: its exception is the library refusing
            if device_out_of_memory(exc):
                raise  # a device's memory: the run's oom
            raise Unavailable(f"refused: {type(exc).__name__}: {first_line(exc)}") from exc
        if self.sync is not None:
            self.sync(output)
        return output, {}

    def to_host(self, output):
        from ttfr.child.workloads import convert

        return [convert.to_float64(self, output)]

    def cache_counters(self):
        return None

    def memory(self):
        return {}

    def versions(self):
        versions = {"numpy": self.np.__version__}
        if self.torch is not None:
            versions["torch"] = self.torch.__version__
        if self.jax is not None:
            import jaxlib

            versions.update(jax=self.jax.__version__, jaxlib=jaxlib.__version__)
        return versions
