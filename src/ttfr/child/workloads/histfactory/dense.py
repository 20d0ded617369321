"""Compile a pyhf workspace into dense arrays: the model the HistFactory NLL (likelihood.py)
evaluates for NumPy, JAX and PyTorch.

Layout: every (channel, sample, bin) is an *entry* e. Modifiers become fixed-width index
tables over entries, padded with a sentinel parameter (value 1.0, coefficients 0):
  expected_e = (nominal_e + sum histosys deltas) * exp(sum normsys log-factors)
               * prod(normfactor, lumi, staterror, shapesys, shapefactor)
  expected_b = sum of expected_e over the entries in bin b
  NLL = -[sum_b Poisson(n_b | expected_b) + Gaussian constraints + Poisson constraints]
with pyhf 0.7's `Model` defaults: histosys code4p (polynomial inside |alpha| < 1, linear
outside), normsys code4 (6th-order polynomial inside, exponential outside), staterror
sigma_b = sqrt(sum unc^2) / sum nominal over the channel's samples, shapesys
tau = (nominal / unc)^2, the continuous Poisson with lgamma, all normalisation
constants kept. The signal sample's nominal histogram is a separate input: gradients are
taken with the constraint widths (staterror sigma, shapesys tau) held at the workspace's
values, so they are partial derivatives with respect to the nominal yields.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

_SCALAR = ("normfactor", "normsys", "histosys", "lumi")


@dataclass
class Parameter:
    name: str  # pyhf's naming: `name` for scalars, `name[i]` for vector components
    kind: str  # modifier type
    init: float
    bounds: tuple[float, float]
    fixed: bool = False


@dataclass
class DenseModel:
    parameters: list[Parameter]
    signal_values: np.ndarray  # the signal sample's nominal histogram (its row in `nominal` is 0)
    arrays: dict = field(default_factory=dict)  # name -> numpy array (see ARRAY_NAMES)

    @property
    def names(self) -> list[str]:
        return [p.name for p in self.parameters]

    def inits(self) -> np.ndarray:
        return np.array([p.init for p in self.parameters])

    def bounds(self) -> np.ndarray:
        return np.array([p.bounds for p in self.parameters], dtype=float)

    def fixed(self) -> np.ndarray:
        return np.array([p.fixed for p in self.parameters])

    def signal_nominal(self) -> np.ndarray:
        return self.signal_values.copy()


# The order in which the NLL takes its arrays (after the parameters and the signal).
ARRAY_NAMES = (
    "nominal", "bin_of", "signal_block", "observed",
    "hs_idx", "hs_up", "hs_dn", "hs_s", "hs_a", "ns_idx", "ns_loghi", "ns_loglo", "ns_coef", "lin_idx",
    "g_idx", "g_aux", "g_sigma", "p_idx", "p_tau", "lgamma_observed", "lgamma_tau", "cons_idx", "unc_idx",
)  # fmt: skip


def _measurement_overrides(spec: dict, measurement: str | None) -> tuple[str, dict]:
    measurements = spec["measurements"]
    chosen = next((m for m in measurements if m["name"] == measurement), None) if measurement else measurements[0]
    if chosen is None:
        raise ValueError(f"no measurement {measurement!r}; have {[m['name'] for m in measurements]}")
    config = chosen["config"]
    return config["poi"], {p["name"]: p for p in config.get("parameters", [])}


def compile_workspace(spec: dict, signal: tuple[str, str], measurement: str | None = None) -> DenseModel:
    poi_name, overrides = _measurement_overrides(spec, measurement)
    observed = {o["name"]: o["data"] for o in spec["observations"]}
    channels = spec["channels"]
    layout = _Layout.of(channels, observed)
    built = _Parameters.ordered(poi_name, _Modifiers.of(channels, layout), overrides)
    blocks = _Blocks.of(channels, layout, built.index)
    signal_nominal, signal_block = blocks.take_signal(layout, signal)
    observed_arr = np.concatenate([np.asarray(observed[c["name"]], dtype=float) for c in channels])
    tables = {
        "nominal": blocks.nominal,
        "bin_of": blocks.bin_of,
        "signal_block": signal_block,
        "observed": observed_arr,
        **blocks.modifier_tables(sentinel=len(built.parameters)),
        **built.constraint_tables(),
        "lgamma_observed": np.array([math.lgamma(n + 1.0) for n in observed_arr]),
    }
    assert layout.n_bins == observed_arr.size
    arrays = {name: tables[name] for name in ARRAY_NAMES}  # in the NLL's order
    return DenseModel(built.parameters, signal_nominal, arrays)  # the POI is ordered first (native.POI)


@dataclass
class _Layout:
    """Bins and (channel, sample) blocks in workspace order."""

    channel_bins: dict[str, tuple[int, int]]  # channel -> (its first bin, one past its last)
    block_index: dict[tuple[str, str], int]  # (channel, sample) -> its block's row
    n_bins: int

    @classmethod
    def of(cls, channels, observed) -> _Layout:
        channel_bins, first_bin, block_index = {}, 0, {}
        for channel in channels:
            nbins = len(observed[channel["name"]])
            channel_bins[channel["name"]] = (first_bin, first_bin + nbins)
            for sample in channel["samples"]:
                block_index[channel["name"], sample["name"]] = len(block_index)
            first_bin += nbins
        return cls(channel_bins, block_index, first_bin)

    @property
    def width(self) -> int:
        """The widest channel's bins: every block's row is padded to it."""
        return max(hi - lo for lo, hi in self.channel_bins.values())


@dataclass
class _Modifiers:
    """The workspace's modifiers by name, pyhf-style: a scalar has one parameter, a vector one
    component per bin it covers; with what the vectors' constraints are computed from."""

    kinds: dict[str, str] = field(default_factory=dict)  # every modifier -> its first occurrence's type
    scalars: dict[str, Parameter] = field(default_factory=dict)
    vector_bins: dict[str, list[int]] = field(default_factory=dict)  # the bins a vector covers
    staterror_unc: dict[str, dict[int, list[float]]] = field(default_factory=dict)  # per bin, each sample's
    staterror_nom: dict[str, dict[int, float]] = field(default_factory=dict)  # per bin, the samples' sum
    shapesys: dict[str, dict[int, tuple[float, float]]] = field(default_factory=dict)  # per bin, (nominal, unc)

    @classmethod
    def of(cls, channels, layout: _Layout) -> _Modifiers:
        found = cls()
        for channel in channels:
            lo_bin, hi_bin = layout.channel_bins[channel["name"]]
            for sample in channel["samples"]:
                for mod in sample["modifiers"]:
                    name, kind = mod["name"], mod["type"]
                    found.kinds.setdefault(name, kind)
                    if kind in _SCALAR:
                        found.scalars.setdefault(name, Parameter(name, kind, *_scalar_defaults(kind)))
                    else:
                        found._add_vector(mod, sample, lo_bin, hi_bin)
        return found

    def _add_vector(self, mod, sample, lo_bin, hi_bin) -> None:
        name, kind = mod["name"], mod["type"]
        covered = self.vector_bins.setdefault(name, [])
        covered.extend(b for b in range(lo_bin, hi_bin) if b not in covered)
        if kind == "staterror":
            for b in range(lo_bin, hi_bin):
                self.staterror_unc.setdefault(name, {}).setdefault(b, []).append(float(mod["data"][b - lo_bin]))
                nom = float(sample["data"][b - lo_bin])
                self.staterror_nom.setdefault(name, {})[b] = self.staterror_nom.get(name, {}).get(b, 0.0) + nom
        elif kind == "shapesys":
            for b in range(lo_bin, hi_bin):
                pair = (float(sample["data"][b - lo_bin]), float(mod["data"][b - lo_bin]))
                self.shapesys.setdefault(name, {})[b] = pair


