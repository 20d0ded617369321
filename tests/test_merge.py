"""`ttfr merge`: shards of one plan into one result directory, refused when they are not."""

from __future__ import annotations

import json

from support.fakes import run_suite

from ttfr.artifacts.reader import validate_dir
from ttfr.commands import cli
from ttfr.measure.spec import RunRequest

SELECTION = dict(backends="numpy,jax_jit_cpu", workloads="matmul,fused_chain", sizes="64", cold_runs=2, warm_procs=2,
                 seed=9)  # fmt: skip


def _run(tmp_path, name, **kwargs):
    return run_suite(tmp_path / name, RunRequest(**{**SELECTION, **kwargs})).result_dir.root


def _cases(root) -> dict:
    suite = json.loads((root / "suite.json").read_text())
    return {ref["case"]: json.loads((root / ref["path"]).read_text()) for ref in suite["cases"]}


def test_two_shards_merge_into_exactly_the_single_runs_cases_and_runs(tmp_path, capsys):
    shards = [_run(tmp_path, f"s{k}", shard=f"{k}/2") for k in (1, 2)]
    whole = _run(tmp_path, "whole")
    assert cli.main(["merge", *map(str, shards), "--out", str(tmp_path / "merged")]) == 0
    (merged,) = (tmp_path / "merged").iterdir()
    assert validate_dir(merged) == []
    mine, single = _cases(merged), _cases(whole)
    assert sorted(mine) == sorted(single)
    for case_id, case in mine.items():  # the same runs per policy as a single machine's run
        assert {p: len(b.get("runs", b.get("procs", []))) for p, b in case["policies"].items()} == {
            p: len(b.get("runs", b.get("procs", []))) for p, b in single[case_id]["policies"].items()
        }
        assert case["status"] == single[case_id]["status"]
    plan = json.loads((merged / "plan.json").read_text())
    assert plan["spec"]["shard"] is None and [m["shard"] for m in plan["merged_from"]] == ["1/2", "2/2"]
    manifest = json.loads((merged / "manifest.json").read_text())
    assert [s["shard"] for s in manifest["shards"]] == ["1/2", "2/2"] and all(s["machine_id"] for s in manifest["shards"])
    assert (merged / "report.html").is_file()


def test_shards_that_do_not_make_one_plan_are_refused_saying_why(tmp_path, capsys):
    one = _run(tmp_path, "a", shard="1/2")
    other_seed = _run(tmp_path, "b", shard="2/2", seed=10)  # the other shards run with seed 9
    assert cli.main(["merge", str(one), str(other_seed), "--out", str(tmp_path / "m")]) == 2
    assert "spec.seed: 9" in capsys.readouterr().err
    assert cli.main(["merge", str(one), str(one), "--out", str(tmp_path / "m")]) == 2
    assert "missing [2], given twice [1]" in capsys.readouterr().err
    three = _run(tmp_path, "c", shard="2/3")
    assert cli.main(["merge", str(one), str(three), "--out", str(tmp_path / "m")]) == 2
    assert "different numbers of slices" in capsys.readouterr().err
    whole = _run(tmp_path, "d")
    assert cli.main(["merge", str(one), str(whole), "--out", str(tmp_path / "m")]) == 2
    assert "is not a shard" in capsys.readouterr().err
    assert not (tmp_path / "m").exists() or list((tmp_path / "m").iterdir()) == []


def test_slices_of_different_plans_are_refused(tmp_path, capsys):
    two = _run(tmp_path, "a", shard="1/2", workloads="matmul")
    three = _run(tmp_path, "b", shard="2/2", workloads="matmul,fused_chain,mlp_train_step")
    assert cli.main(["merge", str(two), str(three), "--out", str(tmp_path / "m")]) == 2
    assert "slices of different plans" in capsys.readouterr().err


def test_the_merged_manifest_records_the_merge_command_line_redacted(tmp_path):
    from ttfr.pipeline import shards as merge

    shards = [_run(tmp_path, f"s{k}", shard=f"{k}/2") for k in (1, 2)]
    root = merge.merge(shards, tmp_path / "m", ["ttfr", "merge", "--api-token", "s3cr3tvalue", *map(str, shards)])
    manifest = (root / "manifest.json").read_text()
    assert "s3cr3tvalue" not in manifest and json.loads(manifest)["command_line"][3] == "<redacted>"


def test_shards_run_with_explain_merge_with_every_cases_explanation(tmp_path):
    """--explain on shards (issue 38): each shard explains its own cases after its measured runs, and the merge
    keeps each explanation where a single machine's run would have it."""
    shards = [_run(tmp_path, f"s{k}", shard=f"{k}/2", explain=True, policies="cold-cache,warm-cache") for k in (1, 2)]
    whole = _run(tmp_path, "whole", explain=True, policies="cold-cache,warm-cache")
    assert cli.main(["merge", *map(str, shards), "--out", str(tmp_path / "merged")]) == 0
    (merged,) = (tmp_path / "merged").iterdir()
    assert validate_dir(merged) == []
    mine, single = _cases(merged), _cases(whole)
    assert sorted(mine) == sorted(single)
    for case_id, case in mine.items():
        for policy in ("cold-process/cold-cache", "cold-process/warm-cache"):
            explained, alone = case["policies"][policy]["explanation"], single[case_id]["policies"][policy]["explanation"]
            assert explained["outcome"] == alone["outcome"] == "ok", (case_id, policy)
            assert [p["phase"] for p in explained["phases"]] == [p["phase"] for p in alone["phases"]]
    assert json.loads((merged / "plan.json").read_text())["spec"]["explain"] is True
    assert "Where the cold start goes" in (merged / "report.md").read_text()
