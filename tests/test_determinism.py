"""The determinism helper strips measurements only (the end-to-end comparison is in test_integration)."""

import json

from support.determinism import deterministic_view


def test_deterministic_view_keeps_what_must_not_change():
    """Timings, calibrated counts and timing flags are ignored; a changed id, status, check, hash or count is not."""
    case = {
        "case": "numpy_matmul_64_f32", "status": "ok", "reason": None,
        "dataset": {"id": "matmul-64-float32-seed0", "sha256": "a" * 64},
        "correctness": {"passed": True, "max_normalised_error": 1e-7, "tolerance": 2e-4},
        "flags": [{"policy": "warm-process", "flag": "unsynchronised", "processes": [0]},
                  {"policy": "cold-process/warm-cache", "flag": "warm_cache_no_hits"}],
        "policies": {"warm-process": {
            "procs": [{"index": 0, "outcome": "ok", "samples_s": [1e-3, 2e-3], "median_s": 1.5e-3, "inner_loops": 7,
                       "metrics": {"ttfr_s": 0.5}, "sync_check": {"unsynchronised": True, "problems": ["x"]},
                       "cache": {"verdict": "verified", "hits": 1}}],
            "summary": {"call_s": {"n": 1, "median": 1.5e-3, "median_ci": {"low": 1, "high": 2, "level": 0.0}}},
        }},
    }  # fmt: skip
    view = deterministic_view(case)
    proc = view["policies"]["warm-process"]["procs"][0]
    assert proc["samples_s"] == "<2 samples>" and proc["median_s"] == proc["inner_loops"] == "<measured>"
    assert proc["metrics"] == {"ttfr_s": "<measured>"} and proc["sync_check"]["unsynchronised"] == "<measured>"
    # a summary, and how many clean runs it has, is measured: a busy machine sets contended runs aside
    assert view["policies"]["warm-process"]["summary"]["call_s"] == "<measured>"
    assert view["flags"] == [{"policy": "cold-process/warm-cache", "flag": "warm_cache_no_hits"}]  # cache flags stay
    retimed = json.loads(json.dumps(case))
    retimed["policies"]["warm-process"]["procs"][0].update(samples_s=[5.0, 6.0], median_s=5.5, inner_loops=1)
    retimed["flags"] = retimed["flags"][1:]
    assert deterministic_view(retimed) == view
    for path, changed in [(("status",), "failed"), (("case",), "numpy_matmul_64_f64"), (("dataset", "sha256"), "b" * 64),
                          (("correctness", "passed"), False), (("correctness", "max_normalised_error"), 2e-7)]:  # fmt: skip
        broken = json.loads(json.dumps(case))
        target = broken
        for part in path[:-1]:
            target = target[part]
        target[path[-1]] = changed
        assert deterministic_view(broken) != view, path
    fewer = json.loads(json.dumps(case))
    fewer["policies"]["warm-process"]["procs"][0]["samples_s"] = [1e-3]
    assert deterministic_view(fewer) != view
    verdict = json.loads(json.dumps(case))
    verdict["policies"]["warm-process"]["procs"][0]["cache"]["verdict"] = "flagged"
    assert deterministic_view(verdict) != view
