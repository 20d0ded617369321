"""An environment here that holds what the GPU image holds of ttfr's stack, and nothing more: a fresh
virtual environment (its own pip, nothing installed) that sees, through a .pth file, only the
distributions of requirements/gpu-image.toml's [image] holds that this machine's .venv has (torch
and JAX as CPU builds, numpy, scipy, rich, ...), never what the image lacks (msgspec, jsonschema,
pyhf, ...). The offline GPU check must get everything else from the wheelhouse."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
from gpu_image import canonical, image_spec  # noqa: E402  (the image's spec, read as the scripts read it)

IMAGE = image_spec()


def _top_level(dist) -> set[str]:
    """The entries a distribution puts in site-packages (packages, modules, .libs, its dist-info)."""
    return {Path(f).parts[0] for f in dist.files or () if not str(f).startswith("..")}


def build(where: Path, leave_out=()) -> Path:
    """The image-like environment under `where`; its python. `leave_out`: held packages to drop
    (an image that lacks one of ttfr's needs)."""
    held = {canonical(n) for n in IMAGE["image"]["holds"]} - {canonical(n) for n in leave_out}
    site = where / "image-site"
    site.mkdir(parents=True)
    exposed = []
    for dist in importlib.metadata.distributions():
        name = canonical(dist.metadata["Name"] or "")
        if name not in held or name in exposed:
            continue
        base = Path(dist.locate_file(""))
        for entry in _top_level(dist):
            if (base / entry).exists() and not (site / entry).exists():
                (site / entry).symlink_to(base / entry)
        exposed.append(name)
    venv = where / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True)
    packages = next((venv / "lib").glob("python3*/site-packages"))
    (packages / "gpu-image.pth").write_text(f"{site}\n")
    return venv / "bin" / "python"
