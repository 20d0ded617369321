"""The JSON Schemas of ttfr's artifacts, generated from the types of the model.

`make schemas` writes them into ttfr/artifacts/schemas/ (ttfr/artifacts/schema_files.py);
tests/test_schemas.py fails when a committed schema is not what the
types give, so a change to either is a visible diff. Constraints between fields that no
single field's type can say (an ok case has no reason) are added here and checked again by
the type's __post_init__ on every decode.
"""

from __future__ import annotations

import json

import msgspec

from ttfr.model import field_docs
from ttfr.model.case import CASE_SCHEMA, CaseResult
from ttfr.model.comparison import COMPARISON_SCHEMA, Comparison
from ttfr.model.gpu_check import GPU_CHECK_SCHEMA, GpuCheckSummary
from ttfr.model.history import HISTORY_SCHEMA, History
from ttfr.model.manifest import MANIFEST_SCHEMA, Manifest
from ttfr.model.plan import PLAN_SCHEMA, PlanDocument
from ttfr.model.replication import REPLICATION_SCHEMA, ReplicationReport
from ttfr.model.selftest import SELFTEST_SCHEMA, SelfTest
from ttfr.model.snapshot import BASELINE_SCHEMA, INDEX_SCHEMA, BaselineManifest, SnapshotIndex
from ttfr.model.validation import VALIDATION_SCHEMA, ValidationPack
from ttfr.model.suite import SUITE_SCHEMA, SuiteResult

DRAFT = "https://json-schema.org/draft/2020-12/schema"
BASE_ID = "https://github.com/ttfr/ttfr/schemas/"

# schema name -> (file name, root type, title)
GENERATED = {
    CASE_SCHEMA: ("case_result.v2.schema.json", CaseResult, "ttfr case result v2"),
    SUITE_SCHEMA: ("suite_result.v1.schema.json", SuiteResult, "ttfr suite result v1"),
    COMPARISON_SCHEMA: ("comparison.v1.schema.json", Comparison, "ttfr comparison v1"),
    GPU_CHECK_SCHEMA: ("gpu_check_summary.v1.schema.json", GpuCheckSummary, "ttfr gpu-check summary v1"),
    MANIFEST_SCHEMA: ("manifest.v1.schema.json", Manifest, "ttfr environment manifest v1"),
    INDEX_SCHEMA: (
        "snapshot_index.v1.schema.json",
        SnapshotIndex,
        "ttfr snapshot index: every file of a published snapshot with its size and sha256",
    ),
    BASELINE_SCHEMA: (
        "baseline_manifest.v1.schema.json",
        BaselineManifest,
        "ttfr baseline manifest: what a published snapshot was measured with",
    ),
    PLAN_SCHEMA: (
        "plan.v1.schema.json",
        PlanDocument,
        "ttfr plan: the run specification a result directory was started with (what --resume re-plans from)",
    ),
    REPLICATION_SCHEMA: (
        "replication_report.v1.schema.json",
        ReplicationReport,
        "ttfr replication report: a published snapshot's plan run again, and what replicated",
    ),
    SELFTEST_SCHEMA: ("selftest.v1.schema.json", SelfTest, "ttfr self-test v1"),
    HISTORY_SCHEMA: ("history.v1.schema.json", History, "ttfr history v1: results in series and the steps in them"),
    VALIDATION_SCHEMA: (
        "validation.v1.schema.json",
        ValidationPack,
        "ttfr validation pack: every gate of a published snapshot and its result",
    ),
}

# What a type's fields cannot say alone, by the type's name.
_BETWEEN_FIELDS = {
    "CaseResult": {
        "allOf": [{
            "if": {"properties": {"status": {"const": "ok"}}},
            "then": {"properties": {"reason": {"type": "null"}}},
            "else": {"properties": {"reason": {"type": "string", "minLength": 1}}},
        }],
    },
    "Record": {
        "allOf": [{
            "if": {"properties": {"verdict": {"const": "not_compared"}}},
            "then": {"required": ["failed"], "not": {"required": ["effect"]}},
            "else": {"required": ["a", "b", "diagnostics", "effect"], "not": {"required": ["failed"]}},
        }],
    },
}  # fmt: skip


def generate(name: str) -> dict:
    """The JSON Schema (draft 2020-12) of artifact `name`, with its root type at the top."""
    file_name, root, title = GENERATED[name]
    generated = msgspec.json.schema(root)
    definitions = generated["$defs"]
    _describe_fields(definitions, root)
    for type_name, extra in _BETWEEN_FIELDS.items():
        if type_name in definitions:
            definitions[type_name].update(extra)
    top = definitions.pop(root.__name__)
    top.pop("title", None)
    schema = {"$schema": DRAFT, "$id": BASE_ID + file_name, "title": title, **top}
    if definitions:
        schema["$defs"] = dict(sorted(definitions.items()))
    return _point_refs_at_top(schema, root.__name__)


def _describe_fields(definitions: dict, root) -> None:
    """Each field's meaning (its attribute docstring, model/field_docs.py) as its `description`."""
    for cls in field_docs.structs([root]):
        definition = definitions.get(cls.__name__)
        if definition is None:  # msgspec names a type's definition by its name: two of one name would be ambiguous
            raise ValueError(f"no schema definition named {cls.__name__} for {cls.__module__}.{cls.__qualname__}")
        for encoded, text in field_docs.encoded_docs(cls).items():
            definition["properties"][encoded] = {**definition["properties"][encoded], "description": text}


def _point_refs_at_top(node, root_name: str):
    """A reference to the root type (none today: a case never holds a case) would dangle once the
    root moved to the top: it points at "#" instead."""
    if isinstance(node, dict):
        return {k: ("#" if k == "$ref" and v == f"#/$defs/{root_name}" else _point_refs_at_top(v, root_name))
                for k, v in node.items()}  # fmt: skip
    if isinstance(node, list):
        return [_point_refs_at_top(v, root_name) for v in node]
    return node


def text(name: str) -> str:
    return json.dumps(generate(name), indent=2, ensure_ascii=False) + "\n"
