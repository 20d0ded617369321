"""Figures measured elsewhere that a reader compares ours with: NextStat's published
HistFactory numbers (NextStat docs, "Differentiable Layer"; CUDA on an RTX 4000 SFF Ada,
20 GB). They are shown as reference rows, never mixed into our statistics."""

NEXTSTAT_CUDA_SOURCE = "NextStat docs, CUDA, RTX 4000 SFF Ada 20 GB: measured elsewhere, other hardware"

# (metric, workload, parameters, value, unit)
NEXTSTAT_CUDA_FIGURES = (
    ("NLL + signal gradient", "hf_nll_grad", 8, 0.12e-3, "s"),
    ("NLL + signal gradient", "hf_nll_grad", 184, 3.66e-3, "s"),
    ("profiled q0", "hf_profiled_q0", 8, 3.0e-3, "s"),
    ("20-step training loop, per step", "hf_train_loop", 184, 2.4e-3, "s"),
    ("signal gradient vs finite differences, max error", "hf_fd_check", 184, 2.07e-9, "abs"),
)
