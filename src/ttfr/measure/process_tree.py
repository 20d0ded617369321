"""The worker's process tree, watched from outside (issue 39, item 3): every process it started, by name, and when
it was seen running. A witness to compiling that does not rest on the runtime's own counters: a compiler the
runtime runs as a child (g++ for Inductor's C++ kernels and its vector-ISA probes, ptxas and nvcc on a GPU) is a
process of the tree whatever the runtime says of its caches.

The supervisor's thread polls while the worker runs (`TreeWatch`): each poll walks the tree from the worker down
through every thread's `/proc/<pid>/task/<tid>/children` and reads each descendant's `/proc/<pid>/stat` (its name,
which an exec changes, and its start time, so that a reused pid is a new process). Nothing runs inside the
worker, so its figures pay only for the parent's poll on another core: the thread's own CPU time is recorded
beside what it saw (about 0.4 ms a poll, every POLL_S, for a torch worker with a compile pool). A process that
lived less than one poll interval can be missed: the counts are a lower bound, and a process's seconds are from
the first poll that saw it to the last.
"""

from __future__ import annotations

import os
import re
import threading
import time

from ttfr.model.journal import ProcessTree, SeenProcess

POLL_S = 0.05  # a C++ compile is 0.2 s or more; a ptxas run tens of ms (a short one can be missed)
KEEP = 200  # processes kept a run; beyond: counted in `left_out`

# Compiler drivers and the programs they run, by the name the kernel gives a process (its first 15 bytes).
COMPILER_DRIVERS = frozenset({"g++", "gcc", "c++", "cc", "clang", "clang++", "nvcc", "ptxas", "icx", "icpx"})
COMPILER_PARTS = frozenset({"cc1", "cc1plus", "as", "collect2", "ld", "ld.gold", "ld.lld", "cicc", "nvlink",
                            "fatbinary", "cudafe++", "lto-wrapper", "lto1"})  # fmt: skip


_VERSION = re.compile(r"-\d+(\.\d+)*$")  # g++-12, clang-17
# a toolchain's prefix (a cross compiler, conda's x86_64-conda-linux-gnu-c++), often all the kernel keeps of its name
_TOOLCHAIN = re.compile(r"^(x86_64|aarch64|arm|armv7l|powerpc64le|ppc64le|riscv64|s390x|i[3-6]86)-")


def is_compiler(name: str) -> bool:
    """Whether a process of this name compiles or links (`g++-12`, `x86_64-linux-gnu-g++`, cut by the kernel to
    `x86_64-linux-gn`, and other toolchains' prefixed names included)."""
    base = _VERSION.sub("", name)
    tail = base.rsplit("-", 1)[-1]
    return base in COMPILER_DRIVERS or base in COMPILER_PARTS or tail in COMPILER_DRIVERS or bool(_TOOLCHAIN.match(name))


def compiler_runs(tree: ProcessTree | None, start_ns: int, end_ns: int) -> tuple[dict[str, int], float] | None:
    """The compiler runs the tree showed between two monotonic readings (a process seen at any moment of the
    window counts): each by the name of its outermost compiler process and how many times (what a driver runs,
    cc1plus or ld under g++, ptxas through a shell under nvcc, is the same run), and the seconds they were seen
    running. None: the tree was not watched."""
    if tree is None:
        return None
    by_pid = {p.pid: p for p in tree.processes}
    runs: dict[str, int] = {}
    seconds = 0.0
    for seen in tree.processes:
        if not is_compiler(seen.name) or _under_a_compiler(seen, by_pid):
            continue
        if seen.last_ns < start_ns or seen.first_ns > end_ns:
            continue
        runs[seen.name] = runs.get(seen.name, 0) + 1
        seconds += (min(seen.last_ns, end_ns) - max(seen.first_ns, start_ns)) / 1e9
    return runs, seconds


def _under_a_compiler(seen: SeenProcess, by_pid: dict[int, SeenProcess]) -> bool:
    """Whether any ancestor of the process is a compiler (it is then part of that one's run): within the tree, then
    the name the topmost one gives its parent (the measured process itself where that is a compiler, a user's
    `--command "g++ x.cpp"`; or a parent left out beyond KEEP)."""
    hops, node = 0, seen
    while hops <= len(by_pid):
        parent = by_pid.get(node.ppid)
        if parent is None:
            return is_compiler(node.parent)
        if is_compiler(parent.name):
            return True
        hops, node = hops + 1, parent
    return False


