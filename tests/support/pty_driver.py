"""`ttfr` with fake executors, for the pseudo-terminal tests: `python tests/support/pty_driver.py ARGS`
runs `ttfr ARGS` as the command line would, but every measured run is answered by a fake
(tests/support/fakes.py), so the live display, the summaries and every command's terminal output run
without starting a worker. TTFR_FAKE picks the machine the fake measures on: `plain` (default),
`loops` (loop workloads' timelines), `contended` (every run waited for a CPU)."""

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: support.*, and conftest for the fakes

from support.fakes import FakeExecutor  # noqa: E402
from support.fixture_suite import FixedHost  # noqa: E402

from ttfr.commands import cli  # noqa: E402
from ttfr.measure.executors import Executors  # noqa: E402


class ContendedExecutor(FakeExecutor):
    """Every run and warm sample waited for a CPU while other work used one."""

    def answer(self, job, call, entries, jax_dir):
        record, process_ns = super().answer(job, call, entries, jax_dir)
        record["sched"] = {"runq_wait_s": 0.2}
        if record.get("warm"):
            evidence = record["warm"]["sample_evidence"]
            evidence["runq_wait_s"] = [0.008] * len(evidence["wall_s"])
            evidence["others_cpu_s"] = 0.1 * len(evidence["wall_s"])
        return record, process_ns


def executors() -> Executors:
    """The fakes, on a machine whose readings around each run are fixed (no /proc/stat: a run's own
    wait for a CPU decides whether it was contended)."""
    kind = os.environ.get("TTFR_FAKE", "plain")
    if kind == "loops":
        from test_loops import LoopExecutor

        return Executors(worker=LoopExecutor(), host=FixedHost)
    return Executors(worker=ContendedExecutor() if kind == "contended" else FakeExecutor(), host=FixedHost)


if __name__ == "__main__":
    sys.exit(cli.main(sys.argv[1:], executors=executors()))
