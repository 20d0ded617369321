"""Users' commands (`ttfr run --command "python train.py"`): any program's time to first
result under the cache policies, read and checked before anything runs.

A command is split like a shell would (shlex) and started without a shell; its program must
be found now. Its first result is the first output line matching `--first-result REGEX`,
the moment it calls `ttfr_mark.first_result()` (`--first-result-mark`), or its exit. Each
command becomes a workload of the `command` backend, case id `command_<name>_1_f64`.

What plan.json records passes through the one redaction: a command with a secret in it is
stored with `<redacted>` in its place and marked so, and a `--resume` of it is refused
(the stored command is not the one that ran).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
from dataclasses import dataclass
from pathlib import Path

from ttfr.cases import MAX_NAME, NAME
from ttfr.errors import UsageError
from ttfr.measure import catalog
from ttfr.model.plan import ProgramFile, RecordedCommand
from ttfr.redaction import redact_argv

_SCRIPT_SUFFIXES = (".py", ".sh", ".jl", ".r", ".js", ".rb", ".pl", ".ipynb")
_SLUG_LENGTH = 40


@dataclass(frozen=True)
class UserCommand:
    name: str
    argv: tuple[str, ...]
    cwd: str  # where it runs: the directory `ttfr run` was started in
    first_result: str | None = None  # a regex on its output (stdout and stderr, line by line)
    mark: bool = False  # it calls ttfr_mark.first_result()
    prepare: tuple[str, ...] | None = None  # run before each of its runs, untimed (hyperfine's --prepare)
    redacted: bool = False  # read back from plan.json with a secret replaced: it cannot run again
    # (absolute path, sha256) of its program and of the files its arguments name (its script):
    # a resume, or a run, of a program that changed since the run started is refused / invalid
    files: tuple[tuple[str, str], ...] = ()
    stop_at_first_result: bool = False  # ttfr ends it (kills its group) at its first result

    @property
    def text(self) -> str:
        """The command as a person reads it (redacted)."""
        return shlex.join(redact_argv(self.argv))

    @property
    def first_result_by(self) -> str:  # output | mark | exit
        return "output" if self.first_result is not None else "mark" if self.mark else "exit"

    def describe(self) -> str:
        ends = {"output": f"first output line matching /{self.first_result}/", "mark": "ttfr_mark.first_result()",
                "exit": "its exit"}[self.first_result_by]  # fmt: skip
        return f"`{self.text}` (first result: {ends})"

    def recorded(self) -> RecordedCommand:
        """What plan.json records of it: through the one redaction (`redacted`: a secret was replaced)."""
        argv, prepare = redact_argv(self.argv), redact_argv(self.prepare) if self.prepare else None
        return RecordedCommand(
            name=self.name, argv=argv, cwd=self.cwd, first_result=self.first_result, mark=self.mark, prepare=prepare,
            redacted=self.redacted or argv != list(self.argv) or (prepare or []) != list(self.prepare or []),
            files=[ProgramFile(path=path, sha256=sha256) for path, sha256 in self.files],
            stop_at_first_result=self.stop_at_first_result,
        )  # fmt: skip

    @classmethod
    def from_recorded(cls, recorded: RecordedCommand) -> UserCommand:
        """A command as plan.json records it (fields a later release added are absent from older plans)."""
        return cls(recorded.name, tuple(recorded.argv), recorded.cwd, recorded.first_result, recorded.mark,
                   tuple(recorded.prepare) if recorded.prepare else None, recorded.redacted,
                   tuple((f.path, f.sha256) for f in recorded.files or ()), bool(recorded.stop_at_first_result))  # fmt: skip

    def workload(self) -> catalog.Workload:
        return catalog.command_workload(self.name, f"your command {self.describe()}")


_MAX_FILES = 16
_MAX_HASHED_BYTES = 512 << 20  # a larger file (a dataset named on the command line) is not hashed


def _sha256(path: Path) -> str | None:
    import hashlib

    try:
        if not path.is_file() or path.stat().st_size > _MAX_HASHED_BYTES:
            return None
        digest = hashlib.sha256()
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
        return digest.hexdigest()
    except OSError:
        return None


def program_files(argv, cwd: str, path_env: str | None = None) -> tuple[tuple[str, str], ...]:
    """(path, sha256) of the program (found on PATH) and of every argument naming a file in
    `cwd` (`train.py`, `config.yaml`), at most 16; what a resume checks is unchanged."""
    found = []
    program = _program(argv[0], path_env)
    candidates = [Path(program)] if program else []
    for word in argv[1:]:
        value = word.partition("=")[2] if word.startswith("-") and "=" in word else word
        if value and not value.startswith("-"):
            candidates.append(Path(cwd) / Path(value).expanduser())
    for candidate in candidates:
        try:
            resolved = candidate.resolve()
        except (OSError, RuntimeError):
            continue
        digest = _sha256(resolved)
        if digest and str(resolved) not in dict(found):
            found.append((str(resolved), digest))
        if len(found) == _MAX_FILES:
            break
    return tuple(found)


def _program(word: str, path_env: str | None) -> str | None:
    """A command's program as the run finds it: a path as given, a bare name on PATH."""
    return word if "/" in word else shutil.which(word, path=path_env)


