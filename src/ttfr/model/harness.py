"""The harness's own figures (`ttfr selftest --harness`): what ttfr adds to a measured process,
cold and warm, against the bare equivalent measured beside it in paired rounds; how its
time-to-exit agrees with hyperfine's on one command; how long its fast test tier takes."""

from __future__ import annotations

from typing import Literal

from ttfr.model.base import UNSET, Artifact, Count, UnsetType
from ttfr.model.comparison import Estimate

# pass: the ratio's interval reaches below the limit and its estimate is within it;
# warn: the estimate is above the limit but the interval reaches below it (not shown);
# fail: the whole interval lies above the limit; unmeasured: too few rounds succeeded.
GateVerdict = Literal["pass", "warn", "fail", "unmeasured"]


class OverheadRatio(Artifact):
    """One of ttfr's own costs (B) against its bare equivalent (A): B/A from paired rounds."""

    name: str  # e.g. "cold process_s"
    measured: str  # what B is
    baseline: str  # what A is
    unit_s: Literal["process", "call"]  # the medians are seconds per process, or per call
    baseline_median_s: float | None
    measured_median_s: float | None
    estimate: Estimate
    limit: float
    verdict: GateVerdict
    reason: str | None = None  # why it is unmeasured

    def ratio_text(self) -> str:
        """B/A and its interval, e.g. `1.168× [1.143, 1.193]` (— when nothing was measured)."""
        ratio, ci = self.estimate.ratio, self.estimate.ci
        if ratio is None:
            return "—"
        return f"{ratio:.3f}×" + (f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "")

    def sentence(self) -> str:
        if self.verdict == "unmeasured":
            return f"{self.name}: not measured ({self.reason})"
        words = {"pass": "within", "warn": "above, but its interval reaches below,", "fail": "entirely above"}
        return f"{self.name}: {self.ratio_text()}, {words[self.verdict]} the limit {self.limit:g}×"


class Agreement(Artifact):
    """ttfr's time to exit (process_s) of one command against hyperfine's wall time of it,
    measured in alternating rounds; they agree when the median per-round ratio is within ±5%."""

    command: list[str]
    rounds: Count
    runs_per_round: Count
    ttfr_median_s: float
    hyperfine_median_s: float
    ratio: float  # median over rounds of (ttfr median / hyperfine median)
    per_round: list[float]
    agrees: bool


class HarnessCheck(Artifact):
    created_at: str
    python: str
    rounds: Count
    limit: float
    ratios: list[OverheadRatio]
    hyperfine: Agreement | None | UnsetType = UNSET  # None: hyperfine is not installed here
    hyperfine_note: str | None = None
    fast_tier_s: float | None = None  # the source checkout's `make test-fast`, when asked and present
    fast_tier_note: str | None = None

    @property
    def failed(self) -> list[OverheadRatio]:
        """The gate: ratios whose whole interval lies above the limit, or that could not be measured."""
        return [r for r in self.ratios if r.verdict in ("fail", "unmeasured")]

    @property
    def gate(self) -> Literal["pass", "regression", "unmeasured"]:
        """The gate's outcome: a figure it could not measure is that, not a regression."""
        if any(r.verdict == "unmeasured" for r in self.ratios):
            return "unmeasured"
        return "regression" if self.failed else "pass"
