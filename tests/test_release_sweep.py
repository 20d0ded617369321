"""`ttfr history --releases`: which releases (checked before anything is built), one uv environment
per release (reused, pruned), the releases interleaved in balanced rounds, a release that cannot be
built a point with uv's words, and a real sweep of NumPy releases end to end."""

import json
from collections import Counter

import pytest

from ttfr.commands import cli
from ttfr.errors import UsageError
from ttfr.measure import release_envs, releases
from ttfr.pipeline.release_sweep import arm_order

KNOWN = ["1.26.4", "2.2.5", "2.2.6", "2.3.0", "2.3.1"]


def test_a_range_or_a_list_names_the_releases_oldest_first():
    assert releases.choose("numpy=2.2.6..2.3.1", KNOWN).versions == ("2.2.6", "2.3.0", "2.3.1")
    assert releases.choose("numpy=..2.2.5", KNOWN).versions == ("1.26.4", "2.2.5")
    assert releases.choose("numpy=2.3.1,1.26.4", KNOWN).versions == ("1.26.4", "2.3.1")


@pytest.mark.parametrize("text, message", [
    ("numpy", "give PACKAGE=LO..HI or PACKAGE=V1,V2"),
    ("numpy=2.3.1..2.2.5", "2.3.1 is above 2.2.5; give LO..HI, oldest first"),
    ("numpy=3.0..4.0", "no release of numpy lies in that range; its releases run from 1.26.4 to 2.3.1"),
    ("numpy=2.2.5,9.9.9", "numpy has no release 9.9.9; its latest: 1.26.4, 2.2.5"),
    ("numpy=2.2.5..2.2.5", "a sweep needs at least two releases; numpy has 2.2.5 alone"),
    ("numpy=two", "'two' is not a version"),
])  # fmt: skip
def test_a_range_that_names_no_sweep_is_refused_with_what_there_is(text, message):
    with pytest.raises(UsageError, match=message.replace(".", r"\.").replace("(", r"\(")):
        releases.choose(text, KNOWN)


def test_every_release_runs_at_every_position_equally_often():
    k = 5
    positions = Counter((order.index(arm), arm) for r in range(2 * k) for order in [arm_order(k, r, phase=3)]
                        for arm in range(k))  # fmt: skip
    assert set(positions.values()) == {2}  # over 2k rounds: each release twice at each position
    assert all(sorted(arm_order(k, r, 0)) == list(range(k)) for r in range(7))


def test_an_environment_asks_for_the_release_and_what_the_cases_import_under_the_lock_but_the_swept_pins(tmp_path):
    assert release_envs.requirements("jax", "0.9.0", ["jax", "jaxlib"]) == ["jax[cpu]==0.9.0", "numpy"]
    assert release_envs.requirements("numpy", "2.2.6", ["numpy"]) == ["numpy==2.2.6"]
    lock = tmp_path / "lock.txt"
    lock.write_text("# pins\njax==0.10.2\njaxlib==0.10.2\nnumpy==2.3.1\nscipy==1.17.1\n")
    assert release_envs._constraints("jax", lock) == "numpy==2.3.1\nscipy==1.17.1\n"
    assert release_envs._constraints("numpy", lock) == "jax==0.10.2\njaxlib==0.10.2\nscipy==1.17.1\n"
    a = release_envs.env_name("2.2.6", "numpy", "/py", ["numpy==2.2.6"], "")
    assert a == release_envs.env_name("2.2.6", "numpy", "/py", ["numpy==2.2.6"], "")
    assert a != release_envs.env_name("2.2.6", "numpy", "/py", ["numpy==2.2.6"], "scipy==1\n")  # constraints count


@pytest.mark.parametrize("argv, message", [
    (["--releases", "numpy=2.2.6,2.3.1"], "--releases measures the cases you name: give --cases"),
    (["--releases", "numpy=2.2.6,2.3.1", "--cases", "numpy_matmul_64_f32", "somewhere"], "name no PATH or --registry"),
    (["--releases", "torch=2.12.0..2.13.0", "--cases", "torch_eager_cpu_matmul_64_f32"], "several GB of CUDA packages"),
    (["--releases", "numpy", "--cases", "numpy_matmul_64_f32"], "give PACKAGE=LO..HI"),
    (["--releases", "numpy=2.2.6,2.3.1", "--cases", "numpy_matmul_64_f32", "--by", "jax"], "give no --by with it"),
])  # fmt: skip
def test_bad_sweeps_exit_2_before_anything_is_built(tmp_path, capsys, argv, message):
    assert cli.main(["history", *argv, "--env-cache", str(tmp_path / "envs"), "--out", str(tmp_path / "out")]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "envs").exists() and not (tmp_path / "out").exists()


