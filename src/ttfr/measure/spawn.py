"""Run one worker process: spawn it in its own session, watch it, collect its record.

- The record comes over a dedicated pipe as a Python literal, read with ast.literal_eval
  (the worker's stdout/stderr go to a log file, whose tail is kept when a run fails).
- A waiter thread sees the worker exit without reaping it (`waitid` with WNOWAIT); that
  moment ends `process_s` (`reaped_ns`). Then the group is killed (stragglers), and only
  then `os.wait4` reaps the leader, so its rusage (CPU time of it and its reaped children,
  such as g++) comes back and no reused pid can ever be the group that is killed.
- The watchdog kills the whole process group on timeout (compiler grandchildren too), and
  the group is killed again after the worker exits to leave no stragglers.
- The group is registered with this process's sweeper (measure/sweeper.py) while it may be
  alive, so it dies with a ttfr that is killed outright (kill -9) instead of running on.
- A worker killed by SIGKILL that ttfr did not send is "oom" only when the kernel's OOM-kill
  counter (of this cgroup, else of the machine) rose during its life; otherwise it is "signal".
"""

from __future__ import annotations

import ast
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field

from ttfr.child import hostinfo
from ttfr.child.job import Job
from msgspec import ValidationError

from ttfr.model.base import decode
from ttfr.model.journal import Rusage
from ttfr.model.record import OUTCOMES as RECORD_OUTCOMES
from ttfr.model.record import RunRecord
from ttfr.redaction import redact_text
from ttfr.measure import sweeper

WORKER_BOOT = "from ttfr.child.worker import main; main()"
STDERR_TAIL_CHARS = 2000
READER_GRACE_S = 5.0  # how long a pipe may stay open after its process group was killed
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


@dataclass(frozen=True)
class OomCounter:
    """A file with an `oom_kill N` line: the kernel's count of OOM-killed processes."""

    path: str
    source: str  # how reasons name it: "memory.oom_control", "memory.events", "/proc/vmstat"
    scope: str  # "in this cgroup" or "on this machine"

    def read(self) -> int | None:
        try:
            with open(self.path, "rb") as stats:
                for line in stats:
                    key, _, value = line.partition(b" ")
                    if key == b"oom_kill":
                        return int(value)
        except (OSError, ValueError):
            pass
        return None


@dataclass(frozen=True)
class OomCheck:
    """How many OOM kills the counter recorded during one worker's life."""

    kills: int
    source: str
    scope: str


def find_oom_counter(proc: str = "/proc", cgroup_fs: str = "/sys/fs/cgroup") -> OomCounter | None:
    """This process's OOM-kill counter: its cgroup's (v1 memory controller, else v2), else the machine's.

    The kernel raises the counter before it sends the SIGKILL, so it is up to date by the time the
    victim is reaped. Both cgroup counters include the cgroup's descendants; workers inherit the cgroup.
    """
    candidates = []
    try:
        with open(os.path.join(proc, "self", "cgroup")) as cgroups:
            lines = cgroups.read().splitlines()
    except OSError:
        lines = []
    for line in lines:
        _hierarchy, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        path = path.lstrip("/")
        if "memory" in controllers.split(","):
            candidates.append(OomCounter(os.path.join(cgroup_fs, "memory", path, "memory.oom_control"),
                                         "memory.oom_control", "in this cgroup"))  # fmt: skip
        elif controllers == "":
            for root in (cgroup_fs, os.path.join(cgroup_fs, "unified")):
                candidates.append(OomCounter(os.path.join(root, path, "memory.events"), "memory.events", "in this cgroup"))
    candidates.append(OomCounter(os.path.join(proc, "vmstat"), "/proc/vmstat", "on this machine"))
    return next((counter for counter in candidates if counter.read() is not None), None)


def inherited_rss_floor() -> int | None:
    """This process's peak RSS: what a child's ru_maxrss cannot go below."""
    return hostinfo.peak_rss_bytes()


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
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


@dataclass
class _Ended:
    """How one supervised process group ended."""

    spawn_ns: int
    exited_ns: int | None  # when the leader exited (None: killed at the timeout)
    exit_code: int | None
    rusage: Rusage
    timed_out: bool
    oom: OomCheck | None
    # A pipe still open READER_GRACE_S after the group was killed: a process it started in a
    # session of its own (a daemon) escaped the kill and holds it; its reader is abandoned.
    escaped: bool = False
    stopped: bool = False  # killed on request (`stop`), not by the timeout


