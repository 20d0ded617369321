"""The one redaction of every environment value and command line that ttfr records or prints.

A secret keeps its name and reads `<redacted>`: a reader still sees that `HF_TOKEN` was set
for arm B, never its value. A name is a secret when it contains a secret word (`SECRET`,
`PASSWORD`, `AUTHORIZATION`, ...), has a component ending in `TOKEN` or `SESSION`, or a secret
component (`PAT`, `KEY`, `CERT`, `PWD`, ... between separators, so `PATH` and `MKL_...` stay
readable) — unless a descriptor follows it (`--key-size`, `TOKEN_LIMIT`), and never for ML
options that merely contain the letters (`--tokenizer`, `max_new_tokens`, `--num-sessions`).
`PWD` itself is the shell's current directory, not a secret; `MYSQL_PWD` is one. Values of other
names are searched for `name=value` pairs and `name: value` / `"name": "value"` items with a
secret name (`XLA_FLAGS=--x_token=...`, `{"password": "..."}`), for credentials in URLs and
for HTTP credentials (`Authorization: Basic ...`, `Bearer ...`).
"""

from __future__ import annotations

import re

REDACTED = "<redacted>"
# Anywhere in a name: words an ordinary option or variable does not contain by chance.
_SECRET_PARTS = ("SECRET", "PASSW", "PASSPHRASE", "PRIVATE", "CREDENTIAL", "APIKEY", "COOKIE", "SIGNATURE",
                 "AUTHORIZATION", "BEARER", "JWT", "ACCESSKEY")  # fmt: skip
# A component (split on anything but letters and digits) that is one of these or ends with one
# (`GHTOKEN`, `accessToken`); not `TOKENIZER`, `max_tokens`, `num_sessions`.
_SECRET_ENDINGS = ("TOKEN", "SESSION", "SESSIONID")
# As a whole component of a name, so `PATH`, `MKL_...` and `KEYBOARD` stay readable.
_SECRET_COMPONENTS = frozenset({"PASS", "PAT", "KEY", "CERT", "AUTH", "DSN", "OTP", "PWD"})
# A component after the secret word that makes the name describe it rather than hold it:
# `--key-size 256`, `TOKEN_LIMIT`, `KEY_FILE` (a path) are readable.
_DESCRIPTORS = frozenset({"SIZE", "SIZES", "LEN", "LENGTH", "BITS", "TYPE", "TYPES", "NAME", "NAMES", "FILE", "PATH",
                          "DIR", "COUNT", "NUM", "DIM", "LIMIT", "MAX", "MIN", "BUDGET", "PARALLELISM", "FORMAT"})  # fmt: skip
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
    components = [c for c in re.split(r"[^A-Z0-9]+", upper) if c]
    for position, component in enumerate(components):
        if component in _SECRET_COMPONENTS or component.endswith(_SECRET_ENDINGS):
            following = components[position + 1] if position + 1 < len(components) else None
            if following not in _DESCRIPTORS:
                return True
    return False


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


def redact_tree(value, environment: dict | None = None):
    """Every string of a value, however deep (a record's free text: a check's detail, a library's refusal
    in a conversion's layouts, a warning), through redact_text."""
    if isinstance(value, str):
        return redact_text(value, environment)
    if isinstance(value, dict):
        return {key: redact_tree(item, environment) for key, item in value.items()}
    if isinstance(value, list):
        return [redact_tree(item, environment) for item in value]
    return value


def argv_secrets(argv) -> list[str]:
    """The values `redact_argv` hides in a command line, to hunt for in free text (a program
    that prints its own `--api-token` argument): whole hidden words, and the pieces of a word
    that its redacted form lost (at least 4 characters, like redact_text's)."""
    pieces = re.compile(r"[\s=:'\"@/]+")
    found = []
    for word, shown in zip(map(str, argv), redact_argv(argv)):
        if word == shown:
            continue
        if shown == REDACTED:
            found.append(word)
            continue
        kept = set(pieces.split(shown))
        found += [piece for piece in pieces.split(word) if len(piece) >= 4 and piece not in kept]
    return sorted(set(found), key=len, reverse=True)  # longest first: no secret is left half replaced
