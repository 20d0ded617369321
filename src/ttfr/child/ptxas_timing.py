"""--explain on a GPU: each run of ptxas (PTX to the GPU's machine code) that Triton makes in Inductor's worker
processes, timed one by one, with the kernel it built.

Triton runs ptxas as a subprocess from the path in `TRITON_PTXAS_PATH` (`TRITON_PTXAS_BLACKWELL_PATH` for
compute capability 10 and up), a documented knob its worker processes inherit from the diagnostic process. This
module points each at a small bash script that runs the ptxas the run would have used and appends a line to a log:
its start and end on the wall clock (bash's `EPOCHREALTIME`, no extra process), its exit status, the `.entry` the
PTX defines (the kernel's name) and the target (`--gpu-name`). Triton's `ptxas --version` probes are logged too.
The few milliseconds bash itself takes are outside each run's span. Only the unmeasured diagnostic process does this.

Which ptxas the run would have used: the user's own setting of the variable; else Triton's bundled one, which is
also what Inductor's workers use unless the installed torch points them at its own (its
`_set_triton_ptxas_path`, read from torch's source: torch is not imported yet). Where torch would point its workers at
another ptxas than Triton uses in this process, one wrapper would change which ptxas one of them runs: then nothing
is wrapped, and the runs are `unavailable` with why. Never a different ptxas than the run's.

Standard library only: the worker imports this before torch.
"""

import atexit
import importlib.util
import os
import re
import shlex
import shutil
import tempfile

# (Triton's variables, its binary, whether torch may point its workers at its own): Triton 3.3-3.5 spells the
# Blackwell one TRITON_PTXAS-BLACKWELL_PATH (its binary's name, upper-cased), later ones with an underscore
TOOLS = ((("TRITON_PTXAS_PATH",), "ptxas", True),
         (("TRITON_PTXAS_BLACKWELL_PATH", "TRITON_PTXAS-BLACKWELL_PATH"), "ptxas-blackwell", False))  # fmt: skip
# where torch's `_set_triton_ptxas_path` has lived, and the two ways its versions compute the path
_TORCH_SOURCES = (("_inductor", "runtime", "compile_tasks.py"), ("_inductor", "codecache.py"))
_PARENTS = re.compile(r'Path\(__file__\)\.absolute\(\)\.parents\[(\d)\]\s*/\s*"bin"\s*/\s*"ptxas"')
_JOINED = re.compile(r'os\.path\.join\(\s*os\.path\.dirname\(__file__\),\s*"\.\.",\s*"bin",\s*"ptxas"\s*\)')
LOG_NAME = "ptxas-runs.tsv"
MAX_LINE = 1000  # characters of one log line read (a kernel name is short; a tampered line is not trusted)

_SCRIPT = """#!{bash}
# ttfr --explain: times one run of ptxas for the diagnostic process (ttfr/child/ptxas_timing.py)
start=${{EPOCHREALTIME:-$(date +%s.%N)}}
{real} "$@"
rc=$?
end=${{EPOCHREALTIME:-$(date +%s.%N)}}
ptx= arch=
for arg in "$@"; do
  case $arg in
    --version) ptx=--version ;;
    --gpu-name=*) arch=${{arg#--gpu-name=}} ;;
    *.ptx) ptx=$arg ;;
  esac
done
entry=
if [ "$ptx" != --version ] && [ -f "$ptx" ]; then
  entry=$(grep -m1 -oE '\\.entry [A-Za-z0-9_$]+' "$ptx")
  entry=${{entry#.entry }}
  ptx=kernel
fi
printf '%s\\t%s\\t%s\\t%s\\t%s\\t%s\\n' "$start" "$end" "$rc" "$ptx" "$entry" "$arch" >> {log}
exit $rc
"""


def _usable(path):
    return bool(path) and os.path.isfile(path) and os.access(path, os.X_OK)


def _package_dirs(package):
    try:  # find_spec of a top-level package locates it without importing it
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return []
    return list(spec.submodule_search_locations or []) if spec else []


def triton_default(binary):
    """The ptxas Triton runs where no variable names one: its bundled binary (None: none found)."""
    for root in _package_dirs("triton"):
        path = os.path.join(root, "backends", "nvidia", "bin", binary)
        if _usable(path):
            return path
    return None


