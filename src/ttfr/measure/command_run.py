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
import threading
import time

import msgspec

import ttfr_mark
from ttfr.model.base import UNSET, UnsetType
from ttfr.model.journal import ProcessTree
from ttfr.model.record import FirstResult, Marks, OwnRusage, RunRecord, Sched
from ttfr.measure.spawn import ERROR, ESCAPED, STDERR_TAIL_CHARS, TIMEOUT, RunResult, _oom_note, classify
from ttfr.measure import command_imports, import_trace
from ttfr.measure.supervisor import READER_GRACE_S, supervise
from ttfr.measure.user_commands import UserCommand, changed_files
from ttfr.redaction import argv_secrets, redact_text

_MAX_LINE = 4096  # characters of a line the regex sees (a long line is matched on its start)
_TAIL_BYTES = 16 * 1024  # of the program's output kept for a failed run's tail (no file: output can be huge)
_MARK_BYTES = 64 * 1024  # of the mark descriptor read (a program writing garbage cannot exhaust memory)
_LINE_SHOWN = 200  # characters of the matching line kept in the record
_LINE_BREAK = re.compile(rb"[\r\n]")  # progress bars rewrite their line with \r
INVALID = "invalid-measurement"
_IMPORT_LINE = import_trace.PREFIX.encode()

_OWN_SHARE = 0.5  # the leader's main thread did at least this share of its tree's CPU time


class _OutputWatch:
    """Reads the program's stdout and stderr (one pipe), keeps their tail, and finds the first
    complete line matching the regex, timed when ttfr read the line's end. An unfinished line
    is not matched (a print's pieces arrive apart without a buffer): only at the end of the
    output is the last one, timed when its last piece arrived."""

    def __init__(self, pattern: str | None, on_first=None, imports: bool = False):
        self.regex = re.compile(pattern) if pattern is not None else None
        self.on_first = on_first  # called once the line is found (--stop-at-first-result)
        self.matched_ns: int | None = None
        self.line: str | None = None
        self.tail = bytearray()
        self._partial = b""
        self._partial_ns = 0
        # --explain's diagnostic process (command_imports.py): its import lines, and how many came before the
        # first result's line
        self.imports: list[str] | None = [] if imports else None
        self.imports_before_first: int | None = None
        self._import_bytes = 0

    def read(self, fd: int) -> None:
        with os.fdopen(fd, "rb", buffering=0) as pipe:
            while chunk := pipe.read(1 << 16):
                now = time.monotonic_ns()
                self.tail += chunk
                del self.tail[:-_TAIL_BYTES]
                if self.imports is not None or (self.regex is not None and self.matched_ns is None):
                    self._scan(chunk, now)
        if self._partial:
            self._line(self._partial, self._partial_ns)

    def _scan(self, chunk: bytes, now: int) -> None:
        lines = _LINE_BREAK.split(self._partial + chunk)
        self._partial, self._partial_ns = lines.pop()[-4 * _MAX_LINE :], now
        for raw in lines:
            if self._line(raw, now) and self.imports is None:
                return

    def _line(self, raw: bytes, when: int) -> bool:
        """A complete line: an import line kept (a diagnostic process), else matched. True: the first result."""
        if self.imports is not None and raw.startswith(_IMPORT_LINE):
            if self._import_bytes < import_trace.MAX_BYTES:
                self.imports.append(raw.decode("utf-8", "replace"))
                self._import_bytes += len(raw)
            return False
        if self.imports is not None and raw.strip() == ttfr_mark.FIRST_RESULT_LINE:  # the mark, in the stream's order
            if self.imports_before_first is None:
                self.imports_before_first = len(self.imports)
            return False
        if self.regex is None or self.matched_ns is not None:
            return False
        if self._match(raw, when):
            if self.imports is not None:
                self.imports_before_first = len(self.imports)
            return True
        return False

    def _match(self, raw: bytes, when: int) -> bool:
        line = raw[: 4 * _MAX_LINE].decode("utf-8", "replace")[:_MAX_LINE]
        if self.regex.search(line):
            self.matched_ns, self.line = when, line[:_LINE_SHOWN]
            if self.on_first:
                self.on_first()
            return True
        return False

    def last_line(self) -> str | None:
        """The last non-empty line of the output (a failure's usual explanation)."""
        for raw in reversed(_LINE_BREAK.split(bytes(self.tail))):
            text = raw.decode("utf-8", "replace").strip()
            if text:
                return text[:_LINE_SHOWN]
        return None

    def text(self) -> str:
        return bytes(self.tail).decode("utf-8", "replace")[-STDERR_TAIL_CHARS:]


