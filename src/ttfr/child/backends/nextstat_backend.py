"""NextStat's Rust core (PyPI CPU wheel): synchronous, no persistent compilation cache.
For the training loop torch belongs to the stack too (NextStat's torch layer)."""

from ttfr.child.backends import EngineRuntime


class Runtime(EngineRuntime):
    framework = "nextstat"

    def import_stack(self):
        import nextstat

        if self.job.workload in ("hf_train_loop", "hf_train20"):  # the training workloads (module names)
            import nextstat.torch  # noqa: F401 - imports torch
        self.nextstat = nextstat

    def versions(self):
        import importlib.metadata

        return {"nextstat": importlib.metadata.version("nextstat")}
