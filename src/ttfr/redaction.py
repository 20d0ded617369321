"""The one redaction of every environment value and command line that ttfr records or prints.

A secret keeps its name and reads `<redacted>`: a reader still sees that `HF_TOKEN` was set
for arm B, never its value. A name is a secret when it contains a secret word (`TOKEN`,
`SECRET`, `PASSWORD`, ...) or has a secret component (`PAT`, `KEY`, `CERT`, ... between
separators, so `PATH` and `MKL_...` stay readable). Values of other names are searched for
`name=value` pairs with a secret name (`XLA_FLAGS=--x_token=...`) and for credentials in URLs.
"""

from __future__ import annotations

import re

REDACTED = "<redacted>"
# Anywhere in a name.
_SECRET_PARTS = ("TOKEN", "SECRET", "PASSW", "PASSPHRASE", "PRIVATE", "CREDENTIAL", "APIKEY", "COOKIE", "SIGNATURE")
# As a whole component of a name (split on anything but letters and digits).
_SECRET_COMPONENTS = frozenset({"PASS", "PAT", "KEY", "CERT", "AUTH", "DSN", "SIG", "PIN", "OTP"})
_PAIR = re.compile(r"(?P<name>[A-Za-z_][A-Za-z0-9_.-]*)=(?P<value>[^\s,;&]*)")
_URL_CREDENTIALS = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)(?P<user>[^/\s:@]*):(?P<password>[^/\s@]*)@")


def is_secret_name(name: str) -> bool:
    upper = name.upper()
    if any(part in upper for part in _SECRET_PARTS):
        return True
    return any(component in _SECRET_COMPONENTS for component in re.split(r"[^A-Z0-9]+", upper))


def redact_value(name: str, value: str) -> str:
    """The value of variable (or option) `name` as it may be recorded."""
    if is_secret_name(name):
        return REDACTED
    value = _URL_CREDENTIALS.sub(lambda m: f"{m['scheme']}{m['user']}:{REDACTED}@", value)
    return _redact_pairs(value)


def _redact_pairs(text: str) -> str:
    """`name=value` pairs with a secret name, also nested (`XLA_FLAGS=--x_api_key=...`)."""

    def one(m):
        if is_secret_name(m["name"]):
            return f"{m['name']}={REDACTED}"
        return f"{m['name']}={_redact_pairs(m['value'])}"

    return _PAIR.sub(one, text)


def redact_env(environment: dict) -> dict:
    return {name: redact_value(name, str(value)) for name, value in environment.items()}


def redact_argv(argv) -> list[str]:
    """A command line as it may be recorded: `NAME=value` words, `--secret value`,
    `--secret=value`, and pairs or URLs inside any other word."""
    out: list[str] = []
    hide_next = False
    for word in map(str, argv):
        if hide_next:
            out.append(REDACTED)
            hide_next = False
            continue
        name, sep, value = word.partition("=")
        if sep:
            out.append(f"{name}={redact_value(name, value)}")
        elif word.startswith("-") and is_secret_name(word.lstrip("-")):
            out.append(word)
            hide_next = True
        else:
            out.append(redact_value("", word))
    return out


def redact_text(text: str | None, environment: dict | None = None) -> str | None:
    """Free text (a failed worker's output tail, a traceback) as it may be recorded: the
    value of every secret-named variable of `environment` wherever it appears (values under
    4 characters would blank out ordinary text), then `name=value` pairs and URL credentials."""
    if not text:
        return text
    for name, value in (environment or {}).items():
        if is_secret_name(name) and len(str(value)) >= 4:
            text = text.replace(str(value), REDACTED)
    return redact_value("", text)