@pytest.mark.integration
def test_a_real_sweep_of_numpy_releases_in_uv_environments_reused_and_pruned(tmp_path, capsys):
    """Two NumPy releases that install here and one without a wheel for this Python (a point with uv's words):
    measured interleaved, read back verified, ordered by NumPy's version; asked again, the environments are
    reused; --prune-envs removes them."""
    envs, out = tmp_path / "envs", tmp_path / "out"
    argv = ["history", "--releases", "numpy=1.21.0,2.2.6,2.3.1", "--cases", "numpy_matmul_64_f32", "--cache-policy",
            "cold-cache,warm", "--rounds", "2", "--env-cache", str(envs), "--out", str(out)]  # fmt: skip
    assert cli.main(argv) == 0
    printed = capsys.readouterr().out
    assert "numpy 2.2.6: ready (built in" in printed and "numpy 1.21.0: failed" in printed
    (sweep,) = out.iterdir()
    assert sorted(p.name for p in sweep.iterdir() if not p.name.startswith("history-")) == ["numpy-2.2.6", "numpy-2.3.1"]
    (folder,) = sweep.glob("history-*")
    document = json.loads((folder / "history.json").read_text())
    assert document["order_by"] == "numpy"
    assert [s["label"] for s in document["sources"]] == ["numpy 1.21.0", "numpy 2.2.6", "numpy 2.3.1"]
    assert [s["kind"] for s in document["sources"]] == ["release", "result", "result"]
    assert document["sources"][1]["manifest"]["runtime.numpy"] == "2.2.6"  # the worker's, not the harness's
    assert document["sources"][2]["manifest"]["resolved.numpy"] == "2.3.1"
    changed = {c["key"]: (c["before"], c["after"]) for c in document["sources"][2]["changed"]}
    assert changed["runtime.numpy"] == ("2.2.6", "2.3.1") and changed["resolved.numpy"] == ("2.2.6", "2.3.1")
    assert "runtime.numpy 2.2.6 → 2.3.1" in (folder / "history.html").read_text()
    ttfr = next(s for s in document["series"] if s["figure"] == "ttfr_s" and s["policy"] == "cold-process/cold-cache")
    gap = ttfr["points"][0]
    assert gap["median_s"] is None and "numpy 1.21.0 could not be measured: uv pip install numpy==1.21.0" in gap["gap"]
    assert all(p["median_s"] and len(p["runs_s"]) == 2 for p in ttfr["points"][1:])
    (damaged,) = envs.glob("numpy-2.3.1-*")
    (damaged / release_envs.RECORD).unlink()  # a half-deleted environment is built again, never trusted
    assert cli.main([*argv[:2], "numpy=2.2.6,2.3.1", *argv[3:]]) == 0
    printed = capsys.readouterr().out
    assert "numpy 2.2.6: ready (reused" in printed and "numpy 2.3.1: ready (built in" in printed
    assert cli.main(["history", "--prune-envs", "--env-cache", str(envs)]) == 0
    assert "removed 2 environment(s)" in capsys.readouterr().out and list(envs.iterdir()) == []


def test_a_sweep_interleaves_its_releases_and_an_interrupt_keeps_the_complete_rounds(tmp_path, monkeypatch):
    """Fake workers, two releases built and one that was not: each round runs every task in both, in both orders
    over the rounds; Ctrl-C in round 3 leaves two complete rounds, read back verified, and the unbuilt release a
    point with its reason."""
    import sys

    from support.fakes import FakeExecutor

    from ttfr.artifacts.reader import validate_dir
    from ttfr.measure.executors import Executors
    from ttfr.measure.plan import build_plan
    from ttfr.measure.spec import RunRequest, build_spec
    from ttfr.pipeline import release_sweep
    from ttfr.pipeline.interleaved import rounds_of

    built = [release_envs.Env("1.0", "ready", python=sys.executable),
             release_envs.Env("2.0", "failed", reason="uv pip install numpy==2.0: no wheel"),
             release_envs.Env("3.0", "ready", python=sys.executable)]  # fmt: skip
    monkeypatch.setattr(release_sweep, "build_envs", lambda spec, say: built)
    run = build_spec(RunRequest(cases="numpy_matmul_64_f32", policies="cold-cache", seed=3))
    spec = release_sweep.SweepSpec(run, releases.Releases("numpy", ("1.0", "2.0", "3.0"), "numpy=1.0,2.0,3.0"),
                                   rounds=4, env_cache=tmp_path / "envs")  # fmt: skip
    per_round = [len(r) for r in rounds_of(build_plan(replace_runs(run, 4)), 3)]
    fake = FakeExecutor(interrupt_at=2 * (per_round[0] + per_round[1]) + 1)
    outcome = release_sweep.execute(spec, tmp_path / "out", executors=Executors(worker=fake), say=lambda _line: None)
    assert outcome.interrupted and outcome.rounds == 2
    arms = [next(part for part in call["env"]["JAX_COMPILATION_CACHE_DIR"].split("/") if part.startswith("numpy-"))
            for call in fake.calls if "JAX_COMPILATION_CACHE_DIR" in call["env"]]  # fmt: skip
    pairs = [tuple(arms[i : i + 2]) for i in range(0, len(arms) - 1, 2)]
    assert set(pairs) == {("numpy-1.0", "numpy-3.0"), ("numpy-3.0", "numpy-1.0")}  # both orders, never one twice
    kinds = {r.id: r.kind for r in outcome.results}
    assert kinds == {"numpy-1.0": "result", "numpy-3.0": "result", "numpy-2.0": "release"}
    failed = next(r for r in outcome.results if r.kind == "release")
    assert failed.cases == {"numpy_matmul_64_f32": "numpy 2.0 could not be measured: uv pip install numpy==2.0: no wheel"}
    for name in ("numpy-1.0", "numpy-3.0"):
        assert validate_dir(outcome.root / name) == []
    figure = release_sweep._unavailable(replace_figures(outcome.results[0], "failed: AttributeError: module 'jax' has "
                                                        "no attribute 'export'"))  # fmt: skip
    assert figure[("c", "p", "ttfr_s")].gap == "unavailable in numpy 1.0: AttributeError: module 'jax' has no attribute 'export'"


def replace_runs(run, rounds):
    from dataclasses import replace

    return replace(run, cold_runs=rounds, warm_procs=rounds)


def replace_figures(result, gap):
    from dataclasses import replace

    from ttfr.artifacts.history_sources import Figure

    return replace(result, figures={("c", "p", "ttfr_s"): Figure(gap=gap)})
