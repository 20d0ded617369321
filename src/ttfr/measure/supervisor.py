"""The one supervisor of ttfr's child processes: start one in a session of its own, watch it,
stop it at its timeout (or on request), kill its whole process group, reap it, and say how it
ended. Worker runs (measure/spawn.py), users' commands and their --prepare
(measure/command_run.py) and the pre-check of a --python interpreter (measure/spec.py) all go
through `supervise`; nothing else starts a process that runs while ttfr waits.

- A waiter thread sees the process exit without reaping it (`waitid` with WNOWAIT); that moment
  is its exit (`exited_ns`). Then the group is killed (stragglers: forked compile workers), and
  only then `os.wait4` reaps the leader, so its rusage (CPU time of it and its reaped children,
  such as g++) comes back and no reused pid can ever be the group that is killed.
- The group is registered with this process's sweeper (measure/sweeper.py) while it may be
  alive, so it dies with a ttfr that is killed outright (kill -9) instead of running on.
- A process killed by SIGKILL that ttfr did not send is an OOM kill only when the kernel's
  OOM-kill counter (of this cgroup, else of the machine) rose during its life.
- Ctrl-C (and SIGTERM, which the commands turn into it) kills the group before it propagates.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from dataclasses import dataclass

from ttfr.child import hostinfo
from ttfr.measure import process_tree, sweeper
from ttfr.model.journal import ProcessTree, Rusage

READER_GRACE_S = 5.0  # how long a pipe may stay open after its process group was killed


@dataclass(frozen=True)
class OomCounter:
    """A file with an `oom_kill N` line: the kernel's count of OOM-killed processes."""

    path: str
    source: str  # how reasons name it: "memory.oom_control", "memory.events", "/proc/vmstat"
    scope: str  # "in this cgroup" or "on this machine"

    def read(self) -> int | None:
        try:
            with open(self.path, "rb") as stats:
                for line in stats:
                    key, _, value = line.partition(b" ")
                    if key == b"oom_kill":
                        return int(value)
        except (OSError, ValueError):
            pass
        return None


@dataclass(frozen=True)
class OomCheck:
    """How many OOM kills the counter recorded during one worker's life."""

    kills: int
    source: str
    scope: str


def find_oom_counter(proc: str = "/proc", cgroup_fs: str = "/sys/fs/cgroup") -> OomCounter | None:
    """This process's OOM-kill counter: its cgroup's (v1 memory controller, else v2), else the machine's.

    The kernel raises the counter before it sends the SIGKILL, so it is up to date by the time the
    victim is reaped. Both cgroup counters include the cgroup's descendants; workers inherit the cgroup.
    """
    candidates = []
    try:
        with open(os.path.join(proc, "self", "cgroup")) as cgroups:
            lines = cgroups.read().splitlines()
    except OSError:
        lines = []
    for line in lines:
        _hierarchy, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        path = path.lstrip("/")
        if "memory" in controllers.split(","):
            candidates.append(OomCounter(os.path.join(cgroup_fs, "memory", path, "memory.oom_control"),
                                         "memory.oom_control", "in this cgroup"))  # fmt: skip
        elif controllers == "":
            for root in (cgroup_fs, os.path.join(cgroup_fs, "unified")):
                candidates.append(OomCounter(os.path.join(root, path, "memory.events"), "memory.events", "in this cgroup"))
    candidates.append(OomCounter(os.path.join(proc, "vmstat"), "/proc/vmstat", "on this machine"))
    return next((counter for counter in candidates if counter.read() is not None), None)


def inherited_rss_floor() -> int | None:
    """This process's peak RSS: what a child's ru_maxrss cannot go below."""
    return hostinfo.peak_rss_bytes()


def kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


@dataclass
class Ended:
    """How one supervised process group ended."""

    spawn_ns: int
    exited_ns: int | None  # when the leader exited (None: killed at the timeout)
    exit_code: int | None
    rusage: Rusage
    timed_out: bool
    oom: OomCheck | None
    # A pipe still open READER_GRACE_S after the group was killed: a process it started in a
    # session of its own (a daemon) escaped the kill and holds it; its reader is abandoned.
    escaped: bool = False
    stopped: bool = False  # killed on request (`stop`), not by the timeout
    # (on-CPU ns, run-queue wait ns) of the leader's main thread, read while it was a zombie:
    # a command's own evidence of waiting for a CPU (its other threads' and children's are gone)
    sched: tuple[int, int] | None = None
    process_tree: ProcessTree | None = None  # what `watch_tree` saw of its descendants


