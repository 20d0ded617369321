"""The result check of a case (the gate): its first result against a float64 reference or the
workload's own gates (HistFactory: parity with pyhf, finite differences, training loops, scans),
as the checking process reports it. `Open`: fields a newer or older worker adds are ignored.
"""

from __future__ import annotations

from typing import Annotated

from msgspec import Meta

from ttfr.model.base import UNSET, Count, Open, UnsetType

NonNegative = Annotated[float, Meta(ge=0)]
NO_REFERENCE = "none"  # a check's reference when there is nothing to compare the result with


class Digest(Open):
    """An order-free fingerprint of the result (a sum that overflowed float64 is null)."""

    sum: float | None
    """The sum of every element of the second call's result arrays, in float64, in the result's own units; null where
    it is not finite."""
    sum_sq: float | None
    """The sum of the squares of every element of the second call's result arrays, in float64 (the result's units
    squared); null where it is not finite."""
    count: Count
    """The number of elements summed."""
    finite: bool
    """Whether every element was finite (a non-finite result makes the run an invalid-measurement)."""


class ParityCheck(Open):
    engine: float | None
    """The engine's value at the nominal signal (an NLL or q0, dimensionless): the timed call's result where the
    workload computes that value, else the engine's recomputation; null where not finite."""
    reference: float | None
    """The reference engine's value for the same workspace (pyhf's, as Check.reference names it; dimensionless); null
    where not finite."""
    tolerance: float
    """The pass line (dimensionless): a relative difference of 1e-8 for the NLL, an absolute difference of 1e-4 for q0."""
    passed: bool
    """Whether the difference is within the tolerance."""
    rel_diff: float | None | UnsetType = UNSET
    """The NLL's relative difference |engine - reference| / |reference| (a ratio); absent for q0."""
    abs_diff: float | None | UnsetType = UNSET
    """q0's absolute difference |engine - reference| (dimensionless); absent for the NLL."""


class Parity(Open):
    nll: ParityCheck
    """The negative log-likelihood at the nominal signal against the reference's (relative difference)."""
    q0: ParityCheck
    """The discovery test statistic q0 at the nominal signal against the reference's (absolute difference)."""


class FiniteDifferences(Open):
    """The signal gradient against central finite differences (histfactory/gate.py)."""

    of: str
    """The function whose gradient with respect to the signal histogram is checked: nll or q0."""
    max_abs_error: float | None
    """The largest |autodiff - finite difference| over the signal bins (dimensionless, as the function and the yields
    are); null where not finite."""
    max_rel_error: float | None
    """The largest |autodiff - finite difference| / max(|finite difference|, 1e-12) over the bins (a ratio); null where
    not finite."""
    normalised_error: float | None
    """max |autodiff - finite difference| / max(1, max |finite difference|), the figure the tolerance judges
    (dimensionless); null where not finite."""
    relative_step: float
    """Each bin's central-difference step relative to its signal: step = relative_step x max(1, |s_b|) (a ratio)."""
    bins: Count
    """The number of signal bins differentiated."""
    tolerance: float
    """The largest normalised_error that passes (dimensionless): 1e-6 for the NLL, 1e-3 for q0."""
    passed: bool
    """Whether normalised_error is finite and within the tolerance."""


class TrainingRun(Open):
    losses: list[float | None]
    """The loss after each step, in order: -Z0, minus the discovery significance (in σ); null where not finite."""
    first_step_s: float | UnsetType = UNSET
    """Seconds of the first step (where compiling happens)."""
    step_s_median: float | None | UnsetType = UNSET
    """The median seconds of the later steps (the first apart); null with a single step."""
    step_s: list[float] | UnsetType = UNSET
    """Seconds of every step, in order."""
    conversion_s: list[float] | UnsetType = UNSET
    """Each step's seconds converting arrays between runtimes, timed crossing by crossing; absent for a trainer that
    does not cross."""
    conversion_share: float | None | UnsetType = UNSET
    """The later steps' median conversion seconds over their median step seconds (the first step apart; with one step,
    that one): a fraction; absent as conversion_s."""


class TrainLoop(Open):
    steps: int
    """The number of steps each training ran (20)."""
    first_loss_of_timed_call: float | None | UnsetType = UNSET
    """hf_train_loop: the loss the timed call's step returned (-Z0, in σ), beside the trainings' first losses."""
    kde: TrainingRun | UnsetType = UNSET
    """The training with the KDE soft histogram (hf_train20: the timed call's losses only)."""
    sigmoid: TrainingRun | UnsetType = UNSET
    """The training with the sigmoid soft histogram (hf_train_loop only)."""


class Scan(Open):
    iterations: int
    """The number of iterations of the scan: the signal hypotheses, then the binnings."""
    max_normalised_error_vs_naive: float | None
    """max |this strategy's q0s and gradients - a naive recomputation's| / max(1, max |naive's|) over every iteration
    (dimensionless); null where the shapes differ."""
    tolerance: float
    """The largest max_normalised_error_vs_naive that passes (dimensionless)."""
    q0: list[float | None]
    """The scan result's first value, the first hypothesis's q0 (dimensionless), as a one-element list; null where not
    finite."""


class Check(Open):
    """The result check (the gate) of a case's first call: against a float64 reference, or for
    HistFactory the parity with pyhf and the gradient against finite differences."""

    reference: str
    """What the result was compared with: `numpy float64` (the workload's float64 NumPy reference), the reference
    engine (e.g. `pyhf <version> (<backend> backend)`), or `none` (nothing to compare)."""
    max_normalised_error: NonNegative | None
    """The worst error: max |result - reference| / max |reference| over the outputs; for HistFactory each gate's error
    over its tolerance, the largest (dimensionless). Null: no figure (shapes or output counts differ, nothing to
    compare)."""
    tolerance: float
    """The largest max_normalised_error that passes (dimensionless): the workload's for the dtype (at least 2e-3 for a
    TF32 variant), 1.0 for HistFactory."""
    passed: bool | None
    """Whether the result passed; null when not checked (no reference to compare with; files before 0.1.2 say true)."""
    detail: str | UnsetType = UNSET
    """Why it failed, in words (e.g. `shape (3,) != reference (4,)`); absent when nothing failed."""
    parity: Parity | UnsetType = UNSET
    """HistFactory: the NLL and q0 against the reference engine's."""
    fd: FiniteDifferences | UnsetType = UNSET
    """HistFactory gradient workloads: the signal gradient against central finite differences."""
    train_loop: TrainLoop | UnsetType = UNSET
    """hf_train_loop and hf_train20: the 20-step trainings the check ran, or the timed call's."""
    scan: Scan | UnsetType = UNSET
    """hf_mass_scan: every iteration against a naive recomputation on the same engine."""
    timed_call_normalised_error: float | None | UnsetType = UNSET
    """hf_fd_check: the normalised finite-difference error its timed call computed itself (dimensionless); absent
    otherwise."""

    @property
    def state(self) -> str:
        """`passed`, `failed`, or `not_checked` (a workload or case without a reference: nothing was compared)."""
        if self.passed is None or self.reference == NO_REFERENCE:
            return "not_checked"
        return "passed" if self.passed else "failed"