@dataclass
class _Parameters:
    """The model's parameters in order (the POI first, then by name), where each modifier (and
    each bin of a vector) finds its own, and their constraint terms."""

    parameters: list[Parameter] = field(default_factory=list)
    index: dict[tuple[str, int | None], int] = field(default_factory=dict)  # (modifier, bin or None) -> parameter
    gaussian: list[tuple[int, float, float]] = field(default_factory=list)  # (parameter, aux, sigma)
    poisson: list[tuple[int, float]] = field(default_factory=list)  # (parameter, tau)

    @classmethod
    def ordered(cls, poi_name: str, modifiers: _Modifiers, overrides: dict) -> _Parameters:
        if poi_name not in modifiers.kinds:
            raise ValueError(f"the POI {poi_name!r} is not a parameter of any sample")
        built = cls()
        for name in [poi_name] + sorted(n for n in modifiers.kinds if n != poi_name):
            if name in modifiers.vector_bins:
                built._add_vector(name, modifiers)
            else:
                built._add_scalar(modifiers.scalars[name], overrides)
        _apply_overrides(built.parameters, overrides)
        return built

    def _add_vector(self, name: str, modifiers: _Modifiers) -> None:
        kind = modifiers.kinds[name]
        for i, b in enumerate(sorted(modifiers.vector_bins[name])):
            fixed = False
            if kind == "staterror":
                total = modifiers.staterror_nom[name][b]
                sigma = math.sqrt(sum(u * u for u in modifiers.staterror_unc[name][b])) / total if total > 0 else 0.0
                fixed = sigma == 0.0
                self.gaussian.append((len(self.parameters), 1.0, sigma if sigma > 0 else 1.0))
                bounds = (1e-10, 10.0)
            elif kind == "shapesys":
                nom, unc = modifiers.shapesys[name][b]
                valid = nom > 0 and unc > 0
                tau = (nom / unc) ** 2 if valid else 1.0
                fixed = not valid
                self.poisson.append((len(self.parameters), tau))
                bounds = (1e-10, 10.0)
            else:  # shapefactor: free
                bounds = (0.0, 10.0)
            self.index[name, b] = len(self.parameters)
            self.parameters.append(Parameter(f"{name}[{i}]", kind, 1.0, bounds, fixed))

    def _add_scalar(self, parameter: Parameter, overrides: dict) -> None:
        self.index[parameter.name, None] = len(self.parameters)
        if parameter.kind in ("normsys", "histosys"):
            self.gaussian.append((len(self.parameters), 0.0, 1.0))
        elif parameter.kind == "lumi":
            override = overrides.get(parameter.name, {})
            aux, sigma = override.get("auxdata", [1.0])[0], override.get("sigmas", [0.0])[0]
            self.gaussian.append((len(self.parameters), aux, sigma))
        self.parameters.append(parameter)

    def constraint_tables(self) -> dict:
        """The constraint terms' arrays (see ARRAY_NAMES)."""
        g = np.array(self.gaussian, dtype=float).reshape(-1, 3)
        q = np.array(self.poisson, dtype=float).reshape(-1, 2)
        constrained = np.zeros(len(self.parameters), dtype=bool)
        constrained[g[:, 0].astype(np.int64)] = True
        constrained[q[:, 0].astype(np.int64)] = True
        return {
            "g_idx": g[:, 0].astype(np.int64), "g_aux": g[:, 1], "g_sigma": g[:, 2],
            "p_idx": q[:, 0].astype(np.int64), "p_tau": q[:, 1],
            "lgamma_tau": np.array([math.lgamma(t + 1.0) for t in q[:, 1]]),
            # Parameters with a constraint term (positive curvature of their own) and without:
            # the fits' Newton systems are reduced over the former (native._newton_direction).
            "cons_idx": np.flatnonzero(constrained), "unc_idx": np.flatnonzero(~constrained),
        }  # fmt: skip