class _MarkReader:
    """The first `first_result <ns>` line the program wrote to its mark descriptor, parsed as
    it arrives (its first _MARK_BYTES; the rest is drained)."""

    def __init__(self, on_first=None):
        self.on_first = on_first
        self.mark_ns: int | None = None
        self.malformed: str | None = None

    def read(self, fd: int) -> None:
        pending, seen = b"", 0
        with os.fdopen(fd, "rb", buffering=0) as pipe:
            while chunk := pipe.read(4096):
                if self.mark_ns is not None or seen >= _MARK_BYTES:
                    continue
                seen += len(chunk)
                *lines, pending = (pending + chunk).split(b"\n")
                for line in lines:
                    if self._line(line.decode("ascii", "replace")):
                        break
        if self.mark_ns is None and pending:
            self._line(pending.decode("ascii", "replace"))

    def _line(self, line: str) -> bool:
        word, _, value = line.partition(" ")
        if word == "first_result" and value.strip().isdigit():
            self.mark_ns = int(value)
            if self.on_first:
                self.on_first()
            return True
        self.malformed = self.malformed or line[:80]
        return False


def run_prepare(command: UserCommand, env: dict, timeout_s: float) -> str | None:
    """Run the command's --prepare program (untimed); None when it succeeded, else why not."""
    if not command.prepare:
        return None
    watch = _OutputWatch(None)
    read_fd, output = os.pipe()
    ended = supervise(list(command.prepare), env, command.cwd, timeout_s, output, readers=[(read_fd, watch.read)])
    if isinstance(ended, str):
        return f"--prepare {ended}"
    if ended.timed_out or ended.exit_code != 0:
        how = f"timed out after {timeout_s:g} s" if ended.timed_out else _exit_words(ended.exit_code)
        last = watch.last_line()
        return redact_text(f"--prepare {how}" + (f"; its output ends: {last}" if last else ""), _redaction_env(command, env))
    return None


def _exit_words(exit_code: int) -> str:
    return classify(None, exit_code, False, 0.0)[1] if exit_code < 0 else f"exited with code {exit_code}"


def _redaction_env(command: UserCommand, env: dict) -> dict:
    """`env` plus the secrets of the command line itself, for redact_text: a program that prints
    its `--api-token` argument has it hidden like an environment secret."""
    secrets = argv_secrets([*command.argv, *(command.prepare or ())])
    return {**env, **{f"TTFR_COMMAND_SECRET_{i}": value for i, value in enumerate(secrets)}}


def run_command(command: UserCommand, env: dict, timeout_s: float, watch_tree: bool = True) -> RunResult:
    """One run of a user's program. `watch_tree`: its process tree is polled (as a cold worker's), but never in
    --explain's diagnostic process; the harness self-test's bare commands pass False (the gate measures what the
    watch costs a cold worker)."""
    env = dict(env)
    hidden = _redaction_env(command, env)
    pass_fds, readers = [], []
    stop = threading.Event() if command.stop_at_first_result else None
    on_first = stop.set if stop else None
    traced = command_imports.asked(env)  # --explain's diagnostic process
    # Output always goes through a pipe: its tail is kept in memory, and a process that escaped
    # the group kill still holding it is seen in every mode.
    watch = _OutputWatch(command.first_result, on_first if command.first_result is not None else None, imports=traced)
    marks = _MarkReader(on_first) if command.mark else None
    if marks:
        read_fd, write_fd = os.pipe()
        env[ttfr_mark.FD_VARIABLE] = str(write_fd)
        pass_fds.append(write_fd)
        readers.append((read_fd, marks.read))
    read_fd, output = os.pipe()
    readers.append((read_fd, watch.read))
    # Its process tree is watched as a cold worker's is (the compilers it runs before its first result), but in
    # --explain's diagnostic process, which is not measured.
    ended = supervise(list(command.argv), env, command.cwd, timeout_s, output, pass_fds, readers, stop,
                      watch_tree=watch_tree and not traced)  # fmt: skip
    if isinstance(ended, str):
        return RunResult(ERROR, f"could not start the command: {ended}", None, time.monotonic_ns(), None, None)
    outcome, reason, record = _judge(command, ended, marks, watch, timeout_s)
    if outcome == "ok":
        changed = changed_files(command)
        if changed:  # the program that ran is not the one the run started with
            outcome, reason = INVALID, f"{changed[0]} changed or disappeared during the run (sha256 recorded in plan.json)"
    return RunResult(
        outcome=outcome,
        reason=redact_text(reason, hidden),
        record=_redacted(record, hidden),
        spawn_ns=ended.spawn_ns,
        reaped_ns=ended.exited_ns,
        exit_code=ended.exit_code,
        rusage=ended.rusage,
        output_tail=None if outcome == "ok" else redact_text(watch.text(), hidden),
        imports=_imports(command, watch, env, hidden) if traced else None,
        process_tree=_redacted_tree(ended.process_tree, hidden),
    )


