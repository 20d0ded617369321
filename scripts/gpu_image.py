"""What the offline GPU check and its wheelhouse read, standard library only (it runs on the GPU
image before anything is installed): requirements/gpu-image.toml and the lock file's pins."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
IMAGE = ROOT / "requirements" / "gpu-image.toml"
LOCK = ROOT / "requirements" / "cpu-lock.txt"
LISTING = "LISTING.json"  # the wheelhouse's listing, beside its wheels
LISTING_FORMAT = "ttfr.wheelhouse.v1"


def canonical(name: str) -> str:
    """A distribution's name as PEP 503 compares it (jsonschema_specifications == jsonschema-specifications)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def image_spec(path: Path = IMAGE) -> dict:
    return tomllib.loads(path.read_text())


def lock_pins(path: Path = LOCK) -> dict[str, str]:
    """requirements/cpu-lock.txt's `name==version` lines, by canonical name."""
    pins = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if "==" in line:
            name, version = line.split("==", 1)
            pins[canonical(name)] = version.strip()
    return pins
