"""--explain on a GPU: each run of ptxas (PTX to the GPU's machine code) that Triton makes in Inductor's worker
processes, timed one by one, with the kernel it built.

Triton runs ptxas as a subprocess from the path in `TRITON_PTXAS_PATH` (`TRITON_PTXAS_BLACKWELL_PATH` for
compute capability 10 and up), a documented knob its worker processes inherit from the diagnostic process. This
module points each at a small bash script that runs the ptxas the run would have used and appends a line to a log:
its start and end on the wall clock (bash's `EPOCHREALTIME`, no extra process), its exit status, the `.entry` the
PTX defines (the kernel's name) and the target (`--gpu-name`). Triton's `ptxas --version` probes are logged too.
The few milliseconds bash itself takes are outside each run's span. Only the unmeasured diagnostic process does this.

Which ptxas the run would have used: the user's own setting of the variable, else (plain ptxas only) the one torch
ships in `torch/bin` (Inductor's workers set it, `compile_tasks._set_triton_ptxas_path`), else Triton's bundled one.

Standard library only: the worker imports this before torch.
"""

import atexit
import importlib.util
import os
import shlex
import shutil
import tempfile

# (Triton's variable, its binary, whether torch's own ptxas stands in when the variable is unset)
TOOLS = (("TRITON_PTXAS_PATH", "ptxas", True), ("TRITON_PTXAS_BLACKWELL_PATH", "ptxas-blackwell", False))
LOG_NAME = "ptxas-runs.tsv"
MAX_LINE = 1000  # characters of one log line read (a kernel name is short; a tampered line is not trusted)

_SCRIPT = """#!{bash}
# ttfr --explain: times one run of {real} for the diagnostic process (ttfr/child/ptxas_timing.py)
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


def real_ptxas(variable, binary, torch_stands_in):
    """The ptxas Triton would run for this variable in Inductor's workers (None: none found)."""
    if os.environ.get(variable):
        return os.environ[variable]
    places = [("torch", ("bin", binary))] if torch_stands_in else []
    places.append(("triton", ("backends", "nvidia", "bin", binary)))
    for package, parts in places:
        try:  # find_spec of a top-level package locates it without importing it
            spec = importlib.util.find_spec(package)
        except (ImportError, ValueError):
            continue
        for root in (spec.submodule_search_locations or []) if spec else []:
            path = os.path.join(root, *parts)
            if os.path.isfile(path) and os.access(path, os.X_OK):
                return path
    return None


class PtxasTimer:
    """Sets the wrappers up before torch is imported (so Inductor's worker pool inherits them); reads their log
    after the first call. `unavailable` says why not, where it could not."""

    def __init__(self):
        self.directory = None
        self.unavailable = None
        self.wrapped = {}  # variable -> the real ptxas

    def install(self):
        bash = shutil.which("bash")
        if bash is None:
            self.unavailable = "no bash on PATH to time ptxas runs with"
            return
        try:
            self.directory = tempfile.mkdtemp(prefix="ttfr-ptxas-")
            atexit.register(shutil.rmtree, self.directory, True)
            log = os.path.join(self.directory, LOG_NAME)
            for variable, binary, torch_stands_in in TOOLS:
                real = real_ptxas(variable, binary, torch_stands_in)
                if real is None:
                    continue
                script = os.path.join(self.directory, binary)
                with open(script, "w") as handle:
                    handle.write(_SCRIPT.format(bash=bash, real=shlex.quote(real), log=shlex.quote(log)))
                os.chmod(script, 0o700)
                os.environ[variable] = script
                self.wrapped[variable] = real
        except OSError as error:
            self.unavailable = f"the ptxas wrapper could not be written ({error})"[:300]
            return
        if not self.wrapped:
            self.unavailable = "no ptxas found (TRITON_PTXAS_PATH unset, none in torch or triton)"

    def runs(self, since_us):
        """The ptxas runs logged from `since_us` on (wall clock, microseconds), as compiler runs."""
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
    if not whole.isdigit() or (fraction and not fraction.isdigit()):
        return None
    return int(whole) * 1_000_000 + int((fraction + "000000")[:6])
