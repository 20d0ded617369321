"""Errors a user can fix: they name the valid choices and map to exit code 2; and a measurement that
produced nothing at all (exit 1)."""

import difflib

from ttfr.exit_codes import EXIT_CASE_FAILED, EXIT_USAGE


class UsageError(Exception):
    """Bad input, found before anything runs. The message says what to use instead."""

    exit_code = EXIT_USAGE


class MeasurementFailed(Exception):
    """Nothing could be measured (every worker failed): the command says why, exit 1, no traceback."""

    exit_code = EXIT_CASE_FAILED


class UnknownChoice(UsageError):
    """An unknown name, with a did-you-mean and the valid choices (`limit` of them at most: a
    list of hundreds hides the point). Its fields let a caller that knows more say it again
    with a hint (measure/spec.py, for a case id)."""

    def __init__(self, kind: str, value: str, choices, limit: int = 40, hint: str = ""):
        self.kind, self.value, self.choices = kind, value, sorted(choices)
        self.close = difflib.get_close_matches(value, self.choices, n=3, cutoff=0.6)
        mean = f" Did you mean {' or '.join(repr(c) for c in self.close)}?" if self.close else ""
        listed = ", ".join(self.choices[:limit])
        if len(self.choices) > limit:
            listed += f", ... ({len(self.choices)} in all: see `ttfr list`)"
        hint = f" {hint}" if hint else ""
        super().__init__(f"unknown {kind} {value!r}.{mean}{hint} Valid {plural(kind)}: {listed}")

    def is_typo(self) -> bool:
        """A near miss of a valid choice (a letter or two off), not a name from somewhere else."""
        return bool(difflib.get_close_matches(self.value, self.choices, n=1, cutoff=0.9))


def unknown_choice(kind, value, choices, limit: int = 40, hint: str = "") -> UnknownChoice:
    """UsageError for an unknown name, with a did-you-mean and the valid choices."""
    return UnknownChoice(kind, value, choices, limit, hint)


def plural(noun: str) -> str:
    """`cache policy` -> `cache policies`, `case id` -> `case ids`: the kinds errors name."""
    if noun.endswith("y") and noun[-2:-1] not in ("a", "e", "i", "o", "u"):
        return noun[:-1] + "ies"
    return noun + "s"
