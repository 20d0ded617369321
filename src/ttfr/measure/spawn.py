"""Run one worker process under the supervisor (measure/supervisor.py: its own session, the
timeout, the group kill, the reap) and collect its record.

- The record comes over a dedicated pipe as a Python literal, read with ast.literal_eval and
  typed here (a RunRecord); the worker's stdout/stderr go to a log file, whose tail is kept
  when a run fails.
- The worker's exit ends `process_s` (`reaped_ns`): the supervisor sees it before the reap.
- A worker killed by SIGKILL that ttfr did not send is "oom" only when the kernel's OOM-kill
  counter rose during its life; otherwise it is "signal".
"""

from __future__ import annotations

import ast
import os
import re
import signal
import sys
import tempfile
import time
from dataclasses import dataclass, field

from msgspec import ValidationError

from ttfr.child.job import Job
from ttfr.measure import import_trace
from ttfr.model.base import decode
from ttfr.model.explanation import ImportTrace
from ttfr.model.journal import ProcessTree, Rusage
from ttfr.model.record import OUTCOMES as RECORD_OUTCOMES
from ttfr.model.record import RunRecord
from ttfr.redaction import redact_text, redact_tree
from ttfr.measure.supervisor import READER_GRACE_S, OomCheck, supervise

WORKER_BOOT = "from ttfr.child.worker import main; main()"
STDERR_TAIL_CHARS = 2000
ESCAPED = ("a process it started in a session of its own still held its pipe {grace:g} s after its process group "
           "was killed: it escaped ttfr's kill and may still be running")  # fmt: skip

# Worker outcomes (ok, unavailable, error, oom, invalid-measurement) pass through;
# these are added by the parent.
TIMEOUT, OOM, SIGNAL, ERROR = "timeout", "oom", "signal", "error"
# Every outcome a run can have (the model's list, which the case result's schema holds).
OUTCOMES = frozenset(RECORD_OUTCOMES)
# Top-level text of a worker's record that is not free text: kept as it is, never redacted.
_RECORD_WORDS = frozenset({"outcome", "phase", "dataset_sha256"})


@dataclass(frozen=True)
class RunResult:
    """What an executor returns for one run: its outcome and why, the worker's record (typed:
    parsed where it arrived), the parent's clock readings and the process tree's rusage."""

    outcome: str
    reason: str | None
    record: RunRecord | None
    spawn_ns: int
    reaped_ns: int | None
    exit_code: int | None
    rusage: Rusage = field(default_factory=Rusage)
    output_tail: str | None = None
    # the lines of its output that are a library's warnings or errors (kept for every run: a cache
    # read or write gone wrong warns and goes on)
    messages: tuple[str, ...] = ()
    imports: ImportTrace | None = None  # --explain's diagnostic process: its -X importtime trace
    process_tree: ProcessTree | None = None  # a cold run's: the processes it started, as the parent saw them


def ensure_worker_bytecode() -> None:
    """Compile ttfr's own modules once, so no worker spends its timed start compiling them.

    Under PYTHONDONTWRITEBYTECODE=1 (or from a fresh checkout) every worker would otherwise
    recompile worker.py and the adapters from source, ~3 ms charged to the measurement.
    py_compile writes regardless of that variable; a read-only install is left as it is.
    """
    import compileall

    import ttfr

    try:
        compileall.compile_dir(os.path.dirname(ttfr.__file__), quiet=2)
    except OSError:
        pass


def _read_all(fd: int, sink: list) -> None:
    with os.fdopen(fd, "rb", buffering=0) as pipe:
        while chunk := pipe.read(1 << 16):
            sink.append(chunk)


def _tail(log) -> str:
    log.seek(0, os.SEEK_END)
    size = log.tell()
    log.seek(max(0, size - 4 * STDERR_TAIL_CHARS))
    return log.read().decode("utf-8", "replace")[-STDERR_TAIL_CHARS:]


def _imports(log, record: RunRecord | None, env: dict) -> ImportTrace:
    """The import trace of --explain's process: its stderr, read up to import_trace.MAX_BYTES, through
    the one redaction (a user's code may print a line shaped like -X importtime's, with anything in it)."""
    log.seek(0)
    text = redact_text(log.read(import_trace.MAX_BYTES).decode("utf-8", "replace"), env)
    distributions = record.distributions if record is not None and record.distributions else None
    return import_trace.parse(text, distributions)


_MESSAGE = re.compile(r"warning|error|exception|traceback", re.IGNORECASE)
MAX_MESSAGES = 10


