"""The journal: what survives a crash and what a garbage line does on reading."""

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from support.fakes import FakeExecutor
from test_artifacts import run_fake

from ttfr.measure.executors import Executors
from ttfr.pipeline import suite as suite_run
from ttfr.commands.cli import main
from ttfr.measure import journal as journal_module
from ttfr.measure.journal import MAX_LINE_BYTES, Journal, JournalError, read_entry
from ttfr.model.base import decode
from ttfr.model.journal import JournalEntry


def raw(task="a", **changes):
    """A journal line's JSON (a dict): what the reader is given."""
    base = {
        "task": task, "case": "numpy_matmul_64_f32", "kind": "cold", "policy": "cold-process/cold-cache",
        "index": 0, "round": 0, "measured": True, "makes_template": False, "outcome": "ok", "reason": None,
        "spawn_ns": 1, "reaped_ns": 9, "exit_code": 0, "cache_dir": {"entries_before": 0, "entries_after": 0},
        "record": {"outcome": "ok", "marks_ns": {"main": 3, "first": 5}, "stages_s": {}}, "rusage": {}, "host": None,
        "output_tail": None,
    }  # fmt: skip
    base.update(changes)
    return base


def entry(task="a", **changes) -> JournalEntry:
    """A typed entry: what the scheduler appends."""
    return decode(raw(task, **changes), JournalEntry)


def test_torn_journal_line_is_skipped_with_a_warning_and_not_glued_to_the_next(tmp_path):
    journal = Journal(tmp_path / "journal.jsonl")
    journal.append(entry("a"))
    with open(journal.path, "a") as fh:
        fh.write('{"task": "b", "trunc')
    journal = Journal(journal.path)
    journal.append(entry("c"))
    assert [e.task for e in journal.entries()] == ["a", "c"]
    assert len(journal.skipped) == 1 and "line 2: not JSON" in journal.skipped[0]


@pytest.mark.parametrize(
    "line, why",
    [
        (b"[]", "Expected `object`, got `array`"),
        (b"5", "Expected `object`, got `int`"),
        (b"\xff\xfe garbage", "not JSON"),
        (json.dumps({k: v for k, v in raw().items() if k != "index"}).encode(), "missing required field `index`"),
        (json.dumps(raw(index="0")).encode(), "Expected `int`, got `str` - at `index`"),
        (json.dumps(raw(index=True)).encode(), "Expected `int`, got `bool` - at `index`"),
        (json.dumps(raw(cache_dir={})).encode(), "missing required field `entries_before` - at `cache_dir`"),
        (json.dumps(raw(record={"outcome": "ok", "marks_ns": {"main": "soon"}})).encode(), "at `record.marks_ns.main`"),
        (json.dumps(raw(record={"outcome": "ok", "stages_s": []})).encode(), "at `record.stages_s`"),
        (b"{" * 50000 + b"}" * 50000, "not JSON"),
    ],
)
def test_garbage_lines_are_skipped_and_named(tmp_path, line, why):
    path = tmp_path / "journal.jsonl"
    path.write_bytes(json.dumps(raw("a")).encode() + b"\n" + line + b"\n" + json.dumps(raw("b")).encode() + b"\n")
    journal = Journal(path)
    assert [e.task for e in journal.entries()] == ["a", "b"]
    assert len(journal.skipped) == 1 and "line 2" in journal.skipped[0] and why in journal.skipped[0]


def test_a_real_entry_passes_the_check(tmp_path):
    root = run_fake(tmp_path).result_dir.root
    lines = (root / "journal.jsonl").read_text().splitlines()
    assert lines and all(read_entry(line.encode()) == (decode(json.loads(line), JournalEntry), None) for line in lines)


def test_resume_over_a_garbage_journal_line_reruns_that_task_and_warns(tmp_path, capsys):
    outcome = run_fake(tmp_path, FakeExecutor(interrupt_at=5))
    root = outcome.result_dir.root
    lines = (root / "journal.jsonl").read_text().splitlines()
    lines[1] = '{"task": 17}'
    (root / "journal.jsonl").write_text("\n".join(lines) + "\n")
    result_dir, spec = suite_run.reopen(root)
    executor = FakeExecutor()
    finished = suite_run.execute(result_dir, spec, Executors(worker=executor))
    assert finished.suite.state == "complete"
    assert finished.warnings and "line 2: Expected `str`, got `int` - at `task`" in finished.warnings[0]
    assert main(["validate", str(root)]) == 0


# Lines that pass for JSON entries but hold values analysis cannot use (found by a hostile
# review: each crashed `ttfr run`/`--resume` while writing the case results, or made one
# fail its schema). Each names the entry it corrupts, how, and what the warning says.
def _first(kind=None, has=None):
    def pick(entries):
        return next(i for i, e in enumerate(entries) if (kind is None or e["kind"] == kind)
                    and (has is None or (e["record"] or {}).get(has)))  # fmt: skip

    return pick


