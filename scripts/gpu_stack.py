"""`make gpu-check`: run benchmarks/gpu_check.py on this machine's own Python stack (a GPU image's
CUDA builds of torch and JAX), not on the CPU lock file's .venv.

    python3 scripts/gpu_stack.py --wheelhouse wheelhouse [-- gpu_check options]   # offline
    python3 scripts/gpu_stack.py [-- gpu_check options]                           # from the index

Standard library only (it runs before ttfr's own needs are installed). In order, before anything is
measured:
1. the wheels: with --wheelhouse, its LISTING.json is read and every wheel checked against it
   (present, size, sha256, built for this Python); without, the carried packages are downloaded
   from the index at requirements/cpu-lock.txt's versions;
2. they are installed with `pip install --no-index --no-deps --target` into a temporary directory
   (offline: pip's configured indexes and find-links are switched off, so nothing is downloaded);
   nothing else is touched;
3. the stack is checked: every package requirements/gpu-image.toml [needs] present at its minimum
   version, every carried one at its listed version; where a GPU is present also a CUDA build of
   torch and a JAX CUDA plugin of jaxlib's own version. Any missing or unsupported one: exit 2,
   each named, nothing run;
4. gpu_check.py runs from this checkout (PYTHONPATH: the temporary directory, then src/) with this
   interpreter, and its exit code is this script's.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from gpu_image import LISTING, LISTING_FORMAT, ROOT, canonical, image_spec, lock_pins

EXIT_REFUSED = 2  # ttfr's exit code for bad input, before anything runs
EXIT_INTERRUPTED = 130


class Refused(Exception):
    """What stops the check before anything runs, in words (exit 2)."""


def release(version: str) -> tuple[int, ...]:
    """A version's release numbers (2.11.0+cu130 -> (2, 11, 0); 0.11.2rc1 -> (0, 11, 2)): what
    a minimum is compared with."""
    match = re.match(r"\d+(?:\.\d+)*", version.strip())
    return tuple(int(part) for part in match.group(0).split(".")) if match else ()


def at_least(version: str, minimum: str) -> bool:
    have, need = release(version), release(minimum)
    width = max(len(have), len(need))
    return have + (0,) * (width - len(have)) >= need + (0,) * (width - len(need))


def python_tag() -> str:
    return f"cp{sys.version_info.major}{sys.version_info.minor}"


def pip_env(offline: bool) -> dict:
    """pip's environment: offline, none of the machine's configured indexes, links or caches; online,
    the site's own (a mirror named by PIP_INDEX_URL, its certificate)."""
    env = {k: v for k, v in os.environ.items() if not (offline and k.startswith("PIP_"))}
    if offline:
        env.update(PIP_CONFIG_FILE=os.devnull, PIP_NO_INDEX="1", PIP_NO_CACHE_DIR="1")
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def runs_here(tag: str) -> bool:
    """A wheel tag (python-abi-platform) this interpreter can import: pure Python, its own CPython
    version, or the stable ABI (abi3) of an older or equal one."""
    python, abi, _platform = (tag.split("-") + ["", ""])[:3]
    if python in ("py3", f"py{sys.version_info.major}{sys.version_info.minor}") and abi == "none":
        return True
    if abi == "abi3" and python.startswith("cp3") and python[3:].isdigit():
        return int(python[3:]) <= sys.version_info.minor
    return python == python_tag() and abi in (python_tag(), "none")


