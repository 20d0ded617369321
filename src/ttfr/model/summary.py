"""Summary: one distribution of figures (timings, bytes) as every artifact reports it."""

from __future__ import annotations

from typing import Annotated

from msgspec import Meta

from ttfr.model.base import Artifact, Fraction


class MedianCI(Artifact):
    """The median's distribution-free confidence interval (order statistics) and the coverage it
    actually has (below 0.95 when too few values allow 95%: reported as such, never rounded up)."""

    low: float
    """The interval's low end: an order statistic of the values, in their unit (seconds, bytes or a fraction)."""
    high: float
    """The interval's high end: an order statistic of the values, in their unit (seconds, bytes or a fraction)."""
    level: Fraction
    """The probability that the interval covers the median: the narrowest one reaching 0.95, else [min, max] with
    its lower coverage (0 for a single value)."""


class Outlier(Artifact):
    """A series' first value, far (robust z) from the rest: reported, never removed."""

    value: float
    """The series' first value, in its unit (seconds for a timing)."""
    robust_z: float
    """How far it lies from the rest's median, in robust sigmas (1.4826 x the rest's MAD); flagged above 3.5."""


class Summary(Artifact):
    n: Annotated[int, Meta(ge=1)]
    """Number of values summarised (null values left out)."""
    min: float
    """The smallest value, in the series' unit: seconds (a `_s` figure), bytes (`_bytes`) or a fraction (`_share`)."""
    max: float
    """The largest value, in the series' unit: seconds, bytes or a fraction, as its field's name says."""
    median: float
    """The median value, in the series' unit: seconds, bytes or a fraction, as its field's name says."""
    median_ci: MedianCI
    """The median's order-statistic confidence interval, with the coverage it actually has."""
    p95: float
    """The 95th percentile (linear interpolation between values), in the series' unit: seconds, bytes or a
    fraction."""
    mean: float
    """The arithmetic mean, in the series' unit: seconds, bytes or a fraction."""
    std: Annotated[float, Meta(ge=0)]
    """The sample standard deviation (n - 1 in the denominator; 0 for a single value), in the series' unit: seconds,
    bytes or a fraction."""
    mad: Annotated[float, Meta(ge=0)]
    """The median absolute deviation from the median, unscaled (not x 1.4826), in the series' unit: seconds, bytes
    or a fraction."""
