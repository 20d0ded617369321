"""Loop workloads in the worker: the timed first call is the whole loop (standard library only).

A loop workload's `build_loop` returns a `Loop` (ttfr/child/contracts.py) for the job's
strategy: labelled iterations, the names of its own compiled functions, and the compile
count its strategy expects.

The first run times every iteration and reads the runtime's compile counters around each
(the timeline: which iteration compiled, and how long it took). After it, the driver stands
in for the runtime: `call()` runs the whole loop again (the second call and the warm
samples), synchronously, and everything else is the runtime's.

Every iteration's result is finished inside its timed span: host data (NumPy arrays, Python
numbers) is; anything else (a device array a strategy handed back) waits on the runtime's
barrier (`runtime.sync`), so an asynchronous runtime's unfinished work is never left to the
next iteration. A loop that moves its data (`take_transfer_s()`: the seconds its host<->device
copies took since it was last asked, each copy waited for) has them recorded per entry as
`transfer_s`; the rest of the entry's `s` is compute.
"""

import sys
import time

_clock = time.perf_counter_ns
_COUNTS = ("compiles", "persistent_hits", "traces", "compile_s")
_HOST_SCALARS = (int, float, complex, bool, str, bytes, type(None))


def on_host(result) -> bool:
    """Is `result` host data (NumPy arrays and scalars, Python numbers, and lists, tuples and
    dicts of them), finished by its nature?"""
    if isinstance(result, _HOST_SCALARS):
        return True
    numpy = sys.modules.get("numpy")  # a result can only be a NumPy array once NumPy is imported
    if numpy is not None and isinstance(result, (numpy.ndarray, numpy.generic)):
        return True
    if isinstance(result, (list, tuple)):
        return all(on_host(item) for item in result)
    if isinstance(result, dict):
        return all(on_host(item) for item in result.values())
    return False


class LoopDriver:
    def __init__(self, runtime, loop):
        self.runtime, self.loop = runtime, loop
        self.call, self.args, self.sync = self.run_again, (), None
        self.framework = runtime.framework

    def _counts(self):
        counts = getattr(self.runtime, "compile_counts", None)
        return counts(self.loop.functions) if counts is not None else None

    def _finished(self, result):
        """`result`, finished: host data is; anything else waits on the runtime's barrier."""
        if not on_host(result):
            sync = getattr(self.runtime, "sync", None)
            if sync is not None:
                sync(result)
        return result

    def _transfer_s(self):
        """The loop's host<->device copy seconds since it was last asked (None: it does not say)."""
        take = getattr(self.loop, "take_transfer_s", None)
        return take() if take is not None else None

    def _timed(self, label, work):
        before = self._counts()
        start = _clock()
        result = self._finished(work())
        seconds = (_clock() - start) / 1e9
        after = self._counts()
        entry = {"label": label, "s": seconds, "transfer_s": self._transfer_s()}
        for key in _COUNTS:
            have = before is not None and after is not None and before.get(key) is not None
            entry[key] = after[key] - before[key] if have else None
        return entry, result

    def first(self):
        """Run the loop once, timing each iteration: (output, the record's `loop` block)."""
        loop = self.loop
        start = self._counts()
        self._transfer_s()  # nothing the loop's construction copied counts in its first entry
        timeline, results = [], []
        prepare = getattr(loop, "prepare", None)
        if prepare is not None:
            entry, _ = self._timed(loop.prepare_label, prepare)
            timeline.append(dict(entry, ahead=True))
        for index, label in enumerate(loop.labels):
            entry, result = self._timed(label, lambda index=index: loop.iteration(index))
            timeline.append(entry)
            results.append(result)
        output = loop.output(results)
        end = self._counts()
        totals = {key: None for key in _COUNTS}
        if start is not None and end is not None:
            totals = {key: end[key] - start[key] if start.get(key) is not None else None for key in _COUNTS}
        transfers = [entry["transfer_s"] for entry in timeline if entry["transfer_s"] is not None]
        block = {
            "iterations": timeline,
            "loop_s": sum(entry["s"] for entry in timeline),
            "transfer_s": sum(transfers) if transfers else None,
            "expected_compiles": loop.expected_compiles,
            "loaded": loop.loaded,
            **totals,
        }
        return output, block

    def run_again(self):
        loop = self.loop
        output = loop.output([self._finished(loop.iteration(index)) for index in range(len(loop.labels))])
        self._transfer_s()  # read by no one: the copies of runs after the first are not figures
        return output

    def to_host(self, output):
        return list(output)

    def __getattr__(self, name):  # everything else is the runtime's (jax, torch, variant, memory, ...)
        if name == "runtime":
            raise AttributeError(name)
        return getattr(self.runtime, name)

    def cache_counters(self):
        counters = self.runtime.cache_counters()
        if counters is not None and self.loop.loaded:
            counters = dict(counters, aot_loaded=self.loop.loaded)  # executables found in the cache directory
        return counters