def _imports(command: UserCommand, watch: _OutputWatch, env: dict, hidden: dict):
    """The diagnostic process's import trace, its `import` phase ending at the first result (the matching line,
    or ttfr_mark's line among the import lines; the exit: every import), through the one redaction (a program
    may print a line shaped like an import line, with anything in it)."""
    first_at = watch.imports_before_first if command.first_result_by in ("output", "mark") else None
    lines = [redact_text(line, hidden) for line in watch.imports or []]
    return command_imports.trace(lines, first_at, list(command.argv), env, command.cwd)


def _judge(command: UserCommand, ended, marks, watch, timeout_s: float) -> tuple[str, str | None, RunRecord | None]:
    """Outcome, reason and record of a finished command run."""
    if ended.timed_out:
        return TIMEOUT, f"timeout after {timeout_s:g} s (process group killed)", None
    if ended.exit_code != 0 and not ended.stopped:  # ttfr's own kill at the first result is no failure
        if ended.exit_code < 0:
            outcome, reason = classify(None, ended.exit_code, False, timeout_s, ended.oom)
            return outcome, f"the command was {reason}", None
        last = watch.last_line()
        said = f"; its output ends: {last}" if last else ""
        return ERROR, f"the command exited with code {ended.exit_code}" + _oom_note(ended.oom) + said, None
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
    record = RunRecord(
        outcome="ok", reason=None, marks_ns=Marks(first=first),
        # the process tree's largest peak; None when it is not above ttfr's own (see spawn)
        rusage_self=OwnRusage(max_rss_bytes=ended.rusage.max_rss_bytes),
        first_result=FirstResult(by=by, line=line, stopped=ended.stopped),
        # its own wait for a CPU, so that a busy neighbour alone does not void the run (as for workers)
        sched=_own_wait(ended),
    )  # fmt: skip
    if ended.escaped:  # what it left running competes with the next runs for the machine
        return INVALID, "the command: " + ESCAPED.format(grace=READER_GRACE_S), record
    if not ended.spawn_ns <= first <= ended.exited_ns:
        # A mark from another clock (time.time_ns) or another run: never a figure.
        record = msgspec.structs.replace(record, marks_ns=Marks())
        return INVALID, f"the first-result mark {first} lies outside the command's life (CLOCK_MONOTONIC ns expected)", record
    return "ok", None, record


def _own_wait(ended) -> Sched | UnsetType:
    """The command's wait for a CPU: its leader's main thread's, where that thread did most of its
    process tree's work. A wrapper (`sh -c`, `bash -c`, a launcher) whose children did the work
    says nothing of their wait: unknown, so the machine's load alone decides, as before."""
    if not ended.sched:
        return UNSET
    on_cpu_s, wait_s = ended.sched[0] / 1e9, ended.sched[1] / 1e9
    tree_cpu_s = ended.rusage.user_s + ended.rusage.sys_s if ended.rusage.user_s is not None else None
    if tree_cpu_s and on_cpu_s < _OWN_SHARE * tree_cpu_s:
        return UNSET
    return Sched(on_cpu_s=on_cpu_s, runq_wait_s=wait_s)


def _redacted_tree(tree: ProcessTree | None, env: dict) -> ProcessTree | None:
    """The user's program's process tree, every name through the one redaction (a program names its children)."""
    if tree is None:
        return None
    seen = [msgspec.structs.replace(p, name=redact_text(p.name, env), parent=redact_text(p.parent, env)) for p in tree.processes]
    return msgspec.structs.replace(tree, processes=seen)


def _redacted(record: RunRecord | None, env: dict) -> RunRecord | None:
    if record and record.first_result and record.first_result.line:
        first_result = msgspec.structs.replace(record.first_result, line=redact_text(record.first_result.line, env))
        return msgspec.structs.replace(record, first_result=first_result)
    return record
