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
from typing import NamedTuple

from ttfr.measure.catalog import DIRECTORY_ENTRIES, JAX_MONITORING, TORCH_COUNTERS
from ttfr.model.base import UNSET
from ttfr.model.run_figures import CacheCheck, HitMiss
from ttfr.model.policies import COLD_CACHE, WARM_CACHE
from ttfr.model.record import JAX_CACHE_HITS, JAX_CACHE_MISSES, JAX_CACHE_REQUESTS, RuntimeCounters

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
# The driver's and torch's kernel caches (CUDA_CACHE_PATH, PYTORCH_KERNEL_CACHE_PATH): an eager GPU run
# that writes there compiled kernels at load time.
KERNEL_CACHE_SUBDIRS = ("cuda", "torch_kernels")
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


class Survey(NamedTuple):
    files: int
    bytes: int
    fingerprint: tuple


class CacheDirs:
    """The cache directories of one case inside a scratch root."""

    def __init__(self, scratch: Path, case_id: str):
        self.root = scratch / "cache" / case_id
        self.template = scratch / "templates" / case_id
        self.artifacts = scratch / "artifacts" / case_id  # precompiled artifacts: outside the directory runs empty

    def artifact(self, mechanism: str) -> Path:
        """The file the case's artifact of `mechanism` is written to and loaded from."""
        return self.artifacts / f"{mechanism}.artifact"

    def ready_artifact(self, mechanism: str) -> None:
        """Its directory made, and no artifact of an earlier try (nor a file it kept beside it, AOTInductor's
        package) left to be mistaken for a new one."""
        self.artifacts.mkdir(parents=True, exist_ok=True)
        for left in self.artifacts.glob(f"{mechanism}.artifact*"):
            left.unlink(missing_ok=True)

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

    def survey(self) -> Survey:
        """Its files, their bytes, and every file's path, size and modification time, in one walk (the
        fingerprint is equal before and after a group that changed nothing in the directory)."""
        found = []
        for dirpath, _dirnames, filenames in os.walk(self.root):
            for name in filenames:
                path = os.path.join(dirpath, name)
                try:
                    info = os.lstat(path)
                except OSError:
                    continue  # removed meanwhile (a cache's temporary file)
                found.append((os.path.relpath(path, self.root), info.st_size, info.st_mtime_ns))
        return Survey(files=len(found), bytes=sum(size for _path, size, _mtime in found), fingerprint=tuple(sorted(found)))

    def unreadable(self) -> list[str]:
        """Files under the directory that cannot be read to their end (paths relative to it): after many
        processes wrote one cache at once, every entry must still be readable."""
        bad = []
        for dirpath, _dirnames, filenames in os.walk(self.root):
            for name in filenames:
                path = os.path.join(dirpath, name)
                try:
                    with open(path, "rb") as entry:
                        while entry.read(1 << 20):
                            pass
                except OSError as exc:
                    bad.append(f"{os.path.relpath(path, self.root)}: {exc.strerror or exc}")
        return sorted(bad)

    def count_by_directory(self) -> dict[str, int]:
        """Files under each cache variable's directory (`jax`, `inductor`, ...)."""
        counts = {}
        for sub in CACHE_SUBDIRS.values():
            counts[sub] = sum(len(files) for _dirpath, _dirnames, files in os.walk(self.root / sub))
        return counts


def _count(table: dict, group: str, name: str) -> int:
    return int(table.get(group, {}).get(name, 0))


def hit_miss(kind: str | None, counters: RuntimeCounters | None) -> HitMiss | None:
    """Persistent-cache hits and misses from a worker's counters of the catalog's `kind`."""
    if not counters:
        return None
    loaded = counters.aot_loaded or 0  # an AOT loop's executables loaded from its cache directory: hits the runtime never sees
    if kind == JAX_MONITORING:
        events = counters.events or {}
        hits = int(events.get(JAX_CACHE_HITS, 0))
        requests = int(events.get(JAX_CACHE_REQUESTS, 0))
        written = int(events.get(JAX_CACHE_MISSES, 0))
        return HitMiss(hits=hits + loaded, misses=requests - hits, requests=requests + loaded, entries_written=written)
    if kind == TORCH_COUNTERS:
        table = counters.counters or {}
        hits = _count(table, "inductor", "fxgraph_cache_hit") + _count(table, "aot_autograd", "autograd_cache_hit")
        hits += loaded  # AOTInductor packages a loop loaded from the cache directory
        misses = _count(table, "inductor", "fxgraph_cache_miss") + _count(table, "aot_autograd", "autograd_cache_miss")
        return HitMiss(
            hits=hits,
            misses=misses,
            requests=hits + misses,
            graph_breaks=int(sum(table.get("graph_break", {}).values())),
            unique_graphs=_count(table, "stats", "unique_graphs"),
        )
    return None


