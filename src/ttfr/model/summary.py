"""Summary: one distribution of figures (timings, bytes) as every artifact reports it."""

from __future__ import annotations

from typing import Annotated

from msgspec import Meta

from ttfr.model.base import Artifact, Fraction


class MedianCI(Artifact):
    """The median's distribution-free confidence interval (order statistics) and the coverage it
    actually has (below 0.95 when too few values allow 95%: reported as such, never rounded up)."""

    low: float
    high: float
    level: Fraction


class Outlier(Artifact):
    """A series' first value, far (robust z) from the rest: reported, never removed."""

    value: float
    robust_z: float


class Summary(Artifact):
    n: Annotated[int, Meta(ge=1)]
    min: float
    max: float
    median: float
    median_ci: MedianCI
    p95: float
    mean: float
    std: Annotated[float, Meta(ge=0)]
    mad: Annotated[float, Meta(ge=0)]
