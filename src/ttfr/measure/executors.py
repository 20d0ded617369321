"""What runs the measured processes, as one object the pipeline passes down: a worker for a
built-in or user's case, a user's command and its --prepare, and the host's readings around
each run. Real by default; a test gives fakes with known costs and outcomes (hyperfine's mock
executor), so every display and command path runs without starting a worker."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ttfr.child import hostinfo
from ttfr.measure.command_run import run_command, run_prepare
from ttfr.measure.spawn import run_worker


@dataclass(frozen=True)
class Executors:
    worker: Callable = run_worker  # (job, env, timeout_s, python) -> RunResult
    command: Callable = run_command  # (command, env, timeout_s) -> RunResult
    prepare: Callable = run_prepare  # (command, env, timeout_s) -> why it failed, or None
    host: object = hostinfo  # load_average, cpu_pressure, cpu_times, runnable_tasks, usable_cpus

    @property
    def starts_workers(self) -> bool:
        """Whether real workers run (ttfr's own bytecode is compiled before them)."""
        return self.worker is run_worker


REAL = Executors()
