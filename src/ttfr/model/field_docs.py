"""What each field of the model means, written once, in its type: the string under a field (an
attribute docstring, as Sphinx and mkdocstrings read them)::

    class Metrics(Artifact):
        import_s: Seconds | None
        \"\"\"From the worker's first instruction to its imports done.\"\"\"

The generated schemas carry it as the field's `description` (model/schemas.py) and the
documentation's field reference renders it. It is read from the source with `ast`, only by the
schema generator, the docs and the tests, never by a measured process. A type made with
`msgspec.defstruct` has no source: it names its fields' meanings in `__field_docs__`.

Units: a number's unit is its name's suffix (`_s` seconds, `_bytes` bytes, ...) or its meaning
says it; `UNITS_BY_SUFFIX` and `UNIT_WORDS` are that rule, which tests/test_field_docs.py holds
every field of every artifact to.
"""

from __future__ import annotations

import ast
import functools
import inspect
import textwrap

import msgspec
from msgspec import inspect as type_inspect

# A field named with one of these suffixes carries its unit in its name.
UNITS_BY_SUFFIX = {
    "_s": "seconds", "_ms": "milliseconds", "_ns": "nanoseconds", "_bytes": "bytes", "_cores": "CPU cores",
    "_pct": "percent", "_fraction": "fraction (0-1)", "_share": "fraction (0-1)", "_ratio": "ratio",
    "_count": "count", "_calls": "count of calls", "_rounds": "count of rounds", "_runs": "count of runs",
    "_hz": "hertz", "_mib": "MiB", "_gib": "GiB", "_kib": "KiB",
}  # fmt: skip
# Otherwise a number's meaning says its unit with one of these words.
UNIT_WORDS = (
    "second", "nanosecond", "millisecond", "byte", "mib", "kib", "gib", "core", "percent", "%", "fraction", "share",
    "ratio", "count", "number of", "how many", "index", "exit code", "exit status", "pid", "seed", "σ", "sigma",
    "dimensionless", "p-value", "p value", "probability", "per call", "per second", "times", "version", "level",
    "bits", "digits", "parameters", "calls", "runs", "rounds", "processes", "samples", "steps", "entries", "files",
    "threads", "cpu", "unix time", "signal number", "rank", "order", "position", "size", "width", "score",
)  # fmt: skip


@functools.cache
def own_field_docs(cls: type) -> dict[str, str]:
    """The meanings written in `cls`'s own body, by attribute name."""
    given = cls.__dict__.get("__field_docs__")
    if given is not None:
        return dict(given)
    try:
        source = textwrap.dedent(inspect.getsource(cls))
    except (OSError, TypeError):
        return {}
    (node,) = ast.parse(source).body
    docs = {}
    for field, after in zip(node.body, node.body[1:]):
        if (isinstance(field, ast.AnnAssign) and isinstance(field.target, ast.Name) and isinstance(after, ast.Expr)
                and isinstance(after.value, ast.Constant) and isinstance(after.value.value, str)):  # fmt: skip
            docs[field.target.id] = " ".join(after.value.value.split())  # one paragraph, as a schema's description
    return docs


def field_docs(cls: type) -> dict[str, str]:
    """Every field's meaning by attribute name, a subclass's own over its bases'."""
    docs: dict[str, str] = {}
    for base in reversed(cls.__mro__):
        if isinstance(base, type) and issubclass(base, msgspec.Struct) and base is not msgspec.Struct:
            docs.update(own_field_docs(base))
    return {name: text for name, text in docs.items() if name in cls.__struct_fields__}


def structs(roots) -> list[type]:
    """Every Struct type reachable from `roots` (types), each once, in the order they are met."""
    found: dict[type, None] = {}

    def walk(info):
        if isinstance(info, type_inspect.Metadata):  # Annotated[T, Meta(...)]
            walk(info.type)
            return
        if isinstance(info, type_inspect.StructType):
            if info.cls in found:
                return
            found[info.cls] = None
            for field in info.fields:
                walk(field.type)
            return
        for name in ("item_type", "key_type", "value_type"):
            if hasattr(info, name):
                walk(getattr(info, name))
        for name in ("types", "item_types"):
            for inner in getattr(info, name, ()):
                walk(inner)

    for info in type_inspect.multi_type_info(list(roots)):
        walk(info)
    return list(found)


def encoded_docs(cls: type) -> dict[str, str]:
    """Every documented field's meaning by its name in JSON (a field may be renamed there)."""
    docs = field_docs(cls)
    return {encoded: docs[name] for name, encoded in zip(cls.__struct_fields__, cls.__struct_encode_fields__)
            if name in docs}  # fmt: skip


def _numeric(info) -> bool:
    """Whether a field's type holds numbers (an int or float, alone, optional, or in a list or dict)."""
    if isinstance(info, type_inspect.Metadata):  # Annotated[T, Meta(...)]
        return _numeric(info.type)
    if isinstance(info, (type_inspect.IntType, type_inspect.FloatType)):
        return True
    if isinstance(info, type_inspect.UnionType):
        return any(_numeric(t) for t in info.types)
    if isinstance(info, (type_inspect.ListType, type_inspect.TupleType, type_inspect.VarTupleType)):
        return _numeric(info.item_type) if hasattr(info, "item_type") else any(_numeric(t) for t in info.item_types)
    if isinstance(info, type_inspect.DictType):
        return _numeric(info.value_type)
    return False


def _words(text: str) -> list[str]:
    return "".join(c if c.isalnum() else " " for c in text.lower()).split()


def problems(cls: type) -> list[str]:
    """What the field reference would lack for `cls`: a field without a meaning, a meaning that only
    repeats the field's name, a number whose unit neither its name nor its meaning says."""
    docs = field_docs(cls)
    info = type_inspect.type_info(cls)
    found = []
    for field in info.fields:
        where = f"{cls.__module__}.{cls.__qualname__}.{field.name}"
        text = docs.get(field.name)
        if not text:
            found.append(f"{where}: no description (a docstring under the field)")
            continue
        if set(_words(text)) <= set(_words(field.name)) | {"the", "a", "an", "of", "its"}:
            found.append(f"{where}: its description only repeats its name ({text!r})")
        if _numeric(field.type) and not any(field.name.endswith(suffix) for suffix in UNITS_BY_SUFFIX) \
                and not any(word in text.lower() for word in UNIT_WORDS):  # fmt: skip
            found.append(f"{where}: a number without its unit (name it with a unit suffix, or say it: {text!r})")
    return found
