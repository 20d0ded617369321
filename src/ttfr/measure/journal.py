"""Append-only journal: one fsynced JSON line per finished task, so an interrupted suite
resumes where it stopped. A torn last line (crash mid-write) is ignored on reading."""

from __future__ import annotations

import json
import os
from pathlib import Path


class Journal:
    def __init__(self, path: Path):
        self.path = Path(path)
        self._checked_tail = False

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
        with open(self.path, "a", encoding="utf-8") as fh:
            fh.write(line)
            fh.flush()
            os.fsync(fh.fileno())

    def entries(self) -> list[dict]:
        if not self.path.exists():
            return []
        entries = []
        with open(self.path, encoding="utf-8") as fh:
            for line in fh:
                try:
                    entries.append(json.loads(line))
                except ValueError:
                    continue  # a line torn by a crash: that task simply runs again
        return entries
