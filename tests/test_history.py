"""`ttfr history`: series never mixing machines, gaps not values, steps found with a fixed rule and
checked against asv's, what changed at them, the gate, every output agreeing, and bad input refused
before anything is written. Fakes here (the real runs: tests/test_history_runs.py)."""

import csv
import hashlib
import json
import shutil

import numpy as np
import pytest
from support.fakes import FakeExecutor

from ttfr.analyse import history_steps
from ttfr.artifacts import snapshot, snapshot_registry
from ttfr.artifacts.history_sources import Figure, ReadResult
from ttfr.artifacts.export import history_csv
from ttfr.artifacts.store import schema_errors
from ttfr.commands import cli
from ttfr.errors import UsageError
from ttfr.measure.executors import Executors
from ttfr.measure.spec import RunRequest, build_spec
from ttfr.model.base import UNSET, encode
from ttfr.model.history import HISTORY_SCHEMA, Machine
from ttfr.pipeline import history
from ttfr.pipeline import suite as suite_run
from ttfr.report import history_md

KEY = ("numpy_matmul_64_f32", "cold-process/cold-cache", "ttfr_s")
HERE = Machine(cpu="EPYC", logical_cores=2, usable_cores=2, gpu=[], os="Linux x86_64 glibc 2.36")
THERE = Machine(cpu="Xeon", logical_cores=16, usable_cores=16, gpu=["H200"], os="Linux x86_64 glibc 2.39")


def _result(i, level, *, machine=HERE, jax="0.10.2", gap=None, key=KEY, seed=None, session_sd=0.03):
    rng = np.random.default_rng(1000 + i if seed is None else seed)
    session = level * np.exp(rng.normal(0, session_sd))
    runs = list(session * np.exp(rng.normal(0, 0.02, 5)))
    figure = Figure(gap=gap) if gap else Figure(runs_s=runs)
    return ReadResult(id=f"r{i:02d}", kind="result", path=f"/results/r{i:02d}", created_at=f"2026-11-{i + 1:02d}T00:00:00Z",
                      machine=machine, ttfr_version="0.1.2", versions={"jax": jax, "numpy": "2.3.1"},
                      manifest={"runtime.jax": jax, "ttfr": "0.1.2"}, figures={key: figure},
                      cases={key[0]: None})  # fmt: skip


def _build(results, **kwargs):
    kwargs.setdefault("by", None)
    kwargs.setdefault("figures", ["ttfr_s", "call_s"])
    kwargs.setdefault("cases", None)
    kwargs.setdefault("fail_above", None)
    return history.build(results, [], now="2026-11-28T00:00:00Z", **kwargs)


def test_a_step_is_named_at_the_first_result_after_it_with_its_size_interval_and_what_changed():
    results = [_result(i, 1.0, jax="0.9.0") for i in range(3)] + [_result(i, 1.4) for i in range(3, 8)]
    (series,) = _build(results).series
    (step,) = series.steps
    assert (step.at, step.source, step.label) == (3, "r03", "2026-11-04T00:00:00Z")
    assert step.ci[0] <= 1.4 <= step.ci[1] and step.ci[0] > 1.2  # the injected change, and clearly a step
    assert [(c.key, c.before, c.after) for c in step.changed] == [("runtime.jax", "0.9.0", "0.10.2")]
    assert [p.segment for p in series.points] == [0, 0, 0, 1, 1, 1, 1, 1]
    assert series.noise.between_rel is not None and series.noise.penalty == pytest.approx(history_steps.penalty(8))


def test_a_flat_history_yields_no_step_and_a_short_one_claims_none():
    (flat,) = _build([_result(i, 1.0) for i in range(8)]).series
    assert flat.steps == [] and flat.status == "detected"
    (short,) = _build([_result(0, 1.0), _result(1, 2.0), _result(2, 2.0)]).series
    assert short.steps == [] and short.status == "too_short" and short.noise.penalty is None


