"""The JSON Schemas ttfr ships are generated from the types of its model: a change to a type
that is not regenerated (`make schemas`), or a hand edit of a schema, fails here."""

import json
import re
import sys
from pathlib import Path

import jsonschema
import pytest

from ttfr.artifacts.store import load_schema
from ttfr.model import schemas


@pytest.mark.parametrize("name", sorted(schemas.GENERATED))
def test_the_committed_schema_is_what_the_types_give(name):
    assert load_schema(name) == schemas.generate(name), "run `make schemas` and commit the result"


@pytest.mark.parametrize("name", sorted(schemas.GENERATED))
def test_every_generated_schema_is_a_valid_draft_2020_12_schema(name):
    jsonschema.Draft202012Validator.check_schema(schemas.generate(name))


def test_the_between_fields_rule_is_in_the_schema_and_the_type():
    """An ok case has no reason; any other status has one: both the schema and the type say so."""
    from msgspec import ValidationError

    from conftest import make_case
    from ttfr.artifacts.store import schema_errors
    from ttfr.model.base import decode, encode
    from ttfr.model.case import CaseResult

    case = encode(make_case())
    case["reason"] = "why not"
    assert any("reason" in e for e in schema_errors(case, "ttfr.case_result.v2"))
    with pytest.raises(ValidationError, match="an ok case has no reason"):
        decode(case, CaseResult)
    assert json.dumps(schemas.generate("ttfr.case_result.v2")).count('"if"') == 1


@pytest.mark.parametrize("name", sorted(schemas.GENERATED))
def test_every_generated_artifact_must_name_its_schema(name):
    """A document without its `schema` name is not an artifact of that schema (a default in the
    type would quietly drop it from `required`). plan.json never carried one, and every plan written
    so far must still validate: it is named by its place (a result directory's plan.json)."""
    if name == "ttfr.plan.v1":
        assert "schema" not in schemas.generate(name)["properties"]
        return
    generated = schemas.generate(name)
    named = {key: value for key, value in generated["properties"]["schema"].items() if key != "description"}
    assert "schema" in generated["required"] and named == {"enum": [name]}


def test_a_comparison_record_is_compared_with_an_effect_or_says_whether_an_arm_failed():
    from msgspec import ValidationError

    from ttfr.artifacts.store import schema_errors
    from ttfr.model.base import decode
    from ttfr.model.comparison import Record

    record = {"case": "numpy_matmul_64_f32", "policy": "warm-process", "regime": "warm", "metric": "call_s",
              "paired": True, "verdict": "not_compared", "explanation": "arm B failed: it crashed"}  # fmt: skip
    with pytest.raises(ValidationError, match="says whether an arm failed"):
        decode(record, Record)
    assert decode({**record, "failed": True}, Record).failed is True
    document = {"schema": "ttfr.comparison.v1", "comparisons": [record]}
    assert any(e.startswith("comparisons/0") for e in schema_errors(document, "ttfr.comparison.v1"))


def test_the_validator_benchmark_runs_as_the_performance_page_shows_it(capsys):
    """benchmarks/schema_validation.py (docs/performance.md's row): both validators give every golden artifact the
    same verdict and refuse the same tampered one before anything is timed."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    import schema_validation

    assert len(schema_validation.documents()) >= 10
    assert schema_validation.main(["1"]) == 0
    out = capsys.readouterr().out
    assert "jsonschema-rs" in out and re.search(r"jsonschema +[\d.]+ ms +\(\d+x\)", out), out