@dataclass
class _Blocks:
    """Block layout: one row per (channel, sample), padded to the widest channel's bins.
    Per-block tables are gathered once and broadcast over bins, which keeps the gathers
    (and their scatter-adds in the backward pass) small: they dominate XLA on CPU."""

    nominal: np.ndarray  # (blocks, width)
    bin_of: np.ndarray  # (blocks, width): each entry's bin; padding goes to a dropped extra bin
    histosys: list  # per block: (parameter, up[bins], dn[bins])
    normsys: list  # per block: (parameter, log hi, log lo); normsys scales a whole sample: one factor per block
    linear: list  # per block, per bin: the parameters that multiply the entry

    @classmethod
    def of(cls, channels, layout: _Layout, index: dict) -> _Blocks:
        n_blocks, width = len(layout.block_index), layout.width
        blocks = cls(np.zeros((n_blocks, width)), np.full((n_blocks, width), layout.n_bins, dtype=np.int64),
                     [[] for _ in range(n_blocks)], [[] for _ in range(n_blocks)],
                     [[[] for _ in range(width)] for _ in range(n_blocks)])  # fmt: skip
        for channel in channels:
            lo_bin, hi_bin = layout.channel_bins[channel["name"]]
            for sample in channel["samples"]:
                block = layout.block_index[channel["name"], sample["name"]]
                nom = np.asarray(sample["data"], dtype=float)
                blocks.nominal[block, : nom.size] = nom
                blocks.bin_of[block, : nom.size] = np.arange(lo_bin, hi_bin)
                for mod in sample["modifiers"]:
                    blocks._add_modifier(block, mod, nom, lo_bin, index)
        return blocks

    def _add_modifier(self, block: int, mod: dict, nom: np.ndarray, lo_bin: int, index: dict) -> None:
        name, kind, data = mod["name"], mod["type"], mod.get("data")
        if kind == "histosys":
            up = np.asarray(data["hi_data"], dtype=float) - nom
            dn = nom - np.asarray(data["lo_data"], dtype=float)
            self.histosys[block].append((index[name, None], up, dn))
        elif kind == "normsys":
            self.normsys[block].append((index[name, None], math.log(data["hi"]), math.log(data["lo"])))
        elif kind in ("normfactor", "lumi"):
            for m in range(nom.size):
                self.linear[block][m].append(index[name, None])
        else:  # staterror, shapesys, shapefactor: one parameter per bin
            for m in range(nom.size):
                self.linear[block][m].append(index[name, lo_bin + m])

    def take_signal(self, layout: _Layout, signal: tuple[str, str]) -> tuple[np.ndarray, np.ndarray]:
        """The signal sample's nominal histogram, taken out of its block (an input, added back
        in by the NLL), and the one-hot column that says which block is the signal's."""
        signal_block_index = layout.block_index[signal]
        signal_bins = layout.channel_bins[signal[0]][1] - layout.channel_bins[signal[0]][0]
        signal_nominal = self.nominal[signal_block_index, :signal_bins].copy()
        self.nominal[signal_block_index] = 0.0  # the signal histogram is an input, added back in
        signal_block = np.zeros((len(self.nominal), 1))
        signal_block[signal_block_index] = 1.0
        return signal_nominal, signal_block

    def modifier_tables(self, sentinel: int) -> dict:
        """The histosys, normsys and linear tables (see ARRAY_NAMES), each padded to its widest
        block (or bin) with the sentinel parameter."""
        n_blocks, width = self.nominal.shape
        hs_w = max([len(r) for r in self.histosys] + [1])
        ns_w = max([len(r) for r in self.normsys] + [1])
        lin_w = max([len(cell) for row in self.linear for cell in row] + [1])
        hs_idx = np.full((n_blocks, hs_w), sentinel, dtype=np.int64)
        hs_up, hs_dn = np.zeros((n_blocks, hs_w, width)), np.zeros((n_blocks, hs_w, width))
        ns_idx = np.full((n_blocks, ns_w), sentinel, dtype=np.int64)
        ns_loghi, ns_loglo = np.zeros((n_blocks, ns_w)), np.zeros((n_blocks, ns_w))
        ns_coef = np.zeros((n_blocks, ns_w, 6))
        lin_idx = np.full((n_blocks, width, lin_w), sentinel, dtype=np.int64)
        for block in range(n_blocks):
            for w, (p, up, dn) in enumerate(self.histosys[block]):
                hs_idx[block, w] = p
                hs_up[block, w, : up.size], hs_dn[block, w, : dn.size] = up, dn
            for w, (p, lhi, llo) in enumerate(self.normsys[block]):
                ns_idx[block, w], ns_loghi[block, w], ns_loglo[block, w] = p, lhi, llo
                ns_coef[block, w] = _code4_coefficients(math.exp(lhi), math.exp(llo))
            for m in range(width):
                for w, p in enumerate(self.linear[block][m]):
                    lin_idx[block, m, w] = p
        return {
            "hs_idx": hs_idx, "hs_up": hs_up, "hs_dn": hs_dn,
            "hs_s": 0.5 * (hs_up + hs_dn), "hs_a": 0.0625 * (hs_up - hs_dn),
            "ns_idx": ns_idx, "ns_loghi": ns_loghi, "ns_loglo": ns_loglo, "ns_coef": ns_coef,
            "lin_idx": lin_idx,
        }  # fmt: skip


