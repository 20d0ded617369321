"""Precompiled artifacts (issue 39): the one place that knows how to make and load each kind.

A priming process compiles the case's function as usual, then `make` writes the compiled code to the artifact
file (after every timed phase). A measured process `load`s it in a timed phase of its own (`artifact_load`) and
its first call runs what it loaded: whatever the runtime still compiles is counted by its own events and judged
against what the mechanism claims to skip (measure/precompiled.py).

Mechanisms, by runtime:
- `jax_serialized`: the compiled executable (`jax.experimental.serialize_executable.serialize`, with its
  argument and result trees), loaded by `deserialize_and_load` onto the run's device. Claims to skip tracing,
  lowering and compiling.
- `jax_export`: the function exported as StableHLO (`jax.export.export(jitted)(*args).serialize()`), loaded
  by `jax.export.deserialize` and run through `Exported.call`, which traces and lowers only its own small
  wrapper (`call_exported`) and compiles that once. Claims to skip tracing and lowering the user's function;
  one backend compile expected.

Standard library only at import: the worker imports this before the runtime, only in a precompiled run.
"""

import os
import time

FORMAT = b"ttfr-precompiled-1\n"  # the file's first line: what wrote it (a file from elsewhere is refused)


class Mechanism:
    """How one kind of artifact is made from a first call's compiled code, and loaded into a fresh process."""

    name = ""

    def make(self, runtime):
        """The artifact's bytes, from the runtime's first call (it compiled as usual)."""
        raise NotImplementedError

    def load(self, runtime, payload):
        """A callable that runs the case's call from `payload`, without compiling what the mechanism claims to
        skip."""
        raise NotImplementedError


class JaxSerialized(Mechanism):
    name = "jax_serialized"

    def make(self, runtime):
        import pickle

        from jax.experimental import serialize_executable

        payload, in_tree, out_tree = serialize_executable.serialize(runtime.compiled)
        return pickle.dumps((payload, in_tree, out_tree), protocol=pickle.HIGHEST_PROTOCOL)

    def load(self, runtime, payload):
        import pickle

        from jax.experimental import serialize_executable

        # the artifact is ttfr's own, made by this run's priming process (never a file a user handed over)
        serialized, in_tree, out_tree = pickle.loads(payload)  # noqa: S301
        return serialize_executable.deserialize_and_load(serialized, in_tree, out_tree,
                                                         execution_devices=[runtime.device])  # fmt: skip


class JaxExport(Mechanism):
    name = "jax_export"

    def make(self, runtime):
        return bytes(runtime.jax.export.export(runtime.call)(*runtime.args).serialize())

    def load(self, runtime, payload):
        return runtime.jax.export.deserialize(bytearray(payload)).call


MECHANISMS = {m.name: m for m in (JaxSerialized(), JaxExport())}


def write(job, runtime):
    """The priming process's artifact: made from its first call, written whole or not at all. Its size and the
    seconds making it took (what it is bound to, versions and device, is the same record's)."""
    mechanism = MECHANISMS[job.precompiled]
    start = time.perf_counter_ns()
    payload = mechanism.make(runtime)
    made_s = (time.perf_counter_ns() - start) / 1e9
    partial = job.artifact + ".partial"
    with open(partial, "wb") as handle:
        handle.write(FORMAT + payload)
    os.replace(partial, job.artifact)  # a reader never sees half a file
    return {"mechanism": mechanism.name, "bytes": len(FORMAT) + len(payload), "make_s": made_s}


def read(job, runtime):
    """The measured process's load: the file read and the runtime's loader run (the timed `artifact_load`)."""
    with open(job.artifact, "rb") as handle:
        data = handle.read()
    if not data.startswith(FORMAT):
        raise ValueError(f"{job.artifact} is not an artifact ttfr wrote (its first line is not {FORMAT[:-1]!r})")
    return MECHANISMS[job.precompiled].load(runtime, data[len(FORMAT) :])
