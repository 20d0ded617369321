"""The job one worker process runs: typed fields, written as `key=value` words on the
worker's command line and parsed back in the child.

Standard library only and no `dataclasses` (it imports `inspect`, a few ms charged to the
measured start): the worker parses its job after its first timing mark.
"""

COLD, WARM = "cold", "warm"  # a cold-start run, or a warm-regime process (samples, check)
ARTIFACT_MAKE, ARTIFACT_LOAD = "make", "load"  # a precompiled policy's process: makes its artifact, or loads it

_BOOL_WORDS = {"1": True, "0": False}

# name, type, default (None: required)
FIELDS = (
    ("mode", str, COLD),
    ("adapter", str, None),  # module under ttfr.child.backends
    ("device", str, "cpu"),
    ("compile", bool, False),  # the backend compiles (torch.compile rather than eager)
    ("variant", str, ""),  # engine option of the adapter (pyhf's tensor backend)
    ("workload", str, None),  # module under ttfr.child.workloads
    ("strategy", str, ""),  # a loop workload's strategy (naive, bucketed, vmapped, dynamic, aot)
    ("size", int, None),
    ("dtype", str, None),
    ("seed", int, 0),
    ("samples", int, 0),  # warm samples (0: none)
    ("min_sample_s", float, 0.0),
    ("max_warmup_s", float, 0.0),
    ("check", bool, False),  # run the case's result check (the gate)
    # --explain's diagnostic process (unmeasured, started with `-X importtime`): each phase's start is
    # marked on stderr among the import lines, and the imported packages' distributions are recorded
    ("explain", bool, False),
    # Run CPU computations inline rather than on the runtime's dispatch thread (JAX:
    # jax_cpu_enable_async_dispatch=False); adapters of synchronous runtimes ignore it.
    ("inline_cpu", bool, False),
    # False only to test the sync check itself: the timed loop skips the runtime's sync.
    ("sync", bool, True),
    ("workspace", str, ""),  # HistFactory: workspace file, evaluation point, signal, reference cache
    ("point", str, ""),
    ("signal", str, ""),
    ("reference", str, ""),
    ("case_source", str, ""),  # a user's case: its file (or `module:<name>`), loaded in its own timed phase
    ("case_name", str, ""),
    ("case_sha256", str, ""),  # what the case file held when the run was planned (checked after timing)
    # A precompiled policy (issue 39): the mechanism (child/precompiled.py), its artifact file, and whether this
    # process makes it (after its timed phases) or loads it (in a timed phase of its own, after setup)
    ("precompiled", str, ""),
    ("artifact", str, ""),
    ("artifact_action", str, ""),
    ("fd", int, -1),  # the pipe the record is written to (set by the parent when it spawns)
)
_TYPES = {name: kind for name, kind, _default in FIELDS}
_DEFAULTS = {name: default for name, _kind, default in FIELDS}


class JobError(ValueError):
    """A job that names an unknown field, lacks a required one, or has a malformed value."""


class Job:
    __slots__ = tuple(_TYPES)

    def __init__(self, **values):
        unknown = sorted(set(values) - set(_TYPES))
        if unknown:
            raise JobError(f"unknown job field(s) {', '.join(unknown)}; fields: {', '.join(_TYPES)}")
        for name, kind, default in FIELDS:
            value = values.get(name, default)
            if value is None:
                raise JobError(f"job field {name!r} is required")
            if kind is float and type(value) is int:
                value = float(value)
            if type(value) is not kind:
                raise JobError(f"job field {name!r} must be {kind.__name__}, got {value!r}")
            object.__setattr__(self, name, value)

    def __setattr__(self, name, value):
        raise AttributeError("a Job is immutable; use replace()")

    def replace(self, **changes):
        return Job(**{**self.as_dict(), **changes})

    def as_dict(self) -> dict:
        return {name: getattr(self, name) for name in _TYPES}

    def __eq__(self, other):
        return isinstance(other, Job) and self.as_dict() == other.as_dict()

    def __hash__(self):
        return hash(tuple(self.as_dict().items()))

    def __repr__(self):
        return "Job(" + ", ".join(f"{k}={v!r}" for k, v in self.as_dict().items() if v != _DEFAULTS[k]) + ")"

    def to_words(self) -> list:
        """`key=value` words for the fields that differ from their defaults (required ones always)."""
        words = []
        for name, kind, default in FIELDS:
            value = getattr(self, name)
            if value == default and default is not None:
                continue
            if kind is bool:
                text = "1" if value else "0"
            elif kind is float:
                text = repr(value)
            else:
                text = str(value)
            words.append(f"{name}={text}")
        return words

    @classmethod
    def parse(cls, words):
        values = {}
        for word in words:
            name, sep, text = word.partition("=")
            if not sep or name not in _TYPES:
                raise JobError(f"bad job word {word!r}; fields: {', '.join(_TYPES)}")
            kind = _TYPES[name]
            try:
                if kind is bool:
                    values[name] = _BOOL_WORDS[text]
                else:
                    values[name] = kind(text)
            except (KeyError, ValueError):
                raise JobError(f"bad value in job word {word!r}: expected {kind.__name__}") from None
        return cls(**values)
