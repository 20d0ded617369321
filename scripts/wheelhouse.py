"""`make wheelhouse`: the wheels an air-gapped GPU image lacks, downloaded here (where an index is
reachable) into one folder that travels with the checkout.

    python scripts/wheelhouse.py [--dest wheelhouse] [--python-version 3.12]

Which packages: requirements/gpu-image.toml's [carried] list, at requirements/cpu-lock.txt's
versions (the image runs what CI tests). Which wheels: binary ones for the image's Python and
platform (manylinux, x86-64), without their dependencies: each carried wheel's requirements are
checked instead to be carried too, or held by the image and listed among the [needs] the image's
pre-flight check verifies. The folder's total size is checked against the limit a GPU lease copies
(64 MiB), and its listing (LISTING.json: each wheel's name, version, file, bytes, sha256) is what
scripts/gpu_stack.py verifies before it installs anything. The folder is replaced whole, only
once every check passed: a failed download leaves the previous one as it was.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from email.parser import Parser
from pathlib import Path

from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name, parse_wheel_filename
from packaging.version import Version

from gpu_image import LISTING, LOCK, ROOT, image_spec, lock_pins
from gpu_image import LISTING_FORMAT as FORMAT


class WheelhouseError(Exception):
    """What keeps the wheelhouse from being made, in words (exit 1)."""


def carried_pins(spec: dict, pins: dict[str, str]) -> dict[str, str]:
    missing = [name for name in spec["carried"]["packages"] if canonicalize_name(name) not in pins]
    if missing:
        raise WheelhouseError(f"{', '.join(missing)}: carried but not pinned in {LOCK.name}")
    return {canonicalize_name(name): pins[canonicalize_name(name)] for name in spec["carried"]["packages"]}


def download(pins: dict[str, str], python_version: str, platforms: list[str], dest: Path) -> None:
    """pip download, binary wheels only, for that Python and platform, no dependencies."""
    abi = "cp" + python_version.replace(".", "")
    argv = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--disable-pip-version-check",
            "--python-version", python_version, "--implementation", "cp", "--abi", abi, "--abi", "none",
            *(word for platform in platforms for word in ("--platform", platform)), "--platform", "any",
            "-d", str(dest), *(f"{name}=={version}" for name, version in sorted(pins.items()))]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True)
    if done.returncode != 0:
        tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-6:])
        raise WheelhouseError(f"pip download failed (exit {done.returncode}):\n{tail}")


def wheel_requirements(path: Path) -> list[str]:
    """The Requires-Dist lines of a wheel's METADATA."""
    with zipfile.ZipFile(path) as wheel:
        name = next(n for n in wheel.namelist() if re.fullmatch(r"[^/]+\.dist-info/METADATA", n))
        metadata = Parser().parsestr(wheel.read(name).decode("utf-8"))
    return metadata.get_all("Requires-Dist") or []


def marker_environment(python_version: str) -> dict[str, str]:
    """Where the wheels will be installed: the image's Python on Linux, x86-64, CPython."""
    return {"python_version": python_version, "python_full_version": f"{python_version}.0", "sys_platform": "linux",
            "platform_system": "Linux", "platform_machine": "x86_64", "os_name": "posix",
            "implementation_name": "cpython", "platform_python_implementation": "CPython", "extra": ""}  # fmt: skip


def closure_problems(wheels: list[dict], spec: dict, python_version: str) -> list[str]:
    """Each carried wheel's requirements (for the image's Python) must be carried at a version
    they accept, or held by the image and listed in [needs] (at a minimum they accept) so the
    image's pre-flight check verifies them."""
    carried = {w["name"]: Version(w["version"]) for w in wheels}
    needs = {canonicalize_name(n): Version(v) for n, v in spec["needs"].items()}
    held = {canonicalize_name(n) for n in spec["image"]["holds"]}
    environment = marker_environment(python_version)
    problems = []
    for wheel in wheels:
        for line in wheel["requires"]:
            requirement = Requirement(line)
            if requirement.marker is not None and not Marker(str(requirement.marker)).evaluate(environment):
                continue
            name = canonicalize_name(requirement.name)
            if name in carried:
                if not requirement.specifier.contains(carried[name], prereleases=True):
                    problems.append(f"{wheel['name']} needs {requirement}, and {name} {carried[name]} is carried")
            elif name not in held:
                problems.append(f"{wheel['name']} needs {requirement}: neither carried nor held by the image")
            elif name not in needs:
                problems.append(f"{wheel['name']} needs {requirement}: held by the image, but not in [needs] "
                                "(so its pre-flight check would not verify it)")  # fmt: skip
            elif not requirement.specifier.contains(needs[name], prereleases=True):
                problems.append(f"{wheel['name']} needs {requirement}, but [needs] accepts {name} {needs[name]}")
    return problems


