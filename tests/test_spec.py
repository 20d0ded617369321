import dataclasses
import json
import sys

import pytest

from ttfr.errors import UsageError
from ttfr.measure import catalog
from ttfr.model.policies import COLD_CACHE, POLICIES, WARM_CACHE, WARM_PROCESS
from ttfr.measure.selection import parse_policies
from ttfr.measure.spec import RunSpec, RunRequest, build_spec
from ttfr.model.base import decode, encode
from ttfr.model.plan import PlanSpec


def test_quick_default_suite_is_smallest_f32_of_every_real_workload_and_backend():
    spec = build_spec(RunRequest())
    ids = {c.id for c in spec.cases}
    assert "numpy_matmul_512_f32" in ids and "jax_jit_cpu_matmul_512_f32" in ids
    array_backends = {b.name for b in catalog.BACKENDS.values() if b.framework in ("numpy", "jax", "torch")}
    # HistFactory engines are opt-in (by workload), and so are the declared TF32 variants (by name)
    assert {c.backend for c in spec.cases} == {b for b in array_backends if not b.endswith("_tf32")}
    assert {c.workload for c in spec.cases} == {"matmul", "fused_chain", "mlp_train_step"}
    assert {c.dtype for c in spec.cases} == {"float32"}
    for case in spec.cases:
        assert case.size == catalog.WORKLOADS[case.workload].sizes[0]
    assert spec.policies == POLICIES


def test_publish_profile_takes_every_catalogued_size_and_dtype():
    spec = build_spec(RunRequest(profile="publish", backends="numpy", workloads="matmul"))
    assert sorted(c.id for c in spec.cases) == [
        "numpy_matmul_1024_f32", "numpy_matmul_1024_f64", "numpy_matmul_512_f32", "numpy_matmul_512_f64",
    ]  # fmt: skip


@pytest.mark.parametrize("case", catalog.BUILTIN.catalogued_cases(), ids=lambda c: c.id)
def test_every_catalogued_case_id_parses_back_to_itself(case):
    assert catalog.BUILTIN.parse_case_id(case.id) == case


def test_seed_case_ids_keep_their_form():
    for case_id in ("jax_jit_cpu_matmul_512_f32", "jax_jit_cpu_matmul_1024_f32"):
        case = catalog.BUILTIN.parse_case_id(case_id)
        assert (case.backend, case.workload, case.dtype) == ("jax_jit_cpu", "matmul", "float32")


def test_uncatalogued_size_inside_the_range_is_accepted():
    assert catalog.BUILTIN.parse_case_id("torch_eager_cpu_matmul_96_f64").size == 96


@pytest.mark.parametrize(
    "kwargs, expected",
    [
        ({"backends": "nmupy"}, "Did you mean 'numpy'"),
        ({"workloads": "matmull"}, "Did you mean 'matmul'"),
        ({"cases": "jax_jit_cpu_matmul_512_f16"}, "Valid case ids"),
        ({"cases": "numpy_matmul_99999_f32"}, "valid sizes are 2..16384"),
        ({"backends": "numpy", "workloads": "noop"}, "backends that do: noop: python"),
        ({"policies": "cold-cash"}, "Did you mean"),
        ({"profile": "fast"}, "Valid profiles"),
        ({"sizes": "big"}, "whole number"),
        ({"dtypes": "f16"}, "Valid dtypes"),
        ({"cold_runs": 0}, "--cold-runs must be >= 1"),
        ({"warm_samples": 2}, "--warm-samples must be >= 3"),
        ({"timeout": float("nan")}, "--timeout"),
        ({"shard": "3/2"}, "1 <= K <= N"),
        ({"cases": "numpy_matmul_512_f32", "backends": "numpy"}, "do not combine"),
    ],
)
def test_bad_input_is_a_usage_error_that_names_the_valid_choices(kwargs, expected):
    with pytest.raises(UsageError) as err:
        build_spec(RunRequest(**kwargs))
    assert expected in str(err.value)


def test_worker_python_must_exist_and_import_ttfr(tmp_path):
    import sys

    with pytest.raises(UsageError, match="cannot be run"):
        build_spec(RunRequest(python=str(tmp_path / "no-such-python")))
    with pytest.raises(UsageError, match="cannot import ttfr"):
        build_spec(RunRequest(python="/bin/false"))
    assert build_spec(RunRequest(python=sys.executable)).python == sys.executable


