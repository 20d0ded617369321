"""The compiler runs a cold start paid for, from the worker's process tree (measure/process_tree.py): each run's
count and seconds before its first result, its policy's summary beside the components, and every output saying
the same figure (report.md's and report.html's components tables, the CSV's per-run rows). Fakes answer the workers;
tests/test_precompiled_run.py watches real ones."""

from __future__ import annotations

import csv
import dataclasses
import os

import pytest

from support.fakes import FakeExecutor, run_suite

from ttfr.artifacts.reader import load_finished
from ttfr.commands import cli
from ttfr.measure import process_tree
from ttfr.measure.spec import RunRequest
from ttfr.model.base import UNSET
from ttfr.model.journal import ProcessTree, SeenProcess
from ttfr.model.policies import COLD_CACHE, WARM_CACHE
from ttfr.report.formatting import COMPILERS_COLUMN, compilers_seen

MS = 1_000_000


class CompilingExecutor(FakeExecutor):
    """Cold runs on an emptied cache start g++ (its cc1plus under it) during the first call, and once more after
    the first result (not part of the cold start); runs on a warm cache start none. Every cold run is watched."""

    def __call__(self, job, env, timeout_s, python=None):
        result = super().__call__(job, env, timeout_s, python)
        if job.mode != "cold" or result.record is None:
            return result
        spawn = result.spawn_ns  # the fake record's first result is 330 ms after it
        empty = not self.calls[-1]["entries_seen"]  # its cache directory as the run found it
        processes = [SeenProcess(name="python3.11", parent="worker", first_ns=spawn + 5 * MS, last_ns=spawn + 390 * MS,
                                 pid=101, ppid=100)]  # fmt: skip
        if empty:
            processes += [
                SeenProcess(name="g++", parent="python3.11", first_ns=spawn + 150 * MS, last_ns=spawn + 300 * MS,
                            pid=102, ppid=101),
                SeenProcess(name="cc1plus", parent="g++", first_ns=spawn + 160 * MS, last_ns=spawn + 290 * MS, pid=103,
                            ppid=102),
                SeenProcess(name="g++", parent="worker", first_ns=spawn + 340 * MS, last_ns=spawn + 380 * MS, pid=104,
                            ppid=100),
            ]  # fmt: skip
        tree = ProcessTree(poll_s=0.05, polls=8, watch_cpu_s=0.002, processes=processes, left_out=0)
        return dataclasses.replace(result, process_tree=tree)


def test_a_cold_start_s_compiler_runs_are_summarised_beside_its_components_and_every_output_agrees(tmp_path):
    outcome = run_suite(tmp_path, RunRequest(backends="jax_jit_cpu", workloads="matmul", sizes="64", cold_runs=4,
                                             seed=1, policies="cold-cache,warm-cache"), CompilingExecutor())  # fmt: skip
    (case,) = outcome.cases
    cold, warm = case.policies.get(COLD_CACHE), case.policies.get(WARM_CACHE)
    # each run: the g++ before the first result counts once (its cc1plus is its run), the one after does not
    assert {(r.resources.compiler_runs, round(r.resources.compiler_seen_s, 3)) for r in cold.runs} == {(1, 0.15)}
    assert {r.resources.compiler_runs for r in warm.runs} == {0}
    assert cold.summary.compiler_runs.median == 1 and cold.summary.compiler_seen_s.median == 0.15
    assert compilers_seen(cold.summary) == "1 (seen 150 ms)" and compilers_seen(warm.summary) == "none"
    root = outcome.result_dir.root
    assert load_finished(root).cases[0] == case  # the reader recomputes the summary from the runs and agrees
    report = (root / "report.md").read_text()
    assert COMPILERS_COLUMN in report and "| 1 (seen 150 ms) |" in report and "| none |" in report
    assert COMPILERS_COLUMN in (root / "report.html").read_text()
    out = tmp_path / "runs.csv"
    assert cli.main(["export", str(root), str(out), "--format", "csv"]) == 0
    rows = [r for r in csv.DictReader(out.open()) if r["metric"] == "compiler_runs" and r["policy"] == COLD_CACHE]
    assert [r["value"] for r in rows] == ["1"] * 4 and {r["unit"] for r in rows} == {"count"}


def test_runs_nobody_watched_have_no_compiler_figures_and_no_column(tmp_path):
    outcome = run_suite(tmp_path, RunRequest(backends="jax_jit_cpu", workloads="matmul", sizes="64", cold_runs=3,
                                             seed=1, policies="cold-cache"))  # fmt: skip
    (case,) = outcome.cases
    cold = case.policies.get(COLD_CACHE)
    assert cold.summary.compiler_runs is UNSET and all(r.resources.compiler_runs is UNSET for r in cold.runs)
    assert COMPILERS_COLUMN not in (outcome.result_dir.root / "report.md").read_text()


@pytest.mark.integration
@pytest.mark.contention_safe  # counts of processes, no figure a busy machine changes
def test_a_users_command_is_watched_and_the_compiler_it_runs_before_exiting_is_counted(tmp_path, monkeypatch):
    """`ttfr run --command`: the program's tree is watched as a cold worker's is. The program runs a compiler (a
    script named g++: the kernel names a process after the file it ran) that waits on a FIFO; the watch itself opens
    the FIFO once a poll has seen g++, so the compiler is seen however busy the machine (no sleep orders it)."""
    fifo = tmp_path / "release"
    os.mkfifo(fifo)
    (tmp_path / "g++").write_text(f"#!/bin/sh\nread line < {fifo}\n")
    (tmp_path / "g++").chmod(0o755)

    class ReleasingWatch(process_tree.TreeWatch):
        released = False  # each run's g++ once: a later poll that still lists it must not wait for a reader

        def _poll(self):
            super()._poll()
            if not self.released and any(entry[0] == "g++" for entry in self._seen.values()):
                self.released = True
                with open(fifo, "w") as release:  # blocks until g++ opens its end: then it reads and exits
                    release.write("go\n")

    monkeypatch.setattr(process_tree, "TreeWatch", ReleasingWatch)
    out = tmp_path / "out"
    # a shell runs it (`; true`: not exec'd in the shell's place), as a build script or a launcher would
    # --keep-contended: a busy machine's runs (a timing) still make the summary the assertions read; --timeout:
    # where nothing watches, g++ waits for ever (the runs then time out and the assertions below fail)
    argv = ["run", "--command", f"sh -c '{tmp_path / 'g++'}; true'", "--command-name", "compiles", "--cache-policy",
            "cold-process/cold-cache", "--cold-runs", "2", "--timeout", "60", "--keep-contended", "--out", str(out)]  # fmt: skip
    assert cli.main(argv) == 0
    (case,) = load_finished(next(out.iterdir())).cases
    cold = case.policies.get(COLD_CACHE)
    assert [r.resources.compiler_runs for r in cold.runs] == [1, 1] and cold.summary.compiler_runs.median == 1
    root = next(out.iterdir())
    report = (root / "report.md").read_text()  # the Commands table's column, as the summary says it
    assert COMPILERS_COLUMN in report and f"| cold {compilers_seen(cold.summary)} |" in report
    assert COMPILERS_COLUMN in (root / "report.html").read_text()
