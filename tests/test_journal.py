"""The journal: what survives a crash and what a garbage line does on reading."""

import json

import pytest
from fakes import FakeExecutor
from test_artifacts import run_fake

from ttfr.commands import run as suite_run
from ttfr.commands.cli import main
from ttfr.measure.journal import Journal, entry_problem


def entry(task="a", **changes):
    base = {
        "task": task, "case": "numpy_matmul_64_f32", "kind": "cold", "policy": "cold-process/cold-cache",
        "index": 0, "round": 0, "makes_template": False, "outcome": "ok", "reason": None, "spawn_ns": 1,
        "reaped_ns": 2, "exit_code": 0, "cache_dir": {"entries_before": 0, "entries_after": 0},
        "record": {"marks_ns": {"main": 3}, "stages_s": {}}, "rusage": {}, "host": None, "output_tail": None,
    }  # fmt: skip
    base.update(changes)
    return base


def test_torn_journal_line_is_skipped_with_a_warning_and_not_glued_to_the_next(tmp_path):
    journal = Journal(tmp_path / "journal.jsonl")
    journal.append(entry("a"))
    with open(journal.path, "a") as fh:
        fh.write('{"task": "b", "trunc')
    journal = Journal(journal.path)
    journal.append(entry("c"))
    assert [e["task"] for e in journal.entries()] == ["a", "c"]
    assert len(journal.skipped) == 1 and "line 2: not JSON" in journal.skipped[0]


@pytest.mark.parametrize(
    "line, why",
    [
        (b"[]", "a JSON list"),
        (b"5", "a JSON int"),
        (b"\xff\xfe garbage", "not JSON"),
        (json.dumps({k: v for k, v in entry().items() if k != "index"}).encode(), "no `index`"),
        (json.dumps(entry(index="0")).encode(), "`index` has the wrong type"),
        (json.dumps(entry(index=True)).encode(), "`index` has the wrong type"),
        (json.dumps(entry(cache_dir={})).encode(), "entry counts"),
        (json.dumps(entry(record={"marks_ns": {"main": "soon"}})).encode(), "timestamp"),
        (json.dumps(entry(record={"stages_s": []})).encode(), "record.stages_s"),
        (b"[" * 50000 + b"]" * 50000, "not JSON"),
    ],
)
def test_garbage_lines_are_skipped_and_named(tmp_path, line, why):
    path = tmp_path / "journal.jsonl"
    path.write_bytes(json.dumps(entry("a")).encode() + b"\n" + line + b"\n" + json.dumps(entry("b")).encode() + b"\n")
    journal = Journal(path)
    assert [e["task"] for e in journal.entries()] == ["a", "b"]
    assert len(journal.skipped) == 1 and "line 2" in journal.skipped[0] and why in journal.skipped[0]


def test_a_real_entry_passes_the_check(tmp_path):
    root = run_fake(tmp_path).result_dir.root
    lines = (root / "journal.jsonl").read_text().splitlines()
    assert lines and all(entry_problem(json.loads(line)) is None for line in lines)


def test_resume_over_a_garbage_journal_line_reruns_that_task_and_warns(tmp_path, capsys):
    outcome = run_fake(tmp_path, FakeExecutor(interrupt_at=5))
    root = outcome.result_dir.root
    lines = (root / "journal.jsonl").read_text().splitlines()
    lines[1] = '{"task": 17}'
    (root / "journal.jsonl").write_text("\n".join(lines) + "\n")
    result_dir, spec = suite_run.reopen(root)
    executor = FakeExecutor()
    finished = suite_run.execute(result_dir, spec, executor)
    assert finished.suite["state"] == "complete"
    assert finished.warnings and "line 2: `task` has the wrong type" in finished.warnings[0]
    assert main(["validate", str(root)]) == 0
