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
    value = _proc_field("/proc/meminfo", "MemTotal")
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


def _cpu_pressure_some(field):
    """A field of the `some` line of /proc/pressure/cpu (PSI), as text; None without PSI."""
    try:
        with open("/proc/pressure/cpu", encoding="ascii") as fh:
            first = fh.readline().split()
    except OSError:
        return None
    for token in first[1:]:
        key, _, value = token.partition("=")
        if key == field:
            return value
    return None


def cpu_pressure():
    """`some avg10` from /proc/pressure/cpu (PSI), or None where the kernel has no PSI."""
    value = _cpu_pressure_some("avg10")
    return None if value is None else float(value)


def gpu_device_nodes():
    """NVIDIA device nodes present (a cheap 'is there a GPU at all' probe)."""
    try:
        return sorted(n for n in os.listdir("/dev") if n.startswith("nvidia") and n[6:].isdigit())
    except OSError:
        return []


def cpu_times():
    """Aggregate CPU jiffies from /proc/stat: (steal, total), or None without /proc."""
    try:
        with open("/proc/stat", encoding="ascii") as fh:
            fields = fh.readline().split()
    except OSError:
        return None
    if not fields or fields[0] != "cpu":
        return None
    values = [int(v) for v in fields[1:9]]  # user nice system idle iowait irq softirq steal
    return [values[7] if len(values) > 7 else 0, sum(values)]


def thread_schedstats():
    """(on-CPU ns, run-queue wait ns) summed over this process's threads, from
    /proc/self/task/*/schedstat; None where the kernel has no schedstat. The wait is time a
    thread was runnable but had no CPU: the direct evidence of contention."""
    on_cpu = waited = 0
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return None
    found = False
    for task in tasks:
        try:
            with open(f"/proc/self/task/{task}/schedstat", "rb") as fh:
                fields = fh.read().split()
        except OSError:
            continue  # a thread that ended meanwhile
        if len(fields) >= 2:
            on_cpu += int(fields[0])
            waited += int(fields[1])
            found = True
    return (on_cpu, waited) if found else None


def runnable_tasks():
    """(runnable, total) scheduling entities machine-wide, /proc/loadavg's 4th field; the
    runnable count includes the reader itself."""
    try:
        with open("/proc/loadavg", encoding="ascii") as fh:
            running, _, total = fh.read().split()[3].partition("/")
        return [int(running), int(total)]
    except (OSError, IndexError, ValueError):
        return None


def cpu_pressure_total_us():
    """PSI's cumulative `some` stall time of the CPU in microseconds (None without PSI)."""
    value = _cpu_pressure_some("total")
    return None if value is None else int(value)


def busy_cpu_seconds():
    """CPU time every task of the machine has used since boot (user, nice, system, irq,
    softirq; /proc/stat, in clock ticks of 10 ms), or None without /proc."""
    try:
        with open("/proc/stat", encoding="ascii") as fh:
            fields = fh.readline().split()
        tick = os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError):
        return None
    if not fields or fields[0] != "cpu":
        return None
    user, nice, system, _idle, _iowait, irq, softirq = (int(v) for v in fields[1:8])
    return (user + nice + system + irq + softirq) / tick
