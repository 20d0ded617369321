"""pyhf JSON workspaces: a seeded generator with named presets, and a loader that checks a
user's file and picks the signal sample (standard library + NumPy only).

Every generated workspace has one POI `mu` (a normfactor on the `signal` sample of every
channel) and a `signal` sample carrying only multiplicative, nominal-independent modifiers
(normfactor, normsys, lumi): its nominal histogram is then a clean differentiable input
for every engine (nextstat's nominal override refuses samples with shape or aux modifiers).
Backgrounds carry normsys, histosys, staterror, optional shapesys and free normalisations.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass

import numpy as np

POI = "mu"
SIGNAL_SAMPLE = "signal"
LUMI_SIGMA = 0.017


@dataclass(frozen=True)
class Knobs:
    """What a generated workspace looks like; the parameter count follows from it."""

    bins: tuple[int, ...]  # bins per channel
    backgrounds: int = 3
    normsys: int = 2  # shared normalisation systematics (one of them on the signal)
    histosys: int = 1  # shared shape systematics on backgrounds
    free_norms: int = 0  # free background normalisations
    staterror: bool = True  # one gamma per bin of every channel
    shapesys_bins: int = 0  # per-bin Poisson-constrained gammas on the first background
    lumi: bool = True

    @property
    def n_parameters(self) -> int:
        staterror = sum(self.bins) if self.staterror else 0
        return 1 + int(self.lumi) + self.normsys + self.histosys + self.free_norms + staterror + self.shapesys_bins


# Named presets; the case "size" of a HistFactory workload is its parameter count.
PRESETS = {
    # pyhf's uncorrelated_background: mu + one shapesys gamma per bin.
    "simple": Knobs(bins=(2,), backgrounds=1, normsys=0, histosys=0, staterror=False, shapesys_bins=2, lumi=False),
    # Like NextStat's "complex" benchmark workspace: 2 channels x 2 bins, 8 parameters.
    "complex8p": Knobs(bins=(2, 2), backgrounds=2, normsys=1, histosys=1),
    # Between the two: 3 channels x 4 bins, 72 parameters (where a compiled engine's per-call
    # dispatch stops mattering against the arithmetic).
    "mid72p": Knobs(bins=(4, 4, 4), backgrounds=3, normsys=25, histosys=30, free_norms=3),
    # The size of NextStat's tHu benchmark workspace: 11 channels, 41 bins, 184 parameters.
    "thu184p": Knobs(bins=(5, 5, 4, 4, 4, 4, 3, 3, 3, 3, 3), backgrounds=5, normsys=64, histosys=74, free_norms=3),
    # Scaling ladder.
    "ladder500": Knobs(bins=(6,) * 20, backgrounds=5, normsys=180, histosys=195, free_norms=3),
    "ladder1000": Knobs(bins=(8,) * 30, backgrounds=6, normsys=380, histosys=373, free_norms=5),
    "ladder2000": Knobs(bins=(10,) * 50, backgrounds=8, normsys=750, histosys=743, free_norms=5),
}


def generate(knobs: Knobs, seed: int = 0) -> dict:
    """A valid pyhf workspace (dict) with exactly `knobs.n_parameters` parameters."""
    rng = np.random.default_rng(seed)
    channels = [f"SR{i}" for i in range(len(knobs.bins))]
    backgrounds = [f"bkg{j}" for j in range(knobs.backgrounds)]
    nominal = {}
    for ch, nbins in zip(channels, knobs.bins):
        x = (np.arange(nbins) + 0.5) / nbins
        peak = rng.uniform(0.3, 0.7)
        signal = rng.uniform(8.0, 20.0) * np.exp(-0.5 * ((x - peak) / 0.18) ** 2) + 0.5
        nominal[ch, SIGNAL_SAMPLE] = signal
        for bkg in backgrounds:
            nominal[ch, bkg] = rng.uniform(20.0, 120.0) * np.exp(-rng.uniform(0.5, 2.0) * x) + 2.0

    modifiers: dict[tuple[str, str], list] = {key: [] for key in nominal}
    for ch in channels:
        modifiers[ch, SIGNAL_SAMPLE].append({"name": POI, "type": "normfactor", "data": None})
        if knobs.lumi:
            for key in [(ch, SIGNAL_SAMPLE)] + [(ch, b) for b in backgrounds]:
                modifiers[key].append({"name": "lumi", "type": "lumi", "data": None})

    def spread(count):
        """Which (channel, background) pairs each shared systematic touches (each >= 1)."""
        pairs = [(ch, b) for ch in channels for b in backgrounds]
        chosen = []
        for _ in range(count):
            size = int(rng.integers(1, max(2, len(pairs) // 3) + 1))
            chosen.append([pairs[i] for i in rng.choice(len(pairs), size=size, replace=False)])
        return chosen

    for k, targets in enumerate(spread(knobs.normsys)):
        name = f"norm_{k}"
        if k == 0:  # a signal cross-section uncertainty, so the signal has a systematic too
            targets = [(ch, SIGNAL_SAMPLE) for ch in channels]
        for key in targets:
            size = rng.uniform(0.02, 0.15)
            modifiers[key].append({"name": name, "type": "normsys", "data": {"hi": 1.0 + size, "lo": 1.0 / (1.0 + size)}})
    for k, targets in enumerate(spread(knobs.histosys)):
        for key in targets:
            nom = nominal[key]
            tilt = rng.uniform(0.01, 0.08) * np.linspace(-1.0, 1.0, nom.size)
            modifiers[key].append({
                "name": f"shape_{k}", "type": "histosys",
                "data": {"hi_data": _round(nom * (1.0 + tilt)), "lo_data": _round(nom * (1.0 - 0.9 * tilt))},
            })  # fmt: skip
    for k in range(knobs.free_norms):
        for ch in channels:
            modifiers[ch, backgrounds[k % len(backgrounds)]].append({"name": f"k_{backgrounds[k % len(backgrounds)]}_{k}",
                                                                    "type": "normfactor", "data": None})  # fmt: skip
    if knobs.staterror:
        for ch in channels:
            for bkg in backgrounds:
                unc = nominal[ch, bkg] * rng.uniform(0.02, 0.08, nominal[ch, bkg].size)
                modifiers[ch, bkg].append({"name": f"staterror_{ch}", "type": "staterror", "data": _round(unc)})
    shapesys_left = knobs.shapesys_bins
    for ch in channels:
        if shapesys_left <= 0:
            break
        key = (ch, backgrounds[0])
        take = min(shapesys_left, nominal[key].size)
        unc = np.zeros(nominal[key].size)
        unc[:take] = np.sqrt(nominal[key][:take])
        modifiers[key].append({"name": f"uncorr_{ch}", "type": "shapesys", "data": _round(unc)})
        shapesys_left -= take
    if shapesys_left:
        raise ValueError("shapesys_bins exceeds the bins of the first background")

    # Observed counts: the rounded signal-plus-background expectation (an Asimov-like
    # dataset), so every seed has a clear excess (mu_hat near 1, q0 > 0) and the training
    # loop's gradients never vanish because a fluctuation pushed mu_hat to its bound.
    observations = []
    for ch in channels:
        expected = sum(nominal[ch, s] for s in [SIGNAL_SAMPLE] + backgrounds)
        observations.append({"name": ch, "data": [float(v) for v in np.round(expected)]})
    parameters = []
    if knobs.lumi:
        parameters.append({"name": "lumi", "auxdata": [1.0], "sigmas": [LUMI_SIGMA], "bounds": [[0.915, 1.085]], "inits": [1.0]})
    parameters.append({"name": POI, "bounds": [[0.0, 10.0]], "inits": [1.0]})
    return {
        "channels": [
            {
                "name": ch,
                "samples": [
                    {"name": s, "data": _round(nominal[ch, s]), "modifiers": modifiers[ch, s]}
                    for s in [SIGNAL_SAMPLE] + backgrounds
                ],
            }  # fmt: skip
            for ch in channels
        ],
        "observations": observations,
        "measurements": [{"name": "measurement", "config": {"poi": POI, "parameters": parameters}}],
        "version": "1.0.0",
    }


def _round(values) -> list[float]:
    # Short decimals keep the JSON readable and byte-stable across platforms.
    return [round(float(v), 6) for v in values]


def preset(name: str, seed: int = 0) -> dict:
    return generate(PRESETS[name], seed)


def canonical_bytes(spec: dict) -> bytes:
    return (json.dumps(spec, sort_keys=True, indent=1) + "\n").encode()


def sha256(spec: dict) -> str:
    return hashlib.sha256(canonical_bytes(spec)).hexdigest()


class WorkspaceError(ValueError):
    """A file that is not a usable HistFactory workspace; the message says what is wrong."""


def count_parameters(spec: dict) -> int:
    """Parameters a pyhf model of this workspace has (pyhf's counting rules)."""
    scalars, per_bin, shapesys = set(), {}, {}
    bins = {c["name"]: len(c["samples"][0]["data"]) for c in spec["channels"]}
    for channel in spec["channels"]:
        for sample in channel["samples"]:
            for mod in sample["modifiers"]:
                kind = mod["type"]
                if kind in ("normfactor", "normsys", "histosys", "lumi"):
                    scalars.add(mod["name"])
                elif kind in ("staterror", "shapefactor"):
                    per_bin.setdefault(mod["name"], set()).add(channel["name"])
                elif kind == "shapesys":
                    shapesys.setdefault(mod["name"], set()).add(channel["name"])
    vectors = {**per_bin, **shapesys}
    return len(scalars) + sum(sum(bins[c] for c in chans) for chans in vectors.values())


def _fail(path: str, what: str) -> WorkspaceError:
    return WorkspaceError(f"{path}: not a usable HistFactory workspace: {what}")


# Modifier types pyhf 0.7 knows, and what their `data` holds.
MODIFIER_TYPES = ("normfactor", "normsys", "histosys", "lumi", "staterror", "shapesys", "shapefactor")
_NO_DATA = ("normfactor", "lumi", "shapefactor")
_FLOAT_MAX = 1.7976931348623157e308  # the largest float64: a larger JSON number does not fit


def _kind(value) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _number(value, where: str, what: str, path: str) -> float:
    """`value` as a finite float; a boolean, a string, an object or NaN/Infinity is refused
    (Python's json module accepts the NaN/Infinity literals JSON itself does not have)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _fail(path, f"{where}: {what} must be a number, got {_kind(value)} {_short(value)}")
    if isinstance(value, int) and abs(value) > _FLOAT_MAX:
        raise _fail(path, f"{where}: {what} is too large for a float64")
    number = float(value)
    if math.isnan(number):
        raise _fail(path, f"{where}: {what} is NaN")
    if math.isinf(number):
        raise _fail(path, f"{where}: {what} is {'-' if number < 0 else ''}Infinity")
    return number


def _short(value) -> str:
    text = json.dumps(value) if isinstance(value, (str, bool)) or value is None else repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _list(value, where: str, what: str, path: str, length: int | None = None) -> list:
    if not isinstance(value, list):
        raise _fail(path, f"{where}: {what} must be a list, got {_kind(value)} {_short(value)}")
    if length is not None and len(value) != length:
        raise _fail(path, f"{where}: {what} has {len(value)} entries, the channel has {length} bins")
    return value


def _object(value, where: str, what: str, path: str) -> dict:
    if not isinstance(value, dict):
        raise _fail(path, f"{where}: {what} must be an object, got {_kind(value)} {_short(value)}")
    return value


def _name(value, where: str, what: str, path: str) -> str:
    if not isinstance(value, str) or not value:
        raise _fail(path, f"{where}: {what} must be a non-empty string, got {_kind(value)} {_short(value)}")
    try:
        value.encode("utf-8")  # names reach a worker's command line, which must be UTF-8
    except UnicodeEncodeError as exc:
        raise _fail(path, f"{where}: {what} {_short(value)} is not valid Unicode text (a lone surrogate "
                          f"{value[exc.start]!r} at position {exc.start})") from None  # fmt: skip
    return value


def _plain_non_negative(values: list) -> bool:
    """Every value a plain int/float (no bool, str, ...), finite and >= 0 (NaN fails `0 <= v`)."""
    return all((type(v) is float or type(v) is int) and 0 <= v <= _FLOAT_MAX for v in values)


def _yields(values, where: str, path: str, length: int, what: str = "yield") -> list:
    values = _list(values, where, f"{what}s", path, length)
    if _plain_non_negative(values):
        return values  # the common case: one pass, no call per value
    for i, value in enumerate(values):  # find the first bad one, by index
        number = _number(value, f"{where}[{i}]", what, path)
        if number < 0:
            raise _fail(path, f"{where}[{i}]: {what} is negative ({value!r})")
    return values  # not reached: the fast check failed on a value the loop refuses


def _counts(values, where: str, path: str) -> list:
    values = _list(values, where, "observed counts", path)
    if _plain_non_negative(values) and all(abs(v - round(v)) <= 1e-9 * max(1.0, v) for v in values):
        return values
    for i, value in enumerate(values):
        number = _number(value, f"{where}[{i}]", "observed count", path)
        if number < 0:
            raise _fail(path, f"{where}[{i}]: observed count is negative ({value!r})")
        if abs(number - round(number)) > 1e-9 * max(1.0, number):
            raise _fail(path, f"{where}[{i}]: observed count {value!r} is not a whole number of events")
    return values  # not reached: the fast check failed on a value the loop refuses


def _check_modifier(mod, where: str, path: str, nbins: int, types: dict) -> None:
    mod = _object(mod, where, "a modifier", path)
    name = _name(mod.get("name"), f"{where}.name", "the modifier name", path)
    kind = mod.get("type")
    if kind not in MODIFIER_TYPES:
        raise _fail(path, f"{where}.type: unknown modifier type {_short(kind)}; valid: {', '.join(MODIFIER_TYPES)}")
    if types.setdefault(name, (kind, where))[0] != kind:
        first_kind, first_where = types[name]
        raise _fail(path, f"{where}: modifier {name!r} is a {kind} here but a {first_kind} at {first_where}")
    data = mod.get("data")
    if kind in _NO_DATA:
        if data is not None:
            raise _fail(path, f"{where}.data: a {kind} modifier has no data (null), got {_kind(data)}")
    elif kind == "normsys":
        data = _object(data, f"{where}.data", "normsys data", path)
        for key in ("hi", "lo"):
            factor = _number(data.get(key), f"{where}.data.{key}", "normsys factor", path)
            if factor <= 0:
                raise _fail(path, f"{where}.data.{key}: normsys factor must be > 0, got {data[key]!r}")
    elif kind == "histosys":
        data = _object(data, f"{where}.data", "histosys data", path)
        for key in ("hi_data", "lo_data"):
            _yields(data.get(key), f"{where}.data.{key}", path, nbins, "template yield")
    else:  # staterror, shapesys: one absolute uncertainty per bin
        _yields(data, f"{where}.data", path, nbins, "uncertainty")


def _check_parameter(par, where: str, path: str) -> None:
    par = _object(par, where, "a parameter setting", path)
    _name(par.get("name"), f"{where}.name", "the parameter name", path)
    for key in ("inits", "auxdata", "sigmas"):
        if key in par:
            for i, value in enumerate(_list(par[key], f"{where}.{key}", key, path)):
                number = _number(value, f"{where}.{key}[{i}]", key[:-1] if key != "auxdata" else key, path)
                if key == "sigmas" and number <= 0:
                    raise _fail(path, f"{where}.sigmas[{i}]: sigma must be > 0, got {value!r}")
    if "bounds" in par:
        for i, pair in enumerate(_list(par["bounds"], f"{where}.bounds", "bounds", path)):
            pair = _list(pair, f"{where}.bounds[{i}]", "a [low, high] pair", path)
            if len(pair) != 2:
                raise _fail(path, f"{where}.bounds[{i}]: bounds must be a [low, high] pair, got {len(pair)} numbers")
            low, high = (_number(v, f"{where}.bounds[{i}][{j}]", "bound", path) for j, v in enumerate(pair))
            if not low < high:
                raise _fail(path, f"{where}.bounds[{i}]: low bound {pair[0]!r} is not below high bound {pair[1]!r}")
    if "fixed" in par and not isinstance(par["fixed"], bool):
        raise _fail(path, f"{where}.fixed: must be true or false, got {_kind(par['fixed'])}")


def _non_finite(spec) -> str | None:
    """The JSON path of the first NaN/Infinity or float-overflowing number anywhere. Iterative
    (a deeply nested file cannot exhaust the stack); paths are built only once one is found."""
    stack = [spec]
    while stack:
        value = stack.pop()
        kind = type(value)
        if kind is dict:
            stack.extend(value.values())
        elif kind is list:
            stack.extend(value)
        elif (kind is float and not math.isfinite(value)) or (kind is int and abs(value) > _FLOAT_MAX):
            break
    else:
        return None
    stack = [(spec, "")]
    while stack:
        value, where = stack.pop()
        if isinstance(value, dict):
            stack.extend((v, f"{where}.{k}" if where else str(k)) for k, v in reversed(list(value.items())))
        elif isinstance(value, list):
            stack.extend((v, f"{where}[{i}]") for i, v in reversed(list(enumerate(value))))
        elif isinstance(value, float) and not math.isfinite(value):
            return f"{where or '<top level>'}: {value!r} is not a JSON number (NaN/Infinity)"
        elif isinstance(value, int) and not isinstance(value, bool) and abs(value) > _FLOAT_MAX:
            return f"{where or '<top level>'}: the number is too large for a float64"
    return None  # pragma: no cover


def check(spec, path: str = "workspace") -> None:
    """Everything a HistFactory engine relies on, each problem named by its JSON path
    (`channels[0].samples[1].data[3]: yield is NaN`): structure and types; yields,
    templates and uncertainties finite and >= 0; observed counts whole numbers >= 0; normsys
    factors > 0; no bin with nothing expected; consistent modifier types; parameter
    settings finite (pyhf's schema, when installed, is checked too by the caller)."""
    if not isinstance(spec, dict):
        raise _fail(path, "the top level must be a JSON object with channels, observations, measurements")
    for key in ("channels", "observations", "measurements"):
        if not isinstance(spec.get(key), list) or not spec[key]:
            raise _fail(path, f"'{key}' must be a non-empty list")
    observed: dict[str, list] = {}
    for i, obs in enumerate(spec["observations"]):
        where = f"observations[{i}]"
        obs = _object(obs, where, "an observation", path)
        name = _name(obs.get("name"), f"{where}.name", "the channel name", path)
        if name in observed:
            raise _fail(path, f"{where}.name: a second observation of channel {name!r}")
        observed[name] = _counts(obs.get("data"), f"{where}.data", path)
    names: set[str] = set()
    types: dict[str, tuple[str, str]] = {}
    for c, channel in enumerate(spec["channels"]):
        where = f"channels[{c}]"
        name = channel.get("name") if isinstance(channel, dict) else None
        samples = channel.get("samples") if isinstance(channel, dict) else None
        if not name or not isinstance(samples, list) or not samples:
            raise _fail(path, f"{where}: every channel needs a 'name' and a non-empty 'samples' list")
        name = _name(name, f"{where}.name", "the channel name", path)
        if name in names:
            raise _fail(path, f"{where}.name: a second channel named {name!r}")
        names.add(name)
        if name not in observed:
            raise _fail(path, f"{where}: channel {name!r} has no observation")
        nbins = len(observed[name])
        if not nbins:
            raise _fail(path, f"{where}: channel {name!r} has no bins (its observation is empty)")
        totals = [0.0] * nbins
        sample_names: set[str] = set()
        for s, sample in enumerate(samples):
            at = f"{where}.samples[{s}]"
            sample = _object(sample, at, "a sample", path)
            sample_name = _name(sample.get("name"), f"{at}.name", "the sample name", path)
            if sample_name in sample_names:
                raise _fail(path, f"{at}.name: a second sample named {sample_name!r} in channel {name!r}")
            sample_names.add(sample_name)
            data = sample.get("data")
            if not isinstance(data, list) or len(data) != nbins:
                raise _fail(path, f"{at}.data: sample {sample_name!r} in channel {name!r} has "
                                  f"{len(data) if isinstance(data, list) else 0} bins, the observation has {nbins}")  # fmt: skip
            yields = _yields(data, f"{at}.data", path, nbins)
            if not any(yields):
                raise _fail(path, f"{at}.data: every yield of sample {sample_name!r} in channel {name!r} is 0 "
                                  "(a sample that predicts nothing: drop it)")  # fmt: skip
            totals = [t + y for t, y in zip(totals, yields)]
            modifiers = sample.get("modifiers")
            if not isinstance(modifiers, list):
                raise _fail(path, f"{at}.modifiers: sample {sample_name!r} in channel {name!r} has no 'modifiers' list")
            for m, mod in enumerate(modifiers):
                _check_modifier(mod, f"{at}.modifiers[{m}]", path, nbins, types)
        empty = [b for b, total in enumerate(totals) if total == 0]
        if empty:
            raise _fail(path, f"{where}: bin {empty[0]} of channel {name!r} has a total expected yield of 0")
    for i, measurement in enumerate(spec["measurements"]):
        where = f"measurements[{i}]"
        measurement = _object(measurement, where, "a measurement", path)
        config = _object(measurement.get("config"), f"{where}.config", "the measurement config", path)
        if i == 0 and not config.get("poi"):
            raise _fail(path, "the first measurement has no 'poi'")
        _name(config.get("poi"), f"{where}.config.poi", "the POI", path)
        for p, par in enumerate(_list(config.get("parameters", []), f"{where}.config.parameters", "parameters", path)):
            _check_parameter(par, f"{where}.config.parameters[{p}]", path)
    problem = _non_finite(spec)
    if problem:
        raise _fail(path, problem)


def find_signal(spec: dict) -> tuple[str, str]:
    """(channel, sample) whose nominal histogram the gradients are taken with respect to:
    the first sample, in the first channel that has one, carrying the POI normfactor."""
    poi = spec["measurements"][0]["config"]["poi"]
    for channel in spec["channels"]:
        for sample in channel["samples"]:
            if any(m["type"] == "normfactor" and m["name"] == poi for m in sample["modifiers"]):
                return channel["name"], sample["name"]
    raise WorkspaceError(f"no sample carries the POI {poi!r} as a normfactor: there is no signal to differentiate")