def verify(policy: str | None, compiles: bool, counts: HitMiss | None, entries_before: int, entries_after: int,
           kind: str | None = None, by_directory: dict | None = None, uncached: bool = False) -> CacheCheck:  # fmt: skip
    """State what the run's cache really was, and flag a policy that did not hold; `kind`: how
    the backend's cache is read (catalog: JAX_MONITORING, TORCH_COUNTERS, DIRECTORY_ENTRIES).
    `uncached`: a program (DIRECTORY_ENTRIES) that wrote nothing into its cache directories in
    any of its runs: the policies do not apply to it (not a flag in every run of `python -c
    "import json"`); its note says what that means if it does compile."""
    base = {"entries_before": entries_before, "entries_after": entries_after}
    if by_directory and (kind == DIRECTORY_ENTRIES or not compiles):
        base["by_directory"] = by_directory
    if kind == DIRECTORY_ENTRIES and uncached:
        return CacheCheck(**base, flags=[], verdict="not_applicable", written=0, note=UNCACHED_NOTE)
    if counts:
        base["counters"] = counts
    if compiles and kind == DIRECTORY_ENTRIES:
        return CacheCheck(**base, **_by_entries(policy, entries_before, entries_after))
    if not compiles:
        # An eager GPU runtime has no cache of its own, but the CUDA driver JIT-compiles any kernel shipped
        # only as PTX for this GPU and keeps it in CUDA_CACHE_PATH (ttfr's per-case directory): say so.
        jitted = sum(max(after - before, 0) for sub, (before, after) in (by_directory or {}).items()
                     if sub in KERNEL_CACHE_SUBDIRS)  # fmt: skip
        if jitted and policy in (COLD_CACHE, WARM_CACHE):
            return CacheCheck(**base, flags=["kernel_cache_grew"], verdict="not_applicable", written=jitted,
                              note=f"the CUDA driver stored {jitted} JIT-compiled kernel file(s) in this run")  # fmt: skip
        return CacheCheck(**base, flags=[], verdict="not_applicable", note="this runtime has no persistent compilation cache")
    if counts is None:
        return CacheCheck(**base, flags=[], verdict="unverified", note="the worker reported no cache counters")
    base.update(hits=counts.hits, misses=counts.misses)
    if policy not in (COLD_CACHE, WARM_CACHE):
        return CacheCheck(**base, flags=[], verdict="not_applicable",
                          note="regime B: the cache state does not enter steady-state figures")  # fmt: skip
    flags = []
    if policy == COLD_CACHE:
        if entries_before:
            flags.append("cold_cache_not_empty")
        # Written here: the directory grew, and the runtime agrees where it counts writes (JAX).
        grew = entries_after - entries_before
        wrote = min(grew, grew if counts.entries_written is UNSET else counts.entries_written)
        if counts.hits and (entries_before or not wrote):
            flags.append("cold_cache_hits")  # found entries this run did not write
        elif counts.hits:
            # The directory started empty and this run filled it: the hits are on its own
            # entries (pyhf's JAX backend compiles identical computations more than once).
            base["self_hits"] = counts.hits
        if not entries_after:
            flags.append("cache_not_written")
    elif policy == WARM_CACHE:
        if not entries_before:
            flags.append("warm_cache_empty")
        if not counts.hits:
            flags.append("warm_cache_no_hits")
        elif counts.misses:
            flags.append("warm_cache_partial_hits")
    return CacheCheck(**base, flags=flags, verdict="flagged" if flags else "verified")


UNCACHED_NOTE = (
    "the program wrote nothing into the cache directories ttfr set, in any run: it compiles nothing "
    "there, so the cache policies do not apply (a program that does compile keeps its cache elsewhere)"
)


def _by_entries(policy: str | None, before: int, after: int) -> dict:
    """A program without counters (a user's command): its cache is what its directories hold.
    Cold cache: they were empty and it wrote into them. Warm cache: they held the template and it
    wrote nothing new (a compile it had to do would have been stored: a miss)."""
    flags = []
    found = {"written": max(after - before, 0)}
    if policy == COLD_CACHE:
        if before:
            flags.append("cold_cache_not_empty")
        if not after:
            flags.append("cache_not_written")
            found["note"] = ("the program wrote nothing into the cache directories ttfr set: it compiles nothing, "
                             "or keeps its cache elsewhere")  # fmt: skip
    elif policy == WARM_CACHE:
        if not before:
            flags.append("warm_cache_empty")
        elif after > before:
            flags.append("warm_cache_grew")
            found["note"] = f"the program stored {after - before} new cache file(s): it compiled what the cache lacked"
    else:
        return {**found, "flags": flags, "verdict": "not_applicable",
                "note": "an unmeasured run: its cache state is not a policy's"}  # fmt: skip
    found.setdefault("note", "verified by the files in the cache directories (a program has no counters ttfr reads)")
    return {**found, "flags": flags, "verdict": "flagged" if flags else "verified"}


def make_run_directory(parent: Path) -> Path:
    """A fresh `ttfr-*` directory of this run's under the one the user named for its groups' caches
    (--concurrency-cache-dir); OSError where none can be made there."""
    import tempfile

    return Path(tempfile.mkdtemp(prefix="ttfr-", dir=parent))


def remove_run_directory(root: Path) -> None:
    shutil.rmtree(root, ignore_errors=True)
