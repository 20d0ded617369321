"""`ttfr export --format openmetrics|prometheus|csv`: what a dashboard or a notebook reads,
parsed back with prometheus_client's own parsers and the csv module (pandas' reader of
this file is the csv module's dialect)."""

from __future__ import annotations

import csv
import io
import json

import pytest
from support.fakes import FakeExecutor, run_suite
from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_openmetrics
from prometheus_client.parser import text_string_to_metric_families as parse_prometheus

from conftest import fake_result
from ttfr.artifacts.export import csv_long, formats, openmetrics, tidy
from ttfr.artifacts.reader import load_finished
from ttfr.commands import cli
from ttfr.measure.spec import RunRequest


def _run(tmp_path, executor=None):
    request = RunRequest(backends="numpy,jax_jit_cpu,jax_jit_gpu", workloads="matmul", sizes="64", cold_runs=3,
                         warm_procs=2, seed=3)  # fmt: skip
    return load_finished(run_suite(tmp_path / "out", request, executor).result_dir.root)


def _samples(families) -> dict:
    out = {}
    for family in families:
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def _case_file(verified, case_id):
    return next(c for c in verified.cases if c.case == case_id)


@pytest.mark.parametrize("fmt", openmetrics.FORMATS)
def test_the_exposition_round_trips_to_the_case_files_figures(tmp_path, fmt):
    verified = _run(tmp_path)
    text = openmetrics.render(verified, fmt).decode()
    samples = _samples(parse_openmetrics(text) if fmt == "openmetrics" else parse_prometheus(text))
    assert text.rstrip().endswith("# EOF") == (fmt == "openmetrics")
    jax = _case_file(verified, "jax_jit_cpu_matmul_64_f32")
    cold = jax.policies.get("cold-process/cold-cache")
    labels = {"case": "jax_jit_cpu_matmul_64_f32", "backend": "jax_jit_cpu", "workload": "matmul", "size": "64",
              "dtype": "float32", "policy": "cold-process/cold-cache"}  # fmt: skip
    for quantile, key in (("0", "min"), ("0.5", "median"), ("1", "max")):
        got = samples[("ttfr_ttfr_seconds", tuple(sorted({**labels, "quantile": quantile}.items())))]
        assert got == pytest.approx(getattr(cold.summary.ttfr_s, key))
    assert samples[("ttfr_runs", tuple(sorted(labels.items())))] == cold.summary.ttfr_s.n
    # the fake's JAX runs compile trace 0.01 + compile 0.1 s: their compile time is the sum of the stages
    compile_median = samples[("ttfr_compile_seconds", tuple(sorted({**labels, "quantile": "0.5"}.items())))]
    assert compile_median == pytest.approx(0.11)
    # cold cache: the fake writes its entry (a miss); warm cache: it finds it (a hit)
    ratio = {p: samples.get(("ttfr_compile_cache_hit_ratio", tuple(sorted({**labels, "policy": p}.items()))))
             for p in ("cold-process/cold-cache", "cold-process/warm-cache")}  # fmt: skip
    assert ratio == {"cold-process/cold-cache": 0.0, "cold-process/warm-cache": 1.0}
    warm = jax.policies.get("warm-process").summary.call_s
    case_labels = {k: v for k, v in labels.items() if k != "policy"}
    assert samples[("ttfr_warm_call_seconds", tuple(sorted({**case_labels, "quantile": "0.5"}.items())))] == pytest.approx(
        warm.median
    )
    assert samples[("ttfr_peak_rss_bytes", tuple(sorted(case_labels.items())))] == jax.memory.peak_rss_bytes.median
    # the status is one state set to 1; the GPU case here is `warn` and has no figures at all
    gpu = {**case_labels, "case": "jax_jit_gpu_matmul_64_f32", "backend": "jax_jit_gpu"}
    states = {s: samples[("ttfr_case_status", tuple(sorted({**gpu, "ttfr_case_status": s}.items())))]
              for s in ("ok", "warn", "failed")}  # fmt: skip
    assert states == {"ok": 0.0, "warn": 1.0, "failed": 0.0}
    assert not any(name != "ttfr_case_status" and dict(lbl).get("case") == gpu["case"] for name, lbl in samples)
    # numpy has no persistent cache: no ratio rather than a made-up 0
    assert not any(name == "ttfr_compile_cache_hit_ratio" and dict(lbl)["backend"] == "numpy" for name, lbl in samples)