def describe(folder: Path, python_version: str) -> list[dict]:
    wheels = []
    for path in sorted(folder.glob("*.whl")):
        name, version, _build, tags = parse_wheel_filename(path.name)
        wheels.append({"name": str(name), "version": str(version), "file": path.name, "bytes": path.stat().st_size,
                       "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
                       "tags": sorted(str(t) for t in tags), "requires": wheel_requirements(path)})  # fmt: skip
    return wheels


def listing(wheels: list[dict], python_version: str, platforms: list[str], limit_bytes: int) -> dict:
    return {
        "format": FORMAT,
        "python": python_version,
        "platforms": platforms,
        "wheels": [{k: w[k] for k in ("name", "version", "file", "bytes", "sha256", "tags")} for w in wheels],
        "total_bytes": sum(w["bytes"] for w in wheels),
        "limit_bytes": limit_bytes,
    }


class Refused(WheelhouseError):
    """A destination that must not be replaced (exit 2, before anything is downloaded)."""


def replaceable(dest: Path) -> None:
    """`dest` is replaced whole: only a wheelhouse (its wheels and listing, nothing else) or nothing
    may be there, and never a folder holding this checkout or the current directory."""
    if dest == ROOT or dest in ROOT.parents or dest == Path.cwd() or dest in Path.cwd().parents:
        raise Refused(f"--dest {dest} holds this checkout or the current directory; name a folder of its own")
    if not dest.exists():
        return
    if not dest.is_dir() or dest.is_symlink():
        raise Refused(f"--dest {dest} exists and is not a folder: it would be replaced; name another")
    others = sorted(p.name for p in dest.iterdir() if not (p.is_file() and (p.suffix == ".whl" or p.name == LISTING)))
    try:
        made_here = json.loads((dest / LISTING).read_text()).get("format") == FORMAT
    except (OSError, ValueError, AttributeError):
        made_here = not any(dest.iterdir())  # an empty folder is fine too
    if others or not made_here:
        shown = ", ".join(others[:3]) or "no wheelhouse listing"
        raise Refused(f"--dest {dest} is not a wheelhouse ({shown}): it would be replaced whole; name another folder")


def make(dest: Path, python_version: str, spec: dict | None = None, pins: dict | None = None) -> dict:
    """Download, check, and only then replace `dest` with the new wheels and their listing."""
    spec = image_spec() if spec is None else spec
    wanted = carried_pins(spec, lock_pins() if pins is None else pins)
    platforms = spec["image"]["platforms"]
    limit = int(spec["carried"]["limit_mib"]) * 1024 * 1024
    dest = dest.resolve()
    replaceable(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".wheelhouse-", dir=dest.parent))
    try:
        download(wanted, python_version, platforms, staging)
        wheels = describe(staging, python_version)
        got = {w["name"]: w["version"] for w in wheels}
        if got != wanted or len(wheels) != len(wanted):
            raise WheelhouseError(f"pip downloaded {sorted(got.items())}, not the pins {sorted(wanted.items())}")
        problems = closure_problems(wheels, spec, python_version)
        if problems:
            raise WheelhouseError("the carried wheels do not hold together with the image:\n  " + "\n  ".join(problems))
        result = listing(wheels, python_version, platforms, limit)
        if result["total_bytes"] > limit:
            raise WheelhouseError(f"the wheels come to {result['total_bytes'] / 2**20:.1f} MiB, above the "
                                  f"{limit / 2**20:.0f} MiB a GPU lease copies with the checkout")  # fmt: skip
        (staging / LISTING).write_text(json.dumps(result, indent=2) + "\n")
        if dest.exists():
            old = dest.with_name(dest.name + ".old")
            shutil.rmtree(old, ignore_errors=True)
            os.replace(dest, old)
            os.replace(staging, dest)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(staging, dest)
        return result
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def show(result: dict, dest: Path) -> str:
    rows = [f"{w['name']:<28}{w['version']:<12}{w['bytes'] / 1024:>9.0f} KiB  {w['file']}" for w in result["wheels"]]
    total = f"{result['total_bytes'] / 2**20:.2f} MiB of {result['limit_bytes'] / 2**20:.0f} MiB"
    return "\n".join([f"wheelhouse {dest} (Python {result['python']}, {len(rows)} wheels, {total}):", *rows])


def main(argv=None) -> int:
    spec = image_spec()
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dest", type=Path, default=ROOT / "wheelhouse", help="the folder (replaced whole)")
    ap.add_argument("--python-version", default=spec["image"]["python"],
                    help="the Python the wheels are for (default: the image's, %(default)s)")  # fmt: skip
    args = ap.parse_args(argv)
    if not re.fullmatch(r"3\.\d+", args.python_version):
        print(f"wheelhouse: --python-version takes MAJOR.MINOR, e.g. 3.12; got {args.python_version!r}", file=sys.stderr)
        return 2
    try:
        result = make(args.dest, args.python_version, spec)
    except WheelhouseError as exc:
        print(f"wheelhouse: {exc}", file=sys.stderr)
        return 2 if isinstance(exc, Refused) else 1
    print(show(result, args.dest))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
