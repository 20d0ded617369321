"""Users' own cases: case files (`--case-file`) and installed packages (entry-point group
`ttfr.cases`), read before anything runs; their workloads make the run's catalogue
(catalog.Catalog.with_workloads).

Reading a file imports it in this process (its top-level code runs, as it will in every
worker); anything wrong is a UsageError (exit 2) with the user's traceback tail: a syntax
error, an exception while importing, no case, a case without a builder, a name that a
built-in workload or another file's case already has.
"""

from __future__ import annotations

import hashlib
import signal
import sys
import threading
import time
import traceback
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from ttfr.cases import MAX_SIZE, CaseError
from ttfr.child.workloads import user_case
from ttfr.errors import UsageError
from ttfr.measure import catalog
from ttfr.model.plan import RecordedCase

ENTRY_POINT_GROUP = "ttfr.cases"
_TRACEBACK_LINES = 12
_NOTICE_AFTER_S = 2.0  # an import still running then is announced, so a hang is not silence


class _ImportTimedOut(BaseException):
    """Raised into a case file's import at --timeout (a BaseException: the file's own
    `except Exception` cannot swallow it)."""


@dataclass(frozen=True)
class UserCase:
    name: str
    source: str  # absolute path of the case file, or `module:<name>`
    frameworks: tuple[str, ...]
    sizes: tuple[int, ...]
    dtypes: tuple[str, ...]
    description: str
    sha256: str | None  # a case file's content when it was read (None: an installed module)

    def recorded(self) -> RecordedCase:
        """What plan.json records of it beside its file's path and sha256."""
        return RecordedCase(name=self.name, frameworks=list(self.frameworks), sizes=list(self.sizes),
                            dtypes=list(self.dtypes), description=self.description)  # fmt: skip

    @classmethod
    def from_recorded(cls, recorded: RecordedCase, source: str, sha256: str) -> UserCase:
        return cls(recorded.name, source, tuple(recorded.frameworks), tuple(recorded.sizes), tuple(recorded.dtypes),
                   recorded.description, sha256)  # fmt: skip

    @property
    def from_file(self) -> bool:
        return not self.source.startswith(user_case.MODULE_PREFIX)

    def workload(self) -> catalog.Workload:
        what = self.description or f"your case {self.name!r}"
        return catalog.Workload(
            self.name, self.frameworks, self.sizes, (1, MAX_SIZE), self.dtypes, "the case's own size parameter",
            f"{what} ({self.source})", default=False, module=catalog.USER_CASE_MODULE, source=self.source,
        )  # fmt: skip


def _tail(exc: BaseException) -> str:
    lines = traceback.format_exception(type(exc), exc, exc.__traceback__)
    text = "".join(lines).rstrip().splitlines()
    return "\n".join(text[-_TRACEBACK_LINES:])


def _one_line(exc: BaseException, source: str) -> str | None:
    """`file:line:column: Type: message` of what went wrong in the user's file (the deepest of
    their frames; the case file's own line too when that is elsewhere), or None when none of
    the traceback is theirs (an installed module's)."""
    message = (str(exc).strip().splitlines() or [""])[0]
    if isinstance(exc, SyntaxError) and exc.filename and not exc.filename.startswith("<"):
        column = f":{exc.offset}" if exc.offset else ""
        return f"{Path(exc.filename).name}:{exc.lineno}{column}: {type(exc).__name__}: {exc.msg}"
    frames = user_case.users_frames(exc.__traceback__, source)
    if not frames:
        return None
    via = next((f for f in frames if f.filename == source), None)
    imported = f" (from {user_case.where(via)})" if via is not None and via is not frames[-1] else ""
    return f"{user_case.where(frames[-1])}: {type(exc).__name__}: {message}{imported}"


@contextmanager
def _time_limit(seconds: float | None, label: str):
    """Importing a case file runs its top-level code: limited to --timeout like any phase of a
    run (SIGALRM, so only in the main thread; elsewhere it is not limited), and announced on
    stderr once it takes longer than a moment."""
    if seconds is None or threading.current_thread() is not threading.main_thread():
        yield
        return

    def expire(_signum, _frame):
        raise _ImportTimedOut

    notice = threading.Timer(_NOTICE_AFTER_S, lambda: print(f"importing {label}… (--timeout {seconds:g} s)",
                                                            file=sys.stderr, flush=True))  # fmt: skip
    notice.daemon = True
    previous = signal.signal(signal.SIGALRM, expire)
    began = time.monotonic()
    outer = signal.setitimer(signal.ITIMER_REAL, seconds)  # an alarm already set (a test runner's timeout)
    notice.start()
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        notice.cancel()
        if outer[0] > 0:  # given back what is left of it (at least a moment: it was due during the import)
            signal.setitimer(signal.ITIMER_REAL, max(outer[0] - (time.monotonic() - began), 1e-3), outer[1])