def listed_wheels(folder: Path) -> list[Path]:
    """The wheelhouse's wheels, each checked against its LISTING.json: any wheel missing,
    changed or not built for this interpreter is refused, before pip sees it."""
    path = folder / LISTING
    if not folder.is_dir():
        raise Refused(f"no wheelhouse at {folder}: run `make wheelhouse` where an index is reachable, and bring the "
                      "folder along with the checkout")  # fmt: skip
    try:
        listing = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise Refused(f"{path}: unreadable ({exc}): make it again with `make wheelhouse`") from exc
    if not isinstance(listing, dict) or listing.get("format") != LISTING_FORMAT or not isinstance(listing.get("wheels"), list):
        raise Refused(f"{path}: not a {LISTING_FORMAT} listing: make it again with `make wheelhouse`")
    wanted, problems = [], []
    for wheel in listing["wheels"]:
        name = wheel.get("file") if isinstance(wheel, dict) else None
        if not isinstance(name, str) or "/" in name or not name.endswith(".whl"):
            problems.append(f"an entry without a plain wheel file name: {wheel!r:.80}")
            continue
        file = folder / name
        if not file.is_file():
            problems.append(f"{name}: listed, not there")
        elif file.stat().st_size != wheel.get("bytes") or hashlib.sha256(file.read_bytes()).hexdigest() != wheel.get("sha256"):
            problems.append(f"{name}: not the file the listing names (size or sha256 differs)")
        else:
            tags = wheel.get("tags") or []
            if not any(runs_here(t) for t in tags):
                problems.append(f"{name}: built for {', '.join(sorted({t.split('-')[0] for t in tags}))}, "
                                f"not this Python ({python_tag()}): make the wheelhouse with "
                                f"--python-version {sys.version_info.major}.{sys.version_info.minor}")  # fmt: skip
            wanted.append(file)
    names = [canonical(p.name.split("-")[0]) for p in wanted]
    problems += [f"{name}: two wheels of it (pip would refuse both): keep one" for name in sorted(set(names))
                 if names.count(name) > 1]  # fmt: skip
    unlisted = sorted({p.name for p in folder.glob("*.whl")} - {p.name for p in wanted})
    problems += [f"{name}: in the folder, not in its listing" for name in unlisted]
    if problems:
        raise Refused(f"wheelhouse {folder}:\n  " + "\n  ".join(problems))
    return wanted


def install(target: Path, wheelhouse: Path | None, carried: list[str]) -> dict[str, str]:
    """The carried packages into `target`; returns what was meant to arrive (name -> version)."""
    pins = lock_pins()
    locked = {canonical(n): pins[canonical(n)] for n in carried}
    if wheelhouse is not None:
        files = listed_wheels(wheelhouse)
        expected = {canonical(f.name.split("-")[0]): f.name.split("-")[1] for f in files}
        stale = [f"{name}: {'not in it' if name not in expected else f'{expected[name]} in it'}, this checkout "
                 f"carries {version}" for name, version in locked.items() if expected.get(name) != version]  # fmt: skip
        if stale:
            raise Refused(f"wheelhouse {wheelhouse} was not made for this checkout (make it again with `make "
                          "wheelhouse`):\n  " + "\n  ".join(stale))  # fmt: skip
        words, offline = ["--no-index", *map(str, files)], True
    else:
        expected = locked
        words, offline = [f"{n}=={v}" for n, v in expected.items()], False
    argv = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(target), *words]
    done = subprocess.run(argv, capture_output=True, text=True, env=pip_env(offline))
    if done.returncode != 0:
        tail = "\n  ".join((done.stderr or done.stdout).strip().splitlines()[-8:])
        raise Refused(f"pip could not install the carried wheels (exit {done.returncode}):\n  {tail}")
    return expected


def installed(paths: list[str]) -> dict[str, str]:
    """name -> version of every distribution on these paths (the first one found wins, as imports do)."""
    found = {}
    for dist in importlib.metadata.distributions(path=paths):
        name = dist.metadata["Name"]
        if name:
            found.setdefault(canonical(name), dist.version)
    return found


def gpu_present() -> bool:
    return any(Path("/dev").glob("nvidia[0-9]*")) or shutil.which("nvidia-smi") is not None


