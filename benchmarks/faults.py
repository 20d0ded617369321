"""The fault probes: ttfr tried as a hostile or unlucky user would, through its real command
line, in real processes. Each probe states what must happen and records what did; after every
probe the runner also checks that no process it started is still alive and that it left no
empty result directory.

Families: bad options and input (exit 2, one line, nothing written), corrupted and malicious
result directories (traversal, absolute paths, symlinks out, tampered hashes, garbage, FIFOs,
duplicated runs), secrets (environment, `ab` arms, a worker that prints them), concurrent
writers, signals (at start-up, mid-run, in the warm loop, SIGKILL of the parent, a worker
killed from outside), and storage faults (a full disk and a directory made read-only mid-run,
on a small tmpfs / read-only bind mount; skipped with the reason where mounting is not
allowed). `fast` probes run in the test suite (tests/test_faults.py).

    .venv/bin/python benchmarks/faults.py [--fast] [--only SUBSTRING] [--json FILE] [--keep DIR]

Prints a table: probe, expected, observed, pass (or skip and why); exit 1 if any probe failed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Callable

HERE = Path(__file__).resolve().parent
SECRET = "hf_probe_s3cret_6a1f"  # injected wherever a value can be recorded; must never be found
SMALL = ["--cold-runs", "1", "--warm-procs", "1", "--warm-samples", "3"]
NUMPY_CASE = ["--cases", "numpy_matmul_64_f32"]
SNAPSHOT_NAME = re.compile(r"^(\d{8}T\d{6}Z-[0-9a-f]{6}|compare-.*)$")


class Skip(Exception):
    """The probe cannot run here (and says why)."""


@dataclass
class Done:
    code: int | None
    out: str
    err: str

    def first_line(self) -> str:
        lines = [line for line in (self.err or self.out).splitlines() if line.strip()]
        return lines[0][:110] if lines else ""


@dataclass
class Probe:
    name: str
    expected: str
    check: Callable[[Sandbox], tuple[bool, str]]
    fast: bool = True


class Sandbox:
    """A probe's own folder; every ttfr process it starts carries a tag in its environment,
    so anything it leaves running can be found."""

    def __init__(self, root: Path, baseline: Path | None = None):
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.tag = uuid.uuid4().hex
        self._baseline = baseline
        self.mounts: list[Path] = []

    def env(self, extra: dict | None = None) -> dict:
        return {**os.environ, "TTFR_PROBE_TAG": self.tag, **(extra or {})}

    def argv(self, args) -> list[str]:
        return [sys.executable, "-m", "ttfr", *map(str, args)]

    def ttfr(self, *args, env: dict | None = None, timeout: float = 300) -> Done:
        try:
            done = subprocess.run(self.argv(args), cwd=self.root, env=self.env(env), capture_output=True, text=True,
                                  timeout=timeout, stdin=subprocess.DEVNULL)  # fmt: skip
        except subprocess.TimeoutExpired as exc:
            return Done(None, exc.stdout or "", f"did not finish within {timeout:g} s")
        return Done(done.returncode, done.stdout, done.stderr)

    def start(self, *args, env: dict | None = None) -> subprocess.Popen:
        return subprocess.Popen(self.argv(args), cwd=self.root, env=self.env(env), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)  # fmt: skip

    def baseline(self) -> Path:
        """A copy of a finished real result directory (made once per probe run)."""
        target = self.root / "baseline"
        shutil.copytree(self._baseline, target, symlinks=True)
        return target

    def mount_tmpfs(self, path: Path, size: str) -> Path:
        path.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True,
                              text=True)  # fmt: skip
        if done.returncode != 0:
            raise Skip(f"cannot mount a tmpfs here ({done.stderr.strip() or done.returncode})")
        self.mounts.append(path)
        return path

    def bind_read_only(self, path: Path) -> None:
        for argv in (["mount", "--bind", str(path), str(path)], ["mount", "-o", "remount,bind,ro", str(path)]):
            done = subprocess.run(argv, capture_output=True, text=True)
            if done.returncode != 0:
                raise Skip(f"cannot bind-mount read-only here ({done.stderr.strip() or done.returncode})")
        self.mounts.append(path)

    def unmount(self, path: Path) -> None:
        subprocess.run(["umount", str(path)], capture_output=True)
        if path in self.mounts:
            self.mounts.remove(path)

    def cleanup_mounts(self) -> None:
        for path in reversed(list(self.mounts)):
            self.unmount(path)


# --------------------------------------------------------------------------- checks


_PF_KTHREAD = 0x00200000  # a kernel thread: it has no environment, ever


def tagged_processes(tag: str) -> list[int]:
    """Live processes (not zombies) whose environment carries `tag`.

    A process caught in the middle of exec (its parent's Popen has returned, its new stack is
    not set up yet) reads an empty environment for a moment: such processes are read again."""
    needle = f"TTFR_PROBE_TAG={tag}".encode()

    def carries(entry: Path) -> bool | None:
        """True or False; None when it has no environment yet (and is no kernel thread)."""
        try:
            stat = (entry / "stat").read_text()
            if " Z " in stat:
                return False
            environ = (entry / "environ").read_bytes()
            if environ:
                return needle in environ
            flags = int(stat.rsplit(")", 1)[1].split()[6])
            return False if flags & _PF_KTHREAD else None
        except (OSError, ValueError, IndexError):
            return False

    found, unsure = [], []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            answer = carries(entry)
            (found if answer else unsure if answer is None else []).append(entry)
    for _ in range(10):
        if not unsure:
            break
        time.sleep(0.02)
        answers = [(entry, carries(entry)) for entry in unsure]
        found += [entry for entry, answer in answers if answer]
        unsure = [entry for entry, answer in answers if answer is None]
    return sorted(int(entry.name) for entry in found)


def empty_result_dirs(root: Path) -> list[Path]:
    empty = []
    for path in root.rglob("*"):
        real_dir = path.is_dir() and not path.is_symlink() and SNAPSHOT_NAME.match(path.name)
        if real_dir and all(p.name == ".lock" for p in path.iterdir()):
            empty.append(path)
    return empty


def one_line_error(done: Done, code: int, *needles: str) -> tuple[bool, str]:
    lines = [line for line in done.err.splitlines() if line.strip()]
    observed = f"exit {done.code}: {done.first_line()}"
    ok = (
        done.code == code
        and len(lines) == 1
        and lines[0].startswith("ttfr: error: ")
        and "Traceback" not in done.err
        and all(n in done.err for n in needles)
    )
    return ok, observed


def no_results_under(root: Path) -> bool:
    return not any(SNAPSHOT_NAME.match(p.name) for p in root.rglob("*") if p.is_dir())


def validate(box: Sandbox, path: Path) -> Done:
    return box.ttfr("validate", path)


def wait_for(predicate, timeout: float, interval: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return predicate()


def only_result_dir(root: Path) -> Path | None:
    found = [p for p in root.rglob("*") if p.is_dir() and SNAPSHOT_NAME.match(p.name)]
    return found[0] if len(found) == 1 else None


def journal_lines(result: Path | None) -> int:
    try:
        return len((result / "journal.jsonl").read_bytes().splitlines()) if result else 0
    except OSError:
        return 0


def grep_secret(*roots: Path, text: str = "") -> list[str]:
    hits = ["<output>"] if SECRET in text else []
    for root in roots:
        for path in Path(root).rglob("*"):
            if path.is_file() and not path.is_symlink():
                try:
                    if SECRET.encode() in path.read_bytes():
                        hits.append(str(path))
                except OSError:
                    continue
    return hits


# --------------------------------------------------------------------------- probes: input


def usage(args, *needles, env=None):
    def check(box: Sandbox):
        out = ["--out", box.root / "out"] if args[0] in ("run", "ab") else []
        done = box.ttfr(*args, *out, env=env, timeout=120)
        ok, observed = one_line_error(done, 2, *needles)
        return ok and no_results_under(box.root), observed

    return check


def _preset_workspace() -> dict:
    from ttfr.child.workloads.histfactory import workspace

    return workspace.preset("simple", 0)


def bad_workspace(mutate, *needles):
    def check(box: Sandbox):
        spec = _preset_workspace()
        mutate(spec)
        path = box.root / "ws.json"
        text = json.dumps(spec) if not isinstance(spec, str) else spec
        path.write_text(text)
        done = box.ttfr("run", "--workspace", path, "--backends", "pyhf_numpy", "--workloads", "hf_nll_grad",
                        *SMALL, "--out", box.root / "out", timeout=120)  # fmt: skip
        ok, observed = one_line_error(done, 2, *needles)
        return ok and no_results_under(box.root), observed

    return check


def _set(path, value):
    def mutate(spec):
        node = spec
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value

    return mutate


def workspace_special(kind):
    def check(box: Sandbox):
        path = box.root / "ws.json"
        if kind == "fifo":
            os.mkfifo(path)
        elif kind == "big":
            with open(path, "wb") as fh:
                fh.write(b" " * (50 << 20))
        elif kind == "dir":
            path.mkdir()
        else:
            path = Path(kind)
        done = box.ttfr("run", "--workspace", path, *SMALL, "--out", box.root / "out", timeout=60)
        ok, observed = one_line_error(done, 2, str(path))
        return ok and no_results_under(box.root), observed

    return check


def hanging_python(box: Sandbox):
    shim = box.root / "hang.sh"
    shim.write_text("#!/bin/sh\nsleep 600 &\nsleep 600\n")
    shim.chmod(0o755)
    started = time.monotonic()
    done = box.ttfr("run", *NUMPY_CASE, "--python", shim, "--out", box.root / "out", timeout=200)
    elapsed = time.monotonic() - started
    ok, observed = one_line_error(done, 2, str(shim))
    return ok and no_results_under(box.root), f"{observed} (after {elapsed:.0f} s)"


def out_is_file(box: Sandbox):
    target = box.root / "a-file"
    target.write_text("mine")
    done = box.ttfr("run", *NUMPY_CASE, *SMALL, "--out", target)
    ok, observed = one_line_error(done, 2, str(target))
    return ok and target.read_text() == "mine", observed


def out_read_only(box: Sandbox):
    target = box.root / "ro"
    target.mkdir()
    box.bind_read_only(target)
    done = box.ttfr("run", *NUMPY_CASE, *SMALL, "--out", target)
    ok, observed = one_line_error(done, 2, str(target))
    return ok, observed


# --------------------------------------------------------------------------- probes: result directories


def _suite(root: Path) -> dict:
    return json.loads((root / "suite.json").read_text())


def _rehash_case(root: Path, index: int = 0, **changes) -> None:
    import hashlib

    suite = _suite(root)
    ref = suite["cases"][index]
    ref.update(changes)
    path = root / ref["path"]
    if path.is_file():
        ref["sha256"] = hashlib.sha256(path.read_bytes()).hexdigest()
    (root / "suite.json").write_text(json.dumps(suite))


def readers_refuse(tamper, *needles, readers=("report", "export", "compare")):
    def check(box: Sandbox):
        root = box.baseline()
        tamper(box, root)
        observed, ok = [], True
        for reader in readers:
            args = {
                "report": ["report", root],
                "export": ["export", "--format", "nextstat-v1", root, box.root / "exported"],
                "compare": ["compare", "--cross-session", root, root, "--out", box.root / "cmp"],
                "resume": ["run", "--resume", root],
            }[reader]
            done = box.ttfr(*args, timeout=120)
            good, seen = one_line_error(done, 2, *needles)
            ok &= good
            observed.append(f"{reader}: {seen}")
        val = validate(box, root)
        ok &= val.code == 1 and "Traceback" not in val.err + val.out
        outside = list(box.root.rglob("PWNED*"))
        ok &= not outside and not (box.root / "exported").exists()
        return ok, "; ".join(observed[:1]) + f"; validate exit {val.code}"

    return check


def _traversal(box, root):
    (box.root / "outside.json").write_bytes((root / _suite(root)["cases"][0]["path"]).read_bytes())
    _rehash_case(root, path="../../outside.json")


def _absolute(box, root):
    _rehash_case(root, path="/etc/passwd")


def _symlink_out(box, root):
    path = root / _suite(root)["cases"][0]["path"]
    (box.root / "elsewhere.json").write_bytes(path.read_bytes())
    path.unlink()
    path.symlink_to(box.root / "elsewhere.json")


def _stale_hash(box, root):
    path = root / _suite(root)["cases"][0]["path"]
    case = json.loads(path.read_text())
    case["reason"] = "edited"
    path.write_text(json.dumps(case))


def _pwned_id(box, root):
    path = root / _suite(root)["cases"][0]["path"]
    case = json.loads(path.read_text())
    case["case"] = "../../../../PWNED"
    path.write_text(json.dumps(case))
    _rehash_case(root, case=case["case"])


def _forged_summary(box, root):
    suite = _suite(root)
    suite["summary"]["n_cases"] = 99
    (root / "suite.json").write_text(json.dumps(suite))


def _forged_median(box, root):
    path = root / _suite(root)["cases"][0]["path"]
    case = json.loads(path.read_text())
    policy = next(p for p in case["policies"].values() if p.get("runs"))
    summary = policy["summary"]
    figure = summary["ttfr_s"] or next((s for s in summary.values() if s), None)
    if figure is None:  # every figure null (the baseline was contended): forging one is the same attack
        figure = {"n": 1, "min": 1e-9, "max": 1e-9, "median": 1e-9, "p95": 1e-9, "mean": 1e-9, "std": 0.0,
                  "mad": 0.0, "median_ci": {"low": 1e-9, "high": 1e-9, "level": 0.95}}  # fmt: skip
    summary["ttfr_s"] = {**figure, "median": 1e-9}
    path.write_text(json.dumps(case))
    _rehash_case(root)


def resume_through_symlinks(box: Sandbox):
    root = box.baseline()
    (root / "suite.json").unlink()
    victim = box.root / "victim.txt"
    victim.write_text("precious")
    (root / ".lock").unlink(missing_ok=True)
    (root / ".lock").symlink_to(victim)
    done = box.ttfr("run", "--resume", root)
    ok, observed = one_line_error(done, 2, "symlink")
    return ok and victim.read_text() == "precious", observed


def _garbage(name, payload):
    def tamper(box, root):
        target = root / (_suite(root)["cases"][0]["path"] if name == "case" else name)
        target.write_bytes(payload)

    return tamper


def _fifo_case(box, root):
    path = root / _suite(root)["cases"][0]["path"]
    path.unlink()
    os.mkfifo(path)


def duplicated_runs(box: Sandbox):
    root = box.baseline()
    path = root / _suite(root)["cases"][0]["path"]
    case = json.loads(path.read_text())
    policy = next(p for p in case["policies"].values() if p.get("runs"))
    policy["runs"] = policy["runs"] + policy["runs"]
    path.write_text(json.dumps(case, indent=2, sort_keys=True))
    _rehash_case(root)
    done = validate(box, root)
    text = done.out + done.err
    return done.code == 1 and ("plan allows" in text or "more than once" in text), f"validate exit {done.code}"


def report_read_only(box: Sandbox):
    root = box.baseline()
    before = (root / "report.md").read_bytes()
    box.bind_read_only(root)
    done = box.ttfr("report", root)
    ok = done.code == 0 and "# " in done.out and "report.md" in done.err and "Traceback" not in done.err
    return ok and (root / "report.md").read_bytes() == before, f"exit {done.code}: {done.first_line()}"


def export_to_file(box: Sandbox):
    root = box.baseline()
    target = box.root / "existing.json"
    target.write_text("keep")
    done = box.ttfr("export", "--format", "nextstat-v1", root, target)
    ok, observed = one_line_error(done, 2, str(target))
    return ok and target.read_text() == "keep", observed


def export_inside(box: Sandbox):
    root = box.baseline()
    before = {p.name: p.read_bytes() for p in (root / "cases").iterdir()}
    done = box.ttfr("export", "--format", "nextstat-v1", root, root / "cases")
    ok, observed = one_line_error(done, 2, "inside the result directory")
    return ok and before == {p.name: p.read_bytes() for p in (root / "cases").iterdir()}, observed


def two_compares(box: Sandbox):
    root = box.baseline()
    procs = [box.start("compare", "--cross-session", root, root, "--out", box.root / "cmp") for _ in range(3)]
    codes = [p.wait(120) for p in procs]
    outs = list((box.root / "cmp").iterdir())
    return codes == [0, 0, 0] and len(outs) == 3, f"exit codes {codes}, {len(outs)} comparison directories"


def _resume_a_plan_naming(box: Sandbox, program: str, code: str, option: str, spec_change) -> tuple[bool, str, Path]:
    """Resume a finished baseline whose plan.json now names `program` (its text `code`, which leaves
    a marker when it runs), changed in by `spec_change(spec, path)`: (refused before it ran, saying
    `add OPTION PATH`; what ttfr said; the result directory)."""
    root = box.baseline()
    (root / "suite.json").unlink()
    marker = box.root / f"{program}-ran"
    evil = box.root / program
    evil.write_text(code.format(marker=str(marker)))
    evil.chmod(0o755)
    plan = json.loads((root / "plan.json").read_text())
    spec_change(plan["spec"], evil)
    (root / "plan.json").write_text(json.dumps(plan))
    done = box.ttfr("run", "--resume", root)
    ok, observed = one_line_error(done, 2, f"add {option} {evil}")
    ran = marker.exists()
    return ok and not ran, observed + ("; IT RAN" if ran else ""), root


def resume_evil_python(box: Sandbox):
    # Refused before anything runs: not even a pre-check starts a program a file names.
    ok, observed, root = _resume_a_plan_naming(box, "evil.sh", "#!/bin/sh\ntouch {marker}\nexit 1\n", "--python",
                                               lambda spec, evil: spec.update(python=str(evil)))  # fmt: skip
    return ok and journal_lines(root) == journal_lines(box._baseline), observed


def resume_evil_case_file(box: Sandbox):
    def name_it(spec, evil):
        spec["case_files"] = [{"path": str(evil), "sha256": hashlib.sha256(evil.read_bytes()).hexdigest()}]

    return _resume_a_plan_naming(box, "evil_cases.py", "import pathlib\npathlib.Path({marker!r}).touch()\n",
                                 "--case-file", name_it)[:2]  # fmt: skip


def resume_garbage_journal(box: Sandbox):
    box.ttfr("run", *NUMPY_CASE, "--cold-runs", "2", "--warm-procs", "1", "--warm-samples", "3", "--out", box.root / "o")
    result = only_result_dir(box.root / "o")
    lines = (result / "journal.jsonl").read_text().splitlines()
    lines[1] = '{"task": 17, "garbage": true}'
    (result / "journal.jsonl").write_text("\n".join(lines) + "\n[]\n")
    (result / "suite.json").unlink()
    done = box.ttfr("run", "--resume", result)
    val = validate(box, result)
    ok = done.code == 0 and "journal.jsonl line 2" in done.err and "Traceback" not in done.err and val.code == 0
    return ok, f"exit {done.code}, {done.err.count('skipped')} lines skipped with a warning, validate exit {val.code}"


# --------------------------------------------------------------------------- probes: secrets


def secrets_in_run(box: Sandbox):
    env = {"HF_TOKEN": SECRET, "XLA_FLAGS": f"--xla_dump_to=/tmp --x_token={SECRET}", "MY_PASSPHRASE": SECRET}
    done = box.ttfr("run", *NUMPY_CASE, *SMALL, "--out", box.root / "o", env=env)
    hits = grep_secret(box.root / "o", text=done.out + done.err)
    return done.code == 0 and not hits, f"exit {done.code}; secret found in: {hits or 'nothing'}"


def secrets_in_ab(box: Sandbox):
    done = box.ttfr("ab", *NUMPY_CASE, "--cache-policy", "cold-process/cold-cache", "--rounds", "2", "--min-rounds", "2",
                    "--a-env", f"DB_PASSWORD={SECRET}", "--b-env", f"HF_TOKEN={SECRET}",
                    "--b-env", f"XLA_FLAGS=--x_api_key={SECRET}", "--markdown", box.root / "pr.md",
                    "--out", box.root / "o")  # fmt: skip
    hits = grep_secret(box.root, text=done.out + done.err)
    return done.code in (0, 3) and not hits, f"exit {done.code}; secret found in: {hits or 'nothing'}"


def secrets_from_a_failing_worker(box: Sandbox):
    shim = box.root / "leaky-python"
    shim.write_text(
        "#!/bin/sh\n"
        f'for a in "$@"; do case "$a" in *"import sys, ttfr.child.worker"*) exec {sys.executable} "$@";; esac; done\n'
        'echo "worker sees HF_TOKEN=$HF_TOKEN and ${HF_TOKEN}" >&2\nexit 3\n'
    )
    shim.chmod(0o755)
    done = box.ttfr("run", *NUMPY_CASE, *SMALL, "--python", shim, "--out", box.root / "o", env={"HF_TOKEN": SECRET})
    hits = grep_secret(box.root / "o", text=done.out + done.err)
    result = only_result_dir(box.root / "o")
    tail_kept = result is not None and "worker sees HF_TOKEN=<redacted>" in (result / "journal.jsonl").read_text()
    return done.code == 1 and not hits and tail_kept, f"exit {done.code}; secret in: {hits or 'nothing'}; tail kept: {tail_kept}"


# --------------------------------------------------------------------------- probes: concurrency


def resume_while_running(box: Sandbox):
    proc = box.start("run", *NUMPY_CASE, "--cold-runs", "8", "--out", box.root / "o")
    try:
        wait_for(lambda: journal_lines(only_result_dir(box.root / "o")) >= 1, 60)
        result = only_result_dir(box.root / "o")
        done = box.ttfr("run", "--resume", result) if result else Done(None, "", "no result directory appeared")
    finally:
        proc.wait(300)
    ok, observed = one_line_error(done, 2, "is being written by pid")
    val = validate(box, result) if result else Done(None, "", "")
    return ok and proc.returncode == 0 and val.code == 0, f"{observed}; first run exit {proc.returncode}"


def twin_deterministic_runs(box: Sandbox):
    args = ("run", *NUMPY_CASE, *SMALL, "--deterministic", "--out", box.root / "o")
    procs = [box.start(*args) for _ in range(2)]
    codes = sorted(p.wait(300) for p in procs)
    dirs = [p for p in (box.root / "o").iterdir() if p.is_dir()]
    valid = [validate(box, d).code for d in dirs]
    ok = codes[0] == 0 and codes[1] in (0, 2) and all(v == 0 for v in valid)
    return ok, f"exit codes {codes}; {len(dirs)} directories, validate {valid}"


# --------------------------------------------------------------------------- probes: signals


def _stop(box: Sandbox, proc: subprocess.Popen, sig) -> tuple[str, str, Path | None, Done]:
    """Send `sig` to a running ttfr and wait for it (killed after 60 s): its stderr, stdout,
    result directory and what `ttfr validate` says of that directory."""
    proc.send_signal(sig)
    try:
        proc.wait(60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    result = only_result_dir(box.root / "o")
    return proc.stderr.read(), proc.stdout.read(), result, validate(box, result) if result else Done(None, "", "")


def _signal_mid_run(sig, *, warm=False):
    def check(box: Sandbox):
        args = ["run", *NUMPY_CASE, "--out", box.root / "o"]
        args += ["--cache-policy", "warm-process", "--warm-procs", "1", "--warm-samples", "100000"] if warm else [
            "--cold-runs", "6", "--warm-procs", "1", "--warm-samples", "3"]  # fmt: skip
        proc = box.start(*args)
        if warm:
            seen = wait_for(lambda: any(_is_warm_worker(pid) for pid in tagged_processes(box.tag)), 60)
            time.sleep(0.5)  # inside the sampling loop
        else:
            seen = wait_for(lambda: journal_lines(only_result_dir(box.root / "o")) >= 2, 60)
        err, out, result, val = _stop(box, proc, sig)
        ok = seen and proc.returncode == 130 and "Traceback" not in err and val.code == 0 and "--resume" in out
        observed = f"exit {proc.returncode}, validate exit {val.code}"
        if ok and not warm:
            resumed = box.ttfr("run", "--resume", result)
            ok = resumed.code == 0 and _suite(result)["state"] == "complete"
            observed += f", resume exit {resumed.code}"
        return ok, observed

    return check


def sigint_in_the_precision_phase(box: Sandbox):
    """Ctrl-C while --precision adds runs: exit 130, a valid directory that says so, and a
    resume that finishes the phase from the journal (no run index twice)."""
    args = ["run", "--cases", "python_noop_1_f64", "--warm-samples", "3", "--precision", "0.01", "--budget", "15",
            "--out", box.root / "o"]  # fmt: skip
    proc = box.start(*args)
    seen = wait_for(lambda: journal_lines(only_result_dir(box.root / "o")) >= 9, 60)  # the plan is 6 runs
    err, _out, result, val = _stop(box, proc, signal.SIGINT)
    stopped = _suite(result).get("precision", {}).get("stopped_by") if val.code == 0 else None
    ok = seen and proc.returncode == 130 and "Traceback" not in err and val.code == 0 and stopped == "interrupted"
    observed = f"exit {proc.returncode}, validate exit {val.code}, stopped_by {stopped}"
    if ok:
        resumed = box.ttfr("run", "--resume", result, timeout=120)
        after = _suite(result)["precision"]["stopped_by"] if resumed.code == 0 else None
        ok = resumed.code == 0 and after in ("budget", "target_met", "cannot_improve") and validate(box, result).code == 0
        observed += f"; resume exit {resumed.code}, stopped_by {after}"
    return ok, observed


def _is_warm_worker(pid: int) -> bool:
    try:
        return b"mode=warm" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def ctrl_c_at_start_up(box: Sandbox):
    outcomes = []
    for delay in (0.05, 0.2, 0.4, 0.8):
        proc = box.start("run", *NUMPY_CASE, *SMALL, "--out", box.root / "o")
        time.sleep(delay)
        proc.send_signal(signal.SIGINT)
        proc.wait(120)
        outcomes.append((proc.returncode, "Traceback" in proc.stderr.read()))
    empty = empty_result_dirs(box.root)
    # -SIGINT: the signal landed before CPython installed its handler (the shell shows 130 too);
    # nothing of ttfr has run then, so nothing can be left behind.
    ok = all(code in (0, 130, -signal.SIGINT) and not tb for code, tb in outcomes) and not empty
    return ok, f"exit codes {[c for c, _ in outcomes]}, tracebacks {sum(tb for _, tb in outcomes)}, empty dirs {len(empty)}"


def sigkill_parent(box: Sandbox):
    proc = box.start("run", *NUMPY_CASE, "--cache-policy", "warm-process", "--warm-procs", "1", "--warm-samples",
                     "100000", "--out", box.root / "o")  # fmt: skip
    seen = wait_for(lambda: any(_is_warm_worker(pid) for pid in tagged_processes(box.tag)), 60)
    proc.kill()
    proc.wait()
    gone = wait_for(lambda: not tagged_processes(box.tag), 10)
    left = tagged_processes(box.tag)
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    return seen and gone, f"worker seen: {seen}; alive 10 s after kill -9 of ttfr: {len(left)}"


def worker_killed_from_outside(box: Sandbox):
    proc = box.start("run", *NUMPY_CASE, "--cache-policy", "warm-process", "--warm-procs", "1", "--warm-samples",
                     "100000", "--out", box.root / "o")  # fmt: skip
    wait_for(lambda: any(_is_warm_worker(pid) for pid in tagged_processes(box.tag)), 60)
    for pid in [p for p in tagged_processes(box.tag) if _is_warm_worker(p)]:
        os.kill(pid, signal.SIGKILL)
    proc.wait(120)
    result = only_result_dir(box.root / "o")
    runs = [json.loads(line) for line in (result / "journal.jsonl").read_text().splitlines()] if result else []
    outcomes = sorted({r["outcome"] for r in runs if r.get("kind") == "warm"})
    return outcomes == ["signal"], f"exit {proc.returncode}; warm outcome {outcomes}"


# --------------------------------------------------------------------------- probes: storage


def _storage_fault(kind):
    def check(box: Sandbox):
        mount = box.mount_tmpfs(box.root / "disk", "4m")
        proc = box.start("run", *NUMPY_CASE, "--cold-runs", "6", "--warm-procs", "1", "--warm-samples", "3",
                         "--out", mount)  # fmt: skip
        wait_for(lambda: journal_lines(only_result_dir(mount)) >= 1, 60)
        result = only_result_dir(mount)
        filler = mount / "filler"
        if kind == "full":
            with open(filler, "wb") as fh:
                try:
                    while True:
                        fh.write(b"\0" * 65536)
                        fh.flush()
                except OSError:
                    pass
        else:
            box.bind_read_only(result)
        proc.wait(120)
        err = proc.stderr.read()
        lines = [line for line in err.splitlines() if line.strip()]
        ok = proc.returncode == 1 and "Traceback" not in err and len(lines) == 1 and f"--resume {result}" in err
        observed = f"exit {proc.returncode}: {lines[0][:90] if lines else ''}"
        if kind == "full":
            filler.unlink()
        else:
            box.unmount(result)
        resumed = box.ttfr("run", "--resume", result)
        ok &= resumed.code == 0 and validate(box, result).code == 0
        return ok, observed + f"; resume exit {resumed.code}"

    return check


# --------------------------------------------------------------------------- the set


def _nan_yield(spec):
    spec["channels"][0]["samples"][0]["data"][0] = float("nan")


PROBES = [
    # bad options and input
    Probe("unknown case", "exit 2, did-you-mean", usage(["run", "--cases", "numpy_matmul_64_f33"], "Did you mean")),
    Probe("unknown backend", "exit 2", usage(["run", "--backends", "jaxx"], "jax")),
    Probe("empty --cases", "exit 2", usage(["run", "--cases", ""], "--cases")),
    Probe("--cold-runs 0", "exit 2", usage(["run", *NUMPY_CASE, "--cold-runs", "0"], "--cold-runs")),
    Probe(
        "--cold-runs 1000000000", "exit 2, limit named", usage(["run", *NUMPY_CASE, "--cold-runs", "1000000000"], "--cold-runs")
    ),
    Probe("--warm-samples 10**9", "exit 2", usage(["run", *NUMPY_CASE, "--warm-samples", "1000000000"], "--warm-samples")),
    Probe("--timeout 1e12", "exit 2", usage(["run", *NUMPY_CASE, "--timeout", "1e12"], "--timeout")),
    Probe("--seed -1", "exit 2", usage(["run", *NUMPY_CASE, "--seed", "-1"], "--seed")),
    Probe("--threads 0", "exit 2", usage(["run", *NUMPY_CASE, "--threads", "0"], "--threads")),
    Probe("--shard 3/2", "exit 2", usage(["run", *NUMPY_CASE, "--shard", "3/2"], "--shard")),
    Probe("--python missing", "exit 2", usage(["run", *NUMPY_CASE, "--python", "/nonexistent/python"], "--python")),
    Probe("--python hangs", "exit 2 within the bounded pre-check, no orphan", hanging_python, fast=False),
    Probe("--signal without --workspace", "exit 2", usage(["run", "--signal", "a/b"], "--signal")),
    Probe("--resume with --cases", "exit 2", usage(["run", "--resume", "x", *NUMPY_CASE], "--resume")),
    Probe("--precision 2", "exit 2", usage(["run", *NUMPY_CASE, "--precision", "2"], "--precision")),
    Probe("--budget 10x", "exit 2", usage(["run", *NUMPY_CASE, "--precision", "0.05", "--budget", "10x"], "--budget")),
    Probe("--budget without --precision", "exit 2", usage(["run", *NUMPY_CASE, "--budget", "10m"], "--precision too")),
    Probe(
        "--precision --deterministic",
        "exit 2",
        usage(["run", *NUMPY_CASE, "--precision", "0.05", "--deterministic"], "--deterministic"),
    ),  # fmt: skip
    Probe("--resume of a non-result dir", "exit 2", usage(["run", "--resume", "/tmp"], "plan.json")),
    Probe("ab --a-env without =", "exit 2", usage(["ab", *NUMPY_CASE, "--a-env", "NOEQUALS"], "--a-env")),
    Probe("report of a non-result dir", "exit 2", usage(["report", "/tmp"], "suite.json")),
    Probe("--out is a file", "exit 2, file untouched", out_is_file),
    Probe("--out read-only", "exit 2", out_read_only),
    Probe("--workspace missing", "exit 2", usage(["run", "--workspace", "/nonexistent.json"], "/nonexistent.json")),
    Probe("--workspace /dev/zero", "exit 2, bounded read", workspace_special("/dev/zero")),
    Probe("--workspace FIFO", "exit 2, no hang", workspace_special("fifo")),
    Probe("--workspace 50 MB", "exit 2, size limit", workspace_special("big")),
    Probe("--workspace a directory", "exit 2", workspace_special("dir")),
    Probe("workspace NaN yield", "exit 2 with the JSON path", bad_workspace(_nan_yield, "channels[0].samples[0].data[0]")),
    Probe(
        "workspace negative yield",
        "exit 2 with the JSON path",
        bad_workspace(_set(["channels", 0, "samples", 0, "data", 0], -5.0), "channels[0].samples[0].data[0]"),
    ),
    Probe(
        "workspace all-zero sample",
        "exit 2",
        bad_workspace(
            lambda s: s["channels"][0]["samples"][0].update(data=[0.0] * len(s["channels"][0]["samples"][0]["data"])),
            "channels[0].samples[0]",
        ),
    ),
    Probe(
        "workspace negative observation",
        "exit 2 with the JSON path",
        bad_workspace(_set(["observations", 0, "data", 0], -1), "observations[0].data[0]"),
    ),
    Probe(
        "workspace fractional observation",
        "exit 2 with the JSON path",
        bad_workspace(_set(["observations", 0, "data", 0], 2.5), "observations[0].data[0]"),
    ),
    Probe(
        "workspace string yield",
        "exit 2 with the JSON path",
        bad_workspace(_set(["channels", 0, "samples", 0, "data", 0], "12"), "channels[0].samples[0].data[0]"),
    ),
    Probe("workspace object for a list", "exit 2", bad_workspace(_set(["channels", 0, "samples"], {"a": 1}), "channels[0]")),
    # result directories
    Probe("case path ../../outside.json", "report/export/compare exit 2 naming it", readers_refuse(_traversal, "outside.json")),
    Probe("case path /etc/passwd", "readers exit 2", readers_refuse(_absolute, "/etc/passwd")),
    Probe("case file symlinked out", "readers exit 2", readers_refuse(_symlink_out, "outside the result directory")),
    Probe("edited case, stale hash", "readers exit 2", readers_refuse(_stale_hash, "sha256 does not match")),
    Probe("case id ../../PWNED, re-hashed", "exit 2, nothing written anywhere", readers_refuse(_pwned_id, "case id")),
    Probe(
        "suite.json truncated",
        "readers exit 2, validate exit 1",
        readers_refuse(_garbage("suite.json", b'{"cases": ['), "suite.json"),
    ),
    Probe("suite.json []", "readers exit 2", readers_refuse(_garbage("suite.json", b"[]"), "suite.json")),
    Probe(
        "manifest.json garbage", "readers exit 2", readers_refuse(_garbage("manifest.json", b"\xff\x00garbage"), "manifest.json")
    ),
    Probe("case file []", "readers exit 2", readers_refuse(_garbage("case", b"[]"))),
    Probe("case file is a FIFO", "readers exit 2, no hang", readers_refuse(_fifo_case, "not a regular file")),
    Probe(
        "plan.json garbage, resume",
        "exit 2",
        readers_refuse(_garbage("plan.json", b"[" * 100000), "plan.json", readers=("resume",)),
    ),
    Probe("duplicated runs", "validate exit 1", duplicated_runs),
    Probe("forged suite summary", "readers exit 2", readers_refuse(_forged_summary, "`summary` is not what")),
    Probe("forged median, re-hashed", "readers exit 2", readers_refuse(_forged_median, "not what its runs give")),
    Probe("resume through a symlinked .lock", "exit 2, the target untouched", resume_through_symlinks),
    Probe("report on a read-only dir", "report printed, warning, exit 0", report_read_only),
    Probe("export to an existing file", "exit 2, file kept", export_to_file),
    Probe("export into the result dir", "exit 2, cases unchanged", export_inside),
    Probe("three compares in one second", "three directories, exit 0", two_compares),
    Probe("resume runs plan.json's program", "exit 2 before anything runs, never run", resume_evil_python),
    Probe("resume imports plan.json's case file", "exit 2 before anything runs, never imported", resume_evil_case_file),
    Probe("garbage journal lines, resume", "skipped with a warning, completes", resume_garbage_journal, fast=False),
    # secrets
    Probe("secrets in the environment", "nothing recorded or printed", secrets_in_run),
    Probe("secrets in ab arms", "nothing recorded or printed", secrets_in_ab, fast=False),
    Probe("worker prints a secret", "output tail kept, secret redacted", secrets_from_a_failing_worker),
    # concurrency
    Probe("resume while the run writes", "exit 2 naming the holder", resume_while_running, fast=False),
    Probe("twin --deterministic runs", "no shared directory; all valid", twin_deterministic_runs, fast=False),
    # signals
    Probe(
        "Ctrl-C at start-up",
        "exit 130 (or SIGINT before Python runs, or 0), no traceback, no empty dir",
        ctrl_c_at_start_up,
        fast=False,
    ),
    Probe("SIGINT mid-run", "exit 130, valid, resume completes", _signal_mid_run(signal.SIGINT), fast=False),
    Probe("SIGTERM mid-run", "exit 130, valid, resume completes", _signal_mid_run(signal.SIGTERM), fast=False),
    Probe("SIGINT in the warm loop", "exit 130, valid", _signal_mid_run(signal.SIGINT, warm=True), fast=False),
    Probe(
        "SIGINT while --precision adds runs",
        "exit 130, valid, interrupted; resume finishes",
        sigint_in_the_precision_phase,
        fast=False,
    ),  # fmt: skip
    Probe("kill -9 of ttfr", "its worker dies within 10 s", sigkill_parent, fast=False),
    Probe("worker SIGKILLed from outside", "outcome signal, not oom", worker_killed_from_outside, fast=False),
    # storage
    Probe("disk full mid-run", "exit 1, one line, resume hint; resume completes", _storage_fault("full"), fast=False),
    Probe("dir made read-only mid-run", "exit 1, one line, resume hint; resume completes", _storage_fault("ro"), fast=False),
]


def make_baseline(root: Path) -> Path:
    """A finished real result directory the corruption probes copy."""
    box = Sandbox(root / "baseline-run")
    done = box.ttfr("run", *NUMPY_CASE, *SMALL, "--out", box.root / "o")
    result = only_result_dir(box.root / "o")
    if done.code != 0 or result is None:
        raise SystemExit(f"the baseline run failed (exit {done.code}):\n{done.err}")
    return result


def run_probe(probe: Probe, root: Path, baseline: Path) -> dict:
    box = Sandbox(root / re.sub(r"[^A-Za-z0-9]+", "-", probe.name).strip("-"), baseline)
    started = time.monotonic()
    try:
        passed, observed = probe.check(box)
        status = "pass" if passed else "FAIL"
    except Skip as exc:
        status, observed = "skip", str(exc)
    except Exception as exc:  # a probe that crashes is a failed probe, with its cause
        status, observed = "FAIL", f"probe crashed: {type(exc).__name__}: {exc}"
    finally:
        box.cleanup_mounts()
    leftovers = tagged_processes(box.tag)
    for pid in leftovers:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    empty = empty_result_dirs(box.root)
    if status == "pass" and (leftovers or empty):
        status = "FAIL"
        observed += f"; left {len(leftovers)} process(es), {len(empty)} empty result dir(s)"
    return {"probe": probe.name, "expected": probe.expected, "observed": observed, "status": status,
            "seconds": round(time.monotonic() - started, 1)}  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fast", action="store_true", help="only the probes the test suite runs")
    parser.add_argument("--only", help="only probes whose name contains this")
    parser.add_argument("--json", type=Path, help="also write the table as JSON")
    parser.add_argument("--keep", type=Path, help="work here and keep it (default: a removed temporary folder)")
    args = parser.parse_args()
    chosen = [p for p in PROBES if (not args.fast or p.fast) and (not args.only or args.only in p.name)]
    root = Path(args.keep or tempfile.mkdtemp(prefix="ttfr-faults-"))
    rows = []
    try:
        baseline = make_baseline(root)
        for probe in chosen:
            row = run_probe(probe, root, baseline)
            rows.append(row)
            print(f"{row['status']:4}  {row['probe']:34} {row['observed'][:120]}", flush=True)
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    counts = {s: sum(r["status"] == s for r in rows) for s in ("pass", "FAIL", "skip")}
    print()
    print("| probe | expected | observed | pass |")
    print("|---|---|---|---|")
    for row in rows:
        print(f"| {row['probe']} | {row['expected']} | {row['observed'].replace('|', '/')} | {row['status']} |")
    print(f"\n{len(rows)} probes: {counts['pass']} passed, {counts['FAIL']} failed, {counts['skip']} skipped")
    if args.json:
        args.json.write_text(json.dumps({"probes": rows, "counts": counts}, indent=2) + "\n")
    return 1 if counts["FAIL"] else 0


if __name__ == "__main__":
    sys.exit(main())