def program_moved(command: UserCommand, path_env: str | None = None) -> str | None:
    """Why the command's program is not the one its run used (PATH finds another one now: a
    resume would mix two programs in one result), or None."""
    if not command.files:
        return None
    program = _program(command.argv[0], path_env)
    try:
        now = str(Path(program).resolve()) if program else None
    except (OSError, RuntimeError):
        now = None
    recorded = command.files[0][0]
    if now == recorded:
        return None
    found = f"finds {now}" if now else "finds nothing"
    return f"the command `{command.text}` ran {recorded}, and {command.argv[0]} {found} now (put that one first on PATH)"


def changed_files(command: UserCommand) -> list[str]:
    """The recorded files of the command that are gone or hold something else now."""
    return [path for path, sha256 in command.files if _sha256(Path(path)) != sha256]


def split(text, option: str = "--command", path_env: str | None = None) -> tuple[str, ...]:
    """A command line split like a shell would, its program found (no shell runs it)."""
    if not isinstance(text, str) or not text.strip():
        raise UsageError(f"{option} was given an empty value: name a program and its arguments, e.g. "
                         f"{option} \"python train.py --epochs 1\"")  # fmt: skip
    try:
        argv = tuple(shlex.split(text))
    except ValueError as exc:
        raise UsageError(f"{option} {shlex.quote(text)}: {exc} (it is split like a shell would)") from None
    if not argv:
        raise UsageError(f"{option} {text!r} names no program")
    program = os.path.expanduser(argv[0])  # no shell will expand `~` for it
    argv = (program, *argv[1:])
    if "/" in program:
        path = Path(program)
        if not path.is_file() or not os.access(path, os.X_OK):
            raise UsageError(f"{option}: {program} is not an executable file")
    elif shutil.which(program, path=path_env) is None:
        raise UsageError(f"{option}: program {program!r} is not on PATH (no shell runs the command: pipes, "
                         f"redirections and shell built-ins need `bash -c '...'`)")  # fmt: skip
    if "\0" in text:
        raise UsageError(f"{option} holds a NUL byte")
    return argv


def slug(argv, qualified: bool = False) -> str:
    """A case name from a command: its script's stem (`python fit_v2.py` -> `fit_v2`), the module
    of `python -m pkg.mod` (`mod`), the first words of `python -c CODE` (`import_numpy`), else
    its program's name. `qualified`: the script's folder before its stem (`a/run.py` -> `a_run`),
    to tell two scripts of one name apart."""
    chosen = Path(argv[0]).stem if argv[0].lower().endswith(_SCRIPT_SUFFIXES) else Path(argv[0]).name
    words = list(argv[1:])
    for position, word in enumerate(words):  # the first of `-m module`, `-c code` and a script decides
        if word == "-m" and position + 1 < len(words):
            chosen = words[position + 1].rpartition(".")[2]
            break
        if word == "-c" and position + 1 < len(words):
            found = dict.fromkeys(re.findall(r"[A-Za-z][A-Za-z0-9]*", words[position + 1]))  # each word once
            chosen = "_".join(list(found)[:3]) or chosen
            break
        if not word.startswith("-") and word.lower().endswith(_SCRIPT_SUFFIXES):
            chosen = Path(word).stem
            if qualified and Path(word).parent.name:
                chosen = f"{Path(word).parent.name}_{chosen}"
            break
    name = re.sub(r"[^a-z0-9]+", "_", chosen.lower()).strip("_")
    name = "_".join(w for w in name.split("_") if w != "custom")[:_SLUG_LENGTH].strip("_")
    if not name or not name[0].isalpha():
        name = f"cmd_{name}".strip("_")
    return name


