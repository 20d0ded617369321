"""`--python`: the interpreter given for workers is tried before anything runs (a process probe)."""

from __future__ import annotations

from ttfr.child.job import FIELDS
from ttfr.errors import UsageError
from ttfr.redaction import redact_text

WORKER_PYTHON_TIMEOUT_S = 30.0  # the --python pre-check (`import ttfr.child.worker`) must answer within this


# Imports the worker and checks that its job takes every field this ttfr may send (a user's
# case fields, say): an older ttfr there would fail every run instead of the check.
_OLDER_WORKER = 86  # an exit code no interpreter uses for anything else
_WORKER_PROBE = (
    "import sys, ttfr.child.worker\n"
    "from ttfr.child.job import FIELDS\n"
    f"missing = sorted(set({sorted(name for name, _kind, _default in FIELDS)!r}) - {{f[0] for f in FIELDS}})\n"
    f"sys.exit(print(', '.join(missing), file=sys.stderr) or {_OLDER_WORKER} if missing else 0)\n"
)


def check_worker_python(python: str, env: dict | None = None, option: str = "--python") -> None:
    """The interpreter given for workers must exist and import this ttfr's worker, in the
    environment its workers get (`env`: what is added to ours), within
    WORKER_PYTHON_TIMEOUT_S. It runs under the supervisor, like a worker: in a session of its
    own, its whole process group killed when it does not answer or leaves anything behind, and
    registered with the sweeper meanwhile, so it dies with a ttfr killed outright."""
    import os
    import tempfile

    from ttfr.measure.supervisor import supervise

    environment = {**os.environ, **(env or {})}
    with tempfile.TemporaryFile() as output:
        ended = supervise([python, "-c", _WORKER_PROBE], environment, None, WORKER_PYTHON_TIMEOUT_S, output)
        if isinstance(ended, str):  # no such program; a NUL byte in the path
            raise UsageError(f"{option} {python!r} cannot be run: {ended.split(': ', 1)[-1]}") from None
        if ended.timed_out:
            raise UsageError(
                f"{option} {python!r} did not answer within {WORKER_PYTHON_TIMEOUT_S:g} s (running "
                "`import ttfr.child.worker`); it and every process it started were killed"
            )
        output.seek(0, os.SEEK_END)
        output.seek(max(0, output.tell() - 8192))
        # The interpreter's own words, as any recorded output: through the one redaction.
        last_lines = redact_text(output.read().decode("utf-8", "replace"), environment).strip().splitlines()
    if ended.exit_code == _OLDER_WORKER:
        raise UsageError(
            f"{option} {python!r} has an older ttfr worker: its jobs lack fields this ttfr sends "
            f"({(last_lines or ['?'])[-1]}); install this ttfr into that environment"
        )
    if ended.exit_code != 0:
        last = (last_lines or ["no output"])[-1]
        raise UsageError(
            f"{option} {python!r} cannot import ttfr's worker, ttfr.child.worker ({last}): install a ttfr with the "
            "same worker protocol into that environment (ttfr before the stage packages had ttfr.worker)"
        )
