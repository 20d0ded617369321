"""`make gpu-check` on an air-gapped GPU image (issue 36): the wheelhouse made here, its listing
verified there, the image's own stack checked before anything runs, the quick check's plan, and its
compact summary. The integration tests build the offline install exactly as the image needs it and
run it with no network up to its "no GPU" exit."""

import dataclasses
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from conftest import machine_has_gpu

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "scripts"))
import gpu_check  # noqa: E402
import gpu_stack  # noqa: E402
import wheelhouse  # noqa: E402

from ttfr.measure import catalog  # noqa: E402
from ttfr.model.policies import COLD_CACHE, WARM_CACHE, WARM_PROCESS  # noqa: E402

NEEDS = {"torch": "2.11", "jax": "0.10.2", "jaxlib": "0.10.2", "rich": "13.7"}
IMAGE_STACK = {"torch": "2.11.0+cu130", "jax": "0.11.2", "jaxlib": "0.11.2", "rich": "14.0.0",
               "jax-cuda13-plugin": "0.11.2", "jax-cuda13-pjrt": "0.11.2", "msgspec": "0.22.0"}  # fmt: skip


# --- the image's stack, checked before anything runs ---------------------------------------------------


def test_versions_compare_by_their_release_numbers_local_builds_included():
    assert gpu_stack.at_least("2.11.0+cu130", "2.11") and gpu_stack.at_least("0.11.2", "0.10.2")
    assert not gpu_stack.at_least("2.10.1+cu128", "2.11") and not gpu_stack.at_least("0.9", "0.10.2")
    assert gpu_stack.at_least("8", "8.0") and gpu_stack.release("0.11.2rc1") == (0, 11, 2)


def test_the_image_they_read_passes_and_every_missing_or_old_package_is_named():
    problems, notes = gpu_stack.stack_problems(IMAGE_STACK, NEEDS, {"msgspec": "0.22.0"}, gpu=True)
    assert problems == [] and notes == []
    older = {**IMAGE_STACK, "torch": "2.9.1+cu128"}
    del older["rich"]
    problems, _ = gpu_stack.stack_problems(older, NEEDS, {"msgspec": "0.22.0", "pyhf": "0.7.6"}, gpu=True)
    assert problems == ["torch 2.9.1+cu128: unsupported (ttfr needs >= 2.11)",
                        "rich: missing (ttfr needs rich >= 13.7; the image should hold it)",
                        "pyhf: carried at 0.7.6, but nothing is what imports find"]  # fmt: skip


def test_a_stack_that_cannot_drive_a_gpu_is_refused_only_where_there_is_one():
    """A CPU-only torch, no JAX CUDA plugin, or a plugin of another jaxlib: refused on a GPU machine,
    only noted on this one (where the check ends at its "no GPU" exit anyway)."""
    cpu = {**IMAGE_STACK, "torch": "2.13.0+cpu", "jax-cuda13-plugin": "0.11.1"}
    del cpu["jax-cuda13-pjrt"]
    problems, notes = gpu_stack.stack_problems(cpu, NEEDS, {}, gpu=True)
    assert problems == ["torch 2.13.0+cpu: a CPU-only build (its CUDA rows need a CUDA build, e.g. 2.11.0+cu130)",
                        "jax-cuda13-plugin 0.11.1 does not match jaxlib 0.11.2: JAX would not load it"]  # fmt: skip
    assert gpu_stack.stack_problems(cpu, NEEDS, {}, gpu=False) == ([], problems)
    bare = {k: v for k, v in IMAGE_STACK.items() if not k.startswith("jax-cuda")}
    assert "no JAX CUDA plugin" in gpu_stack.stack_problems(bare, NEEDS, {}, gpu=True)[0][0]


# --- the wheelhouse's listing, verified before pip sees a wheel ---------------------------------------


