"""Bad user input is exit 2 with a one-line reason, found before anything is written:
--workspace files (bad values by JSON path, non-regular or oversized files), option limits,
a --workspace beside a preset of the same parameter count, a --python that hangs."""

from __future__ import annotations

import copy
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from support.events import read_fifo, wait_gone
from support.fakes import FakeExecutor

from ttfr.measure.executors import Executors
from ttfr.child.workloads.histfactory import workspace as hf_workspace
from ttfr.commands import cli
from ttfr.errors import UsageError
from ttfr.measure import catalog, datasets, limits, worker_probe
from ttfr.measure.journal import Journal
from ttfr.measure.plan import build_plan
from ttfr.measure.scheduler import Scheduler
from ttfr.measure.spec import RunSpec, RunRequest, build_spec
from ttfr.model.base import decode, encode
from ttfr.model.plan import PlanSpec

BASE = hf_workspace.preset("complex8p", seed=11)  # 8 parameters, like the complex8p preset


def _at(spec_dict, path):
    node = spec_dict
    for key in path[:-1]:
        node = node[key]
    return node, path[-1]


def _modifier(spec_dict, kind):
    for c, channel in enumerate(spec_dict["channels"]):
        for s, sample in enumerate(channel["samples"]):
            for m, mod in enumerate(sample["modifiers"]):
                if mod["type"] == kind:
                    return ["channels", c, "samples", s, "modifiers", m]
    raise LookupError(kind)


HISTOSYS, STATERROR, NORMSYS = (_modifier(BASE, k) for k in ("histosys", "staterror", "normsys"))
SHAPESYS = _modifier(hf_workspace.preset("simple"), "shapesys")
YIELD = ["channels", 0, "samples", 1, "data", 1]
OBSERVED = ["observations", 0, "data", 0]


def _where(path) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path).lstrip(".")


# (what is set, where, value, the message after the JSON path)
BAD_VALUES = [
    ("nan yield", YIELD, float("nan"), "yield is NaN"),
    ("inf yield", YIELD, float("inf"), "yield is Infinity"),
    ("negative yield", YIELD, -5.0, "yield is negative"),
    ("string yield", YIELD, "5", 'yield must be a number, got a string "5"'),
    ("bool yield", YIELD, True, "yield must be a number, got a boolean"),
    ("huge int yield", YIELD, 10**400, "yield is too large for a float64"),
    ("object for a list", YIELD[:-1], {"a": 1}, "has 0 bins, the observation has 2"),
    ("all-zero sample", YIELD[:-1], [0.0, 0.0], "every yield of sample 'bkg0' in channel 'SR0' is 0"),
    ("nan observed", OBSERVED, float("nan"), "observed count is NaN"),
    ("negative observed", OBSERVED, -1.0, "observed count is negative"),
    ("fractional observed", OBSERVED, 3.5, "observed count 3.5 is not a whole number"),
    ("string observed", OBSERVED, "3", "observed count must be a number, got a string"),
    ("nan histosys", [*HISTOSYS, "data", "hi_data", 0], float("nan"), "template yield is NaN"),
    ("negative histosys", [*HISTOSYS, "data", "lo_data", 1], -3.0, "template yield is negative"),
    ("string histosys", [*HISTOSYS, "data", "lo_data", 0], "x", "template yield must be a number"),
    ("nan staterror", [*STATERROR, "data", 0], float("nan"), "uncertainty is NaN"),
    ("negative staterror", [*STATERROR, "data", 0], -1.0, "uncertainty is negative"),
    ("inf staterror", [*STATERROR, "data", 1], float("-inf"), "uncertainty is -Infinity"),
    ("zero normsys", [*NORMSYS, "data", "lo"], 0.0, "normsys factor must be > 0"),
    ("nan normsys", [*NORMSYS, "data", "hi"], float("nan"), "normsys factor is NaN"),
    ("modifiers not a list", YIELD[:-2] + ["modifiers"], "abc", "has no 'modifiers' list"),
    ("modifier not an object", YIELD[:-2] + ["modifiers", 0], 1, "a modifier must be an object, got int"),
    ("sample not an object", YIELD[:-2], 5, "a sample must be an object, got int"),
    ("channel name a number", ["channels", 0, "name"], 5, "the channel name must be a non-empty string"),
    ("nan bound", ["measurements", 0, "config", "parameters", 0, "bounds", 0, 0], float("nan"), "bound is NaN"),
    ("config a string", ["measurements", 0, "config"], "x", "the measurement config must be an object"),
    ("nan anywhere else", ["version"], float("nan"), "nan is not a JSON number"),
]


