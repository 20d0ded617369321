"""A HistFactory problem as the worker reads it in the timed setup, as a user reads a
workspace: the workspace bytes, the signal sample being differentiated, the evaluation point."""

from __future__ import annotations

import json

import numpy as np


class Problem:
    """A workspace read from disk, its signal sample and the evaluation point (by name)."""

    def __init__(self, raw: bytes, point: dict, signal: tuple[str, str], seed: int = 0):
        self.seed = seed
        self.raw = raw
        self.text = raw.decode("utf-8")
        self.spec = json.loads(self.text)
        self.point = point
        self.signal = signal

    def signal_nominal(self) -> np.ndarray:
        return np.asarray(signal_sample(self.spec, self.signal)["data"], dtype=np.float64)


def signal_sample(spec: dict, signal: tuple[str, str]) -> dict:
    """The sample entry (in `spec`, not a copy) of the (channel, sample) being differentiated."""
    channel, sample = signal
    for c in spec["channels"]:
        if c["name"] == channel:
            for s in c["samples"]:
                if s["name"] == sample:
                    return s
    raise KeyError(f"no sample {sample!r} in channel {channel!r}")


def load_problem(job) -> Problem:
    """The problem a job's files hold (`job`: a ttfr.child.job.Job)."""
    with open(job.workspace, "rb") as fh:
        raw = fh.read()
    with open(job.point, encoding="utf-8") as fh:
        point = json.load(fh)
    channel, _, sample = job.signal.partition("/")
    return Problem(raw, point, (channel, sample), job.seed)


def dataset_sha256(problem: Problem) -> str:
    import hashlib

    return hashlib.sha256(problem.raw).hexdigest()
