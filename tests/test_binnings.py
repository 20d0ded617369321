"""Other binnings of a workspace (hf_mass_scan's binning scan), checked with pyhf itself."""

import numpy as np
import pytest
from conftest import have

from ttfr.child.workloads.histfactory import binnings, dense, workspace

pytestmark = pytest.mark.skipif(not have("pyhf"), reason="pyhf not installed")


def _model(spec):
    import pyhf

    pyhf.set_backend("numpy", precision="64b")
    ws = pyhf.Workspace(spec)
    return ws.model(), ws.data(ws.model())


@pytest.mark.parametrize("m", [1, 2, 3])
def test_splitting_a_channel_keeps_its_yields_and_multiplies_its_per_bin_parameters(m):
    spec = workspace.preset("complex8p")
    channel = spec["channels"][0]["name"]
    split = binnings.split_bins(spec, channel, m)
    workspace.check(split)  # still a valid workspace for ttfr
    model, data = _model(spec)
    split_model, split_data = _model(split)
    n_bins = len(spec["observations"][0]["data"])
    staterror_bins = sum(1 for s in spec["channels"][0]["samples"] for mod in s["modifiers"] if mod["type"] == "staterror")
    assert split_model.config.npars == model.config.npars + (m - 1) * n_bins * (staterror_bins > 0)
    before = model.expected_actualdata(model.config.suggested_init())
    after = split_model.expected_actualdata(split_model.config.suggested_init())
    first = model.config.channel_nbins[channel]
    np.testing.assert_allclose(after[: first * m].reshape(first, m).sum(axis=1), before[:first], rtol=1e-12)
    np.testing.assert_allclose(after[first * m :], before[first:], rtol=1e-12)  # other channels untouched
    assert sum(split_data[: first * m]) == pytest.approx(sum(data[:first]))
    dense.compile_workspace(split, workspace.find_signal(split))  # the native engines' model builds


def test_a_bad_split_names_what_is_valid():
    spec = workspace.preset("simple")
    with pytest.raises(ValueError, match="whole number >= 1"):
        binnings.split_bins(spec, "SR0", 0)
    with pytest.raises(KeyError, match="channels: SR0"):
        binnings.split_bins(spec, "SR9", 2)