def _write(tmp_path, spec_dict, name="ws.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(spec_dict))  # json.dumps writes NaN/Infinity literals, like a careless exporter
    return path


@pytest.mark.parametrize("what, where, value, message", BAD_VALUES, ids=[b[0] for b in BAD_VALUES])
def test_bad_workspace_values_are_named_by_json_path(tmp_path, what, where, value, message):
    bad = copy.deepcopy(BASE)
    node, key = _at(bad, where)
    node[key] = value
    with pytest.raises(UsageError) as err:
        datasets.load_user_workspace(str(_write(tmp_path, bad)))
    text = str(err.value)
    assert f"{_where(where)}: " in text and message in text and "\n" not in text


def test_shapesys_uncertainties_are_checked_too(tmp_path):
    bad = hf_workspace.preset("simple")
    node, key = _at(bad, [*SHAPESYS, "data"])
    node[key][0] = float("inf")
    with pytest.raises(UsageError, match=r"modifiers\[\d+\]\.data\[0\]: uncertainty is Infinity"):
        datasets.load_user_workspace(str(_write(tmp_path, bad)))


def test_json_nan_literals_and_deep_nesting_are_refused(tmp_path):
    text = json.dumps(BASE)  # "channels" comes first: the first list of yields is channels[0].samples[0].data
    bins = BASE["channels"][0]["samples"][0]["data"]
    literal = tmp_path / "literal.json"
    literal.write_text(text.replace(json.dumps(bins), "[NaN" + ", 1.0" * (len(bins) - 1) + "]", 1))
    with pytest.raises(UsageError, match=r"channels\[0\]\.samples\[0\]\.data\[0\]: yield is NaN"):
        datasets.load_user_workspace(str(literal))
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 200_000)
    with pytest.raises(UsageError, match="nested too deeply|not JSON"):
        datasets.load_user_workspace(str(deep))


def _cli(argv, capsys) -> tuple[int, str]:
    code = cli.main(argv)
    return code, capsys.readouterr().err


@pytest.mark.parametrize("what", ["nan yield", "negative observed", "nan bound", "config a string", "zero normsys"])
def test_bad_workspace_is_exit_2_one_line_before_anything_is_written(tmp_path, capsys, what):
    _, where, value, message = next(b for b in BAD_VALUES if b[0] == what)
    bad = copy.deepcopy(BASE)
    node, key = _at(bad, where)
    node[key] = value
    out = tmp_path / "out"
    code, err = _cli(["run", "--workspace", str(_write(tmp_path, bad)), "--workloads", "hf_nll_grad", "--backends",
                      "nextstat", "--out", str(out)], capsys)  # fmt: skip
    assert code == 2 and err.count("\n") == 1 and err.startswith("ttfr: error: ") and message in err
    assert not out.exists()


def test_non_regular_and_oversized_files_are_refused_without_reading(tmp_path, monkeypatch):
    folder = tmp_path / "folder"
    folder.mkdir()
    with pytest.raises(UsageError, match="a directory, not a regular file"):
        datasets.load_user_workspace(str(folder))
    big = tmp_path / "big.json"
    with open(big, "wb") as fh:
        fh.truncate(datasets.MAX_WORKSPACE_BYTES + 1)  # sparse: nothing to read, and nothing is
    limit = datasets.MAX_WORKSPACE_BYTES
    with pytest.raises(UsageError, match=rf"above the {limit / 2**20:g} MiB limit \({limit} bytes\)"):
        datasets.load_user_workspace(str(big))
    monkeypatch.setattr(datasets, "MAX_WORKSPACE_BYTES", 10)
    small = _write(tmp_path, BASE)
    with pytest.raises(UsageError, match="bytes is above the .* limit"):
        datasets.read_bounded(str(small))
    from ttfr import bounded_file

    monkeypatch.setattr(bounded_file, "stat_regular", lambda *_args: None)  # a file that grew after its stat
    with pytest.raises(UsageError, match="more than the .* limit"):
        datasets.read_bounded(str(small))