def test_policies_accept_aliases_and_keep_canonical_order():
    assert parse_policies(["warm,cold-cache"]) == (COLD_CACHE, WARM_PROCESS)
    assert parse_policies([]) == POLICIES  # the default suite never ships artifacts
    assert parse_policies(["all"])[:2] == (COLD_CACHE, WARM_CACHE) and parse_policies(["all"])[-1] == WARM_PROCESS
    assert parse_policies(["warm-cache"]) == (WARM_CACHE,)


def test_shards_partition_the_cases():
    full = build_spec(RunRequest(profile="publish")).cases
    shards = [build_spec(RunRequest(profile="publish", shard=f"{k}/3", seed=1)).cases for k in (1, 2, 3)]
    assert sorted(c for s in shards for c in s) == sorted(full)
    assert not set(shards[0]) & set(shards[1])
    with pytest.raises(UsageError, match="same --seed"):  # unmergeable: each shard would draw its own seed
        build_spec(RunRequest(shard="1/3"))


def test_deterministic_spec_fixes_the_seed_and_random_specs_differ():
    assert build_spec(RunRequest(deterministic=True)).seed == 0
    assert len({build_spec(RunRequest()).seed for _ in range(5)}) > 1


def test_spec_round_trips_through_json():
    spec = build_spec(RunRequest(backends="numpy,jax_jit_cpu", sizes="64", threads=2, shard="1/1", seed=7))
    assert RunSpec.from_recorded(spec.recorded()) == spec
    assert RunSpec.from_recorded(decode(json.loads(json.dumps(encode(spec.recorded()))), PlanSpec)) == spec


def test_plan_json_records_every_field_of_a_spec():
    # a field added to RunSpec is recorded in plan.json and read back (the case files' cases inside case_files)
    assert {f.name for f in dataclasses.fields(RunSpec)} - {"file_cases"} == set(PlanSpec.__struct_fields__)


def test_a_plan_of_an_older_ttfr_reads_with_the_defaults_of_what_it_lacks():
    spec = build_spec(RunRequest(backends="numpy", sizes="64", seed=7))
    newer = ("keep_contended", "case_files", "commands", "plan_cases", "concurrency", "concurrency_rounds", "threads",
             "shard", "python", "workspace", "signal", "custom_size", "precision", "budget_s")  # fmt: skip
    old = {key: value for key, value in encode(spec.recorded()).items() if key not in newer}
    assert RunSpec.from_recorded(decode(old, PlanSpec)) == spec
    files = encode(build_spec(RunRequest(commands=f"{sys.executable} t.py", seed=1)).recorded())
    del files["commands"][0]["files"], files["commands"][0]["stop_at_first_result"]  # before 0.1.2
    (command,) = RunSpec.from_recorded(decode(files, PlanSpec)).commands
    assert command.files == () and command.stop_at_first_result is False


def test_a_plan_naming_a_case_file_without_its_cases_is_not_read_by_importing_it(tmp_path):
    stored = decode({**encode(build_spec(RunRequest(backends="numpy", sizes="64", seed=7)).recorded()),
                     "case_files": [{"path": str(tmp_path / "cases.py"), "sha256": "0" * 64}]}, PlanSpec)  # fmt: skip
    with pytest.raises(UsageError, match="without its cases"):
        RunSpec.from_recorded(stored)


@pytest.mark.parametrize(
    "option, kwargs",
    [
        ("--cases", {"cases": [""]}),
        ("--cases", {"cases": [" , "]}),
        ("--backends", {"backends": [""]}),
        ("--workloads", {"workloads": ["matmul", ""]}),
        ("--sizes", {"sizes": [""]}),
        ("--dtypes", {"dtypes": [""]}),
        ("--cache-policy", {"policies": [""]}),
        ("--workspace-preset", {"workspace_presets": [""]}),
        ("--workspace", {"workspace": ""}),
        ("--signal", {"workspace": "ws.json", "signal": " "}),
    ],
)
def test_an_empty_selection_is_an_error_naming_the_option_not_everything(option, kwargs):
    with pytest.raises(UsageError, match=f"^{option} was given an empty value"):
        build_spec(RunRequest(**kwargs))