def _stat(pid: int) -> tuple[str, int, str] | None:
    """(name, parent pid, start time in ticks) from /proc/<pid>/stat; None: gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            raw = handle.read()
    except OSError:
        return None
    close = raw.rfind(b")")
    name = raw[raw.find(b"(") + 1 : close].decode("utf-8", "replace")
    rest = raw[close + 2 :].split()
    return name, int(rest[1]), rest[19].decode()


def _children(pid: int) -> list[int]:
    """The children every thread of `pid` started (a thread's fork is its own child, not the process's)."""
    found: list[int] = []
    try:
        threads = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for tid in threads:
        try:
            with open(f"/proc/{pid}/task/{tid}/children", "rb") as handle:
                found.extend(int(child) for child in handle.read().split())
        except (OSError, ValueError):
            continue
    return found


def available() -> bool:
    """Whether this kernel lists a thread's children (CONFIG_PROC_CHILDREN)."""
    return os.path.exists(f"/proc/self/task/{os.getpid()}/children")


class TreeWatch:
    """Polls the tree under `pid` from a thread of its own until `stop()`; `result()` is what it saw."""

    def __init__(self, pid: int, poll_s: float = POLL_S):
        self.pid, self.poll_s = pid, poll_s
        self._seen: dict[tuple[int, str], list] = {}  # (pid, start ticks) -> [name, parent pid, first ns, last ns]
        self._root: str | None = None  # the measured process's own name (the latest poll's: an exec renames it)
        self._polls = 0
        self._cpu_s = 0.0
        self._done = threading.Event()
        self.failed: str | None = None  # why it stopped watching before the process ended
        self._thread: threading.Thread | None = None
        started = time.thread_time()
        try:  # the first poll now, the others every poll_s from the thread; never an exception to the supervisor
            self._poll()
            self._cpu_s = time.thread_time() - started
            self._thread = threading.Thread(target=self._run, daemon=True)
            self._thread.start()
        except Exception as exc:  # noqa: BLE001 - said in `failed`: the run is then not watched
            self.failed = f"{type(exc).__name__}: {exc}"

    def _run(self) -> None:
        started = time.thread_time()
        try:
            while not self._done.wait(self.poll_s):
                self._poll()
        except Exception as exc:  # noqa: BLE001 - a watch that stopped looking is no witness: said, never silent
            self.failed = f"{type(exc).__name__}: {exc}"
        finally:
            self._cpu_s += time.thread_time() - started

    def _poll(self) -> None:
        now = time.monotonic_ns()
        root = _stat(self.pid)
        self._root = root[0] if root else self._root
        frontier = [self.pid]
        while frontier:
            for child in _children(frontier.pop()):
                stat = _stat(child)
                if stat is None:
                    continue
                name, parent, ticks = stat
                entry = self._seen.setdefault((child, ticks), [name, parent, now, now])
                entry[0], entry[3] = name, now  # an exec renames it: the latest name is what it ran
                frontier.append(child)
        self._polls += 1

    def stop(self) -> None:
        self._done.set()
        if self._thread is not None:
            self._thread.join()

    def result(self) -> ProcessTree | None:
        """What it saw; None where it stopped watching early (the run then counts as not watched)."""
        if self.failed:
            return None
        names = {pid: entry[0] for (pid, _ticks), entry in self._seen.items()}
        # its children's parent: `worker`, or the measured process's name where it is a compiler itself (a command)
        root = self._root if self._root and is_compiler(self._root) else "worker"
        kept = sorted(((pid, *entry) for (pid, _ticks), entry in self._seen.items()),
                      key=lambda e: (not is_compiler(e[1]), e[3]))  # fmt: skip
        processes = [SeenProcess(name=name, parent=names.get(parent, root), first_ns=first, last_ns=last,
                                 pid=pid, ppid=parent)
                     for pid, name, parent, first, last in kept[:KEEP]]  # fmt: skip
        processes.sort(key=lambda p: p.first_ns)
        return ProcessTree(poll_s=self.poll_s, polls=self._polls, watch_cpu_s=self._cpu_s, processes=processes,
                           left_out=max(len(kept) - KEEP, 0))  # fmt: skip
