"""--explain of a `--command` (issue 38): its diagnostic process runs with PYTHONPROFILEIMPORTTIME=1,
so a Python program reports every first import on stderr as `-X importtime` does. Its output is read
as the measured runs' is (measure/command_run.py); here the import lines it kept become the trace:
the imports before the first result form the `import` phase (a command has no finer phases: its
interpreter's start-up, its imports and its work up to the first result are one span), those after
it `after`. The installed distribution of each top-level package is asked of the program's own
interpreter (a `python…` the command names), which ran the imports: child/distributions.py as a
script, on stdin the names, in an unmeasured process of its own (the run's environment, untraced).
A program that printed no import line (not Python, or one that ignores the variable) has no trace:
its explanation says why.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import msgspec

import ttfr_mark
from ttfr.child import distributions as distributions_module
from ttfr.measure import import_trace
from ttfr.model.explanation import ImportTrace

VARIABLE = ttfr_mark.TRACE_VARIABLE  # Python reads it as -X importtime
# closes the `import` phase where the first result came: ttfr_mark's own line (it writes it in a diagnostic run)
FIRST_RESULT_MARK = ttfr_mark.FIRST_RESULT_LINE.decode()
_PYTHON = re.compile(r"python(\d+(\.\d+)?)?$")
_DISTRIBUTIONS_TIMEOUT_S = 60.0


def asked(env: dict) -> bool:
    """Whether this run is a diagnostic process whose imports are traced."""
    return env.get(VARIABLE) == "1"


def trace(lines: list[str], first_at: int | None, argv: list[str], env: dict, cwd: str | None = None) -> ImportTrace | None:
    """The trace of the import lines a command printed (`first_at`: how many came before its first result;
    None: all of them, the first result being its exit); None when it printed none."""
    if not lines:
        return None
    at = len(lines) if first_at is None else first_at
    parsed = import_trace.parse("\n".join([*lines[:at], FIRST_RESULT_MARK, *lines[at:]]))
    owners = _distributions(argv, env, sorted({i.module.partition(".")[0] for i in parsed.imports}), cwd)
    return msgspec.structs.replace(parsed, distributions=owners) if owners else parsed


def _distributions(argv: list[str], env: dict, tops: list[str], cwd: str | None = None) -> dict | None:
    """{top-level package: [distribution, version]} from the command's own interpreter, or None where the
    command does not start one by name (a shell, a launcher) or it could not say."""
    program = argv[0] if argv else ""
    if not _PYTHON.match(Path(program).name):
        return None
    found = shutil.which(program, path=env.get("PATH", os.defpath)) if os.sep not in program else program
    if not found:
        return None
    quiet = {k: v for k, v in env.items() if k != VARIABLE}  # its own imports untraced
    try:  # the run's environment and directory: its PYTHONPATH and local packages, as the program saw them
        source = Path(distributions_module.__file__).read_text()
        done = subprocess.run([found, "-c", source], input=json.dumps(tops), capture_output=True, text=True,
                              timeout=_DISTRIBUTIONS_TIMEOUT_S, env=quiet, cwd=cwd)  # fmt: skip
        owners = json.loads(done.stdout) if done.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired, ValueError):
        return None
    return owners if isinstance(owners, dict) else None
