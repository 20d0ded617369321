"""Reading a file someone else may have put there: a regular file only (a FIFO with no
writer would block, /dev/zero never ends), no larger than a limit, read once. Used by the
user-input checks (measure/datasets.py) and every reader of a result directory
(artifacts/reader.py); each words the refusal for its own user. Imports nothing of ttfr."""

from __future__ import annotations

import os
import stat


class FileRefused(Exception):
    """Why a file was not read. `reason`: missing, unreadable, not_regular, too_large or grew
    (past the limit while read); `detail`: the OS's words, what the file is instead, its size
    in bytes, or the limit it grew past."""

    def __init__(self, reason: str, detail):
        super().__init__(f"{reason}: {detail}")
        self.reason, self.detail = reason, detail


def kind_of(mode: int) -> str:
    """What a non-regular file is, in words."""
    for test, what in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a named pipe (FIFO)"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):  # fmt: skip
        if test(mode):
            return what
    return "not a regular file"


def stat_regular(path, limit: int) -> os.stat_result:
    """os.stat of a regular file of at most `limit` bytes, else FileRefused; opens nothing."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        raise FileRefused("missing", "No such file or directory") from None
    except OSError as exc:
        raise FileRefused("unreadable", exc.strerror) from None
    if not stat.S_ISREG(info.st_mode):
        raise FileRefused("not_regular", kind_of(info.st_mode))
    if info.st_size > limit:
        raise FileRefused("too_large", info.st_size)
    return info


def read_regular(path, limit: int) -> bytes:
    """The bytes of a regular file of at most `limit` bytes, read once, else FileRefused."""
    stat_regular(path, limit)
    try:
        # O_NONBLOCK: should the path have become a FIFO since the stat, the open cannot hang.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise FileRefused("unreadable", exc.strerror) from None
    with os.fdopen(fd, "rb") as fh:
        mode = os.fstat(fh.fileno()).st_mode
        if not stat.S_ISREG(mode):
            raise FileRefused("not_regular", kind_of(mode))
        try:
            data = fh.read(limit + 1)
        except OSError as exc:
            raise FileRefused("unreadable", exc.strerror) from None
    if len(data) > limit:
        raise FileRefused("grew", limit)  # larger than its stat said: it grew while read
    return data
