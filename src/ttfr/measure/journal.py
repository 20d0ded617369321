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
import math
import os
import stat
from pathlib import Path

from ttfr.measure import cache
from ttfr.measure.catalog import JAX_MONITORING, TORCH_COUNTERS
from ttfr.measure.spawn import OUTCOMES

MAX_LINE_BYTES = 64 << 20  # a longer line is skipped without being held in memory
_DISCARD_CHUNK = 1 << 20

_INT, _NUM, _TEXT, _OBJ = (int,), (int, float), (str,), (dict,)
_NONE = (type(None),)
# The fields analysis reads, with the types it relies on.
ENTRY_FIELDS = {
    "task": _TEXT, "case": _TEXT, "kind": _TEXT, "policy": _TEXT + _NONE, "index": _INT, "round": _INT,
    "measured": (bool,), "makes_template": (bool,), "outcome": _TEXT, "reason": _TEXT + _NONE, "spawn_ns": _INT,
    "reaped_ns": _INT + _NONE, "exit_code": _INT + _NONE, "cache_dir": _OBJ, "record": _OBJ + _NONE,
    "rusage": _OBJ + _NONE, "host": _OBJ + _NONE, "output_tail": _TEXT + _NONE,
}  # fmt: skip
RECORD_FIELDS = {
    "marks_ns": _OBJ, "stages_s": _OBJ, "rusage_self": _OBJ, "cache": _OBJ + _NONE, "digest": _OBJ + _NONE,
    "warm": _OBJ + _NONE, "check": _OBJ + _NONE, "memory": _OBJ + _NONE, "device": _OBJ + _NONE,
    "versions": _OBJ + _NONE, "dataset_sha256": _TEXT + _NONE, "sched": _OBJ + _NONE,
}  # fmt: skip
_STAMP_LIMIT = 2**63  # a monotonic_ns() reading is an int64
_SECONDS_LIMIT = 1e9  # ~31 years: any duration a run records is far below
# Cold-start spans analysis takes between the parent's spawn mark, the worker's marks and the reap
# (analyse/runs.py run_metrics): each must not end before it starts.
_SPANS = (("spawn", "main"), ("main", "imported"), ("imported", "setup"), ("setup", "first"), ("spawn", "first"),
          ("second_start", "second"))  # fmt: skip


class JournalError(Exception):
    """The journal cannot be used as one (a symbolic link, a FIFO, a device, a directory):
    the message names the path and why. A user's fix, like a bad option."""


def _typed(value, types) -> bool:
    return isinstance(value, types) and not (isinstance(value, bool) and bool not in types)


def _finite(value) -> bool:
    """A number a float holds (no NaN or infinity, no int beyond a float's range)."""
    if _typed(value, _INT):
        return abs(value) < 2**1023
    return _typed(value, _NUM) and math.isfinite(value)


def _number(value) -> bool:
    """A finite number of a sane size: sums and spreads of such values stay finite."""
    return _finite(value) and abs(value) < _STAMP_LIMIT


def _seconds(value) -> bool:
    return _number(value) and 0 <= value <= _SECONDS_LIMIT


def _whole(value, low: int = 0) -> bool:
    return _typed(value, _INT) and low <= value < _STAMP_LIMIT


def _stamp(value) -> bool:
    return _whole(value)


def _or_none(check):
    return lambda value: value is None or check(value)


def _list_of(value, check, nonempty: bool = False) -> bool:
    return isinstance(value, list) and (bool(value) or not nonempty) and all(check(v) for v in value)


def _absent_or(mapping: dict, key: str, check) -> bool:
    return key not in mapping or check(mapping[key])


def entry_problem(entry) -> str | None:
    """Why a parsed line is not a journal entry analysis can use, or None."""
    if not isinstance(entry, dict):
        return f"a JSON {type(entry).__name__}, not an entry"
    for name, types in ENTRY_FIELDS.items():
        if name not in entry:
            return f"no `{name}`"
        if not _typed(entry[name], types):
            return f"`{name}` has the wrong type"
    return _entry_values_problem(entry) or _record_problem(entry, entry["record"])


def _entry_values_problem(entry: dict) -> str | None:
    outcome = entry["outcome"]
    if outcome not in OUTCOMES:
        return "`outcome` is not a known outcome"
    if (outcome == "unavailable" or (entry["measured"] and outcome != "ok")) and not entry["reason"]:
        return "`reason` is missing for a run that was not ok"
    for name in ("index", "round"):
        if not _whole(entry[name]):
            return f"`{name}` is negative"
    if not _stamp(entry["spawn_ns"]):
        return "`spawn_ns` is not a timestamp"
    if entry["reaped_ns"] is not None and not (_stamp(entry["reaped_ns"]) and entry["reaped_ns"] >= entry["spawn_ns"]):
        return "`reaped_ns` is not a timestamp after `spawn_ns`"
    if not all(_whole(entry["cache_dir"].get(k)) for k in ("entries_before", "entries_after")):
        return "`cache_dir` lacks its entry counts (whole numbers >= 0)"
    if not all(_or_none(_number)(v) for v in (entry["rusage"] or {}).values()):
        return "`rusage` holds a value that is not a number"
    return _host_problem(entry["host"])


