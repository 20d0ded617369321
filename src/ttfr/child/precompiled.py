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

- `torch_megacache`: torch's compile caches' entries (`torch.compiler.save_cache_artifacts`), loaded into the
  run's caches by `load_cache_artifacts`; the first call then runs torch.compile as usual, on them. Claims to
  skip AOTAutograd's and Inductor's work, kernel builds included (its caches hit).
- `torch_aot_compile`: the function compiled ahead of time (`torch.compile(fn, fullgraph=True).aot_compile`,
  `save_compiled_function`), loaded by `torch.compiler.load_compiled_function`, which stands for the workload's
  torch.compile(fn). Claims to skip dynamo as well.
- `torch_aoti`: an AOTInductor package (`torch.export.export`, `aoti_compile_and_package`, a `.pt2`), loaded by
  `aoti_load_package`. Claims everything but loading. Inference only: a workload that differentiates through
  its function is unsupported.

A workload a mechanism cannot take is `Unavailable` with the runtime's words (its policy: unsupported).

The loops' ahead-of-time strategies (`sweep_mlp_aot`, `hf_mass_scan_aot`: workloads/aot_store.py) keep their
own meaning, building and loading inside a loop, but make and load their executables and packages through the
same mechanisms here (`JaxSerialized.dumps`/`loads`, `TorchAoti.package`/`open_package`, `framed`/`unframed`).

Standard library only at import: the worker imports this before the runtime in a precompiled run, and the loops'
ahead-of-time strategies after it.
"""

import io
import os
import time

from ttfr.child.backends import Unavailable, first_line

FORMAT = b"ttfr-precompiled-1\n"  # the file's first line: what wrote it (a file from elsewhere is refused)


class Mechanism:
    """How one kind of artifact is made from a first call's compiled code, and loaded into a fresh process."""

    name = ""
    stands_for_compile = False  # torch: what it loads is called where the workload's torch.compile(fn) was
    beside = ""  # the suffix of a file the artifact keeps beside its own (AOTInductor's package), if any

    def make(self, runtime):
        """The artifact's bytes, from the runtime's first call (it compiled as usual)."""
        raise NotImplementedError

    def load(self, runtime, payload):
        """A callable that runs the case's call from `payload`, without compiling what the mechanism claims to
        skip."""
        raise NotImplementedError


class JaxSerialized(Mechanism):
    name = "jax_serialized"

    @staticmethod
    def dumps(executable) -> bytes:
        """A compiled executable's bytes, with its argument and result trees."""
        import pickle

        from jax.experimental import serialize_executable

        return pickle.dumps(serialize_executable.serialize(executable), protocol=pickle.HIGHEST_PROTOCOL)

    @staticmethod
    def loads(payload: bytes, device=None):
        """The executable `dumps` wrote, loaded onto `device` (default: the one it was compiled for)."""
        import pickle

        from jax.experimental import serialize_executable

        if b"lapack_" in payload:
            # An executable that calls LAPACK (a solve) crashes the process (SIGSEGV, jaxlib 0.10.2 on CPU) unless
            # LAPACK's kernels were bound first, which only lowering a linalg call does otherwise: bind them here
            # (it compiles nothing; it imports SciPy's LAPACK, a cost of the load). The payload names its custom
            # calls' targets (lapack_dgetrf_ffi, ...) in plain bytes.
            from jax._src.lax import linalg

            linalg.initialize_lapack()
        # the artifact is ttfr's own, made by this run's priming process or an earlier run of the same case
        # (never a file a user handed over)
        serialized, in_tree, out_tree = pickle.loads(payload)  # noqa: S301
        where = {"execution_devices": [device]} if device is not None else {}
        return serialize_executable.deserialize_and_load(serialized, in_tree, out_tree, **where)

    def make(self, runtime):
        return self.dumps(runtime.compiled)

    def load(self, runtime, payload):
        return self.loads(payload, runtime.device)


class JaxExport(Mechanism):
    name = "jax_export"

    def make(self, runtime):
        return bytes(runtime.jax.export.export(runtime.call)(*runtime.args).serialize())

    def load(self, runtime, payload):
        return runtime.jax.export.deserialize(bytearray(payload)).call