def test_asvs_step_detection_finds_the_same_step_on_the_same_series():
    from asv import step_detect

    for seed, (before, after, at) in enumerate([(1.0, 1.4, 3), (1.0, 0.7, 5), (2.0, 2.6, 4)]):
        results = [_result(i, before if i < at else after, seed=seed * 100 + i) for i in range(9)]
        (series,) = _build(results).series
        (step,) = series.steps
        medians = [p.median_s for p in series.points]
        asv_steps = step_detect.detect_steps(medians)
        assert len(asv_steps) == 2, asv_steps  # one step: two segments
        asv_at = asv_steps[1][0]
        assert abs(asv_at - step.at) <= 1
        assert np.sign(asv_steps[1][2] - asv_steps[0][2]) == np.sign(step.ratio - 1)


def test_series_never_mix_machines():
    results = [_result(i, 1.0 if i % 2 else 3.0, machine=HERE if i % 2 else THERE) for i in range(10)]
    document = _build(results)
    assert len(document.machines) == 2 and len(document.series) == 2
    for series in document.series:
        sources = {s.id: s for s in document.sources}
        assert {sources[p.source].machine for p in series.points} == {series.machine}
        assert series.steps == []  # each machine's own level is flat: alternating machines is not a step


def test_a_withheld_figure_is_a_gap_with_its_reason_and_the_step_is_still_found():
    results = [_result(i, 1.0) for i in range(4)] + [_result(4, 1.0, gap="withheld: 3 of 5 runs were contended")]
    results += [_result(i, 1.5) for i in range(5, 10)]
    document = _build(results)
    (series,) = document.series
    gap = series.points[4]
    assert gap.median_s is None and gap.runs_s == [] and gap.segment is None and "contended" in gap.gap
    (step,) = series.steps
    assert step.at == 5 and step.source == "r05"  # the gap is skipped, not the first point after the step
    rows = list(csv.DictReader(history_csv.render(document).splitlines()))
    assert rows[4]["median_s"] == "" and "contended" in rows[4]["gap"]
    assert float(rows[5]["step_ratio"]) == step.ratio and rows[6]["step_ratio"] == ""


def test_a_case_missing_from_a_result_is_a_gap_that_says_so():
    results = [_result(i, 1.0) for i in range(5)]
    other = ("numpy_matmul_128_f32", "cold-process/cold-cache", "ttfr_s")
    results.append(_result(5, 1.0, key=other))
    series = {s.case: s for s in _build(results).series}
    assert series[KEY[0]].points[5].gap == "this case was not measured in this result"
    assert [p.gap for p in series[other[0]].points[:5]] == ["this case was not measured in this result"] * 5


def test_by_a_packages_version_orders_the_series_and_a_result_without_it_is_refused():
    versions = ["0.10.2", "0.9.0", "0.10.0", "0.8.1"]  # by date; by version: 0.8.1 < 0.9.0 < 0.10.0 < 0.10.2
    results = [_result(i, 1.0, jax=v) for i, v in enumerate(versions)]
    document = _build(results, by="jax")
    assert [s.label for s in document.sources] == ["jax 0.8.1", "jax 0.9.0", "jax 0.10.0", "jax 0.10.2"]
    assert document.order_by == "jax"
    with pytest.raises(UsageError, match=r"--by torch: 4 result\(s\) record no torch.*records: jax, numpy"):
        _build(results, by="torch")


def test_the_gate_fails_on_a_newest_step_up_beyond_the_limit_only():
    up = [_result(i, 1.0) for i in range(4)] + [_result(i, 1.5) for i in range(4, 8)]
    assert _build(up, fail_above=0.10).gate.exit_code == 3
    failing = _build(up, fail_above=0.10).gate.failing
    assert failing == [f"{KEY[0]} · {KEY[1]} · ttfr_s · {history.history_sources.fingerprint(HERE)}"]
    assert _build(up, fail_above=0.80).gate.exit_code == 0  # +50% is not beyond +80%
    assert _build(up).gate.exit_code == 0  # no gate asked for
    down = [_result(i, 1.5) for i in range(4)] + [_result(i, 1.0) for i in range(4, 8)]
    assert _build(down, fail_above=0.10).gate.exit_code == 0
    component = [_result(i, 1.0 if i < 4 else 1.5, key=(*KEY[:2], "import_s")) for i in range(8)]
    document = _build(component, figures=["import_s"], fail_above=0.10)
    assert document.series[0].steps and document.gate.exit_code == 0  # a component's step is reported, not gated


