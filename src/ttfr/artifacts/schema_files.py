"""`make schemas`: the JSON Schema files of the artifacts whose schemas the model's types
generate (ttfr/model/schemas.py), written where the readers load them from."""

from __future__ import annotations

import sys
from pathlib import Path

from ttfr.artifacts.store import write_bytes_atomic
from ttfr.model import schemas


def write(directory: Path) -> list[Path]:
    written = []
    for name, (file_name, _root, _title) in schemas.GENERATED.items():
        path = Path(directory) / file_name
        write_bytes_atomic(path, schemas.text(name).encode("utf-8"))
        written.append(path)
    return written


if __name__ == "__main__":
    for path in write(Path(sys.argv[1])):
        print(f"wrote {path}")