def _one_function(runtime, mechanism):
    """The one function the workload handed torch.compile and its first call's arguments (in the priming process)."""
    sources = runtime.compiled_sources
    if len(sources) != 1 or sources[0][1] is None:
        raise Unavailable(f"{mechanism} makes one function's artifact; this workload compiled {len(sources)} "
                          "function(s) (or never called one)")  # fmt: skip
    fn, (args, kwargs), options = sources[0]
    fresh = _fresh(runtime.torch, args), {k: _fresh(runtime.torch, [v])[0] for k, v in kwargs.items()}
    return fn, *fresh, options


def _fresh(torch, values):
    """The arguments as the first call took them, without what it left on them: a tensor that required gradients
    is a new leaf that requires them, with no .grad (torch 2.13 pickles a .grad into aot_compile's guards that it
    then cannot load: `assigned grad expected to be a Tensor or None but got grad of type _Missing`)."""
    return [v.detach().clone().requires_grad_(v.requires_grad) if isinstance(v, torch.Tensor) else v for v in values]


def _unsupported(torch):
    """The exceptions by which torch says a function cannot be compiled whole (a graph break under fullgraph,
    .backward() inside it, what export cannot trace)."""
    exc = torch._dynamo.exc
    return tuple(k for k in (getattr(exc, "Unsupported", None), getattr(exc, "UserError", None)) if k)


class TorchMegaCache(Mechanism):
    name = "torch_megacache"

    def make(self, runtime):
        saved = runtime.torch.compiler.save_cache_artifacts()
        if not saved or not saved[0]:
            raise Unavailable("torch.compiler.save_cache_artifacts() had nothing to save: the first call compiled "
                              "nothing into torch's caches")  # fmt: skip
        return bytes(saved[0])

    def load(self, runtime, payload):
        runtime.torch.compiler.load_cache_artifacts(payload)
        return None  # torch.compile runs as usual, on the caches this filled


class TorchAotCompile(Mechanism):
    name = "torch_aot_compile"
    stands_for_compile = True

    def make(self, runtime):
        torch = runtime.torch
        fn, args, kwargs, options = _one_function(runtime, self.name)
        if isinstance(fn, torch.nn.Module):
            raise Unavailable("torch_aot_compile takes a function, and this case compiles an nn.Module (torch's module "
                              "form, OptimizedModule.aot_compile, is experimental and loads only into the module "
                              "rebuilt)")  # fmt: skip
        compiled_fn = torch.compile(fn, **{**options, "fullgraph": True})
        if not hasattr(compiled_fn, "aot_compile") or not hasattr(torch.compiler, "load_compiled_function"):
            raise Unavailable(f"torch {torch.__version__} has no aot_compile / torch.compiler.load_compiled_function "
                              "(experimental in 2.13)")  # fmt: skip
        try:
            # the workload's own options (mode, dynamic, backend), whole-graph as aot_compile requires
            compiled = compiled_fn.aot_compile((args, kwargs))
        except _unsupported(torch) as exc:  # the runtime's words: a graph break, a .backward() inside
            raise Unavailable(f"torch.compile(fullgraph=True).aot_compile: {first_line(exc)}") from exc
        import tempfile

        with tempfile.TemporaryDirectory() as where:
            path = os.path.join(where, "function.aot")
            try:
                compiled.save_compiled_function(path)
            except RuntimeError as exc:  # what it cannot serialize (a closure's object): its words
                raise Unavailable(f"save_compiled_function: {first_line(exc)}") from exc
            with open(path, "rb") as handle:
                return handle.read()

    def load(self, runtime, payload):
        return runtime.torch.compiler.load_compiled_function(io.BytesIO(payload))


