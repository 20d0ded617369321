"""One isolated environment per release, made with uv, kept in ttfr's own cache (never the user's).

An environment holds the swept package at its release, the other packages the chosen cases'
backends import (numpy always: the result check's reference), resolved under this checkout's lock
file as constraints where they are compatible (else unconstrained, and recorded so), binary
wheels only (`--no-build`: an old release without a wheel for this Python is a point with uv's
words, never a source build). ttfr's worker side is linked in without its dependencies: a folder
holding links to this ttfr's package and `ttfr_mark`, on the environment's path (a `.pth`).

Each is built in a `.partial-*` folder and renamed into place whole, under a name made of the
release and a hash of what it was asked for (Python, requirements, constraints): asked again, it
is reused. `ttfr-env.json` in it records the request, the constraints used and uv's resolution
(`uv pip freeze`). uv downloads through its own cache (its default, shared by every build).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import ttfr
from ttfr.measure import catalog
from ttfr.redaction import redact_text

RECORD = "ttfr-env.json"
WORKER_LINK = "ttfr-worker"
BUILD_TIMEOUT_S = 1800
ALWAYS = ("numpy",)  # the result check's float64 reference


@dataclass(frozen=True)
class Env:
    version: str
    state: str  # ready | failed
    python: str | None = None
    reason: str | None = None
    reused: bool = False
    bytes: int | None = None
    constraints: str | None = None  # "lock file" | "none"
    resolution: dict[str, str] = field(default_factory=dict)


def default_cache() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "ttfr" / "envs"


def uv_binary() -> str:
    """uv, from this environment's scripts (ttfr's lock file installs it) or PATH."""
    beside = Path(sys.executable).parent / "uv"
    found = str(beside) if beside.is_file() else shutil.which("uv")
    if not found:
        from ttfr.errors import UsageError

        raise UsageError("--releases builds environments with uv, which is not installed: `pip install uv`")
    return found


def requirements(package: str, version: str, needs: list[str]) -> list[str]:
    """The swept package at its release and what the cases import besides (unpinned: the lock file constrains)."""
    facts = catalog.swept_package(package)
    swept = facts.requirement.format(name=package, version=version)
    others = [n for n in dict.fromkeys([*ALWAYS, *needs]) if n != package and n not in facts.pinned_with]
    return [swept, *others]


def _constraints(package: str, lock: Path | None) -> str:
    """The lock file's pins but the swept package's own (and those released with it: jax's jaxlib)."""
    if lock is None:
        return ""
    skip = {package, *catalog.swept_package(package).pinned_with}
    lines = []
    for line in lock.read_text().splitlines():
        name = line.split("==", 1)[0].strip().lower().replace("_", "-")
        if line.strip() and not line.startswith("#") and name not in skip:
            lines.append(line.strip())
    return "\n".join(lines) + "\n"


def env_name(version: str, package: str, python: str, wanted: list[str], constraints: str) -> str:
    key = json.dumps([python, sys.version, wanted, hashlib.sha256(constraints.encode()).hexdigest()])
    return f"{package}-{version}-{hashlib.sha256(key.encode()).hexdigest()[:12]}"


def _size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def _run(argv: list[str], output: bool = False) -> tuple[bool, str]:
    """Whether uv succeeded, and its words (its error output; with `output`, what it printed)."""
    env = {**os.environ, "UV_PYTHON_DOWNLOADS": "never", "UV_NO_PROGRESS": "1"}
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S, env=env)
    except subprocess.TimeoutExpired:
        return False, f"{Path(argv[0]).name} {argv[1]} did not finish within {BUILD_TIMEOUT_S} s"
    text = done.stdout if output and done.returncode == 0 else (done.stderr or done.stdout)
    return done.returncode == 0, redact_text(text.strip(), env)


def _last_words(text: str, lines: int = 6) -> str:
    kept = [line.strip() for line in text.splitlines() if line.strip()]
    return " / ".join(kept[-lines:]) or "no output"