def _set(*path, value):
    def corrupt(entry):
        node = entry
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value

    return corrupt


def _drop(*path):
    def corrupt(entry):
        node = entry
        for key in path[:-1]:
            node = node[key]
        del node[path[-1]]

    return corrupt


WARM, COLD = _first("warm", "warm"), _first("cold")
CORRUPTIONS = {
    "check without passed": (
        WARM,
        _set("record", "check", value={"foo": 1}),
        "missing required field `reference` - at `record.check`",
    ),
    "check passed not a flag": (
        WARM,
        _set("record", "check", "passed", value="yes"),
        "Expected `bool | null`, got `str` - at `record.check.passed`",
    ),
    "check tolerance missing": (WARM, _drop("record", "check", "tolerance"), "`tolerance`"),
    "check error negative": (
        WARM,
        _set("record", "check", "max_normalised_error", value=-1),
        ">= 0.0 - at `record.check.max_normalised_error`",
    ),
    "digest count only": (COLD, _set("record", "digest", value={"count": 1}), "`record.digest`"),
    "digest sum_sq text": (COLD, _set("record", "digest", "sum_sq", value="x"), "at `record.digest.sum_sq`"),
    "digest without finite": (COLD, _drop("record", "digest", "finite"), "`finite`"),
    "negative index": (COLD, _set("index", value=-5), "Expected `int` >= 0 - at `index`"),
    "negative round": (COLD, _set("round", value=-1), "Expected `int` >= 0 - at `round`"),
    "negative cache count": (COLD, _set("cache_dir", "entries_before", value=-1), ">= 0 - at `cache_dir.entries_before`"),
    "no measured flag": (COLD, _drop("measured"), "missing required field `measured`"),
    "unknown outcome": (COLD, _set("outcome", value="banana"), "`outcome`"),
    "failed run without reason": (COLD, lambda e: e.update(outcome="error", reason=None), "`reason`"),
    "ok run without record": (COLD, _set("record", value=None), "`record` is missing"),
    "first mark before setup": (
        COLD,
        lambda e: e["record"]["marks_ns"].update(first=e["record"]["marks_ns"]["setup"] - 1),
        "`first` is before `setup`",
    ),
    "reaped before spawn": (COLD, lambda e: e.update(reaped_ns=e["spawn_ns"] - 1), "`reaped_ns`"),
    "negative stage": (
        _first("cold", "stages_s"),
        _set("record", "stages_s", "compile_s", value=-1.0),
        ">= 0.0 - at `record.stages_s[...]`",
    ),
    "warm without samples": (
        WARM,
        _set("record", "warm", value={"foo": 1}),
        "missing required field `samples_s` - at `record.warm`",
    ),
    "warm empty samples": (WARM, _set("record", "warm", "samples_s", value=[]), "`samples_s`"),
    "warm zero sample": (WARM, _set("record", "warm", "samples_s", 0, value=0.0), "`samples_s`"),
    "warm huge sample": (WARM, _set("record", "warm", "samples_s", 0, value=1e308), "`samples_s`"),
    "warm zero inner loops": (WARM, _set("record", "warm", "inner_loops", value=0), ">= 1 - at `record.warm.inner_loops`"),
    "warm no warmup flag": (WARM, _drop("record", "warm", "warmup_stable"), "`warmup_stable`"),
    "warm no warmup times": (WARM, _drop("record", "warm", "warmup_per_call_s"), "`warmup_per_call_s`"),
    "warm text trailing": (
        WARM,
        _set("record", "warm", "trailing_sync_fraction", value=["x"]),
        "got `str` - at `record.warm.trailing_sync_fraction[0]`",
    ),
    "warm text doubling": (
        WARM,
        _set("record", "warm", "doubling_ratios", value=["x"]),
        "got `str` - at `record.warm.doubling_ratios[0]`",
    ),
    "warm pending not flags": (
        WARM,
        _set("record", "warm", "pending_after_loop", value=3),
        "at `record.warm.pending_after_loop`",
    ),
    "warm overlap a list": (WARM, _set("record", "warm", "overlap", value=[1]), "at `record.warm.overlap`"),
    "warm overlap nulls": (
        WARM,
        _set("record", "warm", "overlap", value={"as_timed_s": [None], "each_waited_s": [1.0]}),
        "got `null` - at `record.warm.overlap.as_timed_s[0]`",
    ),
    "cache counters text": (
        _first("cold", "cache"),
        _set("record", "cache", value={"end": {"events": "x"}}),
        "at `record.cache.end.events`",
    ),
    "host cores text": (
        COLD,
        _set("host", value={"usable_cores": "x", "runnable_start": [9, 9], "runnable_end": [9, 9]}),
        "`host.usable_cores`",
    ),
    "versions a flag": (COLD, _set("record", "versions", value={"numpy": True}), "got `bool` - at `record.versions[...]`"),
    "device without count": (COLD, _set("record", "device", value={"platform": "cpu", "kind": "x"}), "`record.device`"),
}


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    """One finished fake run, which each corruption below copies (a run each would cost ~0.3 s)."""
    return run_fake(tmp_path_factory.mktemp("finished")).result_dir.root


