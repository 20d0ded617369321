"""Runtime adapters used inside the worker process (one module per runtime).

Every module here imports only the standard library at module level: the runtime itself
is imported inside `Runtime.import_stack`, which the worker times as `import_s`.
"""


class Unavailable(Exception):
    """The backend cannot run here (missing dependency, no GPU): a `warn`, not a failure."""


class GpuInitFailed(RuntimeError):
    """A GPU is there (its device nodes are) but the runtime could not use it: a driver/plugin
    mismatch, a CPU-only build. An error, never a quiet `warn` with exit 0."""


def first_line(cause, limit: int = 300, empty: str = "") -> str:
    """An exception's (or a text's) first line, as a reason quotes a library's words."""
    return (str(cause).strip().splitlines() or [empty])[0][:limit]


def device_out_of_memory(exc) -> bool:
    """torch.cuda.OutOfMemoryError (torch.OutOfMemoryError), or XLA's RESOURCE_EXHAUSTED (JAX): the run's oom."""
    return type(exc).__name__ == "OutOfMemoryError" or (
        type(exc).__name__ in ("XlaRuntimeError", "JaxRuntimeError") and "RESOURCE_EXHAUSTED" in str(exc))  # fmt: skip


def gpu_unusable(framework: str, cause: str) -> Exception:
    """What a failed GPU initialisation is: `gpu_unavailable` with its cause's first line where
    this machine has no GPU, an error (GpuInitFailed) where it has one."""
    from ttfr.child import hostinfo

    first = first_line(cause, empty="no reason given")
    if hostinfo.gpu_device_nodes():
        return GpuInitFailed(f"a GPU is present but {framework} could not use it: {first}")
    return Unavailable(f"gpu_unavailable: {first}")


def torch_cuda_device(torch):
    """torch's first CUDA device with its context made (the first tensor on it), or gpu_unusable's why."""
    if not torch.cuda.is_available():
        raise gpu_unusable("PyTorch", f"torch.cuda.is_available() is False (torch {torch.__version__}, "
                           f"built for CUDA {torch.version.cuda or 'none: a CPU-only build'})")  # fmt: skip
    torch.cuda.init()
    device = torch.device("cuda", 0)
    torch.empty(1, device=device)
    return device


def jax_gpu_devices(jax) -> list:
    """JAX's GPU devices (asking for them makes the contexts), or gpu_unusable's why."""
    try:
        return jax.devices("gpu")
    except RuntimeError as exc:
        raise gpu_unusable("JAX", exc) from exc


class EngineRuntime:
    """Shared by adapters whose workloads build a whole engine object in setup (pyhf,
    NextStat): `put` keeps it, the first call asks the workload for the timed call."""

    framework = ""

    def __init__(self, job):
        self.job = job
        self.sync = None
        self.call = None
        self.args = ()
        self.engine = None

    def device_info(self):
        from ttfr.child import hostinfo

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
        return None

    def memory(self):
        return {}