def _limit_memory():
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))  # reading /dev/zero whole must not take the machine


@pytest.mark.parametrize("kind, message", [("fifo", "a named pipe (FIFO)"), ("/dev/zero", "a character device")])
def test_endless_or_blocking_files_are_refused_unopened(tmp_path, kind, message):
    if kind == "fifo":
        path = tmp_path / "pipe.json"
        os.mkfifo(path)  # no writer: opening it for reading would block forever
    else:
        path = Path(kind)  # endless: reading it whole would never finish
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, "-m", "ttfr", "run", "--workspace", str(path), "--workloads", "hf_nll_grad",
                           "--out", str(out)], capture_output=True, text=True, timeout=60,
                          preexec_fn=_limit_memory)  # fmt: skip
    assert done.returncode == 2 and f"{message}, not a regular file" in done.stderr
    assert done.stderr.count("\n") == 1 and not out.exists()


@pytest.mark.parametrize(
    "kwargs, expected",
    [
        ({"cold_runs": 1_000_000_000}, "--cold-runs 1000000000 is above the limit of 1000"),
        ({"warm_procs": 101}, "--warm-procs 101 is above the limit of 100"),
        ({"warm_samples": 100_001}, "--warm-samples 100001 is above the limit of 100000"),
        ({"timeout": 86_401}, "--timeout 86401 is above the limit of 86400"),
        ({"timeout": float("inf")}, "--timeout must be a finite number in 0.1..86400"),
        ({"threads": 1025}, "--threads 1025 is above the limit of 1024"),
        ({"threads": 0}, "--threads must be >= 1"),
        ({"seed": 2**32}, "--seed 4294967296 is above the limit of 4294967295"),
        ({"seed": -1}, "--seed must be >= 0"),
        ({"cold_runs": 2.5}, "--cold-runs must be a whole number"),
        ({"warm_procs": True}, "--warm-procs must be a whole number"),
        ({"profile": "publish", "cold_runs": 1000, "warm_procs": 100}, "worker processes"),
    ],
)
def test_options_above_their_limits_are_refused(kwargs, expected):
    kwargs.setdefault("backends", "numpy")
    if kwargs.get("profile") == "publish":
        kwargs.pop("backends")
    with pytest.raises(UsageError) as err:
        build_spec(RunRequest(**kwargs))
    assert expected in str(err.value)


def test_limits_allow_their_maximum():
    chosen = build_spec(RunRequest(cases="numpy_matmul_512_f32", cold_runs=limits.MAX_COLD_RUNS, warm_procs=limits.MAX_WARM_PROCS,
                        warm_samples=limits.MAX_WARM_SAMPLES, timeout=limits.MAX_TIMEOUT_S, threads=limits.MAX_THREADS,
                        seed=limits.SEED_LIMIT - 1))  # fmt: skip
    assert (chosen.cold_runs, chosen.warm_procs, chosen.seed) == (1000, 100, 2**32 - 1)


def test_cli_refuses_a_huge_cold_run_count_before_writing(tmp_path):
    out = tmp_path / "out"  # (in a bounded subprocess: planning 10**9 runs would take all memory)
    done = subprocess.run([sys.executable, "-m", "ttfr", "run", "--cases", "numpy_matmul_512_f32", "--cold-runs",
                           "1000000000", "--out", str(out)], capture_output=True, text=True, timeout=60,
                          preexec_fn=_limit_memory)  # fmt: skip
    assert done.returncode == 2 and "above the limit of 1000" in done.stderr and done.stderr.count("\n") == 1
    assert not out.exists()


@pytest.mark.parametrize(
    "args, expected",
    [
        ((10**6, 10), "--rounds 1000000 is above the limit of 100"),
        ((20, 1), "--min-rounds must be >= 2"),
        ((20, 10, float("nan")), "--precision is a relative CI half-width in (0, 1)"),
        ((20, 10, 0.05, float("inf")), "--budget must be a finite number"),
        ((20, 10, 0.05, 10**9), "--budget 1000000000 is above the limit of 604800"),
    ],
)
def test_ab_limits(args, expected):
    with pytest.raises(UsageError) as err:
        limits.check_ab_limits(*args)
    assert expected in str(err.value)
    limits.check_ab_limits(20, 10, 0.05, 600.0)


