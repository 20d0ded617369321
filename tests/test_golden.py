"""Golden files: every artifact and rendering of the fixture suite (tests/support/fixture_suite.py),
byte for byte. A refactoring keeps them identical; a change of what ttfr writes shows up
here as a diff to review. Regenerate on purpose with `TTFR_UPDATE_GOLDEN=1 pytest
tests/test_golden.py` and commit the diff with the change that made it (a schema change
bumps its version)."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest
from support.fixture_suite import run_fixture_suite, run_loop_suite
from rich.console import Console

from ttfr.artifacts.export import formats, nextstat
from ttfr.artifacts.reader import load_finished
from ttfr.report import terminal

GOLDEN = Path(__file__).parent / "golden"
SUITES = {"fixture_suite": run_fixture_suite, "loop_suite": run_loop_suite}
UPDATE = os.environ.get("TTFR_UPDATE_GOLDEN") == "1"


def _terminal(render) -> bytes:
    console = Console(file=io.StringIO(), width=160, color_system=None, force_terminal=False)
    render(console)
    return console.file.getvalue().encode()


def _outputs(suite, tmp_path, monkeypatch) -> dict[str, bytes]:
    outcome = SUITES[suite](tmp_path, monkeypatch)
    root = outcome.result_dir.root
    # .lock holds the pid of the run that wrote the directory
    files = {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file() and p.name != ".lock"}
    exports = tmp_path / "exports"
    exports.mkdir()
    for fmt, name in (("csv", "export.csv"), ("openmetrics", "export.om.prom"), ("prometheus", "export.prom")):
        (path,) = formats.export(fmt, root, exports / name, "cold-process/cold-cache")
        files[f"exports/{name}"] = path.read_bytes()
    for path in nextstat.export(root, exports / "nextstat"):
        files[f"exports/nextstat/{path.name}"] = path.read_bytes()
    verified = load_finished(root)
    files["terminal/summary.txt"] = _terminal(lambda c: terminal.print_summary(c, verified.suite, verified.cases, "RESULTS"))
    files["terminal/report.txt"] = _terminal(lambda c: terminal.print_report(c, verified))
    return {name: data.replace(str(root).encode(), b"RESULTS") for name, data in files.items()}


@pytest.mark.parametrize("suite", sorted(SUITES))
def test_every_output_of_a_fixture_suite_is_byte_identical_to_its_golden_file(suite, tmp_path, monkeypatch):
    outputs = _outputs(suite, tmp_path, monkeypatch)
    golden = GOLDEN / suite
    if UPDATE:
        for old in golden.rglob("*"):
            if old.is_file():
                old.unlink()
        for name, data in outputs.items():
            (golden / name).parent.mkdir(parents=True, exist_ok=True)
            (golden / name).write_bytes(data)
        pytest.skip("golden files rewritten: review and commit the diff")
    expected = {p.relative_to(golden).as_posix(): p.read_bytes() for p in sorted(golden.rglob("*")) if p.is_file()}
    assert sorted(outputs) == sorted(expected)
    differ = [name for name in expected if outputs[name] != expected[name]]
    assert not differ, f"differ from tests/golden/{suite}: {differ}"


def test_the_fixture_suite_holds_every_verdict(tmp_path, monkeypatch):
    """The golden files are only as good as the cases they cover."""
    verified = load_finished(run_fixture_suite(tmp_path, monkeypatch).result_dir.root)
    by_case = {c.case: c for c in verified.cases}
    assert by_case["numpy_matmul_64_f32"].status == "ok"
    assert by_case["jax_jit_gpu_matmul_64_f32"].reason == "gpu_unavailable"
    assert by_case["torch_eager_cpu_matmul_64_f32"].status == "failed"
    assert by_case["numpy_fused_chain_64_f32"].status == "warn"  # its figures withheld: no ok result
    withheld = by_case["numpy_fused_chain_64_f32"].policies.get("cold-process/cold-cache")
    assert withheld.summary.ttfr_s is None
    assert any(f.name == "could_not_measure_cleanly" for f in withheld.flags)
    assert any(f.name == "first_run_outlier" for f in by_case["torch_eager_cpu_fused_chain_64_f32"].flags)
    assert by_case["jax_jit_cpu_fused_chain_64_f32"].correctness.state == "not_checked"
