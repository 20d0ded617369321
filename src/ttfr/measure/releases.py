"""`ttfr history --releases PKG=LO..HI` (or `PKG=A,B,C`): which released versions of a package a
sweep measures, from the package index pip is configured with (`pip index versions`), checked
before anything is built: an unknown package, LO above HI, a range or list matching no release
are usage errors naming what is valid."""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import dataclass

from ttfr.errors import UsageError

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
INDEX_TIMEOUT_S = 120


@dataclass(frozen=True)
class Releases:
    package: str
    versions: tuple[str, ...]  # oldest first
    asked: str  # as given on the command line


def _version(text: str):
    from packaging.version import InvalidVersion, Version

    try:
        return Version(text)
    except InvalidVersion:
        return None


def parse(text: str) -> tuple[str, str | None, str | None, list[str] | None]:
    """`PKG=LO..HI` -> (PKG, LO, HI, None); `PKG=A,B` -> (PKG, None, None, [A, B])."""
    package, sep, spec = text.partition("=")
    package = package.strip()
    if not sep or not _NAME.match(package) or not spec.strip():
        raise UsageError(f"--releases {text!r}: give PACKAGE=LO..HI or PACKAGE=V1,V2,... (e.g. numpy=1.26.0..2.3.1)")
    if ".." in spec:
        low, _, high = (part.strip() for part in spec.partition(".."))
        for value in (low, high):
            if value and _version(value) is None:
                raise UsageError(f"--releases {text!r}: {value!r} is not a version")
        if low and high and _version(low) > _version(high):
            raise UsageError(f"--releases {text!r}: {low} is above {high}; give LO..HI, oldest first")
        return package, low or None, high or None, None
    listed = [v.strip() for v in spec.split(",") if v.strip()]
    bad = [v for v in listed if _version(v) is None]
    if bad:
        raise UsageError(f"--releases {text!r}: {bad[0]!r} is not a version")
    return package, None, None, listed


def available(package: str, python: str = sys.executable) -> list[str]:
    """The package's final releases on the configured index, oldest first; UsageError when the index knows no
    such package."""
    try:
        done = subprocess.run([python, "-m", "pip", "index", "versions", package, "--disable-pip-version-check"],
                              capture_output=True, text=True, timeout=INDEX_TIMEOUT_S)  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise UsageError(f"--releases: the package index could not be asked for {package}'s releases ({exc})") from None
    found = re.search(r"^Available versions: (.+)$", done.stdout, re.MULTILINE)
    if done.returncode != 0 or not found:
        raise UsageError(f"--releases: the package index has no package {package!r} (pip: "
                         f"{(done.stderr.strip().splitlines() or ['no answer'])[-1]})")  # fmt: skip
    versions = [v.strip() for v in found.group(1).split(",")]
    parsed = [(v, _version(v)) for v in versions]
    return [v for v, p in sorted((x for x in parsed if x[1] is not None), key=lambda x: x[1]) if not p.is_prerelease]


def choose(text: str, known: list[str] | None = None, python: str = sys.executable) -> Releases:
    """The releases `--releases TEXT` names, checked against the index (or `known`, oldest first)."""
    package, low, high, listed = parse(text)
    known = available(package, python) if known is None else known
    if listed is not None:
        missing = [v for v in listed if v not in known]
        if missing:
            near = ", ".join(known[-8:])
            raise UsageError(f"--releases {text!r}: {package} has no release {missing[0]}; its latest: {near}")
        chosen = sorted(dict.fromkeys(listed), key=_version)
    else:
        chosen = [v for v in known if (low is None or _version(v) >= _version(low))
                  and (high is None or _version(v) <= _version(high))]  # fmt: skip
        if not chosen:
            span = f"its releases run from {known[0]} to {known[-1]}" if known else "it has no release"
            raise UsageError(f"--releases {text!r}: no release of {package} lies in that range; {span}")
    if len(chosen) < 2:
        raise UsageError(f"--releases {text!r}: a sweep needs at least two releases; {package} has "
                         f"{chosen[0]} alone there")  # fmt: skip
    return Releases(package=package, versions=tuple(chosen), asked=text)
