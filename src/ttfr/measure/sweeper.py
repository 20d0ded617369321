"""Kill the workers' process groups when the ttfr process that spawned them dies, even by SIGKILL.

Each worker runs in its own session (a group leader; compiler grandchildren such as g++ stay in its
group), so nothing else takes it down with a parent that died without cleaning up: it would go on
running under PID 1, past its timeout. One small "sweeper" process per ttfr process guards them:

- started lazily before the first worker (and waited for until it is ready, so its start-up never
  overlaps a timed worker start), in its own session (Ctrl-C in the terminal does not reach it),
  `python -I -S -c` (standard library only), stdout/stderr to /dev/null, cwd /;
- its stdin is the read end of a pipe whose write end only this process holds (the pipe is
  close-on-exec, workers are spawned with close_fds, and forked children close it);
- `watch(pgid)` after each spawn writes "add PGID", `release(pgid)` once the group was killed and
  its leader reaped writes "del PGID" (so a reused number is never killed later): one small write each;
- when the parent dies, however it dies, the kernel closes the write end: the sweeper reads EOF,
  SIGKILLs every group still registered and exits. A normal exit closes the pipe too (atexit, which
  also waits for the sweeper), with nothing registered, so the sweeper just exits.

Not covered: a worker spawned in the microseconds between its fork and the "add" write, and
processes that leave the worker's group on purpose (setsid). PR_SET_PDEATHSIG on the worker is not
used: it needs a preexec_fn, which makes Popen fork() instead of vfork() inside the timed spawn,
is unsafe with the watcher threads running, and would cover the worker but not its grandchildren.
"""

from __future__ import annotations

import atexit
import os
import select
import subprocess
import sys
import threading
import warnings

READY_TIMEOUT_S = 10.0
EXIT_WAIT_S = 5.0

SWEEPER_CODE = r"""# ttfr sweeper: kills the registered worker process groups when its parent dies
import os, signal
signal.signal(signal.SIGINT, signal.SIG_IGN)
groups = set()
os.write(1, b"r")
null = os.open(os.devnull, os.O_WRONLY)
os.dup2(null, 1)
os.close(null)
pending = b""
while chunk := os.read(0, 65536):
    *lines, pending = (pending + chunk).split(b"\n")
    for line in lines:
        verb, _, number = line.partition(b" ")
        if number.isdigit() and int(number) > 1:
            if verb == b"add":
                groups.add(int(number))
            elif verb == b"del":
                groups.discard(int(number))
for pgid in groups:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except OSError:
        pass
"""

_lock = threading.Lock()
_proc: subprocess.Popen | None = None
_write_fd: int | None = None
_groups: set[int] = set()
_failed = False  # warned once that no sweeper could be started


def pid() -> int | None:
    """The sweeper's process id, None while none runs for this process."""
    return _proc.pid if _proc is not None else None


def start() -> bool:
    """Make sure a sweeper runs (starting one, or a new one if it was killed); True when one does.

    Called before each worker's timed spawn, so starting never happens inside it; after one failed
    start (warned about once) it is not tried again.
    """
    with _lock:
        if _write_fd is not None and _proc is not None and _proc.poll() is None:
            return True
        _drop_locked()
        return False if _failed else _start_locked()


def watch(pgid: int) -> None:
    """Have the sweeper kill process group `pgid` if this process dies before `release(pgid)`.

    One small write; a sweeper found dead gets the group when `start` replaces it.
    """
    if pgid <= 1:
        return
    with _lock:
        _groups.add(pgid)
        if _write_fd is not None:
            _send(b"add %d\n" % pgid)


def release(pgid: int) -> None:
    """The group was killed and its leader reaped: the sweeper must forget it."""
    with _lock:
        if pgid in _groups:
            _groups.discard(pgid)
            if _write_fd is not None:
                _send(b"del %d\n" % pgid)


def stop() -> None:
    """Close the pipe (the sweeper kills what is still registered and exits) and reap it."""
    global _proc, _write_fd
    with _lock:
        proc, fd = _proc, _write_fd
        _proc, _write_fd = None, None
        _groups.clear()
    if fd is not None:
        os.close(fd)
    if proc is not None:
        try:
            proc.wait(EXIT_WAIT_S)
        except subprocess.TimeoutExpired:
            pass


def _start_locked() -> bool:
    global _proc, _write_fd
    if not sys.executable:
        return _give_up("no Python executable to run it")
    read_fd, write_fd = os.pipe()  # close-on-exec: no worker inherits the write end
    ready_r, ready_w = os.pipe()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", SWEEPER_CODE, "ttfr-sweeper", str(os.getpid())],
            stdin=read_fd, stdout=ready_w, stderr=subprocess.DEVNULL, cwd="/", start_new_session=True,
        )  # fmt: skip
    except OSError as exc:
        os.close(write_fd)
        return _give_up(str(exc))
    finally:
        os.close(read_fd)
        os.close(ready_w)
    try:
        readable, _, _ = select.select([ready_r], [], [], READY_TIMEOUT_S)
        ready = bool(readable) and os.read(ready_r, 1) == b"r"
    finally:
        os.close(ready_r)
    if not ready:
        os.close(write_fd)
        proc.kill()
        proc.wait()
        return _give_up("it did not come up")
    _proc, _write_fd = proc, write_fd
    if _groups:  # a replacement: it takes over the groups its predecessor had
        return _send(b"".join(b"add %d\n" % pgid for pgid in sorted(_groups)))
    return True


def _send(message: bytes) -> bool:
    """Write under the lock; False when the sweeper had died (then `start` replaces it)."""
    try:
        os.write(_write_fd, message)
        return True
    except OSError:  # BrokenPipeError: someone killed the sweeper
        _drop_locked()
        return False


def _drop_locked() -> None:
    """Forget a dead sweeper: close our end of its pipe and reap it."""
    global _proc, _write_fd
    if _write_fd is not None:
        os.close(_write_fd)
        _write_fd = None
    if _proc is not None:
        _proc.kill()
        _proc.wait()
        _proc = None


def _give_up(why: str) -> bool:
    global _failed
    if not _failed:
        _failed = True
        warnings.warn(
            f"ttfr: could not start the sweeper process ({why}); workers will outlive a killed ttfr",
            RuntimeWarning,
            stacklevel=3,
        )
    return False


def _forget_in_child() -> None:
    """After os.fork(): the child must not hold the parent's pipe (the sweeper would wait for it too)."""
    global _lock, _proc, _write_fd
    _lock = threading.Lock()
    if _write_fd is not None:
        try:
            os.close(_write_fd)
        except OSError:
            pass
    _proc, _write_fd = None, None
    _groups.clear()


os.register_at_fork(after_in_child=_forget_in_child)
atexit.register(stop)
