"""The `ttfr` command: Ctrl-C while the tool is still loading (importing the CLI and its
stack takes ~0.3 s) or parsing ends quietly with exit 130, as it does anywhere later; so does
output into a pipe its reader closed (`ttfr list | head -1`), with exit 141."""

import os
import sys

from ttfr import startup

# A closed stdout ends ttfr as it ends git, cat or yes: quietly, with the status a shell shows
# for a process ended by SIGPIPE (128 + 13). This is the Python docs' "Note on SIGPIPE" (catch
# BrokenPipeError at the entry point, send what is left to /dev/null; never SIG_DFL, which
# would also kill ttfr on any other closed pipe or socket) but for its example's exit 1: that
# is ttfr's "a case failed", which a script reading ttfr's output must not see for `head`.
EXIT_BROKEN_PIPE = 141


def main() -> int:
    startup.mark()
    try:
        from ttfr.commands.cli import main as cli_main

        code = cli_main()
        sys.stdout.flush()  # a closed pipe is found here, not by the interpreter's own flush at exit
        return code
    except KeyboardInterrupt:
        print("ttfr: interrupted", file=sys.stderr)
        return 130  # ttfr.exit_codes.EXIT_INTERRUPTED, not imported: Ctrl-C may land during that import
    except BrokenPipeError:
        discard_stdout()
        return EXIT_BROKEN_PIPE


def discard_stdout() -> None:
    """The interpreter flushes stdout again at exit: what is left goes to /dev/null, not into a
    second BrokenPipeError printed there."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
