"""examples/quickstart.ipynb executed by nbclient on a real Jupyter kernel: two small cases measured in
fresh processes from the kernel, the result displayed as HTML (its summary table), the tidy frame,
and the progress drawn as an HTML bar, never terminal codes."""

import json
from pathlib import Path

import nbformat
import pytest

NOTEBOOK = Path(__file__).resolve().parents[1] / "examples" / "quickstart.ipynb"


@pytest.mark.integration
def test_the_example_notebook_runs_on_a_real_kernel_and_shows_the_result_table(tmp_path):
    from nbclient import NotebookClient

    notebook = nbformat.read(NOTEBOOK, as_version=4)
    NotebookClient(notebook, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    run_cell, frame_cell, case_cell = (c for c in notebook.cells if c.cell_type == "code")
    html = [o["data"]["text/html"] for o in run_cell.outputs if "text/html" in o.get("data", {})]
    assert any("<progress" in h for h in html), run_cell.outputs  # the bar, updated in place
    shown = run_cell.outputs[-1]["data"]["text/html"]
    assert "<table>" in shown and "numpy_matmul_64_f32" in shown and "TTFR, cold cache" in shown
    texts = "".join(o.get("text", "") for o in run_cell.outputs)
    assert "\x1b[" not in texts  # no terminal codes in a notebook
    assert "numpy_fused_chain_4096_f32" in frame_cell.outputs[0]["data"]["text/plain"]
    assert "numpy_matmul_64_f32" in case_cell.outputs[0]["data"]["text/html"]
    (result,) = (tmp_path / "ttfr-results").iterdir()
    assert (result / "suite.json").is_file()  # written where the notebook runs, as `ttfr run` writes it
    limitations = json.loads((result / "manifest.json").read_text())["limitations"]
    assert any(note.startswith("Started from a Jupyter kernel (pid ") for note in limitations)  # the kernel, noted