def torch_choice():
    """The ptxas the installed torch points its compile workers at when the user set none, computed as its own
    `_set_triton_ptxas_path` computes it (None: it points them at none). Raises LookupError where its source says it
    in a way this does not know."""
    for root in _package_dirs("torch"):
        for parts in _TORCH_SOURCES:
            source = os.path.join(root, *parts)
            try:
                with open(source, encoding="utf-8") as handle:
                    text = handle.read()
            except OSError:
                continue
            start = text.find("def _set_triton_ptxas_path")
            if start < 0:
                continue
            body = text[start : text.find("\ndef ", start + 1)]
            if found := _PARENTS.search(body):
                path = os.path.join(os.path.dirname(source), *[".."] * int(found[1]), "bin", "ptxas")
            elif _JOINED.search(body):
                path = os.path.join(os.path.dirname(source), "..", "bin", "ptxas")
            else:
                raise LookupError(f"torch's _set_triton_ptxas_path in {source} computes its ptxas in a way ttfr "
                                  "does not read")  # fmt: skip
            path = os.path.normpath(path)
            return path if _usable(path) else None
    return None


def real_ptxas(variables, binary, torch_may_choose):
    """The ptxas Triton runs for these variables in this process and in Inductor's workers alike; raises LookupError
    saying why where there is none, or where the two would differ."""
    for variable in variables:
        if os.environ.get(variable):
            if not _usable(os.environ[variable]):  # Triton falls back to its own: wrapping it would hide that
                raise LookupError(f"{variable} names {os.environ[variable]}, which is no executable file")
            return os.environ[variable]
    default = triton_default(binary)
    if default is None:
        raise LookupError(f"no {binary} in Triton's package")
    workers = torch_choice() if torch_may_choose else None
    if workers is not None and not os.path.samefile(workers, default):
        raise LookupError(f"torch points its compile workers at {workers} and Triton here at {default}: one wrapper "
                          "would change which ptxas one of them runs")  # fmt: skip
    return default


class PtxasTimer:
    """Sets the wrappers up before torch is imported (so Inductor's worker pool inherits them); reads their log
    after the first call. `unavailable` says why not, where it could not."""

    def __init__(self):
        self.directory = None
        self.unavailable = None
        self.wrapped = {}  # variable -> the real ptxas

    def install(self):
        """Never raises: a wrapper that cannot be set leaves ptxas untouched and says why."""
        try:
            self._install()
        except Exception as error:  # noqa: BLE001 - nothing here may fail the diagnostic process
            self.unavailable = f"the ptxas wrapper could not be set ({type(error).__name__}: {error})"[:300]

    def _install(self):
        bash = shutil.which("bash")
        if bash is None or " " in bash or len(bash) > 100:  # a shebang line takes one short path
            self.unavailable = f"no bash usable in a script's first line to time ptxas runs with ({bash})"
            return
        self.directory = tempfile.mkdtemp(prefix="ttfr-ptxas-")
        atexit.register(shutil.rmtree, self.directory, True)
        log = os.path.join(self.directory, LOG_NAME)
        why = []
        for variables, binary, torch_may_choose in TOOLS:
            try:
                real = real_ptxas(variables, binary, torch_may_choose)
            except LookupError as error:
                why.append(str(error))
                continue
            script = os.path.join(self.directory, binary)
            with open(script, "w") as handle:
                handle.write(_SCRIPT.format(bash=bash, log=shlex.quote(log), real=shlex.quote(real)))
            os.chmod(script, 0o700)
            for variable in variables:
                os.environ[variable] = script
            self.wrapped[variables[0]] = real
        if not self.wrapped:
            self.unavailable = ("ptxas not wrapped: " + "; ".join(why))[:600]

    def runs(self, since_us):
        """The ptxas runs logged from `since_us` on (wall clock, microseconds), as compiler runs; raises OSError where
        the log cannot be read (the caller says so)."""
        if self.directory is None:
            return []
        try:
            with open(os.path.join(self.directory, LOG_NAME), errors="replace") as handle:
                lines = [line[:MAX_LINE] for line in handle]
        except FileNotFoundError:  # no run reached a wrapper
            return []
        runs = [run for run in (parse_line(line) for line in lines) if run is not None]
        return [run for run in runs if since_us is None or run["start_us"] >= since_us]


def parse_line(line):
    """One log line as a compiler run (None: not one the wrapper wrote)."""
    fields = line.rstrip("\n").split("\t")
    if len(fields) != 6:
        return None
    start, end = _microseconds(fields[0]), _microseconds(fields[1])
    if start is None or end is None or end < start:
        return None
    kind = "ptxas_version" if fields[3] == "--version" else "ptxas"
    built = fields[4] or None
    if built and fields[5]:
        built = f"{built} ({fields[5]})"
    return {"kind": kind, "s": (end - start) / 1e6, "start_us": start, "end_us": end, "built": built,
            "failed": fields[2] != "0"}  # fmt: skip


def _microseconds(text):
    """bash's EPOCHREALTIME (seconds, 6 decimals, the locale's decimal mark) in whole microseconds."""
    whole, _, fraction = text.replace(",", ".").partition(".")
    digits = "0123456789"
    if not whole or any(c not in digits for c in whole + fraction):  # ASCII digits only (isdigit takes "²")
        return None
    return int(whole) * 1_000_000 + int((fraction + "000000")[:6])
