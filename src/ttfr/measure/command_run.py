"""Run one user command (`ttfr run --command`): spawn its program as a worker is spawned (a
session of its own, the sweeper, the timeout, rusage, OOM evidence: measure/spawn.py) and
build the run's record in the parent from three moments: the spawn, the first result, the exit.

The first result is
- `output`: the first line of its stdout/stderr matching the case's regex, timed when ttfr
  reads it (the program's output goes through a pipe; PYTHONUNBUFFERED=1 is set unless the
  user set it, so a Python program's prints are not held back in a buffer);
- `mark`: the CLOCK_MONOTONIC time the program wrote with `ttfr_mark.first_result()` to the
  descriptor named in TTFR_MARK_FD;
- `exit`: the process's exit.
A run fails with the program's exit code and its output's tail (redacted) when it exits
non-zero or ends without its first result.
"""

from __future__ import annotations

import os
import re
import tempfile
import time

import ttfr_mark
from ttfr.measure.spawn import ERROR, ESCAPED, READER_GRACE_S, TIMEOUT, RunResult, _oom_note, _supervise, _tail, classify
from ttfr.measure.user_commands import UserCommand
from ttfr.redaction import redact_text

_MAX_LINE = 1 << 16  # the part of an unfinished output line kept for matching
_LINE_SHOWN = 200  # characters of the matching line kept in the record
_LINE_BREAK = re.compile(rb"[\r\n]")  # progress bars rewrite their line with \r
INVALID = "invalid-measurement"


class _OutputWatch:
    """Copies the program's output to the log and finds the first line matching a regex."""

    def __init__(self, pattern: str, log):
        self.regex = re.compile(pattern)
        self.log = log
        self.matched_ns: int | None = None
        self.line: str | None = None
        self._partial = b""

    def read(self, fd: int) -> None:
        with os.fdopen(fd, "rb", buffering=0) as pipe:
            while chunk := pipe.read(1 << 16):
                now = time.monotonic_ns()
                self.log.write(chunk)
                if self.matched_ns is None:
                    self._scan(chunk, now)

    def _scan(self, chunk: bytes, now: int) -> None:
        lines = _LINE_BREAK.split(self._partial + chunk)
        self._partial = lines[-1][-_MAX_LINE:]  # unfinished: scanned now, and again once it grows
        for raw in lines:
            line = raw.decode("utf-8", "replace")
            if self.regex.search(line):
                self.matched_ns, self.line = now, line[:_LINE_SHOWN]
                return


class _MarkReader:
    """The first `first_result <ns>` line the program wrote to its mark descriptor."""

    def __init__(self):
        self.mark_ns: int | None = None
        self.malformed: str | None = None

    def read(self, fd: int) -> None:
        data = b""
        with os.fdopen(fd, "rb", buffering=0) as pipe:
            while chunk := pipe.read(4096):
                if len(data) < 4096:
                    data += chunk
        for line in data.decode("ascii", "replace").splitlines():
            word, _, value = line.partition(" ")
            if word == "first_result" and value.strip().isdigit():
                self.mark_ns = int(value)
                return
            self.malformed = self.malformed or line[:80]


def run_prepare(command: UserCommand, env: dict, timeout_s: float) -> str | None:
    """Run the command's --prepare program (untimed); None when it succeeded, else why not."""
    if not command.prepare:
        return None
    with tempfile.TemporaryFile() as log:
        ended = _supervise(list(command.prepare), env, command.cwd, timeout_s, log)
        if isinstance(ended, str):
            return f"--prepare {ended}"
        if ended.timed_out or ended.exit_code != 0:
            how = f"timed out after {timeout_s:g} s" if ended.timed_out else _exit_words(ended.exit_code)
            tail = redact_text(_tail(log), env).strip()
            return f"--prepare {how}" + (f"; its output ends: {tail[-300:]}" if tail else "")
    return None


def _exit_words(exit_code: int) -> str:
    outcome, reason = classify(None, exit_code, False, 0.0)
    return reason if exit_code < 0 else f"exited with code {exit_code}"


def run_command(command: UserCommand, env: dict, timeout_s: float) -> RunResult:
    env = dict(env)
    pass_fds, readers = [], []
    marks = _MarkReader() if command.mark else None
    if marks:
        read_fd, write_fd = os.pipe()
        env[ttfr_mark.FD_VARIABLE] = str(write_fd)
        pass_fds.append(write_fd)
        readers.append((read_fd, marks.read))
    with tempfile.TemporaryFile() as log:
        watch = _OutputWatch(command.first_result, log) if command.first_result is not None else None
        output = log
        if watch:
            read_fd, output = os.pipe()
            readers.append((read_fd, watch.read))
        ended = _supervise(list(command.argv), env, command.cwd, timeout_s, output, pass_fds, readers)
        if isinstance(ended, str):
            return RunResult(ERROR, f"could not start the command: {ended}", None, time.monotonic_ns(), None, None)
        outcome, reason, record = _judge(command, ended, marks, watch, timeout_s)
        return RunResult(
            outcome=outcome,
            reason=redact_text(reason, env),
            record=_redacted(record, env),
            spawn_ns=ended.spawn_ns,
            reaped_ns=ended.exited_ns,
            exit_code=ended.exit_code,
            rusage=ended.rusage,
            output_tail=None if outcome == "ok" else redact_text(_tail(log), env),
        )


def _judge(command: UserCommand, ended, marks, watch, timeout_s: float) -> tuple[str, str | None, dict | None]:
    """Outcome, reason and record of a finished command run."""
    if ended.timed_out:
        return TIMEOUT, f"timeout after {timeout_s:g} s (process group killed)", None
    if ended.exit_code != 0:
        if ended.exit_code < 0:
            outcome, reason = classify(None, ended.exit_code, False, timeout_s, ended.oom)
            return outcome, f"the command was {reason}", None
        return ERROR, f"the command exited with code {ended.exit_code}" + _oom_note(ended.oom), None
    by = command.first_result_by
    line = None
    if by == "output":
        line = watch.line
        if watch.matched_ns is None:
            return ERROR, f"the command exited (code 0) without an output line matching /{command.first_result}/", None
        # The line was written before the exit, however late ttfr's reader got to it (a last line
        # read just after the process ended: the two threads race by microseconds).
        first = min(watch.matched_ns, ended.exited_ns)
    elif by == "mark":
        first = marks.mark_ns
        if first is None:
            extra = f" (it wrote {marks.malformed!r}, not `first_result <ns>`)" if marks.malformed else ""
            return ERROR, f"the command exited (code 0) without calling ttfr_mark.first_result(){extra}", None
    else:
        first = ended.exited_ns
    record = {"outcome": "ok", "reason": None, "marks_ns": {"first": first},
              "rusage_self": {"max_rss_bytes": ended.rusage["max_rss_bytes"]},
              "first_result": {"by": by, "line": line}}  # fmt: skip
    if ended.escaped:  # what it left running competes with the next runs for the machine
        return INVALID, "the command: " + ESCAPED.format(grace=READER_GRACE_S), record
    if not ended.spawn_ns <= first <= ended.exited_ns:
        # A mark from another clock (time.time_ns) or another run: never a figure.
        record["marks_ns"] = {}
        return INVALID, f"the first-result mark {first} lies outside the command's life (CLOCK_MONOTONIC ns expected)", record
    return "ok", None, record


def _redacted(record: dict | None, env: dict) -> dict | None:
    if record and record["first_result"]["line"]:
        record["first_result"]["line"] = redact_text(record["first_result"]["line"], env)
    return record