def supervise(argv, env: dict, cwd, timeout_s: float, output, pass_fds=(), readers=(), stop=None,
              watch_tree: bool = False) -> Ended | str:  # fmt: skip
    """Start `argv` in a session of its own with stdout and stderr to `output` (a file, or a
    pipe's write end, closed here once the child has it), wait for it at most `timeout_s`,
    kill its group, reap it; each of `readers`, (fd, function(fd)), runs in a thread from the
    spawn until its pipe closes. `pass_fds` are the child's ends of those pipes (closed here
    once it started). `stop`: a threading.Event whose setting ends the process group early
    (`stopped`). `watch_tree`: its descendants are polled while it runs (measure/process_tree.py). A str: why
    it did not start."""
    sweeper.start()  # before the clock starts: a no-op once the sweeper runs
    counter = find_oom_counter()
    oom_before = counter.read() if counter else None
    floor = inherited_rss_floor()
    exited: dict = {}  # when the process exited (seen by the waiter thread, which does not reap it)
    reaped: dict = {}  # its wait status and rusage, once reaped
    spawn_ns = time.monotonic_ns()
    try:
        proc = subprocess.Popen(
            argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=output, stderr=output,
            pass_fds=tuple(pass_fds), start_new_session=True,
        )  # fmt: skip
    except (OSError, ValueError) as exc:  # no such program or directory; a NUL byte in an argument
        for fd, _function in readers:
            os.close(fd)
        return f"could not start {argv[0]}: {getattr(exc, 'strerror', None) or exc}"
    finally:
        for fd in (*pass_fds, *([output] if isinstance(output, int) else [])):
            os.close(fd)  # the child's ends: the readers see their pipes close when the child's do
    sweeper.watch(proc.pid)  # the child leads its own group: pgid == pid
    tree = process_tree.TreeWatch(proc.pid) if watch_tree and process_tree.available() else None

    def wait_exit():
        # Exited, not reaped (WNOWAIT): the leader stays a zombie, so its pid and group id
        # cannot be reused before the group is killed below. The time is the process's exit.
        os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)
        exited["ns"] = time.monotonic_ns()
        exited["sched"] = hostinfo.thread_schedstats(proc.pid)
        if tree is not None:
            tree.stop()  # after the exit is timed: its last poll is no part of the worker's life

    threads = [threading.Thread(target=function, args=(fd,), daemon=True) for fd, function in readers]
    waiter = threading.Thread(target=wait_exit, daemon=True)
    for thread in threads:
        thread.start()
    waiter.start()
    try:
        timed_out, stopped = _wait_or_kill(proc.pid, waiter, timeout_s, stop)
    finally:
        if tree is not None:
            tree.stop()  # a timed-out or interrupted run: what it saw until then
        kill_group(proc.pid)  # stragglers holding the pipes (forked compile workers); the leader is unreaped
        if exited:
            sweeper.release(proc.pid)  # the group is dead: never kill that number later
            _pid, status, usage = os.wait4(proc.pid, 0)  # reap now; rusage covers it and its reaped children
            reaped.update(status=status, usage=usage)
        deadline = time.monotonic() + READER_GRACE_S
        for thread in threads:
            thread.join(max(deadline - time.monotonic(), 0.0))
    exit_code = os.waitstatus_to_exitcode(reaped["status"])
    proc.returncode = exit_code  # we reaped it; keep Popen from trying again
    oom_after = counter.read() if oom_before is not None else None
    return Ended(
        spawn_ns=spawn_ns,
        exited_ns=None if timed_out else exited["ns"],
        exit_code=exit_code,
        rusage=_rusage(reaped["usage"], floor),
        timed_out=timed_out,
        oom=None if oom_after is None else OomCheck(oom_after - oom_before, counter.source, counter.scope),
        escaped=any(thread.is_alive() for thread in threads),
        stopped=stopped,
        sched=None if timed_out else exited.get("sched"),
        process_tree=tree.result() if tree is not None else None,
    )


def _wait_or_kill(pid: int, waiter: threading.Thread, timeout_s: float, stop) -> tuple[bool, bool]:
    """Wait for `waiter` (the leader's exit) at most `timeout_s`, or until `stop` is set; kill the
    group of one that is still running then. (timed_out, stopped)"""
    timed_out = stopped = False
    try:
        if stop is None:
            waiter.join(timeout_s)
        else:  # wake for the stop request too (a command's first result, with --stop-at-first-result)
            deadline = time.monotonic() + timeout_s
            while waiter.is_alive() and not stop.wait(min(max(deadline - time.monotonic(), 0.0), 0.05)):
                if time.monotonic() >= deadline:
                    break
            stopped = stop.is_set() and waiter.is_alive()
            if stopped:
                kill_group(pid)
                waiter.join()
        if waiter.is_alive():
            timed_out = True
            kill_group(pid)
            waiter.join()
    except BaseException:  # Ctrl-C: leave nothing running behind us
        kill_group(pid)
        waiter.join()
        raise
    return timed_out, stopped


def _rusage(usage, floor: int | None) -> Rusage:
    """The reaped leader's rusage (it and its reaped children) as the journal records it."""
    return Rusage(
        user_s=usage.ru_utime,
        sys_s=usage.ru_stime,
        # The child's ru_maxrss starts at this process's peak (its memory, held between fork
        # and exec): at or below that floor the figure says nothing about the child.
        max_rss_bytes=usage.ru_maxrss * 1024 if floor is None or usage.ru_maxrss * 1024 > floor else None,
        rss_floor_bytes=floor,
        involuntary_switches=usage.ru_nivcsw,
    )