@pytest.mark.figures
def test_every_output_renders_the_one_document():
    results = [_result(i, 1.0, jax="0.9.0") for i in range(3)] + [_result(i, 1.4) for i in range(3, 8)]
    document = _build(results, fail_above=0.1)
    assert schema_errors(encode(document), HISTORY_SCHEMA) == []
    (step,) = document.series[0].steps
    markdown = history_md.render(document)
    assert history_md.ratio_text(step.ratio) in markdown and history_md.ci_text(step) in markdown
    assert "`runtime.jax`: `0.9.0` → `0.10.2`" in markdown and "fails:" in markdown
    from ttfr.report import html

    page = html.render_history(document, {r.id: f"../{r.id}/report.html" for r in results})
    assert history_md.ratio_text(step.ratio) in page and 'href="../r00/report.html"' in page
    assert "runtime.jax: 0.9.0 → 0.10.2" in page  # what changed, on the page too


def _fake_result_dir(tmp_path, name, seed, explain=False):
    spec = build_spec(RunRequest(backends="numpy", workloads="matmul", sizes="64", cold_runs=3, warm_procs=2, seed=seed,
                                 explain=explain))  # fmt: skip
    result_dir = suite_run.start(spec, tmp_path / name, ["ttfr", "run"])
    suite_run.execute(result_dir, spec, Executors(worker=FakeExecutor()))
    return result_dir.root


def test_real_result_directories_and_snapshots_read_verified_and_a_tampered_one_left_out(tmp_path, capsys):
    dirs = [_fake_result_dir(tmp_path, f"out{i}", seed=i) for i in range(3)]
    published, _ = snapshot.publish(dirs[2], tmp_path / "snaps")
    tampered = tmp_path / "tampered"
    shutil.copytree(dirs[1], tampered)
    case_file = tampered / "cases" / "numpy_matmul_64_f32.json"
    case_file.write_text(case_file.read_text().replace('"ttfr_s": 0.', '"ttfr_s": 1.', 1))
    out = tmp_path / "hist"
    code = cli.main(["history", str(dirs[0]), str(tampered), str(published), "--out", str(out)])
    assert code == 0, capsys.readouterr()
    printed = capsys.readouterr().out
    assert "left out" in printed and "tampered" in printed
    (folder,) = out.iterdir()
    document = json.loads((folder / "history.json").read_text())
    assert schema_errors(document, HISTORY_SCHEMA) == []
    assert [s["kind"] for s in document["sources"]] == ["result", "snapshot"]
    assert document["sources"][1]["id"] == published.name
    (left,) = document["left_out"]
    assert left["path"] == str(tampered) and "numpy_matmul_64_f32.json" in left["reason"]
    figures = {s["figure"] for s in document["series"]}
    assert {"ttfr_s", "import_s", "first_call_s", "call_s"} <= figures
    rows = list(csv.DictReader((folder / "history.csv").open()))
    assert len(rows) == sum(len(s["points"]) for s in document["series"])
    assert all((folder / name).is_file() for name in ("history.md", "history.html"))


def _nextstat_only(source_snapshot, dest):
    """A NextStat snapshot of ML results only (what NextStat's own publisher leaves): its ml files, its baseline
    manifest and an index that lists them."""
    shutil.copytree(source_snapshot / "nextstat", dest / "nextstat")
    shutil.copy(source_snapshot / "baseline_manifest.json", dest / "baseline_manifest.json")
    artifacts = []
    for path in sorted(p for p in dest.rglob("*") if p.is_file()):
        data = path.read_bytes()
        artifacts.append({"path": path.relative_to(dest).as_posix(), "bytes": len(data),
                          "sha256": hashlib.sha256(data).hexdigest()})  # fmt: skip
    index = json.loads((source_snapshot / "snapshot_index.json").read_text())
    index.update(snapshot_id=dest.name, artifacts=artifacts)
    (dest / "snapshot_index.json").write_text(json.dumps(index))