# --workspace FILE beside --workspace-preset P of the same parameter count: both cases, apart.


def _both(tmp_path, **kwargs):
    path = _write(tmp_path, BASE)  # seed 11: not the preset a run with seed 3 generates
    return path, build_spec(RunRequest(workloads="hf_nll_grad", backends="nextstat", workspace=str(path),
                            workspace_presets="complex8p", seed=3, **kwargs))  # fmt: skip


def test_workspace_and_preset_of_the_same_size_are_two_cases(tmp_path):
    _, chosen = _both(tmp_path)
    assert [c.id for c in chosen.cases] == ["nextstat_hf_nll_grad_8_f64", "nextstat_hf_nll_grad_custom_8_f64"]
    assert all(catalog.is_case_id(c.id) for c in chosen.cases)
    assert RunSpec.from_recorded(decode(json.loads(json.dumps(encode(chosen.recorded()))), PlanSpec)) == chosen
    preset, custom = chosen.cases
    assert datasets.dataset_id(preset, 3) == "histfactory-complex8p-8p-seed3"
    assert datasets.dataset_id(custom, 3) == "histfactory-custom-8p-seed3"
    user = datasets.load_user_workspace(chosen.workspace)
    assert datasets.resolve(8, 3, user).name == "complex8p"  # the preset, though the file has 8 parameters
    assert datasets.resolve(8, 3, user, custom=True) is user


def test_custom_case_ids_name_the_workspace_file(tmp_path):
    path = _write(tmp_path, BASE)
    picked = build_spec(RunRequest(cases="nextstat_hf_nll_grad_custom_8_f64", workspace=str(path)))
    assert [(c.size, c.custom) for c in picked.cases] == [(8, True)]
    with pytest.raises(UsageError, match="--workspace was not given"):
        build_spec(RunRequest(cases="nextstat_hf_nll_grad_custom_8_f64"))
    with pytest.raises(UsageError, match="only the HistFactory workloads"):
        build_spec(RunRequest(cases="numpy_matmul_custom_512_f32"))
    # --sizes: the file when it has that many parameters; the preset too when it was named
    only_file = build_spec(RunRequest(workloads="hf_nll_grad", backends="nextstat", workspace=str(path), sizes="8"))
    assert [c.id for c in only_file.cases] == ["nextstat_hf_nll_grad_custom_8_f64"]
    _, both = _both(tmp_path, sizes="8")
    assert len(both.cases) == 2


def test_each_case_reads_its_own_workspace_file(tmp_path):
    from ttfr.pipeline import suite as suite_run

    path, chosen = _both(tmp_path, cold_runs=1, warm_procs=1, warm_samples=3)
    result_dir = suite_run.start(chosen, tmp_path / "out")
    try:
        plan_json = json.loads(result_dir.plan.read_text())
        assert set(plan_json["datasets"]) == {"8", "custom_8"}
        assert plan_json["datasets"]["custom_8"]["dataset_id"] == "histfactory-custom-8p-seed3"
        fields = suite_run.dataset_fields(result_dir)
        preset_file, custom_file = Path(fields["8"]["workspace"]), Path(fields["custom_8"]["workspace"])
        assert preset_file != custom_file
        assert json.loads(custom_file.read_text()) == json.loads(path.read_text())
        assert json.loads(preset_file.read_text()) == hf_workspace.preset("complex8p", 3)
        executor = FakeExecutor()
        plan = build_plan(chosen, lambda _b, _w=None: None)
        Scheduler(plan, Journal(result_dir.journal), result_dir.scratch, Executors(worker=executor), dataset_fields=fields).run()
    finally:
        result_dir.unlock()
    read = {(call["case"], call["job"].workspace) for call in executor.calls}
    assert read == {("nextstat_hf_nll_grad_8_f64", str(preset_file)), ("nextstat_hf_nll_grad_custom_8_f64", str(custom_file))}