def test_a_failed_case_exports_its_status_and_no_figures(tmp_path):
    def fail_numpy(call):
        if call["case"].startswith("numpy"):
            return fake_result(None, outcome="error", reason="boom")
        return None

    verified = _run(tmp_path, FakeExecutor(decide=fail_numpy))
    samples = _samples(parse_openmetrics(openmetrics.render(verified).decode()))
    numpy = [(name, dict(lbl)) for name, lbl in samples if dict(lbl).get("case") == "numpy_matmul_64_f32"]
    assert {name for name, _ in numpy} == {"ttfr_case_status"}
    failed = next(v for (name, lbl), v in samples.items() if name == "ttfr_case_status"
                  and dict(lbl) .get("case") == "numpy_matmul_64_f32" and dict(lbl)["ttfr_case_status"] == "failed")  # fmt: skip
    assert failed == 1.0


def test_the_csv_is_one_row_per_run_and_metric_and_keeps_failures_empty(tmp_path):
    def fail_one(call):  # numpy's second cold-process run fails (not its first: that would stop the case)
        if call["case"].startswith("numpy") and call["job"].mode == "cold":
            fail_one.cold += 1
            if fail_one.cold == 2:
                return fake_result(None, outcome="error", reason="boom")
        return None

    fail_one.cold = 0
    verified = _run(tmp_path, FakeExecutor(decide=fail_one))
    rows = list(csv.DictReader(io.StringIO(csv_long.render(verified))))
    assert tuple(rows[0]) == tidy.COLUMNS
    jax = _case_file(verified, "jax_jit_cpu_matmul_64_f32")
    for policy in ("cold-process/cold-cache", "cold-process/warm-cache"):
        for run in jax.policies.get(policy).runs:
            key = (jax.case, policy, "cold_run", str(run.index))
            got = {r["metric"]: r["value"] for r in rows if (r["case"], r["policy"], r["kind"], r["run"]) == key}
            assert float(got["ttfr_s"]) == run.metrics.ttfr_s
            assert float(got["compile_s"]) == pytest.approx(0.11)
            assert float(got["stage_trace_s"]) == run.stages.trace_s
    samples = [r for r in rows if r["case"] == jax.case and r["kind"] == "warm_sample"]
    procs = jax.policies.get("warm-process").procs
    assert len(samples) == sum(len(p.samples_s) for p in procs)
    assert sorted(float(r["value"]) for r in samples) == sorted(s for p in procs for s in p.samples_s)
    failed = [r for r in rows if r["outcome"] == "error"]
    assert failed and [r["value"] for r in failed if r["metric"] == "ttfr_s"] == [""]  # there, with no figure


def test_export_cli_writes_files_and_refuses_bad_destinations(tmp_path, capsys):
    verified = _run(tmp_path)
    root = verified.result_dir.root
    dest_dir = tmp_path / "textfile"
    dest_dir.mkdir()
    assert cli.main(["export", "--format", "prometheus", str(root), str(dest_dir)]) == 0
    (written,) = dest_dir.iterdir()
    assert written.name == "ttfr.prom"  # one file in a textfile directory: the latest snapshot's
    list(parse_prometheus(written.read_text()))
    assert cli.main(["export", "--format", "csv", str(root), str(tmp_path / "runs.csv")]) == 0
    assert (tmp_path / "runs.csv").read_text().startswith("snapshot,case,")
    # inside the result directory (its files are its hashed artifacts), or under a missing directory
    assert cli.main(["export", "--format", "csv", str(root), str(root / "x.csv")]) == 2
    assert cli.main(["export", "--format", "openmetrics", str(root), str(tmp_path / "nope" / "x.prom")]) == 2
    assert not (root / "x.csv").exists()
    with pytest.raises(SystemExit) as refused:  # argparse names the valid formats
        cli.main(["export", "--format", "yaml", str(root), str(tmp_path / "x")])
    assert refused.value.code == 2
    err = capsys.readouterr().err
    assert "inside the result directory" in err and "does not exist" in err and "openmetrics" in err
    with pytest.raises(Exception, match="valid"):
        formats.export("yaml", root, tmp_path / "x", "cold-process/cold-cache")
    json.loads((root / "suite.json").read_text())  # untouched


def test_the_command_offers_exactly_the_registered_exporters_and_says_what_each_writes():
    """One table of exporters (name, what it writes, how): the command's choices and help are its."""
    from ttfr.commands import cli

    parser = cli.build_parser()
    export = next(a for a in parser._subparsers._group_actions[0].choices["export"]._actions if "--format" in a.option_strings)
    assert tuple(export.choices) == formats.FORMATS == tuple(formats.EXPORTERS)
    assert all(e.description in export.help for e in formats.EXPORTERS.values())
