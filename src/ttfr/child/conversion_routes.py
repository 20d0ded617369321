"""The conversion routes (issue 28): every way a user moves an array between NumPy, PyTorch and
JAX, as data. Standard library only: the catalog reads it in the parent, the worker's adapter in
its timed import phase (which libraries a route imports is its import cost).

A route's workload is named after it (`numpy_to_torch_from_numpy`); its worker module is
`convert`, told the route through the job's `strategy`.
"""

from typing import NamedTuple


class Route(NamedTuple):
    name: str
    source: str  # numpy | torch | jax | torch_pinned | torch_cuda | jax_gpu
    destination: str  # the same kinds
    api: str  # what the user writes, as the report shows it
    device: str = "cpu"  # gpu: a host<->device route (the interop_gpu backend)
    via: str = ""  # a round trip's other runtime (source and destination are the same kind)

    @property
    def libraries(self) -> tuple[str, ...]:
        """The runtimes the route imports (NumPy always)."""
        kinds = (self.source, self.destination, self.via)
        return ("numpy",) + tuple(lib for lib in ("torch", "jax") if any(k.startswith(lib) for k in kinds))


ROUTES = {
    r.name: r
    for r in (
        Route("numpy_copy", "numpy", "numpy", "np.array(a, copy=True)"),  # the route that always copies
        Route("numpy_to_torch_from_numpy", "numpy", "torch", "torch.from_numpy(a)"),
        Route("numpy_to_torch_as_tensor", "numpy", "torch", "torch.as_tensor(a)"),
        Route("numpy_to_torch_tensor", "numpy", "torch", "torch.tensor(a)"),
        Route("numpy_to_torch_dlpack", "numpy", "torch", "torch.from_dlpack(a)"),
        Route("torch_to_numpy_numpy", "torch", "numpy", "t.numpy()"),
        Route("torch_to_numpy_asarray", "torch", "numpy", "np.asarray(t)"),
        Route("torch_to_numpy_dlpack", "torch", "numpy", "np.from_dlpack(t)"),
        Route("numpy_to_jax_asarray", "numpy", "jax", "jnp.asarray(a)"),
        Route("numpy_to_jax_device_put", "numpy", "jax", "jax.device_put(a)"),
        Route("numpy_to_jax_dlpack", "numpy", "jax", "jnp.from_dlpack(a)"),
        Route("jax_to_numpy_asarray", "jax", "numpy", "np.asarray(x)"),
        Route("jax_to_numpy_dlpack", "jax", "numpy", "np.from_dlpack(x)"),
        Route("jax_to_numpy_device_get", "jax", "numpy", "jax.device_get(x)"),
        Route("torch_to_jax_dlpack", "torch", "jax", "jnp.from_dlpack(t)"),
        Route("jax_to_torch_dlpack", "jax", "torch", "torch.from_dlpack(x)"),
        Route("numpy_torch_numpy", "numpy", "numpy", "torch.from_numpy(a).numpy()", via="torch"),
        Route("numpy_jax_numpy", "numpy", "numpy", "np.asarray(jnp.asarray(a))", via="jax"),
        Route("torch_jax_torch", "torch", "torch", "torch.from_dlpack(jnp.from_dlpack(t))", via="jax"),
        # host <-> device (a GPU backend): pageable and pinned host memory, both directions
        Route("numpy_to_torch_cuda", "numpy", "torch_cuda", "torch.from_numpy(a).to('cuda')", device="gpu"),
        Route("torch_pinned_to_cuda", "torch_pinned", "torch_cuda", "t.to('cuda', non_blocking=True)", device="gpu"),
        Route("torch_cuda_to_numpy", "torch_cuda", "numpy", "t.cpu().numpy()", device="gpu"),
        Route("torch_cuda_to_pinned", "torch_cuda", "torch_pinned", "pinned.copy_(t, non_blocking=True)", device="gpu"),
        Route("numpy_to_jax_gpu", "numpy", "jax_gpu", "jax.device_put(a, gpu)", device="gpu"),
        Route("jax_gpu_to_numpy", "jax_gpu", "numpy", "np.asarray(x)", device="gpu"),
        Route("torch_cuda_to_jax_gpu_dlpack", "torch_cuda", "jax_gpu", "jnp.from_dlpack(t)", device="gpu"),
        # pinned host memory (it needs CUDA) into JAX's DLPack import, which once refused it
        Route("torch_pinned_to_jax_dlpack", "torch_pinned", "jax", "jnp.from_dlpack(t)", device="gpu"),
    )
}

# How a source array is laid out for the layout table (the timed calls use `contiguous`).
LAYOUTS = ("contiguous", "transposed", "misaligned", "readonly")
LAYOUT_MEANING = {
    "contiguous": "C-contiguous, as the library allocated it",
    "transposed": "a transposed view (non-contiguous strides)",
    "misaligned": "a view one element into its buffer (not 64-byte aligned)",
    "readonly": "a read-only array (NumPy's writeable=False)",
}
COLUMNS = 64  # a source is (elements // 64) x 64: a transposed view needs two dimensions