def _wheel(folder: Path, name: str, version: str, tag: str, requires=()) -> Path:
    path = folder / f"{name.replace('-', '_')}-{version}-{tag}.whl"
    with zipfile.ZipFile(path, "w") as wheel:
        metadata = "".join(f"Requires-Dist: {r}\n" for r in requires)
        wheel.writestr(f"{name.replace('-', '_')}-{version}.dist-info/METADATA",
                       f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n{metadata}")  # fmt: skip
    return path


def _listed(folder: Path, tag: str | None = None) -> Path:
    tag = tag or f"{gpu_stack.python_tag()}-{gpu_stack.python_tag()}-manylinux_2_17_x86_64"
    folder.mkdir(exist_ok=True)
    files = [_wheel(folder, "msgspec", "0.22.0", tag), _wheel(folder, "pyhf", "0.7.6", "py3-none-any")]
    wheels = [{"name": f.name.split("-")[0], "version": f.name.split("-")[1], "file": f.name, "bytes": f.stat().st_size,
               "sha256": hashlib.sha256(f.read_bytes()).hexdigest(), "tags": [f.name.split("-", 2)[2][:-4]]}
              for f in files]  # fmt: skip
    (folder / "LISTING.json").write_text(json.dumps({"format": wheelhouse.FORMAT, "wheels": wheels}))
    return folder


def test_a_listed_wheelhouse_gives_its_wheels(tmp_path):
    assert [p.name for p in gpu_stack.listed_wheels(_listed(tmp_path / "wh"))][1] == "pyhf-0.7.6-py3-none-any.whl"


def test_a_wheelhouse_that_is_not_what_its_listing_says_is_refused_naming_each_file(tmp_path):
    with pytest.raises(gpu_stack.Refused, match="run `make wheelhouse` where an index is reachable"):
        gpu_stack.listed_wheels(tmp_path / "absent")
    folder = _listed(tmp_path / "wh")
    (folder / next(folder.glob("msgspec*")).name).write_bytes(b"tampered")
    (folder / "extra-1.0-py3-none-any.whl").write_bytes(b"")
    with pytest.raises(gpu_stack.Refused) as refused:
        gpu_stack.listed_wheels(folder)
    assert "not the file the listing names (size or sha256 differs)" in str(refused.value)
    assert "extra-1.0-py3-none-any.whl: in the folder, not in its listing" in str(refused.value)
    (folder / "LISTING.json").write_text("{not json")
    with pytest.raises(gpu_stack.Refused, match="unreadable"):
        gpu_stack.listed_wheels(folder)
    listing = {"format": wheelhouse.FORMAT, "wheels": [{"file": "../../etc/passwd.whl"}]}
    (folder / "LISTING.json").write_text(json.dumps(listing))
    with pytest.raises(gpu_stack.Refused, match="without a plain wheel file name"):
        gpu_stack.listed_wheels(folder)


def test_wheels_built_for_another_python_are_refused_saying_which_to_make(tmp_path):
    folder = _listed(tmp_path / "wh", tag="cp39-cp39-manylinux_2_17_x86_64")
    with pytest.raises(gpu_stack.Refused, match=r"built for cp39, not this Python \(cp3\d+\): make the wheelhouse with"):
        gpu_stack.listed_wheels(folder)


def test_a_wheelhouse_made_for_another_checkout_or_holding_two_of_a_package_is_refused(tmp_path):
    folder = _listed(tmp_path / "wh")
    with pytest.raises(gpu_stack.Refused) as refused:  # before pip runs: nothing is installed
        gpu_stack.install(tmp_path / "target", folder, ["msgspec", "pyhf", "jsonschema"])
    assert "was not made for this checkout" in str(refused.value) and "jsonschema: not in it" in str(refused.value)
    assert not (tmp_path / "target").exists()
    listing = json.loads((folder / "LISTING.json").read_text())
    again = _wheel(folder, "msgspec", "0.21.0", "py3-none-any")
    listing["wheels"].append(
        {
            "name": "msgspec",
            "version": "0.21.0",
            "file": again.name,
            "bytes": again.stat().st_size,
            "sha256": hashlib.sha256(again.read_bytes()).hexdigest(),
            "tags": ["py3-none-any"],
        }
    )
    (folder / "LISTING.json").write_text(json.dumps(listing))
    with pytest.raises(gpu_stack.Refused, match="msgspec: two wheels of it"):
        gpu_stack.listed_wheels(folder)


# --- making the wheelhouse: what it carries holds together with the image, and fits a lease -----------


def _spec(limit_mib=64):
    return {"image": {"python": "3.12", "platforms": ["manylinux_2_17_x86_64"], "holds": ["attrs", "numpy", "rich"]},
            "needs": {"attrs": "22.2", "numpy": "1.26"}, "carried": {"packages": ["jsonschema", "rpds-py"],
                                                                      "limit_mib": limit_mib}}  # fmt: skip


def test_every_requirement_of_a_carried_wheel_is_carried_or_checked_on_the_image():
    wheels = [{"name": "jsonschema", "version": "4.26.0",
               "requires": ["attrs>=22.2.0", "rpds-py>=0.7.1", "rich", "lark; python_version < '3.8'", "pkg; extra == 'x'"]},
              {"name": "rpds-py", "version": "2026.9.1", "requires": ["numpy>=3", "typing-extensions"]}]  # fmt: skip
    assert wheelhouse.closure_problems(wheels, _spec(), "3.12") == [
        "jsonschema needs rich: held by the image, but not in [needs] (so its pre-flight check would not verify it)",
        "rpds-py needs numpy>=3, but [needs] accepts numpy 1.26",
        "rpds-py needs typing-extensions: neither carried nor held by the image",
    ]  # fmt: skip
    wheels[0]["requires"] = ["rpds-py>=2027"]
    assert wheelhouse.closure_problems(wheels[:1] + [{**wheels[1], "requires": []}], _spec(), "3.12") == [
        "jsonschema needs rpds-py>=2027, and rpds-py 2026.9.1 is carried"]  # fmt: skip


def test_a_wheelhouse_over_the_lease_limit_is_refused_and_the_old_one_is_kept(tmp_path, monkeypatch):
    dest = tmp_path / "wheelhouse"
    dest.mkdir()
    previous = json.dumps({"format": wheelhouse.FORMAT, "wheels": []})
    (dest / "LISTING.json").write_text(previous)

    def fake_download(pins, python_version, platforms, folder):
        _wheel(folder, "jsonschema", pins["jsonschema"], "py3-none-any", ["rpds-py>=0.7"])
        big = _wheel(folder, "rpds-py", pins["rpds-py"], "cp312-cp312-manylinux_2_17_x86_64")
        with zipfile.ZipFile(big, "a") as wheel:
            wheel.writestr("payload", os.urandom(2 * 1024 * 1024))

    monkeypatch.setattr(wheelhouse, "download", fake_download)
    pins = {"jsonschema": "4.26.0", "rpds-py": "2026.9.1"}
    with pytest.raises(wheelhouse.WheelhouseError, match=r"2\.0 MiB, above the 1 MiB a GPU lease copies"):
        wheelhouse.make(dest, "3.12", _spec(limit_mib=1), pins)
    assert (dest / "LISTING.json").read_text() == previous  # nothing half-written
    assert sorted(p.name for p in tmp_path.iterdir()) == ["wheelhouse"]  # no staging folder left
    result = wheelhouse.make(dest, "3.12", _spec(limit_mib=3), pins)
    assert [w["name"] for w in result["wheels"]] == ["jsonschema", "rpds-py"] and result["limit_bytes"] == 3 << 20
    assert json.loads((dest / "LISTING.json").read_text()) == result


def test_only_a_wheelhouse_is_ever_replaced_never_a_folder_of_the_users(tmp_path, monkeypatch):
    """`make wheelhouse WHEELHOUSE=~/Downloads` must not empty the user's folder: refused (exit 2) before
    anything is downloaded, as is a folder holding this checkout or the current directory."""
    monkeypatch.setattr(wheelhouse, "download", lambda *a: pytest.fail("nothing may be downloaded"))
    mine = tmp_path / "Downloads"
    mine.mkdir()
    (mine / "thesis.pdf").write_text("years of work")
    for dest in (mine, wheelhouse.ROOT, wheelhouse.ROOT.parent, Path.cwd()):
        with pytest.raises(wheelhouse.Refused, match="name a"):
            wheelhouse.make(dest, "3.12", _spec(), {"jsonschema": "4.26.0", "rpds-py": "2026.9.1"})
    assert (mine / "thesis.pdf").read_text() == "years of work"
    assert wheelhouse.main(["--dest", str(mine)]) == 2


def test_a_wheel_is_accepted_where_this_python_can_import_it():
    """Pure Python, this CPython's own ABI, or the stable ABI of an older one; not another version's."""
    here = f"cp3{sys.version_info.minor}"
    assert gpu_stack.runs_here("py3-none-any") and gpu_stack.runs_here(f"{here}-{here}-manylinux_2_17_x86_64")
    assert gpu_stack.runs_here("cp38-abi3-manylinux_2_17_x86_64")
    assert not gpu_stack.runs_here("cp39-cp39-manylinux_2_17_x86_64")
    assert not gpu_stack.runs_here(f"cp3{sys.version_info.minor + 1}-abi3-manylinux_2_17_x86_64")


def test_online_the_sites_own_pip_settings_are_kept_offline_none_are(monkeypatch):
    monkeypatch.setenv("PIP_INDEX_URL", "https://mirror.example/simple")
    assert gpu_stack.pip_env(offline=False)["PIP_INDEX_URL"] == "https://mirror.example/simple"
    offline = gpu_stack.pip_env(offline=True)
    assert "PIP_INDEX_URL" not in offline and offline["PIP_NO_INDEX"] == "1" and offline["PIP_CONFIG_FILE"] == os.devnull


def test_a_child_killed_by_a_signal_exits_as_a_shell_says():
    assert gpu_stack.exit_status(-9) == 137 and gpu_stack.exit_status(1) == 1 and gpu_stack.exit_status(0) == 0


def test_the_carried_versions_are_the_lock_files():
    pins = wheelhouse.carried_pins(wheelhouse.image_spec(), wheelhouse.lock_pins())
    assert pins["msgspec"] == wheelhouse.lock_pins()["msgspec"] and set(pins) >= {"msgspec", "jsonschema", "pyhf"}
    with pytest.raises(wheelhouse.WheelhouseError, match="not-locked: carried but not pinned"):
        wheelhouse.carried_pins({"carried": {"packages": ["not-locked"]}}, wheelhouse.lock_pins())


# --- the quick check: every GPU row once, its plan and estimate, its summary -----------------------------


@pytest.fixture(scope="module")
def quick_plans(tmp_path_factory):
    return gpu_check.planned(gpu_check.QUICK, gpu_check.COMMON["quick"], tmp_path_factory.mktemp("work"))


def test_the_quick_check_runs_every_gpu_row_at_least_once(quick_plans):
    tasks = [t for plan in quick_plans.values() for t in plan]
    backends = {t.case.backend for t in tasks}
    assert backends == {name for name, b in catalog.BACKENDS.items() if b.device == "gpu"}  # TF32 and interop included
    arrays = {(t.case.backend, t.case.dtype, t.policy) for t in quick_plans["arrays"]}
    assert {(b, d, p) for b in gpu_check.GPU_BACKENDS for d in ("float32", "float64")
            for p in (COLD_CACHE, WARM_CACHE, WARM_PROCESS)} <= arrays  # fmt: skip
    routes = {t.case.workload for t in quick_plans["conversions"]}
    assert routes == {w for w, info in catalog.WORKLOADS.items() if "interop_gpu" in info.frameworks}
    assert len({t.case.size for t in quick_plans["conversions"]}) == 1  # one size
    assert {t.case.workload for t in quick_plans["histfactory"]} == {"hf_nll_grad", "hf_profiled_q0", "hf_train_loop"}
    assert {t.case.workload for t in quick_plans["loops"]} == {"sweep_mlp_aot"}
    assert max(t.index for t in tasks) == 0  # one process per policy


def test_the_quick_check_fits_one_gpu_lease_command_and_the_full_one_does_not(quick_plans, tmp_path):
    # a lease runs one command for at most 10 minutes; the estimate is the H200's own process times (8.4 min taken)
    assert 420 <= gpu_check.estimate_s(quick_plans) <= 540
    full = gpu_check.planned(gpu_check.FULL, gpu_check.COMMON["full"], tmp_path)
    assert sum(map(len, full.values())) > 4 * sum(map(len, quick_plans.values()))
    lines = gpu_check.plan_lines("quick", quick_plans)
    assert re.match(r"gpu-check quick: \d+ processes in 6 `ttfr run`s, then `pytest -m gpu`; estimated \d\.\d min", lines[0])


def _summary(rows, problems=()):
    from ttfr.model.base import decode
    from ttfr.model.gpu_check import GPU_CHECK_SCHEMA, GpuCheckSummary

    verdict = "fail" if problems or any(r["verdict"] == "fail" for r in rows) else "pass"
    return decode({"schema": GPU_CHECK_SCHEMA, "mode": "quick", "stamp": "20261127T000000Z", "verdict": verdict,
                   "gpu": "NVIDIA H100 80GB HBM3", "driver": "580.159.04",
                   "versions": {"torch": "2.11.0+cu130", "jax": "0.11.2", "jax-cuda13-plugin": "0.11.2"},
                   "processes_planned": 46, "estimated_s": 299.0, "wall_s": 250.0,
                   "runs": [{"run": label, "command": "ttfr run " + " ".join(options), "exit_code": 0, "wall_s": 40.0,
                             "processes_planned": 9} for label, options in gpu_check.QUICK.items()],
                   "rows": rows, "problems": list(problems)}, GpuCheckSummary)  # fmt: skip


def test_the_summary_stays_a_few_kilobytes_even_when_every_row_fails_at_length(quick_plans):
    from ttfr.artifacts.store import schema_errors
    from ttfr.model.base import encode

    cases = sorted({(label, t.case.id) for label, plan in quick_plans.items() for t in plan})
    passing = _summary([{"run": label, "row": case, "verdict": "pass", "reasons": []} for label, case in cases])
    assert not schema_errors(encode(passing), "ttfr.gpu_check_summary.v1")
    assert len(json.dumps(encode(passing))) < 8 * 1024
    long = ["x" * 2000] * 10
    failing = _summary([{"run": label, "row": case, "verdict": "fail", "reasons": gpu_check.first_reasons(long)}
                        for label, case in cases], gpu_check.first_reasons(long * 5, 12))  # fmt: skip
    assert not schema_errors(encode(failing), "ttfr.gpu_check_summary.v1")
    assert len(json.dumps(encode(failing))) < 64 * 1024 and failing.rows[0].reasons[-1].startswith("and 7 more")
    report = gpu_check.render(failing, "make gpu-check")
    assert report.startswith("# make gpu-check (quick), 20261127T000000Z: fail") and f"0 of {len(cases)} rows passed" in report


def test_a_failed_row_and_a_passing_one_read_alike_in_the_summary_and_the_report():
    summary = _summary([{"run": "arrays", "row": "jax_jit_gpu_matmul_512_f32", "verdict": "pass", "reasons": []},
                        {"run": "arrays", "row": "torch_eager_cuda_matmul_512_f64", "verdict": "fail",
                         "reasons": ["no device peak memory"]}])  # fmt: skip
    report = gpu_check.render(summary, "make gpu-check")
    assert summary.verdict == "fail" and "1 of 2 rows passed" in report
    assert "- torch_eager_cuda_matmul_512_f64: no device peak memory" in report
    assert "jax_jit_gpu_matmul_512_f32:" not in report


def test_a_run_that_left_no_result_is_never_judged_by_an_earlier_checks(tmp_path, monkeypatch):
    earlier = tmp_path / "work" / "arrays" / "20261101T000000Z-aaaaaa"
    earlier.mkdir(parents=True)
    monkeypatch.setattr(gpu_check, "run_child", lambda *a, **k: (1, "", "boom"))
    run, rows, problems, manifest = gpu_check.run_ttfr("arrays", [], [], tmp_path / "work", 3)
    assert run["exit_code"] == 1 and rows == [] and manifest == {}
    assert problems == ["arrays: no result (boom)"]


@pytest.mark.integration
@pytest.mark.contention_safe
@pytest.mark.skipif(machine_has_gpu(), reason="this machine has a GPU: the check would run for real")
def test_a_check_judges_the_runs_it_made_writes_its_summary_and_renders_it(tmp_path, monkeypatch):
    """The whole path after the GPU's presence, on a real `ttfr run` (a NumPy case standing in for a GPU
    case: it keeps none of the GPU promises, so its row fails, saying which) and a fake pytest."""
    monkeypatch.setattr(gpu_check, "QUICK", {"arrays": ["--cases", "numpy_matmul_64_f32"]})
    monkeypatch.setattr(catalog, "gpu_present", lambda: True)
    monkeypatch.setitem(catalog.BACKENDS, "numpy", dataclasses.replace(catalog.BACKENDS["numpy"], device="gpu"))
    monkeypatch.setattr(gpu_check, "run_pytest", lambda: ({"run": "pytest", "command": "pytest -m gpu", "exit_code": 0,
                                                           "wall_s": 1.0, "processes_planned": 0},
                                                          {"run": "pytest", "row": "pytest -m gpu", "verdict": "pass",
                                                           "reasons": []}))  # fmt: skip
    assert gpu_check.main(["--out", str(tmp_path / "docs"), "--work", str(tmp_path / "work")]) == 1
    (summary_file,) = (tmp_path / "docs").glob("gpu-check-*.json")
    summary = json.loads(summary_file.read_text())
    from ttfr.artifacts.store import schema_errors

    assert not schema_errors(summary, "ttfr.gpu_check_summary.v1")
    (row, pytest_row) = summary["rows"]
    # it keeps none of a GPU row's promises (a busy machine may leave it `warn` first: that fails it too)
    assert row["row"] == "numpy_matmul_64_f32" and row["verdict"] == "fail" and row["reasons"]
    assert any(r.endswith(": no device peak memory") or ": warn: " in r for r in row["reasons"]), row["reasons"]
    assert summary["runs"][0]["exit_code"] == 0 and summary["runs"][0]["processes_planned"] == 3
    assert pytest_row["verdict"] == "pass" and summary["problems"] == ["manifest: no driver or CUDA version"]
    report = (tmp_path / "docs" / summary_file.name.replace(".json", ".md")).read_text()
    assert f"- numpy_matmul_64_f32: {row['reasons'][0]}" in report and "1 of 2 rows passed" in report


# --- the offline path, for real: a wheelhouse, an image-like stack, no network ---------------------------


def _no_network_prefix() -> list[str]:
    """`unshare -n` (a network namespace with nothing in it) where this machine allows one: then not
    even a stray download could happen. Elsewhere pip's index is switched off and pointed at nothing."""
    if shutil.which("unshare") and subprocess.run(["unshare", "-n", "true"], capture_output=True).returncode == 0:
        return ["unshare", "-n"]
    return []


@pytest.fixture(scope="module")
def this_pythons_wheelhouse(tmp_path_factory):
    """The wheelhouse as `make wheelhouse` makes it, for the Python running the tests (the image's is
    3.12: the same packages and versions, built for another interpreter)."""
    dest = tmp_path_factory.mktemp("wheelhouse") / "wheelhouse"
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "wheelhouse.py"), "--dest", str(dest),
                           "--python-version", version], capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return dest


