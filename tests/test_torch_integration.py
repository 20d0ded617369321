"""A few small torch runs: eager vs torch.compile of the train step, with real caches.

One cold torch.compile costs 10-30 s on this machine (g++), so this module runs one case
with one run per policy.
"""

import json
import subprocess
import sys

import pytest
from conftest import have, ok_unless_busy

from ttfr.artifacts.reader import validate_dir

# Counters, cache verdicts and checks: what a busy machine could change (a figure withheld) each test allows.
pytestmark = [
    pytest.mark.integration,
    pytest.mark.torch_compile,
    pytest.mark.contention_safe,
    pytest.mark.skipif(not have("torch"), reason="torch not installed"),
]


@pytest.fixture(scope="module")
def torch_suite(tmp_path_factory):
    out = tmp_path_factory.mktemp("torch")
    done = subprocess.run(
        [sys.executable, "-m", "ttfr", "run", "--out", str(out), "--backends", "torch_eager_cpu,torch_compile_cpu",
         "--workloads", "mlp_train_step", "--sizes", "8", "--cold-runs", "1", "--warm-procs", "1", "--warm-samples", "3"],
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    (root,) = [p for p in out.iterdir() if p.is_dir()]
    return root


def case(root, case_id):
    return json.loads((root / "cases" / f"{case_id}.json").read_text())


def test_torch_artifacts_are_valid_and_both_modes_agree_with_the_reference(torch_suite):
    assert validate_dir(torch_suite) == []
    for case_id in ("torch_eager_cpu_mlp_train_step_8_f32", "torch_compile_cpu_mlp_train_step_8_f32"):
        result = case(torch_suite, case_id)
        assert ok_unless_busy(result), result["reason"]
        assert result["correctness"]["passed"]


def test_torch_compile_first_call_includes_the_backward_compile(torch_suite):
    policies = case(torch_suite, "torch_compile_cpu_mlp_train_step_8_f32")["policies"]
    (cold,) = policies["cold-process/cold-cache"]["runs"]
    stages = cold["stages"]
    assert {"wrap_s", "dynamo_s", "aot_autograd_s", "inductor_s", "backward_compile_s", "first_execute_s"} <= set(stages)
    assert stages["backward_compile_s"] > 0 and stages["inductor_s"] > 0
    compile_total = stages["dynamo_s"] + stages["aot_autograd_s"] + stages["inductor_s"]
    assert compile_total <= cold["metrics"]["first_call_s"]  # parts of one measured span, not two timings
    # The first call compiled (counters, not a ratio of timings a busy machine can upset).
    assert cold["cache"]["misses"] > 0


def test_torch_cache_counters_verify_both_cold_policies(torch_suite):
    policies = case(torch_suite, "torch_compile_cpu_mlp_train_step_8_f32")["policies"]
    (cold,) = policies["cold-process/cold-cache"]["runs"]
    (warm,) = policies["cold-process/warm-cache"]["runs"]
    assert cold["cache"]["hits"] == 0 and cold["cache"]["misses"] > 0 and cold["cache"]["verdict"] == "verified"
    assert warm["cache"]["hits"] > 0 and warm["cache"]["misses"] == 0 and warm["cache"]["verdict"] == "verified"
    eager = case(torch_suite, "torch_eager_cpu_mlp_train_step_8_f32")["policies"]
    assert eager["cold-process/cold-cache"]["cache_verification"]["verdict"] == "not_applicable"


@pytest.mark.skipif(not have("pyhf"), reason="the HistFactory gate needs pyhf")
def test_histfactory_fit_kernels_compile_and_come_back_whole_from_a_warm_cache(tmp_path):
    """The native fits' torch.compile kernels (expected bins with their Jacobian, the Newton
    step with its Cholesky) must pass the gate and be cacheable: an error-checking linalg op
    becomes an effectful node that Inductor's FX graph cache refuses ("Can't cache
    HigherOrderOperator: with_effects"), which leaves a warm cache with misses."""
    done = subprocess.run(
        [sys.executable, "-m", "ttfr", "run", "--out", str(tmp_path), "--backends", "torch_compile_cpu",
         "--workloads", "hf_profiled_q0", "--workspace-preset", "complex8p", "--cold-runs", "1", "--warm-procs", "1",
         "--warm-samples", "3", "--cache-policy", "warm-cache", "--seed", "1"],
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    (root,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    result = case(root, "torch_compile_cpu_hf_profiled_q0_8_f64")
    assert ok_unless_busy(result), result["reason"]
    assert result["correctness"]["passed"] and result["correctness"]["fd"]["passed"]
    (warm,) = result["policies"]["cold-process/warm-cache"]["runs"]
    assert warm["cache"]["hits"] > 0 and warm["cache"]["misses"] == 0, warm["cache"]
    assert warm["cache"]["verdict"] == "verified" and not warm["cache"].get("flags")
