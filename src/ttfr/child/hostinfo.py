"""Facts about the host read from /proc and the OS (standard library only).

Shared by the worker (device kind of CPU backends) and the manifest.
"""

import os


def _proc_field(path, key):
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                name, sep, value = line.partition(":")
                if sep and name.strip() == key:
                    return value.strip()
    except OSError:
        return None
    return None


def cpu_model():
    """CPU model name, e.g. 'AMD EPYC 7B13' (None when /proc/cpuinfo has none)."""
    return _proc_field("/proc/cpuinfo", "model name")


def memory_total_bytes():
    return _meminfo_bytes("MemTotal")


def memory_available_bytes():
    """What the kernel estimates can be allocated without swapping (MemAvailable), or None."""
    return _meminfo_bytes("MemAvailable")


def _meminfo_bytes(key):
    value = _proc_field("/proc/meminfo", key)
    if not value:
        return None
    number, _, unit = value.partition(" ")
    return int(number) * (1024 if unit.strip().lower() == "kb" else 1)


def usable_cpus():
    """CPUs this process may run on (affinity), which can be fewer than os.cpu_count()."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count()


def load_average():
    try:
        return list(os.getloadavg())
    except OSError:
        return None


def cpu_pressure():
    """PSI's CPU `some` line (/proc/pressure/cpu): `avg10` (% of the last 10 s some task
    waited for a CPU) and `total_us` (cumulative stall, microseconds); None without PSI."""
    try:
        with open("/proc/pressure/cpu", encoding="ascii") as fh:
            first = fh.readline().split()
        fields = dict(token.partition("=")[::2] for token in first[1:])
        return {"avg10": float(fields["avg10"]), "total_us": int(fields["total"])}
    except (OSError, KeyError, ValueError):
        return None


def gpu_device_nodes():
    """NVIDIA device nodes present (a cheap 'is there a GPU at all' probe)."""
    try:
        return sorted(n for n in os.listdir("/dev") if n.startswith("nvidia") and n[6:].isdigit())
    except OSError:
        return []


def cpu_times():
    """The machine's CPU time from /proc/stat's first line, in clock ticks: `steal`, `total`
    and `busy` (user, nice, system, irq, softirq: what tasks used), and `tick_s`; None
    without /proc."""
    try:
        with open("/proc/stat", encoding="ascii") as fh:
            fields = fh.readline().split()
        tick_s = 1 / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError):
        return None
    if not fields or fields[0] != "cpu":
        return None
    values = [int(v) for v in fields[1:9]] + [0] * 8  # user nice system idle iowait irq softirq steal
    user, nice, system, _idle, _iowait, irq, softirq, steal = values[:8]
    return {"steal": steal, "total": sum(values[:8]), "busy": user + nice + system + irq + softirq, "tick_s": tick_s}


def busy_cpu_seconds():
    """CPU seconds every task of the machine has used since boot (10 ms resolution)."""
    times = cpu_times()
    return None if times is None else times["busy"] * times["tick_s"]


def thread_schedstats(pid="self"):
    """(on-CPU ns, run-queue wait ns) summed over a process's threads (this one's by default),
    from /proc/PID/task/*/schedstat; None where the kernel has no schedstat. The wait is time a
    thread was runnable but had no CPU: the direct evidence of contention. An exited but unreaped
    process (a zombie) still has its leader thread's."""
    on_cpu = waited = 0
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    found = False
    for task in tasks:
        reading = _schedstat(f"/proc/{pid}/task/{task}/schedstat")
        if reading is not None:  # else a thread that ended meanwhile
            on_cpu += reading[0]
            waited += reading[1]
            found = True
    return (on_cpu, waited) if found else None


def task_schedstat(tid: int):
    """(on-CPU ns, run-queue wait ns) of one thread of this process (the main thread's id is the
    process's), or None: what it did not spend on a CPU or waiting for one, it spent blocked."""
    return _schedstat(f"/proc/self/task/{tid}/schedstat")


def _schedstat(path: str):
    """A thread's schedstat: (on-CPU ns, run-queue wait ns), or None where it cannot be read."""
    try:
        with open(path, "rb") as fh:
            fields = fh.read().split()
        return int(fields[0]), int(fields[1])
    except (OSError, ValueError, IndexError):
        return None


def runnable_tasks():
    """(runnable, total) scheduling entities machine-wide, /proc/loadavg's 4th field; the
    runnable count includes the reader itself."""
    try:
        with open("/proc/loadavg", encoding="ascii") as fh:
            running, _, total = fh.read().split()[3].partition("/")
        return [int(running), int(total)]
    except (OSError, IndexError, ValueError):
        return None


def threadpools():
    """The BLAS/OpenMP libraries this process has loaded and their thread counts
    (threadpoolctl, imported only when asked); None where threadpoolctl is not installed."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return None
    keep = ("user_api", "internal_api", "num_threads", "version", "threading_layer", "prefix")
    try:
        return [{k: pool.get(k) for k in keep} for pool in threadpool_info()]
    except Exception:  # a library threadpoolctl cannot introspect must not fail a run
        return None


def process_age_s() -> float | None:
    """Seconds since this process started (its start time in /proc/self/stat against
    /proc/uptime, both since boot; 10 ms resolution); None without /proc."""
    try:
        with open("/proc/self/stat", "rb") as stat:
            fields = stat.read().rpartition(b")")[2].split()
        with open("/proc/uptime", "rb") as uptime:
            up = float(uptime.read().split()[0])
        return max(0.0, up - int(fields[19]) / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return None


def peak_rss_bytes() -> int | None:
    """This process's peak resident memory since its exec (VmHWM of /proc/self/status);
    None where there is no such file. Unlike ru_maxrss, it does not start at the memory the
    process held as its parent's fork before the exec."""
    try:
        with open("/proc/self/status", "rb") as status:
            for line in status:
                if line.startswith(b"VmHWM:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None