def _host_problem(host: dict | None) -> str | None:
    """What analysis reads of the host's state around the run (analyse/contention.py, diagnostics.py)."""
    if host is None:
        return None
    for name in ("cpu_pressure_avg10", "steal_fraction", "cpu_pressure_stall_s"):
        if not _absent_or(host, name, _or_none(_number)):
            return f"`host.{name}` is not a number"
    if not _absent_or(host, "load_average", _or_none(lambda v: _list_of(v, _or_none(_number)))):
        return "`host.load_average` is not a list of numbers"
    if not _absent_or(host, "usable_cores", _or_none(lambda v: _whole(v, 1))):
        return "`host.usable_cores` is not a count of cores"
    for name in ("runnable_start", "runnable_end"):
        if not _absent_or(host, name, _or_none(lambda v: _list_of(v, _whole, nonempty=True))):
            return f"`host.{name}` is not a list of counts"
    return None


def _record_problem(entry: dict, record: dict | None) -> str | None:
    if record is None:
        return "`record` is missing for a run that was ok" if entry["outcome"] == "ok" else None
    for name, types in RECORD_FIELDS.items():
        if name in record and not _typed(record[name], types):
            return f"`record.{name}` has the wrong type"
    marks = record.get("marks_ns") or {}
    if not all(_or_none(_stamp)(v) for v in marks.values()):
        return "`record.marks_ns` holds a value that is not a timestamp"
    if entry["outcome"] == "ok" and marks.get("first") is None:
        return "`record.marks_ns` has no `first` mark for a run that was ok"
    points = {**marks, "spawn": entry["spawn_ns"]}
    for start, end in _SPANS:
        if points.get(start) is not None and points.get(end) is not None and points[end] < points[start]:
            return f"`record.marks_ns`: `{end}` is before `{start}`"
    if not all(_seconds(v) for v in (record.get("stages_s") or {}).values()):
        return "`record.stages_s` holds a value that is not a number of seconds"
    if not all(_or_none(_number)(v) for v in (record.get("rusage_self") or {}).values()):
        return "`record.rusage_self` holds a value that is not a number"
    sched = record.get("sched") or {}
    if not all(_absent_or(sched, k, _or_none(_number)) for k in ("on_cpu_s", "runq_wait_s")):
        return "`record.sched` holds a value that is not a number"
    for name, check in (("cache", _cache_problem), ("digest", _digest_problem), ("check", _check_problem),
                        ("warm", _warm_problem), ("memory", _memory_problem), ("device", _device_problem)):  # fmt: skip
        if record.get(name) is not None:
            problem = check(record[name], entry["outcome"])
            if problem:
                return f"`record.{name}` {problem}"
    versions = record.get("versions") or {}
    if not all(v is None or isinstance(v, str) or _typed(v, _INT) for v in versions.values()):
        return "`record.versions` holds a value that is not a version"
    sha = record.get("dataset_sha256")
    if sha is not None and not (len(sha) == 64 and all(c in "0123456789abcdef" for c in sha)):
        return "`record.dataset_sha256` is not a sha256 in hex"
    return None


def _cache_problem(value: dict, _outcome) -> str | None:
    """The runtime's counters at the end of the run, as cache.hit_miss reads them."""
    end = value.get("end")
    if end is None:
        return None
    if not isinstance(end, dict):
        return "`end` is not an object"
    for kind in (JAX_MONITORING, TORCH_COUNTERS):
        try:
            counts = cache.hit_miss(kind, end) or {}
        except (AttributeError, TypeError, ValueError, OverflowError):
            return "holds counters that are not counts"
        if not all(_number(v) and v >= 0 for v in counts.values()):
            return "holds counters that are not counts (or more hits than requests)"
    return None


def _digest_problem(digest: dict, outcome: str) -> str | None:
    """The result's fingerprint (worker.py _digest): a sum that overflowed is null, and only
    an ok run's digest is compared (analyse/runs.py), so only there must the sums be numbers."""
    if not _whole(digest.get("count")):
        return "has no `count`"
    sum_ok = _or_none(_finite)  # analysis compares only sums that did not overflow
    if not all(k in digest and sum_ok(digest[k]) for k in ("sum", "sum_sq")):
        return "has no `sum` and `sum_sq` numbers"
    if not isinstance(digest.get("finite"), bool):
        return "has no `finite` flag"
    return None


