"""Append-only journal: one fsynced JSON line per finished task, so an interrupted suite
resumes where it stopped. A line that is not an entry (torn by a crash mid-write, or
garbage) is skipped on reading, and said so: its task simply runs again on --resume."""

from __future__ import annotations

import json
import os
from pathlib import Path

_INT, _NUM, _TEXT, _OBJ = (int,), (int, float), (str,), (dict,)
_NONE = (type(None),)
# The fields analysis reads, with the types it relies on.
ENTRY_FIELDS = {
    "task": _TEXT, "case": _TEXT, "kind": _TEXT, "policy": _TEXT + _NONE, "index": _INT, "round": _INT,
    "makes_template": (bool,), "outcome": _TEXT, "reason": _TEXT + _NONE, "spawn_ns": _INT,
    "reaped_ns": _INT + _NONE, "exit_code": _INT + _NONE, "cache_dir": _OBJ, "record": _OBJ + _NONE,
    "rusage": _OBJ + _NONE, "host": _OBJ + _NONE, "output_tail": _TEXT + _NONE,
}  # fmt: skip
RECORD_FIELDS = {
    "marks_ns": _OBJ, "stages_s": _OBJ, "rusage_self": _OBJ, "cache": _OBJ + _NONE, "digest": _OBJ + _NONE,
    "warm": _OBJ + _NONE, "check": _OBJ + _NONE, "memory": _OBJ + _NONE,
}  # fmt: skip


def _typed(value, types) -> bool:
    return isinstance(value, types) and not (isinstance(value, bool) and bool not in types)


def entry_problem(entry) -> str | None:
    """Why a parsed line is not a journal entry, or None."""
    if not isinstance(entry, dict):
        return f"a JSON {type(entry).__name__}, not an entry"
    for name, types in ENTRY_FIELDS.items():
        if name not in entry:
            return f"no `{name}`"
        if not _typed(entry[name], types):
            return f"`{name}` has the wrong type"
    if not all(_typed(entry["cache_dir"].get(k), _INT) for k in ("entries_before", "entries_after")):
        return "`cache_dir` lacks its entry counts"
    record = entry["record"] or {}
    for name, types in RECORD_FIELDS.items():
        if name in record and not _typed(record[name], types):
            return f"`record.{name}` has the wrong type"
    if not all(_typed(v, _INT + _NONE) for v in (record.get("marks_ns") or {}).values()):
        return "`record.marks_ns` holds a value that is not a timestamp"
    if not all(_typed(v, _NUM + _NONE) for v in (record.get("stages_s") or {}).values()):
        return "`record.stages_s` holds a value that is not a number"
    return None


class Journal:
    def __init__(self, path: Path):
        self.path = Path(path)
        self._checked_tail = False
        self.skipped: list[str] = []  # why each unreadable line was skipped, by the last entries()

    def append(self, entry: dict) -> None:
        line = json.dumps(entry, sort_keys=True, allow_nan=False) + "\n"
        if not self._checked_tail:
            # Terminate a line torn by a crash, so this entry does not get glued onto it.
            self._checked_tail = True
            if self.path.exists() and self.path.stat().st_size:
                with open(self.path, "rb") as fh:
                    fh.seek(-1, os.SEEK_END)
                    if fh.read(1) != b"\n":
                        line = "\n" + line
        try:
            with open(self.path, "a", encoding="utf-8") as fh:
                fh.write(line)
                fh.flush()
                os.fsync(fh.fileno())
        except OSError as exc:  # write() and fsync() errors carry no file name: say which file
            raise OSError(exc.errno, exc.strerror, str(self.path)) from None

    def entries(self) -> list[dict]:
        if not self.path.exists():
            return []
        entries, skipped = [], []
        with open(self.path, "rb") as fh:
            for number, line in enumerate(fh, 1):
                try:
                    entry = json.loads(line.decode("utf-8"))
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