@pytest.mark.parametrize("name", sorted(CORRUPTIONS))
def test_a_line_analysis_cannot_use_is_skipped_and_resume_completes(tmp_path, name, finished_run):
    pick, corrupt, why = CORRUPTIONS[name]
    root = Path(shutil.copytree(finished_run, tmp_path / finished_run.name))
    journal = root / "journal.jsonl"
    entries = [json.loads(line) for line in journal.read_text().splitlines()]
    index = pick(entries)
    corrupt(entries[index])
    journal.write_text("".join(json.dumps(e) + "\n" for e in entries))
    read = Journal(journal)
    assert len(read.entries()) == len(entries) - 1
    assert len(read.skipped) == 1 and f"line {index + 1}: " in read.skipped[0] and why in read.skipped[0], read.skipped
    result_dir, spec = suite_run.reopen(root)
    finished = suite_run.execute(result_dir, spec, Executors(worker=FakeExecutor()))  # reruns that task; analysis must not crash
    assert finished.suite.state == "complete" and finished.warnings == read.skipped
    assert main(["validate", str(root)]) == 0


def test_nan_and_infinity_are_not_journal_numbers(tmp_path):
    # json.loads takes them; a case result holding one could never be written (allow_nan=False).
    path = tmp_path / "journal.jsonl"
    nan = json.dumps(raw("b", host={"started_at": float("nan")}))
    inf = json.dumps(
        raw("c", record={"outcome": "ok", "marks_ns": {"main": 3, "first": 5}, "stages_s": {"trace_s": float("inf")}})
    )
    path.write_text("\n".join([json.dumps(raw("a")), nan, inf, json.dumps(raw("d"))]) + "\n")
    journal = Journal(path)
    assert [e.task for e in journal.entries()] == ["a", "d"]
    assert [s.split(": ", 1)[1][:8] for s in journal.skipped] == ["not JSON", "not JSON"]


# Reading and writing are bounded: journal.jsonl is a regular file of the result directory or
# it is refused. Each read runs in a child with limited memory and time, so that a reader that
# follows /dev/zero or blocks on a FIFO fails the test instead of the machine.
READER = """
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, (320 << 20, 320 << 20))
from ttfr.measure import journal
reader = journal.Journal(sys.argv[1])
try:
    entries = reader.entries()
except Exception as exc:
    print(type(exc).__name__, exc)
else:
    print("entries", [e.task for e in entries], reader.skipped)
"""


