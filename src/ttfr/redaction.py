"""The one redaction of every environment value and command line that ttfr records or prints.

A secret keeps its name and reads `<redacted>`: a reader still sees that `HF_TOKEN` was set
for arm B, never its value. A name is a secret when it contains a secret word (`TOKEN`,
`SECRET`, `PASSWORD`, `AUTHORIZATION`, `SESSION`, ...) or has a secret component (`PAT`,
`KEY`, `CERT`, `PWD`, ... between separators, so `PATH` and `MKL_...` stay readable). `PWD`
itself is the shell's current directory, not a secret; `MYSQL_PWD` is one. Values of other
names are searched for `name=value` pairs and `name: value` / `"name": "value"` items with a
secret name (`XLA_FLAGS=--x_token=...`, `{"password": "..."}`), for credentials in URLs and
for HTTP credentials (`Authorization: Basic ...`, `Bearer ...`).
"""

from __future__ import annotations

import re

REDACTED = "<redacted>"
# Anywhere in a name.
_SECRET_PARTS = ("TOKEN", "SECRET", "PASSW", "PASSPHRASE", "PRIVATE", "CREDENTIAL", "APIKEY", "COOKIE", "SIGNATURE",
                 "AUTHORIZATION", "BEARER", "JWT", "SESSION", "ACCESSKEY")  # fmt: skip
# As a whole component of a name (split on anything but letters and digits).
_SECRET_COMPONENTS = frozenset({"PASS", "PAT", "KEY", "CERT", "AUTH", "DSN", "SIG", "PIN", "OTP", "PWD"})
# Names that match a rule above but are not secrets: the shell's current directory.
_NOT_SECRET = frozenset({"PWD"})
_QUOTED = r""""(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*'"""
_PAIR = re.compile(rf"(?P<name>[A-Za-z_][A-Za-z0-9_.-]*)=(?P<value>{_QUOTED}|[^\s,;&]*)")
# The key of a `name: value` item: `"name": "value"`, `'name': 'value'` (JSON, a Python dict),
# `name: value` (YAML, an HTTP header, a log line). A secret item's value is its quoted string,
# else the rest of its line up to a quote (keeping an HTTP authentication scheme: `Authorization: Basic <redacted>`).
_ITEM_KEY = re.compile(r"""(?<![A-Za-z0-9_.-])(?P<q>["']?)(?P<name>[A-Za-z_][A-Za-z0-9_.-]*)(?P=q)[ \t]*:[ \t]*""")
_QUOTED_VALUE = re.compile(_QUOTED)
_VALUE_END = re.compile(r"[\r\n'\"]")
_SCHEME = re.compile(r"(?i)(?:basic|bearer|digest|negotiate|token)[ \t]+")
# A bearer token anywhere (RFC 6750's token68 characters).
_BEARER = re.compile(r"(?i)\b(?P<scheme>bearer)[ \t]+[A-Za-z0-9._~+/-]+=*")
_URL_CREDENTIALS = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)(?P<user>[^/\s:@]*):(?P<password>[^/\s@]*)@")


def is_secret_name(name: str) -> bool:
    if name in _NOT_SECRET:
        return False
    upper = name.upper()
    if any(part in upper for part in _SECRET_PARTS):
        return True
    return any(component in _SECRET_COMPONENTS for component in re.split(r"[^A-Z0-9]+", upper))


def redact_value(name: str, value: str) -> str:
    """The value of variable (or option) `name` as it may be recorded."""
    if is_secret_name(name):
        return REDACTED
    value = _URL_CREDENTIALS.sub(lambda m: f"{m['scheme']}{m['user']}:{REDACTED}@", value)
    value = _BEARER.sub(lambda m: f"{m['scheme']} {REDACTED}", value)
    value = _redact_items(value)
    return _redact_pairs(value)


def _redact_items(text: str) -> str:
    """`name: value` items with a secret name lose their value."""
    out, done, at = [], 0, 0
    while key := _ITEM_KEY.search(text, at):
        at = key.end()
        if not is_secret_name(key["name"]):
            continue
        quoted = _QUOTED_VALUE.match(text, at)
        if quoted:
            value = f"{text[at]}{REDACTED}{text[at]}"
            end = quoted.end()
        else:
            end = _line_end(text, at)
            if end == at:  # nothing after the colon on this line
                continue
            scheme = _SCHEME.match(text, at, end)
            value = f"{scheme[0] if scheme else ''}{REDACTED}"
        out.append(text[done:at] + value)
        done = at = end
    out.append(text[done:])
    return "".join(out)


def _line_end(text: str, start: int) -> int:
    """Where an unquoted value ends: its line's end, or a quote (`-H 'Authorization: Basic ...'`)."""
    end = _VALUE_END.search(text, start)
    return end.start() if end else len(text)


def _redact_pairs(text: str) -> str:
    """`name=value` pairs with a secret name, also nested (`XLA_FLAGS=--x_api_key=...`)."""

    def one(m):
        value = m["value"]
        quote = value[0] if value[:1] in ("'", '"') and len(value) > 1 and value[-1] == value[0] else ""
        if is_secret_name(m["name"]):
            return f"{m['name']}={quote}{REDACTED}{quote}"
        return f"{m['name']}={_redact_pairs(value)}"

    return _PAIR.sub(one, text)


def redact_env(environment: dict) -> dict:
    return {name: redact_value(name, str(value)) for name, value in environment.items()}


def redact_argv(argv) -> list[str]:
    """A command line as it may be recorded: `NAME=value` words, `--secret value`,
    `--secret=value`, and pairs or URLs inside any other word; a word that is itself a
    command line (`--command "python t.py --token X"`, `bash -c "..."`) is redacted as one."""
    out: list[str] = []
    hide_next = False
    for word in map(str, argv):
        if hide_next:
            out.append(REDACTED)
            hide_next = False
            continue
        name, sep, value = word.partition("=")
        if sep and not any(c.isspace() for c in name):
            value = redact_value(name, value)
            out.append(f"{name}={_redact_words(value) if any(c.isspace() for c in value) else value}")
        elif word.startswith("-") and is_secret_name(word.lstrip("-")):
            out.append(word)
            hide_next = True
        else:
            out.append(_redact_words(word) if any(c.isspace() for c in word) else redact_value("", word))
    return out


def _redact_words(text: str) -> str:
    """A word holding a command line: its words redacted as a command line's, joined again
    the way a shell would read them (kept as it is when nothing in it is a secret)."""
    import shlex

    try:
        words = shlex.split(text)
    except ValueError:  # not a command line (unbalanced quotes): free text
        return redact_value("", text)
    redacted = redact_argv(words)
    return redact_value("", text) if redacted == words else shlex.join(redacted)


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
