"""What every type of the model shares: frozen msgspec Structs, and the numbers they hold."""

from __future__ import annotations

from typing import Annotated, Any, TypeVar

import msgspec
from msgspec import UNSET, Meta, Struct, UnsetType, field

__all__ = [
    "UNSET", "Artifact", "Count", "Fraction", "Open", "Seconds", "Sha256", "Stamp", "Struct", "UnsetType",
    "copied", "decode", "encode", "field", "present",
]  # fmt: skip

T = TypeVar("T")

Count = Annotated[int, Meta(ge=0)]
Stamp = Annotated[int, Meta(ge=0)]  # a CLOCK_MONOTONIC reading, ns
Seconds = Annotated[float, Meta(ge=0)]
Fraction = Annotated[float, Meta(ge=0, le=1)]
Sha256 = Annotated[str, Meta(pattern="^[a-f0-9]{64}$")]


class Artifact(Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A part of an artifact ttfr writes: exactly these fields (the schema says
    `additionalProperties: false`), absent ones being UNSET."""


class Open(Struct, frozen=True, kw_only=True):
    """A part of a record another process wrote (the worker, a runtime's counters): the fields
    analysis reads, typed; others are ignored rather than refused (an older or newer worker)."""


def encode(value: Any) -> Any:
    """JSON-ready builtins (dicts, lists, numbers, strings); UNSET fields left out."""
    return msgspec.to_builtins(value)


def decode(data: Any, kind: type[T]) -> T:
    """`data` (parsed JSON) as `kind`, checked: msgspec.ValidationError names the first bad field."""
    return msgspec.convert(data, kind)


def copied(source, names) -> dict:
    """The attributes `names` of `source`, by name: what one type hands on to another under the
    same names (a task's coordinates to its journal entry, a spec's settings to a case result)."""
    return {name: getattr(source, name) for name in names}


def present(value) -> bool:
    """A field that is set: neither UNSET nor None."""
    return value is not UNSET and value is not None
