"""MkDocs hook: the field reference page (reference/fields.md), generated at every build from
ttfr's model types, where each field's meaning is written once (src/ttfr/model/field_docs.py).
Nothing here is written into the source tree: the page is a generated file of the build."""

from __future__ import annotations

from msgspec import inspect as type_inspect

from ttfr.artifacts.store import SCHEMA_FILES
from ttfr.model import field_docs, schemas

PAGE = "reference/fields.md"

INTRO = """# Field reference

Every JSON artifact ttfr writes, field by field, generated from the types of its model when
these pages are built: each field's meaning is written once, beside the field, and the same text
is the field's `description` in the artifact's JSON Schema (`src/ttfr/artifacts/schemas/`). A
number's unit is its name's suffix (`_s` seconds, `_bytes` bytes, `_ns` nanoseconds) or its
meaning says it. *Optional* fields may be absent (older files, or where they do not apply);
`null` is a value the type allows, said where it means something.
"""


def _anchor(cls: type) -> str:
    return f"{cls.__module__.rsplit('.', 1)[-1]}-{cls.__name__}".lower()


def _artifact_anchor(name: str) -> str:
    return name.replace(".", "-").replace("_", "-")


def _constraints(info) -> str:
    bounds = [(name, getattr(info, name, None)) for name in ("ge", "gt", "le", "lt", "min_length", "max_length")]
    words = {"ge": "≥", "gt": ">", "le": "≤", "lt": "<", "min_length": "length ≥", "max_length": "length ≤"}
    shown = [f"{words[name]} {value}" for name, value in bounds if value is not None]
    if getattr(info, "pattern", None):
        shown.append(f"pattern `{info.pattern}`".replace("|", "\\|"))  # a table's cell
    return f" ({', '.join(shown)})" if shown else ""


def type_text(info) -> str:
    """A field's type as a reader says it, a struct as a link to its table."""
    if isinstance(info, type_inspect.StructType):
        return f"[{info.cls.__name__}](#{_anchor(info.cls)})"
    if isinstance(info, type_inspect.UnionType):
        return " or ".join(type_text(t) for t in info.types)  # (UNSET, an absent field, is no type here)
    if isinstance(info, type_inspect.LiteralType):
        return " \\| ".join(f"`{value}`" for value in info.values)
    if isinstance(info, (type_inspect.ListType, type_inspect.VarTupleType)):
        return f"list of {type_text(info.item_type)}{_constraints(info)}"
    if isinstance(info, type_inspect.TupleType):
        return "[" + ", ".join(type_text(t) for t in info.item_types) + "]"
    if isinstance(info, type_inspect.DictType):
        return f"map of {type_text(info.key_type)} to {type_text(info.value_type)}"
    names = {type_inspect.IntType: "integer", type_inspect.FloatType: "number", type_inspect.StrType: "string",
             type_inspect.BoolType: "boolean", type_inspect.NoneType: "null", type_inspect.AnyType: "any JSON value"}  # fmt: skip
    return names.get(type(info), type(info).__name__) + _constraints(info)


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _table(cls: type) -> list[str]:
    info = type_inspect.type_info(cls)
    docs = field_docs.field_docs(cls)
    lines = [f'<a id="{_anchor(cls)}"></a>', "", f"### {cls.__name__}", ""]
    if cls.__doc__:
        lines += [_cell(cls.__doc__), ""]
    if info.tag_field:
        lines += [f"A kind of its union, named by its `{info.tag_field}` field: `{info.tag}`.", ""]
    if not info.fields:
        return lines + ["No fields beyond its name.", ""]
    lines += ["| field | type | meaning |", "|---|---|---|"]
    for field in info.fields:
        optional = "" if field.required else " *(optional)*"
        lines.append(f"| `{field.encode_name}`{optional} | {type_text(field.type)} | {_cell(docs.get(field.name, ''))} |")
    return lines + [""]


def render() -> str:
    """The whole page: one section per artifact, each type's table once (later artifacts link to it)."""
    lines = [INTRO, "| artifact | schema file |", "|---|---|"]
    lines += [f"| [{name}](#{_artifact_anchor(name)}) | `{SCHEMA_FILES[name]}` |" for name in schemas.GENERATED]
    lines.append("")
    shown: set[type] = set()
    for name, (_file, root, title) in schemas.GENERATED.items():
        lines += [f'<a id="{_artifact_anchor(name)}"></a>', "", f"## {name}", "", f"{title}.", ""]
        for cls in field_docs.structs([root]):  # each type once, under the first artifact that holds it
            if cls in shown:
                continue
            shown.add(cls)
            lines += _table(cls)
    return "\n".join(lines) + "\n"


def on_files(files, config):
    """MkDocs event: the page joins the build's files (generated, never written to docs/)."""
    from mkdocs.structure.files import File

    files.append(File.generated(config, PAGE, content=render()))
    return files
