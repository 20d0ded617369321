"""The `ttfr` command: Ctrl-C while the tool is still loading (importing the CLI and its
stack takes ~0.3 s) or parsing ends quietly with exit 130, as it does anywhere later."""

import sys

from ttfr import startup


def main() -> int:
    startup.mark()
    try:
        from ttfr.commands.cli import main as cli_main

        return cli_main()
    except KeyboardInterrupt:
        print("ttfr: interrupted", file=sys.stderr)
        return 130  # ttfr.exit_codes.EXIT_INTERRUPTED, not imported: Ctrl-C may land during that import