def _for_the_image(tag: str) -> bool:
    """A wheel tag CPython 3.12 on manylinux installs: its own ABI, the stable ABI of 3.12 or older, or pure Python."""
    stable = re.match(r"cp3(\d+)-abi3-manylinux", tag)
    return tag.startswith(("cp312-cp312-manylinux", "py3-none-any")) or bool(stable and int(stable.group(1)) <= 12)


@pytest.mark.integration
@pytest.mark.contention_safe
def test_the_wheelhouse_for_the_image_carries_exactly_its_needs_for_its_python_and_fits_a_lease(tmp_path):
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "wheelhouse.py"), "--dest", str(tmp_path / "wh")],
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr
    listing = json.loads((tmp_path / "wh" / "LISTING.json").read_text())
    spec, pins = wheelhouse.image_spec(), wheelhouse.lock_pins()
    assert listing["python"] == spec["image"]["python"] == "3.12"
    assert {w["name"]: w["version"] for w in listing["wheels"]} == {
        wheelhouse.canonicalize_name(n): pins[wheelhouse.canonicalize_name(n)] for n in spec["carried"]["packages"]
    }
    for wheel in listing["wheels"]:
        file = tmp_path / "wh" / wheel["file"]
        assert hashlib.sha256(file.read_bytes()).hexdigest() == wheel["sha256"] and file.stat().st_size == wheel["bytes"]
        assert all(_for_the_image(t) and t.endswith(("x86_64", "any")) for t in wheel["tags"]), wheel
    assert listing["total_bytes"] == sum(w["bytes"] for w in listing["wheels"]) <= listing["limit_bytes"] == 64 << 20
    assert sorted(p.name for p in (tmp_path / "wh").iterdir()) == sorted([w["file"] for w in listing["wheels"]] +
                                                                         ["LISTING.json"])  # fmt: skip
    assert "wheelhouse" in done.stdout and "MiB of 64 MiB" in done.stdout


