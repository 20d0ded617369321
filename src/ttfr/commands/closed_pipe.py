"""A closed stdout ends ttfr as it ends git, cat or yes: quietly, with the status a shell shows
for a process ended by SIGPIPE (128 + 13). This is the Python docs' "Note on SIGPIPE" (catch
BrokenPipeError at the entry point, send what is left to /dev/null; never SIG_DFL, which would
also kill ttfr on any other closed pipe or socket) but for its example's exit 1: that is ttfr's
"a case failed", which a script reading ttfr's output must not see for `head`.

Standard library only: the `ttfr` command imports it before the CLI (commands/entry.py), and
the commands' console (commands/output.py) too, without importing each other.
"""

import os
import sys

EXIT_BROKEN_PIPE = 141
_closed = False  # set once: stdout's reader has gone


def discard_stdout() -> None:
    """What is still to be printed goes to /dev/null (the interpreter flushes stdout again at exit:
    not into a second BrokenPipeError printed there); the command ends with EXIT_BROKEN_PIPE."""
    global _closed
    _closed = True
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


def closed() -> bool:
    return _closed
