"""Cache policies made real: per-case cache directories, templates, and verification.

Every run of a case uses the same absolute cache path (some runtimes embed paths in cache
entries), under the result directory's scratch area:
- cold-cache: the directory is emptied before the run;
- warm-cache / warm-process: the directory is restored from the case's template, a copy
  taken right after the template producer's run (same environment, same thread count).
Verification reads the runtime's own counters (JAX monitoring events, torch dynamo
counters) plus the number of files in the directory before and after the run.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from ttfr.measure.catalog import DIRECTORY_ENTRIES, JAX_MONITORING, TORCH_COUNTERS
from ttfr.model.policies import COLD_CACHE, WARM_CACHE

CACHE_SUBDIRS = {
    "JAX_COMPILATION_CACHE_DIR": "jax",
    "TORCHINDUCTOR_CACHE_DIR": "inductor",
    "TRITON_CACHE_DIR": "triton",
    "CUDA_CACHE_PATH": "cuda",
    "TTFR_AOT_DIR": "aot",  # executables a loop's AOT strategy serialised (sweep_mlp_aot)
    # Other runtimes' caches a user's command may use (ttfr's own workloads do not).
    "NUMBA_CACHE_DIR": "numba",
    "CUPY_CACHE_DIR": "cupy",
    "PYTORCH_KERNEL_CACHE_PATH": "torch_kernels",
}
# JAX writes nothing to its persistent cache on CPU without these (default minimum 1 s).
JAX_CACHE_SETTINGS = {
    "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
    "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": "-1",
}

LIMITATIONS = (
    "The OS page cache (shared libraries, Python files) cannot be dropped without root: "
    "'cold-process' means a fresh process with empty compilation caches, not a cold disk.",
    "Python bytecode caches (__pycache__) are warm after the first import of each module.",
    "CPU frequency scaling, turbo and other tenants of a shared machine are not controlled; "
    "rounds are interleaved so drift affects every case alike.",
    "GPU driver caches outside the directories ttfr sets (CUDA_CACHE_PATH, Triton, XLA "
    "autotune inside the JAX cache) are not cleared.",
)


class CacheDirs:
    """The cache directories of one case inside a scratch root."""

    def __init__(self, scratch: Path, case_id: str):
        self.root = scratch / "cache" / case_id
        self.template = scratch / "templates" / case_id

    def env(self) -> dict:
        env = {var: str(self.root / sub) for var, sub in CACHE_SUBDIRS.items()}
        env.update(JAX_CACHE_SETTINGS)
        return env

    def make_empty(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)
        for sub in CACHE_SUBDIRS.values():
            (self.root / sub).mkdir(parents=True)

    def has_template(self) -> bool:
        return self.template.is_dir()

    def save_template(self) -> None:
        shutil.rmtree(self.template, ignore_errors=True)
        self.template.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(self.root, self.template, symlinks=True)

    def restore_template(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)
        self.root.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(self.template, self.root, symlinks=True)

    def count_entries(self) -> int:
        total = 0
        for _dirpath, _dirnames, filenames in os.walk(self.root):
            total += len(filenames)
        return total

    def count_by_directory(self) -> dict[str, int]:
        """Files under each cache variable's directory (`jax`, `inductor`, ...)."""
        counts = {}
        for sub in CACHE_SUBDIRS.values():
            counts[sub] = sum(len(files) for _dirpath, _dirnames, files in os.walk(self.root / sub))
        return counts


def _count(table: dict, group: str, name: str) -> int:
    return int(table.get(group, {}).get(name, 0))


