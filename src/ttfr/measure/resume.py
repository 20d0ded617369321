"""Which programs a stored plan may run again (a resume, a replication): only those the user names
on the command line. ttfr never runs a program because a file names it."""

from __future__ import annotations

import os
import shlex
import shutil
from dataclasses import dataclass

from ttfr.errors import UsageError
from ttfr.measure import user_commands
from ttfr.model.base import UNSET
from ttfr.model.plan import CaseFile, RecordedCase


@dataclass(frozen=True)
class Named:
    """The programs a user named on a command line (`--python`, `--case-file`, `--command`,
    `--prepare`): the only ones a stored plan may run. ttfr never runs a program because a file
    (plan.json, a result directory, a snapshot) names it: checking it by running it is running it."""

    python: str | None = None
    case_files: tuple[str, ...] = ()
    commands: tuple[str, ...] = ()
    prepare: tuple[str, ...] = ()
    python_recorded: bool = True  # False: the spec's python is not used (a replication runs this ttfr's own)


NOTHING_NAMED = Named()


def interpreter_path(python: str) -> str:
    """An interpreter as the user named it, made absolute (found on PATH if a bare name) but with
    its symlinks kept: every virtual environment's bin/python links to one base interpreter, and
    which environment it is, is the link's own location."""
    return os.path.abspath(os.path.expanduser(shutil.which(python) or python))


def _same_interpreter(recorded: str, given: str | None) -> bool:
    return given is not None and os.path.abspath(recorded) == interpreter_path(given)


def _same_file(recorded: str, given: str) -> bool:
    return os.path.realpath(recorded) == os.path.realpath(os.path.expanduser(given))


def _split_or_none(text: str):
    try:
        return shlex.split(text)
    except ValueError:
        return None


def unnamed_programs(python: str | None, case_files, commands, named: Named) -> list[str]:
    """What a stored spec would run that `named` does not name, each with the option that names it:
    its workers' interpreter, its case files `[(path, sha256)]` and its commands (UserCommand)."""
    missing = []
    if named.python_recorded and python is not None and not _same_interpreter(python, named.python):
        missing.append(f"the workers' interpreter {python} (add --python {shlex.quote(python)})")
    if named.python_recorded and python is None and named.python is not None:
        missing.append(f"--python {named.python}: its workers ran ttfr's own interpreter (drop --python)")
    for path, _sha in case_files:
        if not any(_same_file(path, given) for given in named.case_files):
            missing.append(f"the case file {path} (add --case-file {shlex.quote(path)})")
    named_commands = [_split_or_none(text) for text in named.commands]
    prepares = [_split_or_none(text) for text in named.prepare]
    for command in commands:
        text = shlex.join(command.argv)
        if list(command.argv) not in named_commands:
            missing.append(f"the command `{text}` (add --command {shlex.quote(text)})")
        if command.prepare and list(command.prepare) not in prepares:
            prepare = shlex.join(command.prepare)
            missing.append(f"the --prepare step `{prepare}` (add --prepare {shlex.quote(prepare)})")
        if os.path.realpath(command.cwd) != os.path.realpath(os.getcwd()):
            missing.append(f"the command `{text}` runs in {command.cwd} (run ttfr from there)")
        elif moved := user_commands.program_moved(command):  # PATH finds another program by that name now
            missing.append(moved)
    return missing


def check_runnable_again(commands) -> None:
    """A stored command runs again (a resume, a replication) only as it ran: not one whose secret the
    plan does not hold (`<redacted>` is not the command that ran), nor one whose program or files changed."""
    for command in commands:
        if command.redacted:
            raise UsageError(f"command {command.name} held a secret, which plan.json does not record, so it cannot be "
                             "run again: start a new run (pass secrets through the environment)")  # fmt: skip
        changed = user_commands.changed_files(command)
        if changed:
            raise UsageError(f"command {command.name}'s {changed[0]} changed or is gone since the run started (sha256 "
                             "in plan.json): restore it, or start a new run")  # fmt: skip


def recorded_cases(recorded: CaseFile) -> list[RecordedCase]:
    """A plan's record of a case file's cases; plans before 0.1.2 have none, and reading them would
    mean importing the file."""
    if recorded.cases is UNSET:
        raise UsageError(f"plan.json names the case file {recorded.path} without its cases (ttfr before 0.1.2): "
                         "reading them would run the file; run the cases again with this ttfr")  # fmt: skip
    return recorded.cases
