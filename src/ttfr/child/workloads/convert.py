"""Array conversions across runtimes as a workload (issue 28): one route per case
(conversion_routes.ROUTES, named by the job's `strategy`), a source of `size` bytes.

The timed calls convert a C-contiguous source: the first call is the first conversion in a fresh
process (any lazy import or registration it triggers included), the warm regime the steady
state. The process that checks the result also gathers the evidence (`evidence`): whether the
route copied, measured rather than assumed (the two buffers' address ranges and, where the
source is writable, a write through it), the same for each layout (transposed, misaligned,
read-only) with a library's refusal kept as its own words, this machine's memcpy of the same
bytes measured in the same process, and a leak probe (repeated conversions, the RSS watched).
"""

import os
import time

import numpy as np

from ttfr.child import hostinfo
from ttfr.child.backends import Unavailable, first_line
from ttfr.child.conversion_routes import COLUMNS, LAYOUTS

TOLERANCE = {"float32": 0.0, "float64": 0.0, "bfloat16": 0.0}  # a conversion changes no value
HEADROOM_BYTES = 256 << 20
# What a case holds at once: source, destination, memcpy's two destinations, and the check's float64
# copies (reference, result, difference) at 8 bytes an element.
COPIES_NEEDED = 4
FLOAT64_COPIES = 3
LEAK_CALLS = 10_000
LEAK_MAX_BYTES = 8 << 30  # bytes a leak probe moves at most (a large array gets fewer calls)
LEAK_MAX_S = 5.0
LEAK_FLAG_BYTES = 4 << 20  # RSS growth over the probe's second half that flags a route
_SENTINEL = 1024.0  # exactly representable in bfloat16, float32 and float64; never in the seeded data


# ------------------------------------------------------------------ inputs
def _dtype(dtype: str):
    if dtype == "bfloat16":
        try:
            import ml_dtypes
        except ModuleNotFoundError:
            raise Unavailable("missing_dependency: ml_dtypes (NumPy's bfloat16)") from None
        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(dtype)