def _check_problem(check: dict, _outcome) -> str | None:
    """The result check (worker.py _check, histfactory/gate.py), as the case result holds it."""
    if not isinstance(check.get("passed"), bool):
        return "has no `passed` flag"
    if not (_number(check.get("tolerance")) and check["tolerance"] >= 0):
        return "has no `tolerance` number"
    if "max_normalised_error" not in check or not _or_none(lambda v: _number(v) and v >= 0)(check["max_normalised_error"]):
        return "has no `max_normalised_error` (a number >= 0, or null)"
    if not isinstance(check.get("reference"), str):
        return "has no `reference`"
    if not _absent_or(check, "detail", lambda v: isinstance(v, str)):
        return "has a `detail` that is not text"
    return None


def _numbers(value) -> bool:
    return _list_of(value, _number)


def _warm_problem(warm: dict, _outcome) -> str | None:
    """The warm regime (worker.py _warm_regime) as analysis reads it: analyse/runs.py warm_view,
    sync_check.judge (inner_loops indexed; the evidence lists read with .get) and contention."""
    if not _list_of(warm.get("samples_s"), lambda v: _seconds(v) and v > 0, nonempty=True):
        return "has no `samples_s` (a non-empty list of seconds > 0)"
    if not _whole(warm.get("inner_loops"), 1):
        return "has no `inner_loops` (a whole number >= 1)"
    if not _numbers(warm.get("warmup_per_call_s")):
        return "has no `warmup_per_call_s` list of numbers"
    if not isinstance(warm.get("warmup_stable"), bool):
        return "has no `warmup_stable` flag"
    if not _absent_or(warm, "trailing_sync_fraction", _numbers):
        return "has a `trailing_sync_fraction` that is not a list of numbers"
    if not _absent_or(warm, "doubling_ratios", lambda v: _list_of(v, _or_none(_number))):  # inf is written as null
        return "has a `doubling_ratios` that is not a list of numbers"
    if not _absent_or(warm, "pending_after_loop", lambda v: _list_of(v, lambda x: isinstance(x, bool))):
        return "has a `pending_after_loop` that is not a list of flags"
    overlap = warm.get("overlap")
    if overlap is not None and not (
        isinstance(overlap, dict) and all(_absent_or(overlap, k, _numbers) for k in ("as_timed_s", "each_waited_s"))
    ):
        return "has an `overlap` that is not lists of seconds"
    evidence = warm.get("sample_evidence")
    if evidence is not None and not (
        isinstance(evidence, dict)
        and _absent_or(evidence, "cpu_s", _numbers)
        and all(_absent_or(evidence, k, lambda v: _list_of(v, _or_none(_number))) for k in ("wall_s", "runq_wait_s"))
    ):
        return "has a `sample_evidence` that is not lists of seconds"
    return None


def _memory_problem(memory: dict, _outcome) -> str | None:
    if "peak_rss_bytes" in memory:
        return "holds `peak_rss_bytes`, which analysis computes"
    if not _absent_or(memory, "device_peak_bytes", _whole):
        return "has a `device_peak_bytes` that is not a byte count"
    if not _absent_or(memory, "compiled", lambda v: isinstance(v, dict) and all(_whole(x) for x in v.values())):
        return "has a `compiled` that is not byte counts"
    return None


def _device_problem(device: dict, _outcome) -> str | None:
    if not (isinstance(device.get("platform"), str) and isinstance(device.get("kind"), str) and _whole(device.get("count"))):
        return "lacks its `platform`, `kind` and `count`"
    return None


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

    def append(self, entry: dict) -> None:
        line = (json.dumps(entry, sort_keys=True, allow_nan=False) + "\n").encode("utf-8")
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

    def entries(self) -> list[dict]:
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
                try:  # NaN and Infinity are not JSON (append never writes them): they would not write out
                    entry = json.loads(line.decode("utf-8"), parse_constant=_no_constant)
                except (UnicodeDecodeError, ValueError, RecursionError):
                    problem = "not JSON (torn by a crash, or garbage)"
                else:
                    problem = entry_problem(entry)
                if problem:
                    if line.strip():
                        skipped.append(f"{self.path} line {number}: {problem}; skipped, its task runs again")
                    continue
                entries.append(entry)
        self.skipped = skipped
        return entries


def _no_constant(token: str):
    raise ValueError(f"{token} is not a JSON number")


def _file_kind(mode: int) -> str:
    for test, kind in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):  # fmt: skip
        if test(mode):
            return kind
    return "not a regular file"