def check_name(name) -> str:
    if not isinstance(name, str) or not NAME.match(name) or len(name) > MAX_NAME:
        raise UsageError(f"--command-name {name!r}: lower-case letters, digits and single underscores, starting with "
                         f"a letter, at most {MAX_NAME} characters (it becomes the case id command_<name>_1_f64)")  # fmt: skip
    if "custom" in name.split("_"):
        raise UsageError(f"--command-name {name!r}: the word 'custom' is reserved in case ids")
    return name


def check_pattern(pattern) -> str:
    if not isinstance(pattern, str) or not pattern:
        raise UsageError("--first-result was given an empty pattern: give a regular expression its first result's "
                         "output line matches, e.g. --first-result 'loss='")  # fmt: skip
    try:
        compiled = re.compile(pattern)
    except re.error as exc:
        raise UsageError(f"--first-result {pattern!r} is not a regular expression: {exc}") from None
    if "\n" in pattern or "\r" in pattern:
        raise UsageError(f"--first-result {pattern!r} holds a line break: it is matched against one line at a time")
    if compiled.search(""):
        raise UsageError(f"--first-result {pattern!r} matches an empty line, so any output would end the timing: "
                         "give the text of the first result's line")  # fmt: skip
    return pattern


def parse(commands, names=(), first_result=None, mark=False, prepare=(), cwd=None, path_env=None,
          stop_at_first_result=False) -> tuple[UserCommand, ...]:  # fmt: skip
    """Check and name the commands of `--command` (with their options); nothing runs.
    `path_env`: the PATH the programs will be found on (an ab arm's, with its venv first)."""
    commands = [commands] if isinstance(commands, str) else list(commands or ())
    names = [names] if isinstance(names, str) else list(names or ())
    prepare = [prepare] if isinstance(prepare, str) else list(prepare or ())
    if not commands:
        used = [o for o, v in (("--command-name", names), ("--first-result", first_result is not None),
                               ("--first-result-mark", mark), ("--prepare", prepare),
                               ("--stop-at-first-result", stop_at_first_result)) if v]  # fmt: skip
        if used:
            raise UsageError(f'{", ".join(used)} describe(s) a command: give the command with --command "..."')
        return ()
    if first_result is not None and mark:
        raise UsageError("--first-result (a line of output) and --first-result-mark (ttfr_mark.first_result()) are two "
                         "ways to end the timing: choose one")  # fmt: skip
    if first_result is not None:
        check_pattern(first_result)
    if stop_at_first_result and first_result is None and not mark:
        raise UsageError("--stop-at-first-result ends each run at its first result: say what that is with "
                         "--first-result REGEX or --first-result-mark (without either it is the exit)")  # fmt: skip
    if len(names) > len(commands):
        raise UsageError(f"{len(names)} --command-name for {len(commands)} --command: give at most one name per command, "
                         "in the same order")  # fmt: skip
    if len(prepare) not in (0, 1, len(commands)):
        raise UsageError(f"{len(prepare)} --prepare for {len(commands)} --command: give one for every command, or one "
                         "for all")  # fmt: skip
    prepares = [split(p, "--prepare", path_env) for p in prepare]
    prepares = prepares * len(commands) if len(prepares) == 1 else prepares or [None] * len(commands)
    cwd = str(Path(cwd or os.getcwd()).resolve())
    out, seen = [], {}
    argvs = [split(text, path_env=path_env) for text in commands]
    slugs = [slug(argv) for argv in argvs]
    for position, text in enumerate(commands):
        argv = argvs[position]
        name = check_name(names[position]) if position < len(names) else slugs[position]
        if position >= len(names) and slugs.count(name) > 1:  # `python a/run.py` and `python b/run.py`: a_run, b_run
            name = slug(argv, qualified=True)
        if position >= len(names) and name in seen:  # still the same: numbered
            name = next(f"{name}_{n}" for n in range(2, len(commands) + 2) if f"{name}_{n}" not in seen)
        if name in seen:
            raise UsageError(f"--command-name {name!r} is given to two commands ({seen[name]!r} and {text!r}): "
                             "names make the case ids, so each must differ")  # fmt: skip
        seen[name] = text
        files = program_files(argv, cwd, path_env)
        out.append(UserCommand(name, argv, cwd, first_result, bool(mark), prepares[position], files=files,
                               stop_at_first_result=bool(stop_at_first_result)))  # fmt: skip
    return tuple(out)


def case_of(command: UserCommand) -> catalog.Case:
    return catalog.Case(catalog.COMMAND, command.name, 1, "float64", info=command.workload())
