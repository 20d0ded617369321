"""Append-only journal: one fsynced JSON line per finished task, so an interrupted suite
resumes where it stopped. A line that is not an entry (torn by a crash mid-write, garbage,
or values analysis cannot use) is skipped on reading, and said so: its task simply runs
again on --resume.

The journal is a regular file in the result directory, and is used only as one: reading and
writing never follow a symbolic link (a journal.jsonl planted as a link to a file elsewhere
is neither read nor written) and refuse a FIFO or a device (JournalError), and a line is
read at most MAX_LINE_BYTES at a time, so no journal can hang a run or exhaust its memory."""

from __future__ import annotations

import errno
import json
import os
import stat
from pathlib import Path

import msgspec

from ttfr.model.base import encode
from ttfr.model.journal import JournalEntry

MAX_LINE_BYTES = 64 << 20  # a longer line is skipped without being held in memory
_DISCARD_CHUNK = 1 << 20
_DECODER = msgspec.json.Decoder(JournalEntry)  # NaN and Infinity are not JSON: refused like garbage


class JournalError(Exception):
    """The journal cannot be used as one (a symbolic link, a FIFO, a device, a directory):
    the message names the path and why. A user's fix, like a bad option."""


def read_entry(line: bytes) -> tuple[JournalEntry | None, str | None]:
    """One line as a journal entry, or why it is not one analysis can use (the entry's types and
    how its values must agree: ttfr.model.journal)."""
    try:
        return _DECODER.decode(line), None
    except msgspec.ValidationError as exc:
        return None, str(exc).replace("`$.", "`").replace(" - at `$`", "")
    except (msgspec.DecodeError, RecursionError):
        return None, "not JSON (torn by a crash, or garbage)"


def encode_entry(entry: JournalEntry) -> bytes:
    """The entry as one line of JSON, as every journal has held it (sorted keys, Python's floats)."""
    return json.dumps(encode(entry), sort_keys=True, allow_nan=False).encode("utf-8")


class Journal:
    def __init__(self, path: Path):
        self.path = Path(path)
        self._checked_tail = False
        self.skipped: list[str] = []  # why each unreadable line was skipped, by the last entries()

    def _open(self, flags: int) -> int:
        """A descriptor of the journal, which must be a regular file (never through a link)."""
        try:
            fd = os.open(self.path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            if os.path.islink(self.path):  # ELOOP (O_NOFOLLOW), or EMLINK/ENOTDIR on other systems
                raise JournalError(f"{self.path}: is a symbolic link, not ttfr's journal; ttfr reads and writes only "
                                   "a regular journal.jsonl inside the result directory") from None  # fmt: skip
            if exc.errno in (errno.EISDIR, errno.ENXIO):  # a directory; a socket
                raise JournalError(f"{self.path}: is not a regular file ({exc.strerror}); ttfr's journal is a "
                                   "regular journal.jsonl inside the result directory") from None  # fmt: skip
            raise
        try:
            mode = os.fstat(fd).st_mode
        except OSError as exc:
            os.close(fd)
            raise OSError(exc.errno, exc.strerror, str(self.path)) from None
        if not stat.S_ISREG(mode):
            os.close(fd)
            raise JournalError(f"{self.path}: is {_file_kind(mode)}, not a regular file; ttfr's journal is "
                               "a regular journal.jsonl inside the result directory")  # fmt: skip
        return fd

    def append(self, entry: JournalEntry) -> None:
        line = encode_entry(entry) + b"\n"
        fd = self._open(os.O_RDWR | os.O_APPEND | os.O_CREAT)  # read too: the torn-tail check below
        try:
            if not self._checked_tail:
                # Terminate a line torn by a crash, so this entry does not get glued onto it.
                self._checked_tail = True
                size = os.fstat(fd).st_size
                if size and os.pread(fd, 1, size - 1) != b"\n":
                    line = b"\n" + line
            view = memoryview(line)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        except OSError as exc:  # write() and fsync() errors carry no file name: say which file
            raise OSError(exc.errno, exc.strerror, str(self.path)) from None
        finally:
            os.close(fd)

    def entries(self) -> list[JournalEntry]:
        try:
            fd = self._open(os.O_RDONLY)
        except FileNotFoundError:
            return []
        entries, skipped = [], []
        with os.fdopen(fd, "rb") as fh:
            number = 0
            while line := fh.readline(MAX_LINE_BYTES + 1):
                number += 1
                if len(line) > MAX_LINE_BYTES:
                    while not line.endswith(b"\n") and (line := fh.readline(_DISCARD_CHUNK)):
                        pass  # the rest of an overlong line, never held whole
                    skipped.append(f"{self.path} line {number}: longer than {MAX_LINE_BYTES} bytes; skipped, "
                                   "its task runs again")  # fmt: skip
                    continue
                entry, problem = read_entry(line)
                if problem:
                    if line.strip():
                        skipped.append(f"{self.path} line {number}: {problem}; skipped, its task runs again")
                    continue
                entries.append(entry)
        self.skipped = skipped
        return entries


def _file_kind(mode: int) -> str:
    for test, kind in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):  # fmt: skip
        if test(mode):
            return kind
    return "not a regular file"
