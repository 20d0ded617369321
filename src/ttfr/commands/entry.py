"""The `ttfr` command: Ctrl-C while the tool is still loading (importing the CLI and its
stack takes ~0.3 s) or parsing ends quietly with exit 130, as it does anywhere later; so does
output into a pipe its reader closed (`ttfr list | head -1`), with exit 141."""

import sys

from ttfr import startup
from ttfr.commands import closed_pipe
from ttfr.commands.closed_pipe import EXIT_BROKEN_PIPE, discard_stdout


def main() -> int:
    startup.mark()
    try:
        from ttfr.commands.cli import main as cli_main

        code = cli_main()
        sys.stdout.flush()  # a closed pipe is found here, not by the interpreter's own flush at exit
        return EXIT_BROKEN_PIPE if closed_pipe.closed() else code
    except KeyboardInterrupt:
        print("ttfr: interrupted", file=sys.stderr)
        return 130  # ttfr.exit_codes.EXIT_INTERRUPTED, not imported: Ctrl-C may land during that import
    except BrokenPipeError:
        discard_stdout()
        return EXIT_BROKEN_PIPE
