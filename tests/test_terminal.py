"""The live display's pieces for every catalogued backend (a pseudo-terminal run of each
family is in test_terminal_pty.py)."""

import pytest

from ttfr.measure import catalog
from ttfr.measure.plan import COLD, PRIME, WARM, Task
from ttfr.model.policies import COLD_CACHE, WARM_CACHE, WARM_PROCESS
from ttfr.report.terminal import RunEstimator


@pytest.mark.parametrize("case", catalog.BUILTIN.catalogued_cases(), ids=lambda c: c.id)
def test_every_catalogued_backend_has_an_eta_prior(case):
    # The display asked a framework-keyed table before: pyhf and nextstat crashed it (KeyError).
    estimator = RunEstimator()
    tasks = [Task(PRIME, case, None, 0, 0), Task(COLD, case, COLD_CACHE, 0, 0), Task(COLD, case, WARM_CACHE, 0, 2),
             Task(WARM, case, WARM_PROCESS, 0, 1)]  # fmt: skip
    for task in tasks:
        assert estimator.estimate(task) > 0


def test_the_prior_gives_way_to_observed_runs_of_the_same_kind():
    case = catalog.BUILTIN.make_case("torch_compile_cpu", "matmul", 64, "float32")
    estimator = RunEstimator()
    cold, warm_cache = Task(COLD, case, COLD_CACHE, 0, 0), Task(COLD, case, WARM_CACHE, 0, 2)
    fresh, from_template = case.backend_info.cost_prior_s
    assert (estimator.estimate(cold), estimator.estimate(warm_cache)) == (fresh, from_template)
    estimator.observe(cold, 3.0)
    estimator.observe(cold, 5.0)
    assert estimator.estimate(cold) == 4.0
    assert estimator.estimate(warm_cache) == from_template  # another kind: still the prior