def _messages(log, env: dict) -> tuple[str, ...]:
    """Warning and error lines of the worker's output (the last 64 KiB), once each, redacted."""
    log.seek(0, os.SEEK_END)
    size = log.tell()
    if not size:
        return ()
    log.seek(max(0, size - (1 << 16)))
    lines = log.read().decode("utf-8", "replace").splitlines()
    found = dict.fromkeys(
        line.strip()[:300]
        for line in lines
        if _MESSAGE.search(line) and not line.startswith((import_trace.PREFIX, import_trace.MARKER))
    )  # (--explain's lines)
    return tuple(redact_text(line, env) for line in list(found)[:MAX_MESSAGES])


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def classify(record: RunRecord | None, exit_code: int | None, timed_out: bool, timeout_s: float,
             oom: OomCheck | None = None) -> tuple[str, str | None]:  # fmt: skip
    """Outcome and reason of one run; `oom` is the OOM-kill evidence (None: it could not be read)."""
    if timed_out:
        return TIMEOUT, f"timeout after {timeout_s:g} s (process group killed)"
    if record is not None:
        outcome, reason = record.outcome, record.reason
        if outcome not in OUTCOMES:  # a worker of another protocol, or a broken one
            return ERROR, f"the worker reported an unknown outcome {_quoted(outcome)}"
        if exit_code not in (0, None) and outcome == "ok":
            how = f"killed by {_signal_name(-exit_code)}" if exit_code < 0 else f"exit code {exit_code}"
            return ERROR, f"worker reported a result, then {how}" + _oom_note(oom)
        if not isinstance(reason, str) or not reason.strip():
            reason = None if outcome == "ok" else f"the worker reported {outcome} without a reason"
        return outcome, reason
    if exit_code is not None and exit_code < 0:
        if -exit_code == signal.SIGKILL:
            if oom is None:
                return SIGNAL, ("killed by SIGKILL from outside ttfr; whether the kernel's OOM killer did it "
                                "could not be checked (no readable OOM-kill counter)")  # fmt: skip
            if oom.kills > 0:
                return OOM, "killed by SIGKILL" + _oom_note(oom)
            return SIGNAL, f"killed by SIGKILL from outside ttfr (no OOM kill recorded {oom.scope}: {oom.source})"
        return SIGNAL, f"killed by {_signal_name(-exit_code)}"
    return ERROR, f"exit code {exit_code} without a result record" + _oom_note(oom)


def _quoted(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _oom_note(oom: OomCheck | None) -> str:
    if oom is None or oom.kills <= 0:
        return ""
    return f"; the kernel's OOM killer killed {oom.kills} process(es) {oom.scope} meanwhile ({oom.source})"


def parse_record(raw: bytes, env: dict) -> tuple[RunRecord | None, str | None]:
    """The worker's record, typed (its free text redacted first: it may quote its environment),
    or None and why it is not one."""
    if not raw:
        return None, "empty"
    try:
        data = ast.literal_eval(raw.decode("utf-8"))
    except (ValueError, SyntaxError, MemoryError, RecursionError, UnicodeDecodeError):
        return None, "not a Python literal"
    if not isinstance(data, dict):
        return None, f"a {type(data).__name__}, not a record"
    data = {key: value if key in _RECORD_WORDS else redact_tree(value, env) for key, value in data.items()}
    try:
        return decode(data, RunRecord), None
    except ValidationError as exc:
        return None, str(exc)


def run_worker(job: Job, env: dict, timeout_s: float, python: str | None = None, cwd: str | None = None,
               watch_tree: bool | None = None) -> RunResult:  # fmt: skip
    """One worker run. `watch_tree`: poll its process tree (measure/process_tree.py); by default every cold
    process alike (a precompiled policy's load and the standard runs it is compared with bear the same watch), never
    a warm process's samples or --explain's diagnostic process."""
    read_fd, write_fd = os.pipe()
    words = job.replace(fd=write_fd).to_words()
    # --explain's diagnostic process (unmeasured) reports every first import on stderr
    argv = [python or sys.executable, *(("-X", "importtime") if job.explain else ()), "-P", "-c", WORKER_BOOT, *words]
    chunks: list[bytes] = []
    with tempfile.TemporaryFile() as log:
        watch = job.mode == "cold" and not job.explain if watch_tree is None else watch_tree
        ended = supervise(argv, env, cwd, timeout_s, log, (write_fd,), [(read_fd, lambda fd: _read_all(fd, chunks))],
                          watch_tree=watch)  # fmt: skip
        if isinstance(ended, str):
            return RunResult(ERROR, f"could not start the worker: {ended}", None, time.monotonic_ns(), None, None)
        raw = b"".join(chunks)
        record, unreadable = parse_record(raw, env)
        outcome, reason = classify(record, ended.exit_code, ended.timed_out, timeout_s, ended.oom)
        if record is None and not ended.timed_out and raw:
            reason = f"{reason}; the worker's record was unreadable ({unreadable})"
        if ended.escaped and outcome == "ok":  # its record may be cut short, and a stray process runs on
            outcome, reason = "invalid-measurement", "the worker: " + ESCAPED.format(grace=READER_GRACE_S)
        return RunResult(
            outcome=outcome,
            reason=redact_text(reason, env),  # free text from the worker: it may quote its environment
            record=record,
            spawn_ns=ended.spawn_ns,
            reaped_ns=ended.exited_ns,
            exit_code=ended.exit_code,
            rusage=ended.rusage,
            output_tail=None if outcome in ("ok", "unavailable") else redact_text(_tail(log), env),
            messages=_messages(log, env),
            imports=_imports(log, record, env) if job.explain and outcome == "ok" else None,
            process_tree=ended.process_tree,
        )