def stack_problems(have: dict[str, str], needs: dict[str, str], carried: dict[str, str],
                   gpu: bool) -> tuple[list[str], list[str]]:  # fmt: skip
    """(what refuses the check, what only a GPU machine would refuse) on this stack."""
    problems = []
    for name, minimum in needs.items():
        version = have.get(canonical(name))
        if version is None:
            problems.append(f"{name}: missing (ttfr needs {name} >= {minimum}; the image should hold it)")
        elif not at_least(version, minimum):
            problems.append(f"{name} {version}: unsupported (ttfr needs >= {minimum})")
    for name, version in carried.items():
        if have.get(name) != version:
            problems.append(f"{name}: carried at {version}, but {have.get(name) or 'nothing'} is what imports find")
    gpu_build = []
    torch = have.get("torch")
    if torch and "+cpu" in torch:
        gpu_build.append(f"torch {torch}: a CPU-only build (its CUDA rows need a CUDA build, e.g. 2.11.0+cu130)")
    plugins = {n: v for n, v in have.items() if re.fullmatch(r"jax-cuda\d+-(plugin|pjrt)", n)}
    jaxlib = have.get("jaxlib")
    if not plugins:
        gpu_build.append("no JAX CUDA plugin (jax-cuda13-plugin and jax-cuda13-pjrt, or the cuda12 pair): "
                         "jax_jit_gpu would see no GPU")  # fmt: skip
    for name, version in sorted(plugins.items()):
        if jaxlib and release(version) != release(jaxlib):
            gpu_build.append(f"{name} {version} does not match jaxlib {jaxlib}: JAX would not load it")
    return (problems + gpu_build if gpu else problems), ([] if gpu else gpu_build)


def preflight(target: Path, wheelhouse: Path | None) -> str:
    """Install, then check the stack imports will find; the table of what was found."""
    spec = image_spec()
    expected = install(target, wheelhouse, spec["carried"]["packages"])
    have = installed([str(target), *sys.path])
    gpu = gpu_present()
    problems, notes = stack_problems(have, spec["needs"], expected, gpu)
    if problems:
        raise Refused("this stack cannot run the GPU check:\n  " + "\n  ".join(problems))
    rows = [f"{name:<26}{have[canonical(name)]:<22}image (needs >= {minimum})" for name, minimum in spec["needs"].items()]
    rows += [f"{name:<26}{version:<22}carried" for name, version in expected.items()]
    rows += [f"{name:<26}{version:<22}image (GPU stack)" for name, version in sorted(have.items())
             if re.fullmatch(r"jax-cuda\d+-(plugin|pjrt)|triton", name)]  # fmt: skip
    rows += [f"(no GPU here, so not refused) {note}" for note in notes]
    return "\n  ".join([f"gpu-stack: Python {sys.version.split()[0]} at {sys.executable}; the stack:", *rows])


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    own, rest = (argv[: argv.index("--")], argv[argv.index("--") + 1 :]) if "--" in argv else (argv, [])
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--wheelhouse", type=Path, help="install from this folder (`make wheelhouse`), offline")
    args = ap.parse_args(own)
    target = Path(tempfile.mkdtemp(prefix="ttfr-gpu-stack-"))
    # a scheduler's time limit or a dropped session (SIGTERM, SIGHUP) ends it like Ctrl-C: the temporary
    # install is removed either way
    for ending in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(ending, _interrupted)
    try:
        try:
            print(preflight(target, args.wheelhouse), flush=True)
        except Refused as exc:
            print(f"gpu-stack: {exc}", file=sys.stderr)
            return EXIT_REFUSED
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([str(target), str(ROOT / "src"), *filter(None, [env.get("PYTHONPATH")])])
        # in the caller's directory: a relative --out or --work is the caller's
        return exit_status(wait_through_interrupt([sys.executable, str(ROOT / "benchmarks" / "gpu_check.py"), *rest],
                                                  env=env))  # fmt: skip
    except KeyboardInterrupt:
        print("gpu-stack: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    finally:
        shutil.rmtree(target, ignore_errors=True)


def _interrupted(_signum, _frame):
    raise KeyboardInterrupt


def wait_through_interrupt(argv: list[str], **options) -> int:
    """Run a child to its end. On Ctrl-C the terminal interrupts it too, and it finishes its own way
    (a `ttfr run` writes what it measured): it is waited for, not killed, and the interrupt is raised
    after it."""
    child = subprocess.Popen(argv, **options)
    try:
        return child.wait()
    except KeyboardInterrupt:
        child.wait()
        raise


def exit_status(code: int) -> int:
    """A child's return code as a shell's exit status (killed by signal N: 128 + N)."""
    return 128 - code if code < 0 else code


if __name__ == "__main__":
    raise SystemExit(main())
