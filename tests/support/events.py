"""Waiting for events, never for the clock: what a test (or a program it writes) blocks on instead
of sleeping, polling against a deadline or asserting an elapsed time. A wait here has no bound of
its own: pytest-timeout is the safety net (`make test-fast` gives --timeout; a test that blocks on
one of these says `@pytest.mark.timeout` itself), so a regression fails with the waiting stack
rather than a guess of how long is long enough on a loaded machine."""

from __future__ import annotations

import os
import select

# A program's statement (with `import os`) that never returns by itself: it reads a pipe whose write
# end it holds, so no EOF ever comes. A process blocked here ends only when it is killed, so "it is
# gone" proves a kill, not that some sleep ran out.
BLOCK_FOREVER = "os.read(os.pipe()[0], 1)"

# A program's statements (with `import fcntl, select`) for ordering its output against ttfr's reads:
# SHRINK_STDOUT_PIPE makes its stdout pipe one page, which is full while anything in it is unread;
# UNTIL_READ then returns once ttfr's reader has taken all that was written (the pipe has room again).
SHRINK_STDOUT_PIPE = "fcntl.fcntl(1, fcntl.F_SETPIPE_SZ, 4096)"
UNTIL_READ = "select.select([], [1], [])"


def wait_gone(*pids: int) -> None:
    """Return once every one of `pids` has exited (a zombie counts: it runs nothing, and a process
    reparented to a PID 1 that does not reap stays one). Blocks on a pidfd, which becomes readable
    when its process exits; a pid already gone returns at once."""
    for pid in pids:
        try:
            pidfd = os.pidfd_open(pid)
        except ProcessLookupError:
            continue
        try:
            select.select([pidfd], [], [])
        finally:
            os.close(pidfd)


def read_fifo(path) -> str:
    """All a FIFO's writer writes, once it closes its end: opening blocks until a writer opens it,
    reading until the last writer closes (a program that writes its pids there, then goes on)."""
    with open(path) as fifo:
        return fifo.read()
