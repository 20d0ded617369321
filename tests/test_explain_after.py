"""`ttfr explain DIR` (issue 38): --explain added to a finished result directory. Only the diagnostic
processes run (a warm cache's template primed again), the figures stay, and every refusal (exit 2)
leaves the directory as it was."""

from __future__ import annotations

import json

from support.fakes import FakeExecutor, run_suite

from ttfr.artifacts import manifest
from ttfr.artifacts.reader import load_finished, validate_dir
from ttfr.commands import cli
from ttfr.measure.executors import Executors
from ttfr.measure.resume import NOTHING_NAMED
from ttfr.measure.spec import RunRequest
from ttfr.model.policies import COLD_CACHE, WARM_CACHE
from ttfr.pipeline import explain_after
from ttfr.pipeline import suite as suite_run

CASES = ("numpy_matmul_64_f32", "jax_jit_cpu_matmul_64_f32")


def _finished(tmp_path, **fields):
    request = RunRequest(cases=",".join(CASES), cold_runs=2, warm_procs=1, warm_samples=3, deterministic=True,
                         policies="cold-cache,warm-cache", **fields)  # fmt: skip
    return run_suite(tmp_path, request).result_dir.root


def _files(root) -> dict:
    return {p.relative_to(root): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def test_explain_runs_only_the_diagnostic_processes_and_keeps_the_figures(tmp_path):
    root = _finished(tmp_path)
    before = load_finished(root)
    result_dir, spec = explain_after.reopen_to_explain(root, NOTHING_NAMED)
    fake = FakeExecutor()
    suite_run.execute(result_dir, spec, Executors(worker=fake))
    # one process per case and cold policy, and the warm cache's template made again (its scratch area was gone)
    explained = sorted((c["case"], c["job"].explain) for c in fake.calls)
    assert sum(explain for _case, explain in explained) == len(CASES) * 2
    primes = [c for c in fake.calls if not c["job"].explain]
    assert [c["case"] for c in primes] == ["jax_jit_cpu_matmul_64_f32"]  # numpy compiles nothing: no template
    after = load_finished(root)
    assert validate_dir(root) == [] and json.loads((root / "plan.json").read_text())["spec"]["explain"] is True
    for was, now in zip(before.cases, after.cases):
        for policy in (COLD_CACHE, WARM_CACHE):
            assert now.policies.get(policy).summary == was.policies.get(policy).summary  # the figures, unchanged
            assert now.policies.get(policy).explanation.outcome == "ok"
    assert "Where the cold start goes" in (root / "report.md").read_text()


def test_explain_refuses_what_it_cannot_explain_and_leaves_the_directory_as_it_was(tmp_path, monkeypatch, capsys):
    root = _finished(tmp_path / "plain")
    files = _files(root)
    monkeypatch.setattr(manifest, "differences", lambda _recorded: ["CPU: AMD EPYC there, Intel Xeon here"])
    assert cli.main(["explain", str(root)]) == 2
    assert (
        "measured on another machine or with other versions than this one's (CPU: AMD EPYC there, Intel Xeon "
        "here)" in capsys.readouterr().err
    )
    assert _files(root) == files  # nothing written, and unlocked: the next command may open it
    monkeypatch.undo()
    interrupted = run_suite(tmp_path / "stopped", RunRequest(cases=CASES[0], cold_runs=3, deterministic=True),
                            FakeExecutor(interrupt_at=2)).result_dir.root  # fmt: skip
    assert cli.main(["explain", str(interrupted)]) == 2
    said = capsys.readouterr().err
    assert "the run is not finished (1 cases pending): finish it with `ttfr run --resume" in said, said
    explained = _finished(tmp_path / "explained", explain=True)
    files = _files(explained)
    assert cli.main(["explain", str(explained)]) == 2
    assert "already explained" in capsys.readouterr().err and _files(explained) == files
    assert cli.main(["explain", str(tmp_path / "nowhere")]) == 2


def test_a_crash_before_the_diagnostic_processes_ran_is_no_explanation_and_precision_runs_are_refused(tmp_path, capsys):
    root = _finished(tmp_path / "crashed")
    result_dir, _spec = explain_after.reopen_to_explain(root, NOTHING_NAMED)
    result_dir.unlock()  # kill -9 here: plan.json says --explain, the journal holds no diagnostic process
    again, spec = explain_after.reopen_to_explain(root, NOTHING_NAMED)  # not "already explained"
    fake = FakeExecutor()
    suite_run.execute(again, spec, Executors(worker=fake))
    assert sum(c["job"].explain for c in fake.calls) == len(CASES) * 2
    assert cli.main(["explain", str(root)]) == 2 and "already explained" in capsys.readouterr().err
    # --precision: a resumed directory buys runs for it, so the figures would not stay
    precise = run_suite(tmp_path / "precise", RunRequest(cases=CASES[0], cold_runs=3, seed=3, precision=0.5,
                                                         budget="60")).result_dir.root  # fmt: skip
    files = _files(precise)
    assert cli.main(["explain", str(precise)]) == 2
    assert "ran with --precision" in capsys.readouterr().err and _files(precise) == files


def test_an_interrupted_explain_is_finished_by_resume_and_a_tampered_directory_is_refused(tmp_path, capsys):
    root = _finished(tmp_path / "stopped")
    result_dir, spec = explain_after.reopen_to_explain(root, NOTHING_NAMED)
    stopped = suite_run.execute(result_dir, spec, Executors(worker=FakeExecutor(interrupt_at=2)))  # Ctrl-C
    assert stopped.interrupted and validate_dir(root) == []
    assert cli.main(["explain", str(root)]) == 2  # unfinished now: `ttfr run --resume` finishes it
    assert f"finish it with `ttfr run --resume {root}`" in capsys.readouterr().err
    again, spec = suite_run.reopen(root)
    rest = FakeExecutor()
    suite_run.execute(again, spec, Executors(worker=rest))
    assert rest.calls and all(c["job"].explain or c["case"] == CASES[1] for c in rest.calls)  # diagnostics (+ a prime)
    assert all(p.explanation.outcome == "ok" for c in load_finished(root).cases for _n, p in c.policies.cold())
    tampered = _finished(tmp_path / "tampered")
    case_file = next((tampered / "cases").glob("*.json"))
    case_file.write_text(case_file.read_text().replace('"ok"', '"warn"', 1))
    files = _files(tampered)
    assert cli.main(["explain", str(tampered)]) == 2
    assert "sha256" in capsys.readouterr().err and _files(tampered) == files