# pyhf's code4 (alpha0 = 1): the polynomial's coefficients are A^-1 b, matching value,
# first and second derivative of hi^alpha at +1 and lo^-alpha at -1.
_CODE4_A_INVERSE = np.array([
    [15 / 16, -15 / 16, -7 / 16, -7 / 16, 1 / 16, -1 / 16],
    [3 / 2, 3 / 2, -9 / 16, 9 / 16, 1 / 16, 1 / 16],
    [-5 / 8, 5 / 8, 5 / 8, 5 / 8, -1 / 8, 1 / 8],
    [-3 / 2, -3 / 2, 7 / 8, -7 / 8, -1 / 8, -1 / 8],
    [3 / 16, -3 / 16, -3 / 16, -3 / 16, 1 / 16, -1 / 16],
    [1 / 2, 1 / 2, -5 / 16, 5 / 16, 1 / 16, 1 / 16],
])  # fmt: skip


def _code4_coefficients(hi: float, lo: float) -> np.ndarray:
    log_hi, log_lo = math.log(hi), math.log(lo)
    b = np.array([hi - 1.0, lo - 1.0, log_hi * hi, -log_lo * lo, log_hi**2 * hi, log_lo**2 * lo])
    return _CODE4_A_INVERSE @ b


def _scalar_defaults(kind: str) -> tuple[float, tuple[float, float]]:
    if kind in ("normsys", "histosys"):
        return 0.0, (-5.0, 5.0)
    return 1.0, (0.0, 10.0)  # normfactor, lumi (lumi's come from the measurement)


