"""When the `ttfr` command began (standard library only): `ttfr run --verbose` counts the
interpreter's start and ttfr's imports from the process's start to then and on."""

from __future__ import annotations

import time

_began: tuple[float, float] | None = None  # (monotonic time, the process's age then)


def mark() -> None:
    """Called first by the `ttfr` command (not when a program calls cli.main itself: its
    process's age would say nothing of ttfr's start-up)."""
    global _began
    from ttfr.child.hostinfo import process_age_s

    age = process_age_s()
    _began = None if age is None else (time.monotonic(), age)


def seconds() -> float | None:
    """From the process's start until now, or None when `mark` was not called (or no /proc)."""
    if _began is None:
        return None
    at, age = _began
    return age + time.monotonic() - at