@pytest.mark.integration
@pytest.mark.contention_safe
@pytest.mark.skipif(machine_has_gpu(), reason="this machine has a GPU: the check would run for real")
def test_make_gpu_check_offline_reaches_its_no_gpu_exit_on_an_image_like_stack(tmp_path, this_pythons_wheelhouse):
    from support import gpu_image_env

    python = gpu_image_env.build(tmp_path / "image")
    empty_index = tmp_path / "empty-index"
    empty_index.mkdir()
    env = {**os.environ, "PIP_INDEX_URL": empty_index.as_uri(), "PIP_FIND_LINKS": str(empty_index)}
    done = subprocess.run([*_no_network_prefix(), "make", "-C", str(ROOT), "gpu-check", "OFFLINE=1", f"PYTHON={python}",
                           f"WHEELHOUSE={this_pythons_wheelhouse}",
                           f"ARGS=--work {tmp_path / 'work'} --out {tmp_path / 'docs'}"],
                          capture_output=True, text=True, env=env, timeout=600)  # fmt: skip
    assert "gpu-check: no GPU here" in done.stderr and "[Makefile" in done.stderr and "Error 1" in done.stderr
    assert re.search(r"msgspec\s+0\.22\.0\s+carried", done.stdout) and re.search(r"torch\s+2\.\d+\.\d+\S*\s+image", done.stdout)
    assert re.search(r"gpu-check quick: \d+ processes in 6 `ttfr run`s.*estimated \d\.\d min", done.stdout)
    assert not (tmp_path / "work").exists() and not (tmp_path / "docs").exists()  # nothing ran
    # and ttfr itself runs from the checkout on that stack, offline: a real worker process
    target = tmp_path / "target"
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--target", str(target),
                    *map(str, this_pythons_wheelhouse.glob("*.whl"))],
                   check=True, env=gpu_stack.pip_env(offline=True), capture_output=True)  # fmt: skip
    run = subprocess.run([*_no_network_prefix(), str(python), "-m", "ttfr", "run", "--cases", "numpy_matmul_64_f32",
                          "--cold-runs", "1", "--warm-procs", "1", "--cache-policy", "cold-cache", "--no-html",
                          "--out", str(tmp_path / "run")], capture_output=True, text=True, timeout=300, cwd=tmp_path,
                         env={**env, "PYTHONPATH": f"{target}{os.pathsep}{ROOT / 'src'}"})  # fmt: skip
    # its worker ran and its result checked (a busy machine may leave the case `warn`, never failed)
    assert run.returncode == 0 and "check #1: ok" in run.stdout and ", 0 failed" in run.stdout, run.stderr[-2000:]


