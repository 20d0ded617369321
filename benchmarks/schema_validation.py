"""Validate ttfr's committed golden artifacts against their schemas, two validators, interleaved:

- jsonschema-rs (ttfr's: artifacts/store.py), one compiled Draft202012Validator per schema;
- jsonschema, the pure-Python validator ttfr used before, also one cached Draft202012Validator per schema.

Both must give the same verdict on every document, and both must refuse the same tampered copy
(a status outside its enum), checked first. Prints seconds per pass over the documents and the ratio;
docs/performance.md's table quotes it.

    .venv/bin/python benchmarks/schema_validation.py [ROUNDS]
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

import jsonschema
import jsonschema_rs

from ttfr.artifacts import store

GOLDEN = Path(__file__).resolve().parents[1] / "tests" / "golden"


def documents() -> list[tuple[dict, str]]:
    found = []
    for path in sorted(GOLDEN.rglob("*.json")):
        data = json.loads(path.read_text())
        if isinstance(data, dict) and data.get("schema") in store.SCHEMA_FILES:
            found.append((data, data["schema"]))
    return found


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    rounds = int(argv[0]) if argv else 5
    docs = documents()
    rust = {name: jsonschema_rs.Draft202012Validator(store.load_schema(name)) for name in store.SCHEMA_FILES}
    python = {name: jsonschema.Draft202012Validator(store.load_schema(name)) for name in store.SCHEMA_FILES}
    for data, name in docs:  # the same verdict, valid and tampered
        assert rust[name].is_valid(data) and python[name].is_valid(data), name
        if name == "ttfr.case_result.v2":
            tampered = dict(data, status="ok!")
            assert not rust[name].is_valid(tampered) and not python[name].is_valid(tampered)
    times: dict[str, list[float]] = {"jsonschema-rs": [], "jsonschema": []}
    for _ in range(rounds):
        for label, validators in (("jsonschema-rs", rust), ("jsonschema", python)):
            start = time.perf_counter()
            for data, name in docs:
                list(validators[name].iter_errors(data))
            times[label].append(time.perf_counter() - start)
    fast, slow = (statistics.median(times[k]) for k in ("jsonschema-rs", "jsonschema"))
    print(f"{len(docs)} golden artifacts, {rounds} rounds, median seconds a pass")
    print(f"  jsonschema-rs {fast * 1e3:8.2f} ms")
    print(f"  jsonschema    {slow * 1e3:8.2f} ms  ({slow / fast:.0f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
