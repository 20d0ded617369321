"""ttfr's own time in one run, phase by phase (`ttfr run --verbose`): what the harness costs
beyond the processes it runs. The phases are wall time on this process's clock; the start-up
(interpreter and imports, known when the `ttfr` command started this process) is given by the
command."""

from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass, field


@dataclass
class Costs:
    started: float = field(default_factory=time.monotonic)
    startup_s: float | None = None  # interpreter + ttfr's imports, before `started`
    phases: list[tuple[str, float]] = field(default_factory=list)
    worker_lives_s: float = 0.0  # spawn to exit of the workers this session ran (not --prepare's)
    processes: int = 0
    alongside_s: float | None = None  # ttfr's work done while an unmeasured process ran

    def timed_alongside(self, work, *args) -> None:
        began = time.monotonic()
        try:
            work(*args)
        finally:
            self.alongside_s = time.monotonic() - began

    @contextmanager
    def phase(self, name: str):
        began = time.monotonic()
        try:
            yield
        finally:
            self.phases.append((name, time.monotonic() - began))

    def lines(self) -> list[str]:
        """One line per phase, the measured processes beside the scheduling around them, and the
        total with ttfr's own share of it."""
        out = []
        if self.startup_s is not None:
            out.append(f"start-up (interpreter and ttfr's imports) {self.startup_s:7.3f} s")
        for name, seconds in self.phases:
            out.append(f"{name:<42}{seconds:7.3f} s")
            if name == "runs" and self.processes:
                label = f"  of which its {self.processes} processes' lives"
                out.append(f"{label:<42}{self.worker_lives_s:7.3f} s")
            if name == "runs" and self.alongside_s is not None:
                label = "  ttfr's imports beside unmeasured runs"
                out.append(f"{label:<42}{self.alongside_s:7.3f} s")
        total = (self.startup_s or 0.0) + time.monotonic() - self.started
        runs = sum(seconds for name, seconds in self.phases if name == "runs")
        own = total - min(self.worker_lives_s, runs)  # a process lives within the runs' wall time
        out.append(f"{'total':<42}{total:7.3f} s (ttfr's own: {own:.3f} s, {own / total:.0%})" if total > 0 else "")
        return [line for line in out if line]