def test_a_run_with_a_workspace_and_its_preset_twin_writes_valid_artifacts(tmp_path):
    from ttfr.artifacts.reader import validate_dir
    from ttfr.pipeline import suite as suite_run

    _, chosen = _both(tmp_path, cold_runs=1, warm_procs=1, warm_samples=3)
    result_dir = suite_run.start(chosen, tmp_path / "out")
    outcome = suite_run.execute(result_dir, chosen, Executors(worker=FakeExecutor()))
    assert {c.case for c in outcome.cases} == {"nextstat_hf_nll_grad_8_f64", "nextstat_hf_nll_grad_custom_8_f64"}
    assert sorted((d.name[:7], d.size) for d in outcome.suite.datasets if d.path.endswith(".point.json")) == [
        ("complex", 8), ("custom-", 8)
    ]  # fmt: skip
    assert validate_dir(result_dir.root) == []


# --python that hangs: stopped at its limit, and nothing it started survives. The stand-in
# interpreter and its child block on a FIFO nobody writes (HANG): they end only when killed, so the
# outcome says the limit fired and "gone" (wait_gone, which blocks; pytest-timeout is its bound)
# says the kill reached the whole group. Nothing here waits for, or asserts, an elapsed time.

HANG = "cat <&3 >/dev/null"  # reads the FIFO the script holds open for reading and writing: no EOF, ever


def _fake_python(tmp_path, tail: str, pids_in_a_fifo: bool = False) -> tuple[Path, Path]:
    """A stand-in interpreter (a shell script) that starts a child (HANG), writes the child's pid and
    its own to `pids`, then runs `tail` (`exec HANG`: the script's own process blocks, so both pids
    are every process of the stand-in's). `pids_in_a_fifo`: `pids` is a FIFO, for a test that reads
    it while the pre-check runs (the read waits for the script to get there); else a file, written
    before the script could be stopped (read once the pre-check has returned)."""
    pids, hold = tmp_path / "pids", tmp_path / "hold"
    os.mkfifo(hold)
    if pids_in_a_fifo:
        os.mkfifo(pids)
    script = tmp_path / "python"
    script.write_text(f"#!/bin/sh\nexec 3<>'{hold}'\n{HANG} &\necho $! $$ > '{pids}'\n{tail}\n")
    script.chmod(0o755)
    return script, pids


def _pids(path: Path) -> list[int]:
    return [int(p) for p in read_fifo(path).split()]


@pytest.mark.timeout(120)  # the safety net: a stand-in left running blocks wait_gone
def test_a_hanging_python_is_refused_within_the_limit_and_leaves_no_process(tmp_path, monkeypatch):
    monkeypatch.setattr(worker_probe, "WORKER_PYTHON_TIMEOUT_S", 1.0)
    script, pids = _fake_python(tmp_path, f"exec {HANG}")
    with pytest.raises(UsageError, match=r"did not answer within 1 s"):  # it never answers: the limit stopped it
        worker_probe.check_worker_python(str(script))
    wait_gone(*_pids(pids))  # blocks while the pre-check left the fake interpreter or its child running


@pytest.mark.timeout(120)
def test_a_failing_python_leaves_no_process_behind(tmp_path):
    script, pids = _fake_python(tmp_path, "echo 'ModuleNotFoundError: No module named ttfr' >&2\nexit 1")
    with pytest.raises(UsageError, match="cannot import ttfr's worker.*No module named ttfr"):
        worker_probe.check_worker_python(str(script))
    wait_gone(*_pids(pids))  # its child outlives it unless the group is killed


@pytest.mark.timeout(120)
def test_cli_reports_a_hanging_python_as_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(worker_probe, "WORKER_PYTHON_TIMEOUT_S", 0.5)
    script, pids = _fake_python(tmp_path, f"exec {HANG}")
    out = tmp_path / "out"
    code, err = _cli(["run", "--cases", "numpy_matmul_512_f32", "--python", str(script), "--out", str(out)], capsys)
    assert code == 2 and "did not answer within 0.5 s" in err and err.count("\n") == 1 and not out.exists()
    wait_gone(*_pids(pids))


