"""Errors a user can fix: they name the valid choices and map to exit code 2."""

import difflib

from ttfr.exit_codes import EXIT_USAGE


class UsageError(Exception):
    """Bad input, found before anything runs. The message says what to use instead."""

    exit_code = EXIT_USAGE


def unknown_choice(kind, value, choices):
    """UsageError for an unknown name, with a did-you-mean and the full list."""
    choices = sorted(choices)
    close = difflib.get_close_matches(value, choices, n=3, cutoff=0.6)
    hint = f" Did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
    listed = ", ".join(choices) if len(choices) <= 40 else ", ".join(choices[:40]) + ", ... (see `ttfr list`)"
    return UsageError(f"unknown {kind} {value!r}.{hint} Valid {kind}s: {listed}")