class TorchAoti(Mechanism):
    name = "torch_aoti"
    stands_for_compile = True
    beside = ".pt2"

    @staticmethod
    def package(torch, exported, path: str | None) -> str:
        """An exported program compiled by AOTInductor into a package written whole at `path` (a name ending
        in .pt2: its writer refuses any other), or where AOTInductor chooses (None); the package's path."""
        if path is None:
            return torch._inductor.aoti_compile_and_package(exported)
        partial = path[: -len(".pt2")] + ".partial.pt2"
        torch._inductor.aoti_compile_and_package(exported, package_path=partial)
        os.replace(partial, path)  # a reader never sees half a package
        return path

    @staticmethod
    def open_package(torch, path: str):
        """The package's callable (its kernels loaded, nothing compiled that the package holds)."""
        return torch._inductor.aoti_load_package(path)

    def make(self, runtime):
        torch = runtime.torch
        fn, args, kwargs, _options = _one_function(runtime, self.name)
        if any(getattr(a, "requires_grad", False) for a in (*args, *kwargs.values())):
            raise Unavailable("AOTInductor packages inference: its loaded function has no backward, and this "
                              "workload differentiates through the function (its arguments require gradients)")  # fmt: skip

        class Function(torch.nn.Module):
            def forward(self, *inputs, **named):
                return fn(*inputs, **named)

        try:  # a module is exported as it is; a function through a module that calls it
            exported = torch.export.export(fn if isinstance(fn, torch.nn.Module) else Function(), tuple(args), kwargs)
        except _unsupported(torch) as exc:
            raise Unavailable(f"torch.export.export: {first_line(exc)}") from exc
        # the package is a file of its own beside the artifact, as a shipped .pt2 is (its loader reads a path)
        self.package(torch, exported, runtime.job.artifact + self.beside)
        return b""

    def load(self, runtime, payload):
        return self.open_package(runtime.torch, runtime.job.artifact + self.beside)


MECHANISMS = {m.name: m for m in (JaxSerialized(), JaxExport(), TorchMegaCache(), TorchAotCompile(), TorchAoti())}


def framed(payload: bytes) -> bytes:
    """An artifact file's bytes: the format line, then the payload."""
    return FORMAT + payload


def unframed(data: bytes, path: str) -> bytes:
    """The payload of an artifact file's bytes; a file ttfr did not write is refused."""
    if not data.startswith(FORMAT):
        raise ValueError(f"{path} is not an artifact ttfr wrote (its first line is not {FORMAT[:-1]!r})")
    return data[len(FORMAT) :]


def digest(path: str, mechanism: str) -> str | None:
    """The sha256 of an artifact's files (the artifact, then the file it keeps beside it); None: one is missing
    or unreadable. The parent checks it before a run loads the artifact: a file changed since it was made (a
    pickle, in most mechanisms) is never loaded."""
    import hashlib

    found, beside = hashlib.sha256(), MECHANISMS[mechanism].beside
    try:
        for name in (path, path + beside) if beside else (path,):
            with open(name, "rb") as handle:
                for block in iter(lambda handle=handle: handle.read(1 << 20), b""):
                    found.update(block)
    except OSError:
        return None
    return found.hexdigest()


def write(job, runtime):
    """The priming process's artifact: made from its first call, written whole or not at all. Its size and the
    seconds making it took (what it is bound to, versions and device, is the same record's)."""
    mechanism = MECHANISMS[job.precompiled]
    start = time.perf_counter_ns()
    payload = mechanism.make(runtime)
    made_s = (time.perf_counter_ns() - start) / 1e9
    partial = job.artifact + ".partial"
    with open(partial, "wb") as handle:
        handle.write(framed(payload))
    os.replace(partial, job.artifact)  # a reader never sees half a file
    size = len(FORMAT) + len(payload) + (os.path.getsize(job.artifact + mechanism.beside) if mechanism.beside else 0)
    sha = digest(job.artifact, mechanism.name)
    return {"mechanism": mechanism.name, "bytes": size, "make_s": made_s, **({"sha256": sha} if sha else {})}


def read(job, runtime):
    """The measured process's load: the file read and the runtime's loader run (the timed `artifact_load`)."""
    with open(job.artifact, "rb") as handle:
        data = handle.read()
    return MECHANISMS[job.precompiled].load(runtime, unframed(data, job.artifact))