def read_in_a_bounded_child(path) -> str:
    try:
        done = subprocess.run([sys.executable, "-c", READER, str(path)], capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        return "timed out"
    return done.stdout + done.stderr


def test_a_journal_that_is_a_link_to_dev_zero_or_a_fifo_is_refused_without_reading(tmp_path):
    linked = tmp_path / "linked" / "journal.jsonl"
    linked.parent.mkdir()
    linked.symlink_to("/dev/zero")
    out = read_in_a_bounded_child(linked)
    assert out.startswith(f"JournalError {linked}: is a symbolic link"), out
    fifo = tmp_path / "fifo" / "journal.jsonl"
    fifo.parent.mkdir()
    os.mkfifo(fifo)
    out = read_in_a_bounded_child(fifo)
    assert out.startswith(f"JournalError {fifo}: is a FIFO, not a regular file"), out
    folder = tmp_path / "folder" / "journal.jsonl"
    folder.mkdir(parents=True)
    with pytest.raises(JournalError, match="not a regular file"):
        Journal(folder).entries()
    with pytest.raises(JournalError, match="not a regular file"):
        Journal(folder).append(entry("a"))


@pytest.mark.slow  # reads a 1 GiB line (sparse) through a memory-bounded child: seconds of I/O
def test_a_line_larger_than_the_readers_memory_is_skipped_without_being_held(tmp_path):
    path = tmp_path / "journal.jsonl"
    with open(path, "wb") as fh:
        fh.write(json.dumps(raw("a")).encode() + b"\n")
        fh.truncate(fh.tell() + (512 << 20))  # a 512 MiB line, past the reader's 320 MiB (sparse: no disk used)
        fh.seek(0, 2)
        fh.write(b"\n" + json.dumps(raw("b")).encode() + b"\n" + b"{" * 100 + b" no newline at the end")
    out = read_in_a_bounded_child(path)
    assert out.startswith("entries ['a', 'b']"), out
    assert f"line 2: longer than {MAX_LINE_BYTES} bytes" in out and "line 4: not JSON" in out


def test_an_overlong_line_is_skipped_and_the_next_line_read(tmp_path, monkeypatch):
    monkeypatch.setattr(journal_module, "MAX_LINE_BYTES", 1000)
    monkeypatch.setattr(journal_module, "_DISCARD_CHUNK", 7)
    path = tmp_path / "journal.jsonl"
    long_entry = json.dumps(raw("long", output_tail="x" * 5000))
    path.write_text("\n".join([json.dumps(raw("a")), long_entry, json.dumps(raw("b")), "y" * 3000]))
    journal = Journal(path)
    assert [e.task for e in journal.entries()] == ["a", "b"]
    assert [s.split(": ", 1)[1] for s in journal.skipped] == ["longer than 1000 bytes; skipped, its task runs again"] * 2


def test_append_never_writes_through_a_link(tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_text("not ttfr's\n")
    result = tmp_path / "result"
    result.mkdir()
    (result / "journal.jsonl").symlink_to(outside)
    with pytest.raises(JournalError, match=r"journal\.jsonl: is a symbolic link"):
        Journal(result / "journal.jsonl").append(entry("a"))
    assert outside.read_text() == "not ttfr's\n"
    dangling = tmp_path / "dangling"
    dangling.mkdir()
    (dangling / "journal.jsonl").symlink_to(tmp_path / "created-elsewhere")
    with pytest.raises(JournalError, match="symbolic link"):
        Journal(dangling / "journal.jsonl").append(entry("a"))
    assert not (tmp_path / "created-elsewhere").exists()


def test_append_to_a_fifo_is_refused_without_blocking(tmp_path):
    os.mkfifo(tmp_path / "journal.jsonl")
    caught = []

    def append():
        try:
            Journal(tmp_path / "journal.jsonl").append(entry("a"))
        except JournalError as exc:
            caught.append(str(exc))

    thread = threading.Thread(target=append, daemon=True)
    thread.start()
    thread.join(10)
    if thread.is_alive():  # release the blocked open, so the test ends
        os.close(os.open(tmp_path / "journal.jsonl", os.O_RDONLY | os.O_NONBLOCK))
        pytest.fail("appending to a FIFO blocked")
    assert caught and "is a FIFO, not a regular file" in caught[0]


def test_a_resume_over_a_fifo_journal_is_a_journal_error(tmp_path):
    outcome = run_fake(tmp_path, FakeExecutor(interrupt_at=5))
    root = outcome.result_dir.root
    (root / "journal.jsonl").unlink()
    os.mkfifo(root / "journal.jsonl")
    result_dir, spec = suite_run.reopen(root)

    def blocked(_signum, _frame):  # a reader blocked on the FIFO fails the test instead of hanging it
        raise TimeoutError("resuming over a FIFO journal blocked")

    previous = signal.signal(signal.SIGALRM, blocked)
    signal.alarm(30)
    try:
        with pytest.raises(JournalError) as raised:
            suite_run.execute(result_dir, spec, Executors(worker=FakeExecutor()))
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    assert str(raised.value).startswith(f"{root / 'journal.jsonl'}: is a FIFO")


def test_an_infinite_doubling_ratio_or_an_overflowed_digest_sum_is_data_not_garbage(tmp_path):
    """The worker writes inf and overflowed sums as null: such a line must be kept (else its
    task would run again on every read and the case never finish) and analysed."""
    root = run_fake(tmp_path).result_dir.root
    journal = root / "journal.jsonl"
    entries = [json.loads(line) for line in journal.read_text().splitlines()]
    warm = next(e for e in entries if (e.get("record") or {}).get("warm"))
    warm["record"]["warm"]["doubling_ratios"] = [None, 2.0, 2.0]
    cold = next(e for e in entries if e["kind"] == "cold" and (e.get("record") or {}).get("digest"))
    cold["record"]["digest"]["sum_sq"] = None
    journal.write_text("".join(json.dumps(e) + "\n" for e in entries))
    read = Journal(journal)
    assert len(read.entries()) == len(entries) and read.skipped == []
    (root / "suite.json").unlink()
    result_dir, spec = suite_run.reopen(root)
    finished = suite_run.execute(result_dir, spec, Executors(worker=FakeExecutor()))
    assert finished.suite.state == "complete" and main(["validate", str(root)]) == 0