def shape_of(size: int, dtype: str) -> tuple[int, int]:
    """`size` bytes as (rows, 64) elements: at least one row."""
    elements = max(size // _dtype(dtype).itemsize, COLUMNS)
    return elements // COLUMNS, COLUMNS


def make_inputs(size, dtype, seed):
    """The source's values as a NumPy array (the dataset and the reference)."""
    rng = np.random.default_rng(seed)
    values = rng.uniform(-1.0, 1.0, size=shape_of(size, dtype)).astype(np.float32)
    return [values.astype(_dtype(dtype))]


def load_inputs(job):
    """The memory guard first: a size that does not fit what this machine has free (with headroom)
    is skipped with that reason before anything is allocated."""
    needed = (COPIES_NEEDED + FLOAT64_COPIES * 8 // _dtype(job.dtype).itemsize) * job.size + HEADROOM_BYTES
    available = hostinfo.memory_available_bytes()
    if available is not None and needed > available:
        raise Unavailable(f"insufficient_memory: {job.size} bytes need about {needed >> 20} MiB free with headroom, "
                          f"{available >> 20} MiB available")  # fmt: skip
    return make_inputs(job.size, job.dtype, job.seed)


def reference(host_inputs):
    return [np.asarray(host_inputs[0], dtype=np.float64)]


def inputs_for(runtime, host_inputs):
    """The source in the route's source library, C-contiguous (built in setup, not timed as a call)."""
    return [make_source(runtime, runtime.route.source, host_inputs[0], "contiguous")]


# ------------------------------------------------------------------ sources and routes
def _torch_dtype(torch, dtype: str):
    return getattr(torch, str(dtype))


def make_source(runtime, kind: str, values, layout: str):
    """`values` (NumPy) as a `kind` array laid out as `layout`; None where the kind has no such layout
    (a JAX array is immutable and dense; a torch tensor has no read-only flag)."""
    if kind == "numpy":
        return _numpy_layout(values, layout)
    if kind in ("torch", "torch_pinned", "torch_cuda"):
        if layout == "readonly" or (kind == "torch_pinned" and layout != "contiguous"):
            return None
        torch = runtime.torch
        # torch cannot take NumPy's bfloat16: build float32, cast, then lay it out in torch; cloned, so the
        # source is torch's own allocation (a float32 cast is a no-op: it would sit in NumPy's memory, with
        # NumPy's alignment, and a route's copy verdict would be NumPy's)
        dense = torch.from_numpy(np.array(values, dtype=np.float32)).to(_torch_dtype(torch, values.dtype)).clone()
        if kind == "torch_pinned":
            return dense.pin_memory()
        tensor = dense.to(runtime.device) if kind == "torch_cuda" else dense
        if layout == "transposed":
            return tensor.T.contiguous().T
        if layout == "misaligned":
            flat = torch.empty(tensor.numel() + 1, dtype=tensor.dtype, device=tensor.device)
            flat[1:] = tensor.reshape(-1)
            return flat[1:].view(tensor.shape)
        return tensor
    if kind in ("jax", "jax_gpu"):
        if layout != "contiguous":
            return None
        jax = runtime.jax
        return jax.block_until_ready(jax.device_put(np.array(values), runtime.jax_device))
    raise ValueError(f"unknown array kind {kind!r}")


def _numpy_layout(values, layout: str):
    if layout == "transposed":
        return np.ascontiguousarray(values.T).T
    if layout == "misaligned":
        flat = np.empty(values.size + 1, dtype=values.dtype)
        flat[1:] = values.ravel()
        return flat[1:].reshape(values.shape)
    array = np.array(values, copy=True)
    if layout == "readonly":
        array.setflags(write=False)
    return array


def converter(runtime, route, source):
    """The route as a one-argument function of its source (a pinned destination made once)."""
    np_, torch, jax = np, runtime.torch, runtime.jax
    jnp = jax.numpy if jax is not None else None
    name = route.name
    if name == "torch_cuda_to_pinned":
        pinned = torch.empty(source.shape, dtype=source.dtype, pin_memory=True)
        return lambda t: pinned.copy_(t, non_blocking=True)
    table = {
        "numpy_copy": lambda a: np_.array(a, copy=True),
        "numpy_to_torch_from_numpy": lambda a: torch.from_numpy(a),
        "numpy_to_torch_as_tensor": lambda a: torch.as_tensor(a),
        "numpy_to_torch_tensor": lambda a: torch.tensor(a),
        "numpy_to_torch_dlpack": lambda a: torch.from_dlpack(a),
        "torch_to_numpy_numpy": lambda t: t.numpy(),
        "torch_to_numpy_asarray": lambda t: np_.asarray(t),
        "torch_to_numpy_dlpack": lambda t: np_.from_dlpack(t),
        "numpy_to_jax_asarray": lambda a: jnp.asarray(a),
        "numpy_to_jax_device_put": lambda a: jax.device_put(a),
        "numpy_to_jax_dlpack": lambda a: jnp.from_dlpack(a),
        "jax_to_numpy_asarray": lambda x: np_.asarray(x),
        "jax_to_numpy_dlpack": lambda x: np_.from_dlpack(x),
        "jax_to_numpy_device_get": lambda x: jax.device_get(x),
        "torch_to_jax_dlpack": lambda t: jnp.from_dlpack(t),
        "jax_to_torch_dlpack": lambda x: torch.from_dlpack(x),
        "numpy_torch_numpy": lambda a: torch.from_numpy(a).numpy(),
        "numpy_jax_numpy": lambda a: np_.asarray(jnp.asarray(a)),
        "torch_jax_torch": lambda t: torch.from_dlpack(jnp.from_dlpack(t)),
        "numpy_to_torch_cuda": lambda a: torch.from_numpy(a).to(runtime.device),
        "torch_pinned_to_cuda": lambda t: t.to(runtime.device, non_blocking=True),
        "torch_cuda_to_numpy": lambda t: t.cpu().numpy(),
        "numpy_to_jax_gpu": lambda a: jax.device_put(a, runtime.jax_device),
        # JAX keeps a device array's host copy on the array: a second np.asarray(x) of the same array is a
        # lookup, not a transfer (an H200 timed it at 762 GB/s). A user converts a fresh result each time,
        # so each call converts a fresh device copy (x.copy(): a device-to-device copy, a small part of the
        # transfer it stands before)
        "jax_gpu_to_numpy": lambda x: np_.asarray(x.copy()),
        "torch_cuda_to_jax_gpu_dlpack": lambda t: jnp.from_dlpack(t),
        "torch_pinned_to_jax_dlpack": lambda t: jnp.from_dlpack(t),
    }
    return table[name]


def route_call(runtime, source):
    return converter(runtime, runtime.route, source)


# ------------------------------------------------------------------ what an array is
def to_float64(runtime, array):
    """Any kind's values as a float64 NumPy array (a copy; for the check and the digest)."""
    torch = runtime.torch
    if torch is not None and isinstance(array, torch.Tensor):
        return array.detach().to("cpu", torch.float64).numpy().copy()
    return np.array(np.asarray(array), dtype=np.float64, copy=True)


def extent(runtime, array):
    """(memory space, first byte, one past the last byte) of an array's buffer, or None."""
    torch = runtime.torch
    if isinstance(array, np.ndarray):
        start = array.__array_interface__["data"][0]
        shape, strides, itemsize = array.shape, array.strides, array.itemsize
        space = "host"
    elif torch is not None and isinstance(array, torch.Tensor):
        start = array.data_ptr()
        itemsize = array.element_size()
        shape, strides = array.shape, tuple(s * itemsize for s in array.stride())
        space = "device" if array.is_cuda else "host"
    elif hasattr(array, "unsafe_buffer_pointer"):
        try:
            start = array.unsafe_buffer_pointer()
        except Exception:  # noqa: BLE001 - a sharded or deleted array has no one pointer
            return None
        itemsize = array.dtype.itemsize
        shape, strides = array.shape, None
        on_gpu = next(iter(array.devices())).platform != "cpu"
        memory_kind = getattr(getattr(array, "sharding", None), "memory_kind", None) or ""
        space = "device" if on_gpu and not memory_kind.endswith("host") else "host"
    else:
        return None
    if strides is None:
        return space, start, start + int(np.prod(shape)) * itemsize
    low = start + sum(min(0, (n - 1) * s) for n, s in zip(shape, strides) if n)
    high = start + sum(max(0, (n - 1) * s) for n, s in zip(shape, strides) if n) + itemsize
    return space, low, high


def shares_memory(source_extent, destination_extent):
    """Whether two buffers' address ranges overlap. Host and device addresses are compared as they
    are: CUDA's unified addressing gives host and device memory one address space, and an array a
    library imports from pinned host memory may sit on the GPU while its bytes stay where they were
    (on an H200, JAX's import of a torch pinned tensor showed a write through it while the memory
    spaces said host and device), so the spaces alone cannot tell."""
    if source_extent is None or destination_extent is None:
        return None
    return source_extent[1] < destination_extent[2] and destination_extent[1] < source_extent[2]


def _writable(runtime, array) -> bool:
    if isinstance(array, np.ndarray):
        return bool(array.flags.writeable)
    torch = runtime.torch
    return torch is not None and isinstance(array, torch.Tensor)


def write_through(runtime, source, destination, sync):
    """Does a write to the source show in the destination? None where the source cannot be written."""
    if not _writable(runtime, source):
        return None
    try:
        first = _first_element(source)
        source[0, 0] = _SENTINEL
    except Exception:  # noqa: BLE001 - this source takes no write (a tensor that requires grad): no verdict
        return None
    try:  # a destination that fails when read raises on: the layout row calls it unusable
        sync(destination)
        seen = _first_element(destination) == _SENTINEL
    finally:
        source[0, 0] = first
    return bool(seen)


def _first_element(array) -> float:
    """The buffer's first element as it is now: indexing reads the buffer (np.asarray of a JAX array
    would return a host copy JAX caches on the array, and a later write would not show)."""
    element = array[0, 0]
    return float(element.item() if hasattr(element, "item") else element)


# ------------------------------------------------------------------ timing and probes
def _median_call_s(call, source, sync, budget_s=0.02, most=200):
    """The median of a few synchronised conversions (a layout's time, measured in the checking
    process: the case's warm regime is the contiguous source's)."""
    clock = time.perf_counter
    start = clock()
    sync(call(source))
    once = clock() - start
    reps = max(3, min(most, int(budget_s / max(once, 1e-7))))
    times = []
    for _ in range(reps):
        start = clock()
        sync(call(source))
        times.append(clock() - start)
    return float(np.median(times))


def memcpy_s(values, reps=None):
    """This machine's memcpy of the same bytes: `np.copyto` into a preallocated, already-touched
    destination (median), and into a fresh one (first-touch page faults included)."""
    source = np.ascontiguousarray(values)
    destination = np.empty_like(source)
    np.copyto(destination, source)  # touch every page
    clock = time.perf_counter
    reps = reps or max(5, min(200, int(0.05 / max(_timed(lambda: np.copyto(destination, source)), 1e-7))))
    warm = float(np.median([_timed(lambda: np.copyto(destination, source)) for _ in range(reps)]))
    fresh = []
    for _ in range(max(3, reps // 4)):
        start = clock()
        np.copyto(np.empty_like(source), source)
        fresh.append(clock() - start)
    return warm, float(np.median(fresh))


def _timed(work):
    start = time.perf_counter()
    work()
    return time.perf_counter() - start


def rss_bytes():
    try:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def leak_probe(call, source, sync, nbytes, calls=LEAK_CALLS, max_bytes=LEAK_MAX_BYTES, max_s=LEAK_MAX_S, rss=rss_bytes):
    """Repeated conversions in this process, the RSS read before, at each tenth and after; a route
    whose RSS still grows over the second half (by LEAK_FLAG_BYTES or more) is flagged."""
    planned = max(10, min(calls, max_bytes // max(nbytes, 1)))
    samples = [rss()]
    done = 0
    deadline = time.perf_counter() + max_s
    for tenth in range(10):
        for _ in range(planned // 10):
            sync(call(source))
            done += 1
        samples.append(rss())
        if time.perf_counter() > deadline and tenth < 9:
            break
    if any(s is None for s in samples) or done == 0:
        return {"calls": done, "rss_samples": [], "growth_per_call_bytes": None, "grows": None}
    half = len(samples) // 2
    second_half = samples[-1] - samples[half]
    return {
        "calls": done,
        "rss_samples": samples,
        "growth_per_call_bytes": (samples[-1] - samples[0]) / done,
        "grows": second_half >= LEAK_FLAG_BYTES,
    }


def layout_row(runtime, route, values, layout, sync, source=None):
    """One layout of the source: refused (the library's words), not applicable, or converted with its
    copy evidence, its values checked and its time. `source`: the array to convert (the timed calls'
    own for the contiguous layout: whether a route copies can depend on where its source happens to
    be, e.g. XLA aliases only 64-byte aligned buffers), else one made in `layout`."""
    row = {"layout": layout, "outcome": "ok", "reason": None, "copied": None, "shares_memory": None,
           "write_through": None, "values_ok": None, "call_s": None, "source_offset_64": None}  # fmt: skip
    source = make_source(runtime, route.source, values, layout) if source is None else source
    if source is None:
        return dict(row, outcome="not_applicable", reason=f"a {route.source} array has no {layout} layout")
    where = extent(runtime, source)
    row["source_offset_64"] = where[1] % 64 if where else None
    call = converter(runtime, route, source)
    try:
        destination = call(source)
        sync(destination)
    except Exception as exc:  # noqa: BLE001 - a refusal is the library's answer, kept as its words
        return dict(row, outcome="refused", reason=f"{type(exc).__name__}: {first_line(exc)}")
    expected = np.asarray(values, dtype=np.float64)
    landed = extent(runtime, destination)
    try:
        # the values before the write-through probe: a route that ignored strides gives the wrong ones
        row["values_ok"] = bool(np.array_equal(to_float64(runtime, destination), expected))
        through = write_through(runtime, source, destination, sync)
    except Exception as exc:  # noqa: BLE001 - accepted, then failed when used: the library's words
        # (on an H200, JAX imported a misaligned torch CUDA view, then refused to compute on it)
        return dict(row, outcome="unusable", reason=f"{type(exc).__name__}: {first_line(exc)}")
    shared = shares_memory(where, landed)
    row["shares_memory"], row["write_through"] = shared, through
    # copied: measured; where the pointers and the write disagree, no verdict, and the row says why
    if through is None or shared is None or through == shared:
        row["copied"] = (not shared) if shared is not None else (not through if through is not None else None)
    else:
        row["reason"] = (f"the addresses ({_where(where)} and {_where(landed)}) say {'' if shared else 'no '}shared "
                         f"memory; a write through the source {'showed' if through else 'did not show'}")  # fmt: skip
    row["call_s"] = _median_call_s(call, source, sync)
    return row


def _where(found) -> str:
    space, low, high = found
    return f"{space} {low:#x}+{high - low}"


def conversion_evidence(runtime, inputs, host_inputs, job):
    """The conversion block of the checking process's record."""
    route = runtime.route
    values = host_inputs[0]
    sync = runtime.sync or (lambda _x: None)
    source = inputs[0]  # the timed calls' own source: the case's verdict is theirs
    layouts = [layout_row(runtime, route, values, layout, sync, source if layout == "contiguous" else None)
               for layout in LAYOUTS]  # fmt: skip
    warm, fresh = memcpy_s(values)
    where = extent(runtime, source)
    return {
        "route": route.name,
        "source": route.source,
        "destination": route.destination,
        "api": route.api,
        "bytes": int(np.asarray(values).nbytes),
        "source_offset_64": where[1] % 64 if where else None,
        "copied": layouts[0]["copied"],
        "layouts": layouts,
        "memcpy_s": warm,
        "memcpy_fresh_s": fresh,
        "leak": leak_probe(runtime.call, source, sync, int(np.asarray(values).nbytes)),
    }
