"""Decode and validate a journal of N runs into typed objects, two ways, interleaved:

- msgspec: `msgspec.json.decode(line, type=JournalEntry)` (ttfr's model: frozen Structs whose
  types and constraints are checked while decoding);
- dataclasses: `json.loads`, then the entry's JSON Schema (generated from the same types) with
  a cached jsonschema validator, then frozen dataclasses built field by field (mirrors of the
  same types, made with dataclasses.make_dataclass).

Both refuse the same malformed line (checked first). The entries are real ones: the fixture
suite's journal (tests/golden), repeated with fresh indexes. Prints seconds per journal and
the ratio; docs/performance.md's table quotes it.

    .venv/bin/python benchmarks/typed_model.py [N] [ROUNDS]
"""

from __future__ import annotations

import dataclasses
import json
import statistics
import sys
import time
from pathlib import Path

import jsonschema
import msgspec
from msgspec import inspect as mi

from ttfr.model.journal import JournalEntry

GOLDEN = Path(__file__).resolve().parents[1] / "tests" / "golden" / "fixture_suite" / "journal.jsonl"


def journal_lines(n: int) -> list[bytes]:
    sample = [json.loads(line) for line in GOLDEN.read_text().splitlines()]
    lines = []
    for i in range(n):
        entry = dict(sample[i % len(sample)], index=i, task=f"case|policy|{i}")
        lines.append(json.dumps(entry, sort_keys=True).encode())
    return lines


# ------------------------------------------------------------------ dataclass mirrors
_MIRRORS: dict[type, type] = {}


def _mirror(struct_type: mi.StructType) -> type:
    cls = struct_type.cls
    if cls not in _MIRRORS:
        fields = [(f.encode_name, object, dataclasses.field(default=None)) for f in struct_type.fields]
        _MIRRORS[cls] = dataclasses.make_dataclass(cls.__name__ + "DC", fields, frozen=True, slots=True)
    return _MIRRORS[cls]


def _build(info, value):
    if value is None:
        return None
    if isinstance(info, mi.StructType):
        mirror = _mirror(info)
        return mirror(**{f.encode_name: _build(f.type, value.get(f.encode_name)) for f in info.fields
                         if f.encode_name in value})  # fmt: skip
    if isinstance(info, mi.UnionType):
        for member in info.types:
            if isinstance(member, mi.StructType) and isinstance(value, dict):
                return _build(member, value)
        return value
    if isinstance(info, mi.ListType):
        return [_build(info.item_type, v) for v in value]
    if isinstance(info, mi.DictType):
        return {k: _build(info.value_type, v) for k, v in value.items()}
    return value


def main(n: int = 100_000, rounds: int = 5) -> None:
    lines = journal_lines(n)
    decoder = msgspec.json.Decoder(JournalEntry)
    validator = jsonschema.Draft202012Validator(msgspec.json.schema(JournalEntry))
    info = mi.type_info(JournalEntry)

    def with_msgspec():
        return [decoder.decode(line) for line in lines]

    def with_dataclasses():
        out = []
        for line in lines:
            data = json.loads(line)
            validator.validate(data)
            out.append(_build(info, data))
        return out

    bad = json.loads(lines[0])
    bad["index"] = -1
    for name, reject in (("msgspec", lambda: decoder.decode(json.dumps(bad))), ("dataclasses", lambda: validator.validate(bad))):
        try:
            reject()
        except (msgspec.ValidationError, jsonschema.ValidationError):
            continue
        raise SystemExit(f"{name} accepted a negative index")
    assert with_msgspec()[7].index == 7 and with_dataclasses()[7].index == 7

    times = {"msgspec": [], "dataclasses": []}
    for _ in range(rounds):  # interleaved: both see the same machine
        for name, run in (("msgspec", with_msgspec), ("dataclasses", with_dataclasses)):
            start = time.perf_counter()
            run()
            times[name].append(time.perf_counter() - start)
    fast, slow = statistics.median(times["msgspec"]), statistics.median(times["dataclasses"])
    print(f"journal of {n} runs ({sum(map(len, lines)) / 1e6:.0f} MB), median of {rounds} interleaved rounds:")
    print(f"  msgspec Structs           {fast:7.2f} s  ({fast / n * 1e6:.1f} µs/entry)")
    print(f"  json + jsonschema + dataclasses {slow:7.2f} s  ({slow / n * 1e6:.1f} µs/entry)")
    print(f"  ratio dataclasses / msgspec: {slow / fast:.1f}x")


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:3]))
