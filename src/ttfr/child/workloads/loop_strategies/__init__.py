"""The loop strategies, per framework, over a loop described as segments (segments.py).

Strategies (ttfr.measure.catalog.LOOP_STRATEGIES), built by name in builders.py:
- naive: one jitted / compiled step called with whatever shapes come (a compile per new shape);
- bucketed: width and batch padded to powers of two, the batch masked (a compile per bucket);
- vmapped: independent segments padded to the largest shape, stacked, and trained in one
  batched call per step (one compile; a loop whose segments carry state cannot be batched);
- dynamic: one program for every shape (torch.compile(dynamic=True); JAX: jax.export with a
  symbolic width and batch, traced and lowered once, compiled by XLA per concrete shape);
- aot: every needed shape compiled before the loop (`.lower().compile()`), serialised into
  the case's AOT directory (TTFR_AOT_DIR, one of ttfr's cache directories, so the cache
  policies apply; ttfr.child.workloads.aot_store) and, where an earlier run left them there,
  loaded instead of compiled.

Modules: segments.py (the loop's description and its NumPy reference), segment_loop.py (what
every strategy shares: the timed copies), batched.py (vmapped, for JAX and torch alike),
numpy_loops.py, jax_loops.py and torch_loops.py (each framework's strategies), builders.py
(a strategy by framework and name).

Every strategy moves its data to the device inside the loop, as a loop loads its data, and
its losses back to the host at each iteration's end; it times both copies (`take_transfer_s`),
each waited for: the inputs put on the device are waited on before the compute starts, and the
compute is waited on (the runtime's barrier) before the losses are copied back, so neither is
charged to the other.
"""