def hit_miss(kind: str | None, counters: dict | None) -> dict | None:
    """Persistent-cache hits and misses from a worker's raw counters of the catalog's `kind`."""
    if not counters:
        return None
    if kind == JAX_MONITORING:
        events = counters.get("events", {})
        hits = int(events.get("/jax/compilation_cache/cache_hits", 0))
        requests = int(events.get("/jax/compilation_cache/compile_requests_use_cache", 0))
        written = int(events.get("/jax/compilation_cache/cache_misses", 0))
        # An AOT loop's executables loaded from the cache directory are hits JAX never sees.
        loaded = int(counters.get("aot_loaded", 0))
        return {"hits": hits + loaded, "misses": requests - hits, "requests": requests + loaded, "entries_written": written}
    if kind == TORCH_COUNTERS:
        table = counters.get("counters", {})
        hits = _count(table, "inductor", "fxgraph_cache_hit") + _count(table, "aot_autograd", "autograd_cache_hit")
        hits += int(counters.get("aot_loaded", 0))  # AOTInductor packages a loop loaded from the cache directory
        misses = _count(table, "inductor", "fxgraph_cache_miss") + _count(table, "aot_autograd", "autograd_cache_miss")
        return {
            "hits": hits,
            "misses": misses,
            "requests": hits + misses,
            "graph_breaks": sum(table.get("graph_break", {}).values()),
            "unique_graphs": _count(table, "stats", "unique_graphs"),
        }
    return None


def verify(policy: str | None, compiles: bool, counts: dict | None, entries_before: int, entries_after: int,
           kind: str | None = None) -> dict:  # fmt: skip
    """State what the run's cache really was, and flag a policy that did not hold; `kind`: how
    the backend's cache is read (catalog: JAX_MONITORING, TORCH_COUNTERS, DIRECTORY_ENTRIES)."""
    result = {"entries_before": entries_before, "entries_after": entries_after, "flags": []}
    if compiles and kind == DIRECTORY_ENTRIES:
        return _verify_by_entries(policy, result)
    if not compiles:
        result["verdict"] = "not_applicable"
        result["note"] = "this runtime has no persistent compilation cache"
        return result
    if counts is None:
        result["verdict"] = "unverified"
        result["note"] = "the worker reported no cache counters"
        return result
    result.update(hits=counts["hits"], misses=counts["misses"])
    if policy not in (COLD_CACHE, WARM_CACHE):
        result["verdict"] = "not_applicable"
        result["note"] = "regime B: the cache state does not enter steady-state figures"
        return result
    flags = result["flags"]
    if policy == COLD_CACHE:
        if entries_before:
            flags.append("cold_cache_not_empty")
        # Written here: the directory grew, and the runtime agrees where it counts writes (JAX).
        grew = entries_after - entries_before
        wrote = min(grew, counts.get("entries_written", grew))
        if counts["hits"] and (entries_before or not wrote):
            flags.append("cold_cache_hits")  # found entries this run did not write
        elif counts["hits"]:
            # The directory started empty and this run filled it: the hits are on its own
            # entries (pyhf's JAX backend compiles identical computations more than once).
            result["self_hits"] = counts["hits"]
        if not entries_after:
            flags.append("cache_not_written")
    elif policy == WARM_CACHE:
        if not entries_before:
            flags.append("warm_cache_empty")
        if not counts["hits"]:
            flags.append("warm_cache_no_hits")
        elif counts["misses"]:
            flags.append("warm_cache_partial_hits")
    result["verdict"] = "flagged" if flags else "verified"
    return result


def _verify_by_entries(policy: str | None, result: dict) -> dict:
    """A program without counters (a user's command): its cache is what its directories hold.
    Cold cache: they were empty and it wrote into them. Warm cache: they held the template and it
    wrote nothing new (a compile it had to do would have been stored: a miss)."""
    before, after = result["entries_before"], result["entries_after"]
    flags = result["flags"]
    result["written"] = max(after - before, 0)
    if policy == COLD_CACHE:
        if before:
            flags.append("cold_cache_not_empty")
        if not after:
            flags.append("cache_not_written")
            result["note"] = ("the program wrote nothing into the cache directories ttfr set: it compiles nothing, "
                              "or keeps its cache elsewhere")  # fmt: skip
    elif policy == WARM_CACHE:
        if not before:
            flags.append("warm_cache_empty")
        elif after > before:
            flags.append("warm_cache_grew")
            result["note"] = f"the program stored {after - before} new cache file(s): it compiled what the cache lacked"
    else:
        result["verdict"] = "not_applicable"
        result["note"] = "an unmeasured run: its cache state is not a policy's"
        return result
    result["verdict"] = "flagged" if flags else "verified"
    result.setdefault("note", "verified by the files in the cache directories (a program has no counters ttfr reads)")
    return result