def _apply_overrides(parameters: list[Parameter], overrides: dict) -> None:
    by_base: dict[str, list[Parameter]] = {}
    for p in parameters:
        by_base.setdefault(p.name.split("[")[0], []).append(p)
    for name, override in overrides.items():
        for i, p in enumerate(by_base.get(name, [])):
            if "inits" in override:
                p.init = float(override["inits"][i])
            if "bounds" in override:
                p.bounds = tuple(float(v) for v in override["bounds"][i])
            if override.get("fixed"):
                p.fixed = True


def evaluation_point(model: DenseModel, seed: int) -> np.ndarray:
    """A seeded point near the initial values, away from every interpolation kink (alpha=0),
    at which NLL values and gradients are compared across engines (keyed by name)."""
    rng = np.random.default_rng(seed + 7919)
    point = model.inits()
    for i, p in enumerate(model.parameters):
        if p.fixed:
            continue
        if p.kind in ("normsys", "histosys"):
            point[i] = rng.choice([-1.0, 1.0]) * rng.uniform(0.1, 0.4)
        elif p.kind in ("staterror", "shapesys", "shapefactor"):
            point[i] = 1.0 + rng.uniform(-0.03, 0.03)
        else:  # POI, free normalisations, lumi
            point[i] = p.init * (1.0 + rng.uniform(-0.01, 0.05))
    return point