def test_a_registry_of_snapshots_nextstat_only_ones_included_and_a_missing_one_refused(tmp_path, capsys):
    root = tmp_path / "snapshots"
    first, _ = snapshot.publish(_fake_result_dir(tmp_path, "a", 1), root)
    second, _ = snapshot.publish(_fake_result_dir(tmp_path, "b", 2), root)
    native = root / "nextstat-only-1"
    native.mkdir()
    _nextstat_only(second, native)
    registry = tmp_path / "snapshot_registry.json"
    for path in (first, second):
        snapshot_registry.register(path, registry)
    data = json.loads(registry.read_text())
    data["snapshots"].append({"snapshot_id": native.name})
    registry.write_text(json.dumps(data))
    out = tmp_path / "hist"
    assert cli.main(["history", "--registry", str(registry), "--root", str(root), "--out", str(out)]) == 0
    (folder,) = out.iterdir()
    document = json.loads((folder / "history.json").read_text())
    assert sorted(s["kind"] for s in document["sources"]) == ["nextstat", "snapshot", "snapshot"]
    native_series = [s for s in document["series"] if s["figure"].startswith("nextstat.")]
    assert {s["figure"] for s in native_series} >= {"nextstat.ttfr_s", "nextstat.call_s"}
    assert len(document["machines"]) == 2  # NextStat's platform string alone is not ttfr's machine
    shutil.rmtree(native)
    capsys.readouterr()
    assert cli.main(["history", "--registry", str(registry), "--root", str(root), "--out", str(out)]) == 2
    assert "the snapshot of entry 'nextstat-only-1' is not under" in capsys.readouterr().err
    assert len(list(out.iterdir())) == 1  # nothing new written


@pytest.mark.parametrize(
    "argv, message",
    [
        ([], "name result directories or snapshots"),
        (["--fail-above", "ten"], "--fail-above 'ten': give a percentage"),
        (["--fail-above", "-5"], "--fail-above '-5': give a percentage"),
        (["--figure", "ttfr"], "--figure 'ttfr': not a figure; choose from ttfr_s,"),
        (["--registry", "missing.json"], "--registry missing.json: no such file"),
        (["--root", "."], "--root says where a registry's snapshots are"),
    ],
)
def test_bad_input_exits_2_naming_the_choices_before_anything_is_written(tmp_path, capsys, argv, message):
    out = tmp_path / "hist"
    assert cli.main(["history", *argv, "--out", str(out)]) == 2
    assert message in capsys.readouterr().err
    assert not out.exists()


def test_an_unknown_package_or_case_exits_2(tmp_path, capsys):
    result = _fake_result_dir(tmp_path, "a", 1)
    out = tmp_path / "hist"
    assert cli.main(["history", str(result), "--by", "jaxx", "--out", str(out)]) == 2
    assert "--by jaxx: 1 result(s) record no jaxx" in capsys.readouterr().err
    assert cli.main(["history", str(result), "--cases", "nope", "--out", str(out)]) == 2
    assert "--cases nope: no such case in these results; they hold numpy_matmul_64_f32" in capsys.readouterr().err
    assert not out.exists()


def test_explain_on_both_sides_of_a_step_names_what_moved_and_one_side_alone_names_nothing(tmp_path, monkeypatch):
    from dataclasses import replace

    from support import fakes

    from ttfr.artifacts import history_sources

    before = history_sources.read_one(_fake_result_dir(tmp_path, "a", 1, explain=True))
    slower = fakes.FAKE_IMPORTTIME.replace("40000 |      60000 | numpy", "140000 |     160000 | numpy")
    monkeypatch.setattr(fakes, "FAKE_IMPORTTIME", slower)  # the second run's numpy imports 100 ms slower
    after = history_sources.read_one(_fake_result_dir(tmp_path, "b", 2, explain=True))
    assert set(before.explained) == set(after.explained) == {KEY[0]}

    def like(source, i, level):
        return replace(_result(i, level), explained=source.explained)

    (series,) = _build([like(before, i, 1.0) for i in range(4)] + [like(after, i, 1.5) for i in range(4, 8)]).series
    (step,) = series.steps
    numpy = [row for row in step.explained if row.name == "numpy"]
    assert numpy and all(row.change_s == pytest.approx(0.1) for row in numpy)
    assert "moved (distribution, import): `numpy` 60 ms → 160 ms (+100 ms)" in history_md.render(_build(
        [like(before, i, 1.0) for i in range(4)] + [like(after, i, 1.5) for i in range(4, 8)]))  # fmt: skip
    one_sided = [like(before, i, 1.0) for i in range(4)] + [_result(i, 1.5) for i in range(4, 8)]
    (series,) = _build(one_sided).series
    assert series.steps[0].explained is UNSET  # an explanation on one side alone compares nothing
