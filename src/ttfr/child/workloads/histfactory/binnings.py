"""Other binnings of a HistFactory workspace, for a scan over binnings (hf_mass_scan).

`split_bins(spec, channel, m)` splits every bin of one channel into m equal bins: yields and
histosys templates are divided by m; observed counts stay whole numbers (n // m in each, the
remainder one by one from the first), summing to the original count; staterror and shapesys absolute
uncertainties by sqrt(m), so their quadrature sum over the m bins is the original bin's;
normfactor, normsys and lumi are untouched. The per-bin parameters of that channel
(staterror, shapesys, shapefactor) become m times as many, so the parameter count changes
with the binning as it does in a real analysis.
"""

from __future__ import annotations

import copy
import math

_PER_BIN = ("staterror", "shapesys", "shapefactor")


def _split(values, m: int, scale: float) -> list[float]:
    return [float(v) * scale for v in values for _ in range(m)]


def _split_counts(values, m: int) -> list[float]:
    out = []
    for value in values:
        count = int(round(float(value)))
        base, extra = divmod(count, m)
        out += [float(base + (i < extra)) for i in range(m)]
    return out


def split_bins(spec: dict, channel: str, m: int) -> dict:
    if not isinstance(m, int) or m < 1:
        raise ValueError(f"split factor must be a whole number >= 1, got {m!r}")
    out = copy.deepcopy(spec)
    if m == 1:
        return out
    chosen = next((c for c in out["channels"] if c["name"] == channel), None)
    if chosen is None:
        raise KeyError(f"no channel {channel!r}; channels: {', '.join(c['name'] for c in out['channels'])}")
    per_bin = set()
    for sample in chosen["samples"]:
        sample["data"] = _split(sample["data"], m, 1.0 / m)
        for modifier in sample["modifiers"]:
            kind = modifier["type"]
            if kind == "histosys":
                data = modifier["data"]
                modifier["data"] = {key: _split(data[key], m, 1.0 / m) for key in ("hi_data", "lo_data")}
            elif kind in ("staterror", "shapesys"):
                modifier["data"] = _split(modifier["data"], m, 1.0 / math.sqrt(m))
            if kind in _PER_BIN:
                per_bin.add(modifier["name"])
    for observation in out["observations"]:
        if observation["name"] == channel:
            observation["data"] = _split_counts(observation["data"], m)
    for measurement in out["measurements"]:
        for parameter in measurement["config"].get("parameters", []):
            if parameter["name"] in per_bin:  # per-bin settings follow their bins
                for key in ("inits", "bounds", "auxdata", "sigmas", "factors"):
                    if key in parameter:
                        parameter[key] = [value for value in parameter[key] for _ in range(m)]
    return out
