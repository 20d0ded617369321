"""A call that does nothing: measures the harness itself (cold floor, warm loop overhead).

Imports nothing, so the `python` backend's cold run is interpreter start plus harness.
"""

TOLERANCE = {"float64": 0.0}


def make_inputs(size, dtype, seed):
    return []


def reference(inputs):
    return []


def python_fn():
    def noop():
        return None

    return noop