def _supervise(argv, env: dict, cwd, timeout_s: float, output, pass_fds=(), readers=(), stop=None) -> _Ended | str:
    """Start `argv` in a session of its own with stdout and stderr to `output` (a file, or a
    pipe's write end, closed here once the child has it), wait for it at most `timeout_s`,
    kill its group, reap it; each of `readers`, (fd, function(fd)), runs in a thread from the
    spawn until its pipe closes. `pass_fds` are the child's ends of those pipes (closed here
    once it started). `stop`: a threading.Event whose setting ends the process group early
    (`stopped`). A str: why it did not start."""
    sweeper.start()  # before the clock starts: a no-op once the sweeper runs
    counter = find_oom_counter()
    oom_before = counter.read() if counter else None
    floor = inherited_rss_floor()
    exited: dict = {}  # when the process exited (seen by the waiter thread, which does not reap it)
    reaped: dict = {}  # its wait status and rusage, once reaped
    spawn_ns = time.monotonic_ns()
    try:
        proc = subprocess.Popen(
            argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=output, stderr=output,
            pass_fds=tuple(pass_fds), start_new_session=True,
        )  # fmt: skip
    except (OSError, ValueError) as exc:  # no such program or directory; a NUL byte in an argument
        for fd, _function in readers:
            os.close(fd)
        return f"could not start {argv[0]}: {getattr(exc, 'strerror', None) or exc}"
    finally:
        for fd in (*pass_fds, *([output] if isinstance(output, int) else [])):
            os.close(fd)  # the child's ends: the readers see their pipes close when the child's do
    sweeper.watch(proc.pid)  # the child leads its own group: pgid == pid

    def wait_exit():
        # Exited, not reaped (WNOWAIT): the leader stays a zombie, so its pid and group id
        # cannot be reused before the group is killed below. The time is the process's exit.
        os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)
        exited["ns"] = time.monotonic_ns()

    threads = [threading.Thread(target=function, args=(fd,), daemon=True) for fd, function in readers]
    waiter = threading.Thread(target=wait_exit, daemon=True)
    for thread in threads:
        thread.start()
    waiter.start()
    timed_out = stopped = False
    try:
        if stop is None:
            waiter.join(timeout_s)
        else:  # wake for the stop request too (a command's first result, with --stop-at-first-result)
            deadline = time.monotonic() + timeout_s
            while waiter.is_alive() and not stop.wait(min(max(deadline - time.monotonic(), 0.0), 0.05)):
                if time.monotonic() >= deadline:
                    break
            stopped = stop.is_set() and waiter.is_alive()
            if stopped:
                _kill_group(proc.pid)
                waiter.join()
        if waiter.is_alive():
            timed_out = True
            _kill_group(proc.pid)
            waiter.join()
    except BaseException:  # Ctrl-C: leave nothing running behind us
        _kill_group(proc.pid)
        waiter.join()
        raise
    finally:
        _kill_group(proc.pid)  # stragglers holding the pipes (forked compile workers); the leader is unreaped
        if exited:
            sweeper.release(proc.pid)  # the group is dead: never kill that number later
            _pid, status, usage = os.wait4(proc.pid, 0)  # reap now; rusage covers it and its reaped children
            reaped.update(status=status, usage=usage)
        deadline = time.monotonic() + READER_GRACE_S
        for thread in threads:
            thread.join(max(deadline - time.monotonic(), 0.0))
    exit_code = os.waitstatus_to_exitcode(reaped["status"])
    proc.returncode = exit_code  # we reaped it; keep Popen from trying again
    oom_after = counter.read() if oom_before is not None else None
    usage = reaped["usage"]
    return _Ended(
        spawn_ns=spawn_ns,
        exited_ns=None if timed_out else exited["ns"],
        exit_code=exit_code,
        rusage=Rusage(
            user_s=usage.ru_utime,
            sys_s=usage.ru_stime,
            # The child's ru_maxrss starts at this process's peak (its memory, held between fork
            # and exec): at or below that floor the figure says nothing about the child.
            max_rss_bytes=usage.ru_maxrss * 1024 if floor is None or usage.ru_maxrss * 1024 > floor else None,
            rss_floor_bytes=floor,
            involuntary_switches=usage.ru_nivcsw,
        ),
        timed_out=timed_out,
        oom=None if oom_after is None else OomCheck(oom_after - oom_before, counter.source, counter.scope),
        escaped=any(thread.is_alive() for thread in threads),
        stopped=stopped,
    )


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
    for key, value in data.items():
        if isinstance(value, str) and key not in _RECORD_WORDS:
            data[key] = redact_text(value, env)
    try:
        return decode(data, RunRecord), None
    except ValidationError as exc:
        return None, str(exc)


def run_worker(job: Job, env: dict, timeout_s: float, python: str | None = None, cwd: str | None = None) -> RunResult:
    read_fd, write_fd = os.pipe()
    words = job.replace(fd=write_fd).to_words()
    argv = [python or sys.executable, "-P", "-c", WORKER_BOOT, *words]
    chunks: list[bytes] = []
    with tempfile.TemporaryFile() as log:
        ended = _supervise(argv, env, cwd, timeout_s, log, (write_fd,),
                           [(read_fd, lambda fd: _read_all(fd, chunks))])  # fmt: skip
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
        )
