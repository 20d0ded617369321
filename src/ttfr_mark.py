"""Tell ttfr when your program has its first result: `ttfr_mark.first_result()`.

For `ttfr run --command "python train.py" --first-result-mark`: call it the moment your
program has what it runs for (the first loss, the fitted value), and ttfr's time to first
result ends there instead of at the program's exit. Outside ttfr it does nothing, so the
call can stay in the program.

Standard library only, and nothing but `os` and `time` imported: it costs your program no
measurable time. The protocol is one line, `first_result <CLOCK_MONOTONIC ns>`, written to the
file descriptor ttfr names in `TTFR_MARK_FD`; a program in another language can write it
itself. The descriptor is inherited by processes your program starts, unless they close
inherited descriptors (Python's `subprocess` does by default: pass `pass_fds`).
"""

import os
import time

__all__ = ["first_result"]

FD_VARIABLE = "TTFR_MARK_FD"
TRACE_VARIABLE = "PYTHONPROFILEIMPORTTIME"  # set in ttfr's --explain diagnostic run of a command
FIRST_RESULT_LINE = b"ttfr-phase imported"  # --explain of a command: its imports before the mark are its import phase
_sent = False


def first_result() -> bool:
    """Record now as the time of the first result; True when ttfr was told. Only the first
    call counts (later ones return False), so it can sit inside a loop."""
    global _sent
    now = time.monotonic_ns()  # before anything else: the mark is this moment
    fd = os.environ.get(FD_VARIABLE, "")
    if _sent or not fd.isdigit():
        return False
    _sent = True
    try:
        os.write(int(fd), b"first_result %d\n" % now)
    except OSError:  # not a descriptor ttfr passed (the variable leaked into another program)
        return False
    if os.environ.get(TRACE_VARIABLE) == "1":  # ttfr's --explain: the mark among the import lines
        try:
            os.write(2, b"\n" + FIRST_RESULT_LINE + b"\n")
        except OSError:
            pass
    return True
