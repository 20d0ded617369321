"""A result directory of the first case format (`ttfr.case_result.v1`, committed under
tests/fixtures/result_v1: the fixture suite as ttfr wrote it before flags held numbers) still
validates, reads, reports, compares and publishes: it reads as exactly the case results the
current ttfr writes for the same runs (tests/golden/fixture_suite)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ttfr.artifacts import case_v1
from ttfr.artifacts.reader import inspect, load_finished, validate_dir
from ttfr.artifacts.store import schema_errors
from ttfr.model.base import encode
from ttfr.model.case import CASE_SCHEMA

V1 = Path(__file__).parent / "fixtures" / "result_v1"
GOLDEN = Path(__file__).parent / "golden" / "fixture_suite"


@pytest.fixture
def v1_dir(tmp_path) -> Path:
    copy = tmp_path / "result_v1"
    shutil.copytree(V1, copy)
    return copy


def test_the_fixture_is_written_in_the_first_format_and_the_golden_suite_in_the_current_one():
    for path in sorted((V1 / "cases").glob("*.json")):
        assert json.loads(path.read_text())["schema"] == case_v1.V1_SCHEMA
        assert schema_errors(json.loads(path.read_text()), case_v1.V1_SCHEMA) == []
    assert {json.loads(p.read_text())["schema"] for p in (GOLDEN / "cases").glob("*.json")} == {CASE_SCHEMA}


def test_a_v1_result_directory_validates_and_reads_as_the_cases_the_current_ttfr_writes(v1_dir):
    assert validate_dir(v1_dir) == []
    read = {case.case: encode(case) for case in load_finished(v1_dir).cases}
    written = {p.stem: json.loads(p.read_text()) for p in sorted((GOLDEN / "cases").glob("*.json"))}
    assert read == written  # the contention evidence and the withheld figures' reasons included


def test_a_v1_directory_renders_the_report_the_current_one_does(v1_dir):
    from ttfr.report import markdown

    verified = load_finished(v1_dir)
    report = markdown.render(verified).replace(str(v1_dir), "RESULTS")
    assert report == (GOLDEN / "report.md").read_text()
    assert "4 of 4 runs were contended: no figure is given" in report


def test_a_v1_directory_compares_with_a_current_one(v1_dir, tmp_path):
    from ttfr.pipeline import comparison

    current = tmp_path / "current"
    shutil.copytree(GOLDEN, current, ignore=shutil.ignore_patterns("exports", "terminal", "report.*"))
    _, document = comparison.compare_dirs(
        v1_dir, current, tmp_path / "cmp", cross_session=True, correction="holm", fail_on="regression"
    )
    verdicts = {(r.case, r.policy): r.verdict for r in document.comparisons}
    assert len({case for case, _ in verdicts}) == 8
    # the same runs on both sides: the same figures (a failed case's policies are not compared)
    assert set(verdicts.values()) <= {"not_compared", "equivalent"} and "equivalent" in verdicts.values(), verdicts


def test_a_v1_directory_publishes_as_a_snapshot_that_verifies(v1_dir, tmp_path):
    from ttfr.artifacts import snapshot, snapshot_verify

    published, _ = snapshot.publish(v1_dir, tmp_path / "snapshots", generated_at="2026-01-01T00:00:00Z")
    assert snapshot_verify.verify(published) == []


def test_a_tampered_v1_file_is_a_problem_named_not_a_crash(v1_dir):
    path = v1_dir / "cases" / "numpy_fused_chain_64_f32.json"
    data = json.loads(path.read_text())
    next(f for f in data["flags"] if f["flag"] == "contended")["runs"] = [0, 1, 2, 99]  # no run 99
    path.write_text(json.dumps(data))
    assert any("sha256 does not match" in p for p in validate_dir(v1_dir))
    # read without its index's hash (as a file on its own): the upgrade names what it cannot read
    _, problems = inspect(v1_dir, "cases/numpy_fused_chain_64_f32.json", CASE_SCHEMA)
    assert problems == [
        "cases/numpy_fused_chain_64_f32.json: a ttfr.case_result.v1 file that cannot be read as the current format (KeyError: 99)"
    ]
