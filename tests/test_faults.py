"""The fast, safe half of the fault probes (benchmarks/faults.py) as tests: each runs ttfr's
real command line in real processes and also fails if it leaves a process running or an empty
result directory. The slow half (signals mid-run, kill -9, disk full, twin writers) runs with
`python benchmarks/faults.py`."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import faults  # noqa: E402

# Errors, exit codes and files: a probe reads no figure, so a busy machine cannot change its verdict.
pytestmark = [pytest.mark.integration, pytest.mark.contention_safe]
FAST = [p for p in faults.PROBES if p.fast]


@pytest.fixture(scope="module")
def baseline(tmp_path_factory):
    return faults.make_baseline(tmp_path_factory.mktemp("faults-baseline"))


def test_the_probe_set_is_whole():
    names = [p.name for p in faults.PROBES]
    assert len(names) == len(set(names))
    assert len(FAST) >= 40 and len(faults.PROBES) - len(FAST) >= 10


@pytest.mark.parametrize("probe", FAST, ids=[p.name for p in FAST])
def test_probe(probe, baseline, tmp_path):
    row = faults.run_probe(probe, tmp_path, baseline)
    if row["status"] == "skip":
        pytest.skip(row["observed"])
    assert row["status"] == "pass", f"{probe.name}: expected {probe.expected}; observed {row['observed']}"


def test_a_probe_that_finds_a_fault_fails(baseline, tmp_path):
    """The runner is not a rubber stamp: a probe whose expectation is wrong fails, and a
    process left running fails the probe even when its check passed."""
    wrong = faults.Probe("wrong", "exit 0", faults.usage(["run", "--cases", "nope"], "this text is not in the error"))
    assert faults.run_probe(wrong, tmp_path, baseline)["status"] == "FAIL"

    def leaves_a_process(box):
        import subprocess

        subprocess.Popen(["sleep", "60"], env=box.env(), start_new_session=True)
        return True, "started sleep"

    row = faults.run_probe(faults.Probe("orphan", "nothing left", leaves_a_process), tmp_path, baseline)
    assert row["status"] == "FAIL" and "left 1 process" in row["observed"]
