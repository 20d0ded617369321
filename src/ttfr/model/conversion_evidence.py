"""A conversion route's evidence (issue 28), as its checking process reports it: per layout
whether the route copied (addresses and a write through the source), its values, a leak probe,
and memcpy of the same bytes for scale. `Open`: fields a newer or older worker adds are ignored.
"""

from __future__ import annotations

from typing import Annotated, Literal

from msgspec import Meta

from ttfr.model.base import Count, Open

NonNegative = Annotated[float, Meta(ge=0)]


class ConversionLayout(Open):
    """A conversion route on one layout of its source (child/workloads/convert.py): refused or unusable (the
    library's words), not applicable, or converted: copied or not (the buffers' address ranges and, where
    the source is writable, a write through it; null where the two disagree), its values, its time."""

    layout: str
    """The source's layout: contiguous (the timed calls' own source), transposed, misaligned (one element into its
    buffer) or readonly."""
    outcome: Literal["ok", "refused", "unusable", "not_applicable"]
    """ok (converted), refused (the library raised), unusable (converted, then the library raised when the result was
    read) or not_applicable (the source's kind has no such layout)."""
    reason: str | None
    """A refusal's or an unusable result's exception in the library's words, why the layout does not apply, or, for a
    converted one without a copy verdict, how its addresses and its write disagree; else null."""
    copied: bool | None
    """Whether the conversion copied, measured: from shares_memory and write_through; null where they disagree or
    neither could tell."""
    shares_memory: bool | None
    """Whether the destination's buffer overlaps the source's address range (one address space for host and device
    memory under CUDA's unified addressing); null where an address is unknown."""
    write_through: bool | None
    """Whether a write into the source showed in the destination; null: the source cannot be written (read-only,
    immutable)."""
    values_ok: bool | None
    """Whether the destination's values equal the source's exactly (a route that ignored strides fails); null unless
    converted."""
    call_s: NonNegative | None
    """The median seconds of a few synchronised conversions of this layout in the checking process; null unless
    converted."""
    source_offset_64: Annotated[int, Meta(ge=0, lt=64)] | None
    """The source's start address modulo 64, in bytes (0: 64-byte aligned); null where unknown or not applicable."""


class LeakProbe(Open):
    """Repeated conversions in one process, its RSS read before, at each tenth and after."""

    calls: Count
    """The number of conversions made (up to 10,000; fewer for a large source or past 5 s)."""
    rss_samples: list[Count]
    """The process's resident memory in bytes before the first conversion and after each tenth of them; empty where it
    could not be read."""
    growth_per_call_bytes: float | None
    """(last sample - first) / calls: the RSS growth per conversion, in bytes; null where the RSS could not be read."""
    grows: bool | None
    """Whether the RSS still grew by 4 MiB or more over the probe's second half (a leak); null where it could not be
    read."""


class ConversionEvidence(Open):
    """What the checking process of a conversion case measured beside its timed calls."""

    route: str
    """The route's name (e.g. numpy_to_torch_from_numpy)."""
    source: str
    """The source's kind: numpy, torch, jax, torch_pinned, torch_cuda or jax_gpu."""
    destination: str
    """The destination's kind (the same kinds)."""
    api: str
    """What the user writes, e.g. `torch.from_numpy(a)`."""
    bytes: Count
    """The source's size in bytes."""
    source_offset_64: Annotated[int, Meta(ge=0, lt=64)] | None
    """The timed calls' source's start address modulo 64, in bytes; null where unknown."""
    copied: bool | None
    """Whether the timed calls' conversion copied: the contiguous layout's `copied`."""
    layouts: list[ConversionLayout]
    """The route on each layout of its source: contiguous, transposed, misaligned, readonly."""
    memcpy_s: NonNegative
    """This machine's memcpy of the same bytes in the same process: the median seconds of np.copyto into an
    already-touched destination."""
    memcpy_fresh_s: NonNegative
    """The same into a freshly allocated destination, first-touch page faults included (median seconds)."""
    leak: LeakProbe
    """Repeated conversions with the process's RSS watched."""
