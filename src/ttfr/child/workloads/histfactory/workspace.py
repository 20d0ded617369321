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


def check(spec, path: str = "workspace") -> None:
    """Structural checks with messages that say what is wrong (pyhf's schema, when
    installed, is checked too by the caller)."""
    if not isinstance(spec, dict):
        raise _fail(path, "the top level must be a JSON object with channels, observations, measurements")
    for key in ("channels", "observations", "measurements"):
        if not isinstance(spec.get(key), list) or not spec[key]:
            raise _fail(path, f"'{key}' must be a non-empty list")
    observed = {o.get("name"): o.get("data") for o in spec["observations"] if isinstance(o, dict)}
    for channel in spec["channels"]:
        name = channel.get("name") if isinstance(channel, dict) else None
        samples = channel.get("samples") if isinstance(channel, dict) else None
        if not name or not isinstance(samples, list) or not samples:
            raise _fail(path, "every channel needs a 'name' and a non-empty 'samples' list")
        if name not in observed:
            raise _fail(path, f"channel {name!r} has no observation")
        nbins = len(observed[name] or [])
        for sample in samples:
            data = sample.get("data")
            if not isinstance(data, list) or len(data) != nbins:
                raise _fail(path, f"sample {sample.get('name')!r} in channel {name!r} has {len(data or [])} bins, "
                                  f"the observation has {nbins}")  # fmt: skip
            if not isinstance(sample.get("modifiers"), list):
                raise _fail(path, f"sample {sample.get('name')!r} in channel {name!r} has no 'modifiers' list")
    config = spec["measurements"][0].get("config", {})
    if not config.get("poi"):
        raise _fail(path, "the first measurement has no 'poi'")


def find_signal(spec: dict) -> tuple[str, str]:
    """(channel, sample) whose nominal histogram the gradients are taken with respect to:
    the first sample, in the first channel that has one, carrying the POI normfactor."""
    poi = spec["measurements"][0]["config"]["poi"]
    for channel in spec["channels"]:
        for sample in channel["samples"]:
            if any(m["type"] == "normfactor" and m["name"] == poi for m in sample["modifiers"]):
                return channel["name"], sample["name"]
    raise WorkspaceError(f"no sample carries the POI {poi!r} as a normfactor: there is no signal to differentiate")