@pytest.mark.integration
@pytest.mark.contention_safe
def test_an_image_without_one_of_ttfrs_needs_is_refused_naming_it_before_anything_runs(tmp_path, this_pythons_wheelhouse):
    from support import gpu_image_env

    python = gpu_image_env.build(tmp_path / "image", leave_out=("rich",))
    done = subprocess.run([*_no_network_prefix(), str(python), str(ROOT / "scripts" / "gpu_stack.py"),
                           "--wheelhouse", str(this_pythons_wheelhouse), "--", "--work", str(tmp_path / "work")],
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "rich: missing (ttfr needs rich >= 13.7; the image should hold it)" in done.stderr
    assert "gpu-check quick" not in done.stdout and not (tmp_path / "work").exists()
    assert not list(Path(os.environ.get("TMPDIR", "/tmp")).glob("ttfr-gpu-stack-*/msgspec"))  # its install is removed


_CHILD = """
import pathlib, signal, sys
done = pathlib.Path(sys.argv[1])
signal.signal(signal.SIGINT, lambda *_: (done.write_text("finished its own way"), sys.exit(3)))
print("ready", flush=True)
signal.pause()
"""
_DRIVER = """
import sys
sys.path.insert(0, sys.argv[1])
import gpu_stack
try:
    gpu_stack.wait_through_interrupt([sys.executable, "-c", sys.argv[2], sys.argv[3], sys.argv[4]])
except KeyboardInterrupt:
    sys.exit(gpu_stack.EXIT_INTERRUPTED)
"""


@pytest.mark.integration
@pytest.mark.contention_safe
def test_ctrl_c_lets_the_check_finish_its_own_way_and_exits_130(tmp_path):
    """Ctrl-C reaches the whole foreground group: the child (a `ttfr run`) handles it and is waited for,
    never killed a moment later as subprocess.run would; then the launcher exits 130."""
    import signal

    done = tmp_path / "done"
    driver = subprocess.Popen([sys.executable, "-c", _DRIVER, str(ROOT / "scripts"), _CHILD, str(done), "-"],
                              start_new_session=True, stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert driver.stdout.readline() == "ready\n"  # the child's own word that its handler is in place
        os.killpg(driver.pid, signal.SIGINT)  # as a terminal's Ctrl-C: the whole group
        assert driver.wait(timeout=60) == 130
    finally:
        if driver.poll() is None:
            os.killpg(driver.pid, signal.SIGKILL)
    assert done.read_text() == "finished its own way"