def _link_worker(root: Path, python: Path, final: Path) -> None:
    """This ttfr's package and ttfr_mark, linked into the environment (being built in `root`, to be renamed to
    `final`) without its dependencies."""
    done = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    site = Path(done.stdout.strip())
    folder = root / WORKER_LINK
    folder.mkdir()
    package = Path(ttfr.__file__).resolve().parent
    (folder / "ttfr").symlink_to(package, target_is_directory=True)
    mark = package.parent / "ttfr_mark.py"
    if mark.is_file():
        (folder / "ttfr_mark.py").symlink_to(mark)
    (site / "ttfr-worker.pth").write_text(f"{final / WORKER_LINK}\n")


def _read(root: Path, version: str) -> Env | None:
    try:
        record = json.loads((root / RECORD).read_text())
    except (OSError, ValueError):
        return None
    python = root / "bin" / "python"
    if not python.exists():
        return None
    return Env(version=version, state="ready", python=str(python), reused=True, bytes=record.get("bytes"),
               constraints=record.get("constraints"), resolution=record.get("resolution") or {})  # fmt: skip


def ensure(package: str, version: str, needs: list[str], cache: Path, lock: Path | None,
           python: str = sys.executable) -> Env:  # fmt: skip
    """The release's environment: reused when built before, else built now; failed (with uv's words) when it does
    not resolve or install."""
    wanted = requirements(package, version, needs)
    constraints = _constraints(package, lock)
    root = Path(cache) / env_name(version, package, python, wanted, constraints)
    existing = _read(root, version)
    if existing is not None:
        return existing
    Path(cache).mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".partial-", dir=cache))
    try:
        uv = uv_binary()
        shutil.rmtree(staging)
        ok, words = _run([uv, "venv", "--quiet", "--python", python, str(staging)])
        if not ok:
            return Env(version=version, state="failed", reason=f"uv venv: {_last_words(words)}")
        env_python = staging / "bin" / "python"
        used = "lock file" if constraints else "none"
        ok, words = _install(uv, env_python, wanted, constraints, staging)
        if not ok and constraints:  # the lock's pins do not fit this release: unconstrained, and said so
            used = "none"
            ok, words = _install(uv, env_python, wanted, "", staging)
        if not ok:
            return Env(version=version, state="failed", reason=f"uv pip install {' '.join(wanted)}: {_last_words(words)}")
        _link_worker(staging, env_python, root)
        ok, frozen = _run([uv, "pip", "freeze", "--python", str(env_python)], output=True)
        resolution = dict(line.split("==", 1) for line in frozen.splitlines() if "==" in line) if ok else {}
        size = _size(staging)
        record = {"package": package, "version": version, "requested": wanted, "constraints": used,
                  "resolution": resolution, "bytes": size, "python": python, "ttfr": ttfr.__version__}  # fmt: skip
        (staging / RECORD).write_text(json.dumps(record, indent=2) + "\n")
        if root.exists():  # a damaged one (no record, no interpreter): ours to replace
            shutil.rmtree(root)
        staging.rename(root)  # whole or not at all
        staging = None
        return Env(version=version, state="ready", python=str(root / "bin" / "python"), bytes=size, constraints=used,
                   resolution=resolution)  # fmt: skip
    finally:
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)


def _install(uv: str, python: Path, wanted: list[str], constraints: str, staging: Path) -> tuple[bool, str]:
    argv = [uv, "pip", "install", "--quiet", "--no-build", "--python", str(python), *wanted]
    if constraints:
        path = staging / "constraints.txt"
        path.write_text(constraints)
        argv += ["--constraints", str(path)]
    return _run(argv)


def envs(cache: Path) -> list[Path]:
    return sorted(p for p in Path(cache).iterdir() if p.is_dir()) if Path(cache).is_dir() else []


def prune(cache: Path) -> tuple[int, int]:
    """Remove every environment (and half-built one) in the cache: (how many, bytes freed)."""
    removed, freed = 0, 0
    for path in envs(cache):
        freed += _size(path)
        shutil.rmtree(path, ignore_errors=True)
        removed += 1
    return removed, freed
