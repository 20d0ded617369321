"""A PyTorch model under torch.compile as a ttfr case: an MLP's forward pass on a batch.

    ttfr run --case-file examples/torch_mlp.py --backends torch_eager_cpu,torch_compile_cpu

On `torch_compile_cpu` the builder's `compile` is torch.compile, and the first call is split
into dynamo / AOTAutograd / inductor; on `torch_eager_cpu` it is the identity.
"""

import numpy as np

from ttfr.cases import Case

FEATURES, HIDDEN = 16, 64
_rng = np.random.default_rng(0)  # the model's weights, fixed: the reference uses the same ones
WEIGHTS = {
    "w1": _rng.standard_normal((HIDDEN, FEATURES)) / np.sqrt(FEATURES),
    "b1": _rng.uniform(-0.1, 0.1, HIDDEN),
    "w2": _rng.standard_normal((1, HIDDEN)) / np.sqrt(HIDDEN),
    "b2": np.zeros(1),
}

case = Case("torch_mlp_forward", sizes=(256, 4096), dtypes=("float32",), tolerance={"float32": 1e-4},
            description="a 16-64-1 MLP's forward pass on a batch of `size` rows")  # fmt: skip


@case.inputs
def inputs(size, dtype, seed):
    return [np.random.default_rng(seed).standard_normal((size, FEATURES)).astype(dtype)]


@case.reference
def reference(x):
    hidden = np.tanh(x.astype(np.float64) @ WEIGHTS["w1"].T + WEIGHTS["b1"])
    return [hidden @ WEIGHTS["w2"].T + WEIGHTS["b2"]]


@case.torch
def build(torch, compile, device):
    model = torch.nn.Sequential(torch.nn.Linear(FEATURES, HIDDEN), torch.nn.Tanh(), torch.nn.Linear(HIDDEN, 1))
    with torch.no_grad():
        for layer, (w, b) in zip((model[0], model[2]), (("w1", "b1"), ("w2", "b2"))):
            layer.weight.copy_(torch.from_numpy(WEIGHTS[w]))
            layer.bias.copy_(torch.from_numpy(WEIGHTS[b]))
    model.to(device).eval()
    forward = compile(model)

    def run(x):
        with torch.no_grad():
            return forward(x)

    return run
