"""The field reference (issue 37): every field of every artifact says what it means and, for a
number, its unit, written once in its type (model/field_docs.py); the schemas and the docs carry
that text."""

from __future__ import annotations

from ttfr.model import field_docs, schemas
from ttfr.model.base import Artifact

ROOTS = [root for _file, root, _title in schemas.GENERATED.values()]


def test_every_field_of_every_artifact_has_a_meaning_and_a_number_its_unit():
    found = [problem for cls in field_docs.structs(ROOTS) for problem in field_docs.problems(cls)]
    assert found == [], f"{len(found)} fields:\n" + "\n".join(found[:80])


class _Probe(Artifact):
    undocumented: int
    the_thing: str
    """The thing."""
    reach: float
    """How far it went."""
    reach_s: float
    """How long it took to get there."""
    runs_listed: list[int]
    """How many runs each worker did (a count of runs)."""


def test_the_check_finds_what_it_forbids():
    found = field_docs.problems(_Probe)
    assert [p.split(": ", 1)[0].rsplit(".", 1)[1] for p in found] == ["undocumented", "the_thing", "reach"]
    assert "no description" in found[0] and "only repeats its name" in found[1] and "without its unit" in found[2]


def test_a_fields_meaning_is_its_description_in_the_schema():
    from ttfr.model.run_figures import Metrics, Stages

    schema = schemas.generate("ttfr.case_result.v2")["$defs"]
    for cls in (Metrics, Stages):
        docs = field_docs.field_docs(cls)
        assert docs and all(schema[cls.__name__]["properties"][name]["description"] == text for name, text in docs.items())


def _reference_page():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "docs" / "hooks" / "field_reference.py"
    spec = importlib.util.spec_from_file_location("field_reference", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_docs_field_reference_lists_every_field_of_every_artifact_with_its_meaning():
    reference = _reference_page()
    page = reference.render()
    for name in schemas.GENERATED:
        assert f"\n## {name}\n" in page
    for cls in field_docs.structs(ROOTS):
        table = page.split(f'<a id="{reference._anchor(cls)}"></a>', 1)[1].split("<a id=", 1)[0]
        docs = field_docs.encoded_docs(cls)
        for encoded in cls.__struct_encode_fields__:
            (row,) = [line for line in table.splitlines() if line.startswith(f"| `{encoded}`")]
            assert reference._cell(docs.get(encoded, "")) in row  # (a `|` escaped in a table's cell)
