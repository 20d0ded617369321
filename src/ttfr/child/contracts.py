"""What the worker asks of a runtime adapter and of a workload module, as types.

The worker never imports this module (`typing` costs start-up time it would measure); the
tests check every adapter and workload against it, and a new one is written to it.

Adding a backend: a module under `ttfr.child.backends` whose `Runtime` class is a
`RuntimeAdapter`, and one `Backend` entry in `ttfr.measure.catalog`. Adding a workload: a
module under `ttfr.child.workloads` that is an `ArrayWorkload` (seeded arrays, a NumPy
reference), an `EngineWorkload` (a file-backed problem and an engine per runtime) or a
`LoopWorkload` (a loop whose strategies are cases of their own), and one `Workload` entry
in the catalog (a loop family: one per strategy, generated from `LOOP_STRATEGIES`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

from ttfr.child.job import Job


@runtime_checkable
class RuntimeAdapter(Protocol):
    """One runtime (NumPy, JAX, torch, pyhf, NextStat) inside the worker. After `first_call`,
    `call(*args)` is the steady-state call and `sync(output)` (None for synchronous
    runtimes) waits for its result. An asynchronous runtime may also offer `ready(output)`,
    a non-blocking "is it finished?" probe that the warm sync check uses."""

    framework: str
    call: Callable[..., Any] | None
    args: tuple
    sync: Callable[[Any], Any] | None

    def __init__(self, job: Job) -> None: ...

    def import_stack(self) -> None:
        """Import and initialise the runtime (timed as `import_s`)."""

    def put(self, host_inputs: Any) -> Any:
        """Inputs on the device, ready (timed as part of `setup_s`)."""

    def first_call(self, workload: Any, inputs: Any) -> tuple[Any, dict]:
        """Build the call from the workload, run it once, synchronised; (output, stage seconds)."""

    def to_host(self, output: Any) -> Sequence[Any]:
        """The output as host arrays (for the digest and the check)."""

    def device_info(self) -> dict: ...

    def cache_counters(self) -> dict | None:
        """Raw persistent-cache counters, in the catalog's `cache_counters` format."""

    def memory(self) -> dict: ...

    def versions(self) -> dict: ...


@runtime_checkable
class ArrayWorkload(Protocol):
    """Seeded input arrays, one pure function per framework, a float64 NumPy reference. The
    framework builders (`numpy_fn`, `jax_fn`, `torch_build`, `python_fn`) are those of the
    frameworks the catalog says it supports."""

    TOLERANCE: dict  # dtype -> normalised max error allowed against the reference

    def make_inputs(self, size: int, dtype: str, seed: int) -> list: ...

    def reference(self, inputs: list) -> list: ...


@runtime_checkable
class EngineWorkload(Protocol):
    """A problem read from the job's files in the timed setup, prepared per runtime, with its
    own result check (HistFactory). Besides `jax_fn(jax)`, one may give `jax_build(jax, inputs)
    -> (function, args)`: a JAX function built for its inputs (their layout, their size) and the
    arguments it is called with, as `torch_build` does for torch; the adapter prefers it."""

    def load_inputs(self, job: Job) -> Any: ...

    def inputs_for(self, runtime: RuntimeAdapter, problem: Any) -> Any: ...

    def engine_build(self, runtime: RuntimeAdapter, engine: Any) -> tuple[Callable[..., Any], tuple]: ...

    def check(self, runtime: RuntimeAdapter, inputs: Any, problem: Any, host_first: Sequence[Any], job: Job) -> dict: ...

    def dataset_sha256(self, problem: Any) -> str: ...


@runtime_checkable
class Loop(Protocol):
    """What a loop workload builds for one runtime and strategy; ttfr/child/loop.py runs it.
    It may also have `prepare()` with `prepare_label` (an ahead-of-time phase, timed as its
    own timeline entry), which may change `expected_compiles` and `loaded`; and
    `take_transfer_s() -> float | None`: the seconds its host<->device copies took since it was
    last asked, each copy waited for, and zeroed (None: it moves no data), which the driver
    records per entry as `transfer_s` (the rest of the entry is compute). A loop without it
    records none."""

    labels: list  # one per iteration
    functions: tuple | None  # the loop's own compiled functions (JAX `fun_name`); None: all the process compiles
    expected_compiles: int | None  # what the runtime's compile counter must show (None: no compiler)
    loaded: int  # executables loaded from disk rather than compiled

    def iteration(self, index: int) -> Any:
        """Run iteration `index`; its host result, finished (the driver waits on the runtime's
        barrier for anything that is not host data, inside the iteration's time)."""

    def output(self, results: list) -> list:
        """The loop's result (host arrays) from every iteration's."""


@runtime_checkable
class LoopWorkload(Protocol):
    """`build_loop(runtime, job, inputs) -> Loop` for the job's strategy, on inputs shared by
    every strategy: an `ArrayWorkload`'s seeded arrays and reference (the loop's inputs are
    then the host arrays), or an engine workload's prepared problem (its `inputs_for`, `check`)."""

    LOOP: bool

    def build_loop(self, runtime: RuntimeAdapter, job: Job, inputs: Any) -> Loop: ...