def _import(source: str, label: str, timeout_s: float | None = None):
    module_name = "ttfr_case_file_" + hashlib.sha256(source.encode()).hexdigest()[:12]
    try:
        with _time_limit(timeout_s, label):
            return user_case.import_source(source, module_name)
    except KeyboardInterrupt:
        raise
    except _ImportTimedOut as exc:
        frames = user_case.users_frames(exc.__traceback__, source)
        at = f" (it was at {user_case.where(frames[-1])})" if frames else ""
        raise UsageError(f"{label}: importing it took longer than --timeout {timeout_s:g} s{at}: its top-level code "
                         "runs in every worker too; move slow work into @case.inputs or a builder") from None  # fmt: skip
    except BaseException as exc:  # noqa: BLE001 - the user's code: any failure is their error to read
        line = _one_line(exc, source)
        if line:
            raise UsageError(f"{label} could not be imported: {line}") from None
        raise UsageError(f"{label} could not be imported:\n{_tail(exc)}") from None


def _describe(module, source: str, label: str, sha256: str | None = None) -> list[UserCase]:
    found = user_case.cases_of(module)
    if not found:
        raise UsageError(f"{label} defines no case: create one with `ttfr.cases.Case(...)` at its top level")
    described = []
    for case in found:
        try:
            case.validate()  # again: the module may have changed the case after creating it
        except CaseError as exc:
            raise UsageError(f"{label}: {exc}") from None
        if not case.builders:
            raise UsageError(f"{label}: case {case.name!r} has no builder: decorate a function with "
                             "@case.jax, @case.torch or @case.numpy (see `ttfr.cases`)")  # fmt: skip
        if case.make_inputs is None:  # its function would be called with nothing and fail every run
            raise UsageError(f"{label}: case {case.name!r} has no inputs: decorate a function (size, dtype, seed) -> "
                             "list of arrays with @case.inputs (see `ttfr.cases`)")  # fmt: skip
        described.append(UserCase(case.name, source, tuple(case.builders), case.sizes, case.dtypes, case.description, sha256))
    names = [c.name for c in described]
    duplicated = sorted({n for n in names if names.count(n) > 1})
    if duplicated:
        raise UsageError(f"{label} defines case {', '.join(map(repr, duplicated))} more than once")
    return described


def read_case_file(path, timeout_s: float | None = None) -> list[UserCase]:
    file = Path(path).expanduser()
    label = f"case file {path}"
    if not file.is_file():
        raise UsageError(f"{label}: no such file (a Python file defining ttfr.cases.Case objects)")
    if file.suffix != ".py":
        raise UsageError(f"{label}: not a .py file")
    source = str(file.resolve())
    sha256 = user_case.file_sha256(source)
    return _describe(_import(source, label, timeout_s), source, label, sha256)


def installed_cases() -> list[UserCase]:
    """Cases of installed packages: each entry point of the group names a module."""
    out = []
    for entry in metadata.entry_points(group=ENTRY_POINT_GROUP):
        module_name = entry.value.partition(":")[0].strip()
        source = user_case.MODULE_PREFIX + module_name
        out += _describe(_import(source, f"entry point {entry.name!r} ({module_name})"), source,
                         f"entry point {entry.name!r}")  # fmt: skip
    return out


def read_recorded(recorded, timeout_s: float | None = None) -> list[UserCase]:
    """The case files a plan records, `[(path, sha256)]`: each must still hold what the run
    started with (a changed file would mix two versions of the code in one result)."""
    for path, sha256 in recorded:
        now = user_case.file_sha256(path)
        if now is None:
            raise UsageError(f"case file {path}, which this run's plan.json names, is gone: put it back to go on")
        if now != sha256:
            raise UsageError(f"case file {path} changed since this run started (sha256 {sha256[:12]}... in plan.json): "
                             "restore it, or start a new run")  # fmt: skip
    return read([path for path, _sha in recorded], installed=False, timeout_s=timeout_s)


def read(case_files=(), installed: bool = True, timeout_s: float | None = None) -> list[UserCase]:
    """The cases of the case files (and of installed packages), files first; `timeout_s`
    limits each file's import."""
    cases = []
    for path in case_files:
        cases += read_case_file(path, timeout_s)
    if installed:
        cases += installed_cases()
    seen = {}
    for case in cases:
        if case.name in seen and seen[case.name] != case.source:
            raise UsageError(f"case {case.name!r} is defined in {seen[case.name]} and in {case.source}: rename one")
        seen[case.name] = case.source
    return cases
