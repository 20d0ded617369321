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
import traceback
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from ttfr.cases import MAX_SIZE, CaseError
from ttfr.child.workloads import user_case
from ttfr.errors import UsageError
from ttfr.measure import catalog

ENTRY_POINT_GROUP = "ttfr.cases"
_TRACEBACK_LINES = 12


@dataclass(frozen=True)
class UserCase:
    name: str
    source: str  # absolute path of the case file, or `module:<name>`
    frameworks: tuple[str, ...]
    sizes: tuple[int, ...]
    dtypes: tuple[str, ...]
    description: str
    sha256: str | None  # a case file's content when it was read (None: an installed module)

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


def _import(source: str, label: str):
    module_name = "ttfr_case_file_" + hashlib.sha256(source.encode()).hexdigest()[:12]
    try:
        return user_case.import_source(source, module_name)
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # noqa: BLE001 - the user's code: any failure is their error to read
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
        described.append(UserCase(case.name, source, tuple(case.builders), case.sizes, case.dtypes, case.description, sha256))
    names = [c.name for c in described]
    duplicated = sorted({n for n in names if names.count(n) > 1})
    if duplicated:
        raise UsageError(f"{label} defines case {', '.join(map(repr, duplicated))} more than once")
    return described


def read_case_file(path) -> list[UserCase]:
    file = Path(path).expanduser()
    label = f"case file {path}"
    if not file.is_file():
        raise UsageError(f"{label}: no such file (a Python file defining ttfr.cases.Case objects)")
    if file.suffix != ".py":
        raise UsageError(f"{label}: not a .py file")
    source = str(file.resolve())
    sha256 = user_case.file_sha256(source)
    return _describe(_import(source, label), source, label, sha256)


def installed_cases() -> list[UserCase]:
    """Cases of installed packages: each entry point of the group names a module."""
    out = []
    for entry in metadata.entry_points(group=ENTRY_POINT_GROUP):
        module_name = entry.value.partition(":")[0].strip()
        source = user_case.MODULE_PREFIX + module_name
        out += _describe(_import(source, f"entry point {entry.name!r} ({module_name})"), source,
                         f"entry point {entry.name!r}")  # fmt: skip
    return out


def read_recorded(recorded) -> list[UserCase]:
    """The case files a plan records, `[(path, sha256)]`: each must still hold what the run
    started with (a changed file would mix two versions of the code in one result)."""
    for path, sha256 in recorded:
        now = user_case.file_sha256(path)
        if now is None:
            raise UsageError(f"case file {path}, which this run's plan.json names, is gone: put it back to go on")
        if now != sha256:
            raise UsageError(f"case file {path} changed since this run started (sha256 {sha256[:12]}... in plan.json): "
                             "restore it, or start a new run")  # fmt: skip
    return read([path for path, _sha in recorded])


def read(case_files=(), installed: bool = True) -> list[UserCase]:
    """The cases of the case files (and of installed packages), files first."""
    cases = []
    for path in case_files:
        cases += read_case_file(path)
    if installed:
        cases += installed_cases()
    seen = {}
    for case in cases:
        if case.name in seen and seen[case.name] != case.source:
            raise UsageError(f"case {case.name!r} is defined in {seen[case.name]} and in {case.source}: rename one")
        seen[case.name] = case.source
    return cases