# The pre-check in a ttfr process of its own that says, on stdout, when the sweeper has the stand-in's
# group: sweeper.watch has written "add PGID" down the sweeper's pipe, which the sweeper reads to the
# end once the pipe closes (this process dies), before it kills what it was given.
_PRE_CHECK_SAYING_WATCHED = (
    "import os, sys\nfrom ttfr.measure import sweeper, worker_probe\nwatch = sweeper.watch\n"
    "def watched(pgid):\n    watch(pgid)\n    os.write(1, b'watched\\n')\n"
    "sweeper.watch = watched\nworker_probe.check_worker_python(sys.argv[1])\n"
)


@pytest.mark.timeout(120)  # the safety net: a stand-in the sweeper left running blocks wait_gone
def test_a_ttfr_killed_during_the_python_pre_check_takes_the_interpreter_with_it(tmp_path):
    # kill -9 of ttfr mid pre-check: the sweeper (measure/sweeper.py) must kill the pre-check's
    # process group, as it does a worker's, instead of leaving it running under PID 1.
    script, pids = _fake_python(tmp_path, f"exec {HANG}", pids_in_a_fifo=True)
    parent = subprocess.Popen([sys.executable, "-c", _PRE_CHECK_SAYING_WATCHED, str(script)],
                              stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)  # fmt: skip
    started = []
    try:
        assert parent.stdout.readline() == b"watched\n", "the pre-check never handed its group to the sweeper"
        started = _pids(pids)  # the stand-in runs (and its child)
        parent.kill()
        parent.wait()
        wait_gone(*started)  # blocks while the pre-check's interpreter outlives a ttfr killed with SIGKILL
    finally:
        parent.kill()
        parent.wait()
        parent.stdout.close()
        for pid in started:  # never leave the stand-ins running, whatever the outcome
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def test_a_name_that_is_not_unicode_text_is_refused_with_its_json_path(tmp_path, capsys):
    # A lone surrogate ("\ud800" in the JSON) is a Python str but no UTF-8: it would crash the
    # worker's spawn mid-run (UnicodeEncodeError in Popen) instead of failing here.
    for where, what in ((["channels", 0, "samples", 1, "name"], "the sample name"),
                        ([*NORMSYS, "name"], "the modifier name")):  # fmt: skip
        bad = copy.deepcopy(BASE)
        node, key = _at(bad, where)
        node[key] = "bkg\ud800"
        with pytest.raises(UsageError) as err:
            datasets.load_user_workspace(str(_write(tmp_path, bad)))
        assert f"{_where(where)}: {what} " in str(err.value) and "not valid Unicode text" in str(err.value)
    bad = copy.deepcopy(BASE)
    for channel, observation in zip(bad["channels"][:1], bad["observations"][:1]):
        channel["name"] = observation["name"] = "SR\udfff"
    out = tmp_path / "out"
    code, err = _cli(["run", "--workspace", str(_write(tmp_path, bad)), "--workloads", "hf_nll_grad", "--backends",
                      "nextstat", "--out", str(out)], capsys)  # fmt: skip
    assert code == 2 and err.count("\n") == 1 and "observations[0].name: the channel name" in err
    assert "not valid Unicode text" in err and not out.exists()


def test_the_plan_schema_holds_the_same_limits_as_the_command_line():
    """An edited plan.json cannot ask --resume for more than `ttfr run` would accept."""
    from ttfr.artifacts.store import load_schema
    from ttfr.measure import limits as spec_module

    spec = load_schema("ttfr.plan.v1")["$defs"]["PlanSpec"]["properties"]
    # a field that may also be null holds its number's limits in the anyOf's number branch
    props = {name: next((b for b in p.get("anyOf", [p]) if "maximum" in b), p) for name, p in spec.items()}
    assert props["cold_runs"]["maximum"] == spec_module.MAX_COLD_RUNS
    assert props["warm_procs"]["maximum"] == spec_module.MAX_WARM_PROCS
    assert props["warm_samples"]["maximum"] == spec_module.MAX_WARM_SAMPLES
    assert props["timeout_s"]["maximum"] == spec_module.MAX_TIMEOUT_S
    assert props["threads"]["maximum"] == spec_module.MAX_THREADS
    assert props["seed"]["maximum"] == spec_module.SEED_LIMIT - 1
