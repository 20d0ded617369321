"""Workloads: each module gives every framework a pure function plus seeded inputs and a
float64 NumPy reference. Imported by the worker inside the timed setup phase."""


def inputs_sha256(host_inputs) -> str:
    """Identity of a case's dataset: dtype, shape and bytes of every input array."""
    import hashlib

    digest = hashlib.sha256()
    for array in host_inputs:
        digest.update(str(array.dtype).encode() + str(array.shape).encode())
        digest.update(array.tobytes())
    return digest.hexdigest()


def dataset_sha256(workload: str, size: int, dtype: str, seed: int) -> str:
    """The same hash, computed outside a worker (for cases that never ran)."""
    module = __import__(f"ttfr.child.workloads.{workload}", fromlist=["make_inputs"])
    return inputs_sha256(module.make_inputs(size, dtype, seed))
