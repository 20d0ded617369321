"""The documentation holds to what it shows (docs/development.md, "Documentation").

Every `ttfr …` line in a bash/console/sh block of README.md and docs/ is parsed by ttfr's own
parser (an unknown option or an invalid choice fails, naming the page and line) and the
selection it names is checked against the catalogue (backends, workloads, dtypes, cache
policies, case ids, presets, concurrency): a renamed option or backend cannot linger in a page.
A block after an `<!-- runnable -->` comment is run, line by line, on the fake executor and must
exit 0. Every page is in mkdocs.yml's navigation (or excluded there), the README stays short,
and the docs' lock file agrees with the CPU lock where both pin a package.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from support.fakes import FakeExecutor

from ttfr.commands import cli
from ttfr.errors import UsageError
from ttfr.measure import catalog, datasets
from ttfr.measure.executors import Executors
from ttfr.measure.selection import check_names, parse_concurrency, parse_int, parse_policies, split_values

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
README = ROOT / "README.md"
MKDOCS = ROOT / "mkdocs.yml"
README_MAX_LINES = 250
SHELL_BLOCKS = {"bash", "console", "sh", "shell"}
RUNNABLE = "<!-- runnable -->"
# Pages the build writes (a MkDocs hook), never committed: in the navigation, not in docs/.
GENERATED = {"reference/fields.md"}


def _config() -> dict:
    class Loader(yaml.SafeLoader):  # mkdocs.yml may hold MkDocs' own tags (!ENV, !relative)
        pass

    Loader.add_multi_constructor("!", lambda loader, suffix, node: None)
    return yaml.load(MKDOCS.read_text(), Loader=Loader)


def _excluded(relative: str) -> bool:
    """Whether mkdocs.yml's exclude_docs (anchored folder patterns: `/gpu/`) leaves this page out."""
    patterns = [p.strip() for p in (_config().get("exclude_docs") or "").splitlines() if p.strip()]
    for pattern in patterns:
        assert pattern.startswith("/") and pattern.endswith("/"), f"exclude_docs {pattern!r}: this test reads folders only"
        if ("/" + relative).startswith(pattern):
            return True
    return False


def _pages() -> list[Path]:
    return [README] + [p for p in sorted(DOCS.rglob("*.md")) if not _excluded(p.relative_to(DOCS).as_posix())]


@dataclass(frozen=True)
class Block:
    path: Path
    line: int  # of the opening fence, 1-based
    lang: str
    lines: tuple[tuple[int, str], ...]  # (line number, text)
    runnable: bool

    def where(self, number: int) -> str:
        return f"{self.path.relative_to(ROOT)}:{number}"


def _blocks(path: Path) -> list[Block]:
    blocks, current, previous = [], None, ""
    for number, text in enumerate(path.read_text().splitlines(), 1):
        fence = re.match(r"\s*```(\S*)", text)
        if current is None and fence:
            current = (number, fence.group(1).lower(), [], previous.strip() == RUNNABLE)
        elif current is not None and fence:
            blocks.append(Block(path, current[0], current[1], tuple(current[2]), current[3]))
            current, previous = None, text
        elif current is not None:
            current[2].append((number, text))
        elif text.strip():
            previous = text
    assert current is None, f"{path}: a code block opened at line {current[0]} is never closed"
    return blocks


def _shell_blocks() -> list[Block]:
    return [b for page in _pages() for b in _blocks(page) if b.lang in SHELL_BLOCKS]


def _placeholders(text: str) -> str:
    """A line as a reader would type it: `[--html]` taken as given, `SHARD_DIR...` as one
    directory, `<run>` as a word (shlex would read `<` and `>` as redirections)."""
    text = re.sub(r"<([^<>\s]+)>", lambda m: "X" + re.sub(r"\W", "_", m.group(1)).upper(), text)
    text = re.sub(r"(?<=\S)(\.\.\.|…)", "", text)
    return re.sub(r"(?<!\S)\[([^\[\]]*)\]", r"\1", text)


def _commands(block: Block) -> list[tuple[int, list[str]]]:
    """Each `ttfr …` command of a shell block (after a `$ ` prompt too; continuation lines joined;
    `a; b` and `a && b` are two), as (line, argv after `ttfr`); `make run ARGS="…"` counts as `ttfr run …`."""
    out, pending, start = [], "", 0
    for number, text in block.lines:
        if not pending:
            start = number
            text = re.sub(r"^\s*\$ ", "", text)
        if text.rstrip().endswith("\\"):
            pending += text.rstrip()[:-1] + " "
            continue
        line, pending = pending + text, ""
        lexer = shlex.shlex(_placeholders(line), posix=True, punctuation_chars=";&|")
        lexer.whitespace_split = True
        try:
            tokens = list(lexer)
        except ValueError as exc:
            pytest.fail(f"{block.where(start)}: cannot be split like a shell would: {exc}\n{line}")
        words: list[str] = []
        for token in [*tokens, ";"]:
            if token and set(token) <= set(";&|"):
                argv = _ttfr_argv(words)
                if argv is not None:
                    out.append((start, argv))
                words = []
            else:
                words.append(token)
    return out


def _ttfr_argv(words: list[str]) -> list[str] | None:
    if words and Path(words[0]).name == "ttfr":
        return words[1:]
    if words[:2] == ["make", "run"]:
        given = [w.split("=", 1)[1] for w in words[2:] if w.startswith("ARGS=")]
        return ["run", *(shlex.split(given[0]) if given else [])]
    return None


def _subparser(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser | None:
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return commands.choices.get(name)


def _example_values(parser: argparse.ArgumentParser, argv: list[str]) -> list[str]:
    """A placeholder given to a typed option (`--shards N`, `--precision REL`) becomes a value of
    that type; every other word stays as written (a placeholder path is a path)."""
    command = _subparser(parser, argv[0]) if argv else None
    if command is None:
        return argv
    out = list(argv)
    for i in range(1, len(out)):
        action = command._option_string_actions.get(out[i - 1])
        if action is None or action.type is None or action.choices or action.nargs == 0:
            continue
        if not re.fullmatch(r"X?[A-Z][A-Z0-9_/]*", out[i]):
            continue
        for example in ("2", "0.05", "10"):
            try:
                action.type(example)
            except (TypeError, ValueError, argparse.ArgumentTypeError):
                continue
            out[i] = example
            break
    return out


def _parse(argv: list[str]) -> argparse.Namespace | None:
    """Parse as `ttfr` does; None for a line that exits 0 at parsing (`--help`, `--version`)."""
    parser = cli.build_parser()
    argv = _example_values(parser, argv)
    stderr, stdout = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(stdout):
            return parser.parse_args(argv)
    except SystemExit as exc:
        if exc.code == 0:
            return None
        raise AssertionError(stderr.getvalue().strip() or f"exit {exc.code}") from None


def _check_selection(ns: argparse.Namespace) -> None:
    """What `run`, `ab` and `list` would refuse only once they start: names the catalogue lacks."""
    mine = bool(getattr(ns, "case_file", None))  # a case file's own workloads and case ids are its own
    backends = split_values(getattr(ns, "backends", ()), "--backends", catalog.BACKENDS)
    workloads = [] if mine else catalog.expand_workloads(split_values(getattr(ns, "workloads", ()), "--workloads"))
    dtypes = split_values(getattr(ns, "dtypes", ()), "--dtypes", catalog.DTYPES)
    check_names(catalog.BUILTIN, backends, workloads, dtypes)
    for size in split_values(getattr(ns, "sizes", ()), "--sizes"):
        parse_int(size, "--sizes")
    if hasattr(ns, "cache_policy"):
        parse_policies(ns.cache_policy)
    if hasattr(ns, "concurrency"):
        parse_concurrency(ns.concurrency)
    datasets.preset_sizes(split_values(getattr(ns, "workspace_preset", ()), "--workspace-preset"))
    for case_id in [] if mine else split_values(getattr(ns, "cases", ()), "--cases"):
        catalog.BUILTIN.parse_case_id(case_id)


def _all_commands() -> list[tuple[str, list[str]]]:
    return [(block.where(line), argv) for block in _shell_blocks() for line, argv in _commands(block)]


def test_the_pages_show_commands_and_the_parser_finds_them():
    """The extraction itself: a page that lost its blocks (or a parser that reads none) would pass
    every check below vacuously."""
    found = _all_commands()
    assert len(found) >= 50, found
    assert {argv[0] for _, argv in found} >= {"run", "list", "report", "ab", "compare", "selftest", "export", "publish"}
    block = Block(README, 1, "bash", ((2, "$ ttfr merge SHARD_DIR... ; ttfr report DIR [--html]  # x"), (3, "ttfr run \\"),
                                      (4, "    --cases A --out <dir>")), False)  # fmt: skip
    assert _commands(block) == [(2, ["merge", "SHARD_DIR"]), (2, ["report", "DIR", "--html"]),
                                (3, ["run", "--cases", "A", "--out", "XDIR"])]  # fmt: skip


def test_every_command_shown_parses_and_names_only_what_the_catalogue_has():
    problems = []
    for where, argv in _all_commands():
        try:
            ns = _parse(argv)
            if ns is not None:
                _check_selection(ns)
        except (AssertionError, UsageError) as exc:
            problems.append(f"{where}: `ttfr {shlex.join(argv)}`\n    {exc}")
    assert not problems, "commands in the docs that ttfr refuses:\n" + "\n".join(problems)


def test_a_mistyped_command_is_caught():
    """The check has teeth: an unknown option, an invalid choice and an unknown backend fail."""
    for argv in (["run", "--backend", "numpy"], ["run", "--profile", "fast"], ["list", "--workloads", "matmull"]):
        with pytest.raises((AssertionError, UsageError)):
            ns = _parse(argv)
            _check_selection(ns)


def _runnable_blocks() -> list[Block]:
    return [b for b in _shell_blocks() if b.runnable]


def test_runnable_blocks_exist_where_a_reader_starts():
    runnable = _runnable_blocks()
    commands = [argv[0] for block in runnable for _, argv in _commands(block)]
    assert any(b.path == DOCS / "getting-started.md" for b in runnable), "getting-started.md lost its runnable first run"
    assert "run" in commands and {"report", "list"} & set(commands), commands


@pytest.mark.parametrize("block", _runnable_blocks(), ids=lambda b: f"{b.path.relative_to(ROOT)}:{b.line}")
def test_runnable_blocks_run_on_the_fake_executor(block, tmp_path, monkeypatch, capsys):
    """Each command as printed, in a fresh directory, every measured process answered by the fake
    executor; `DIR` is the result directory the last `ttfr run` wrote."""
    monkeypatch.chdir(tmp_path)
    commands = _commands(block)
    assert commands, f"{block.where(block.line)}: a runnable block with no ttfr command"
    result_dir = None
    for line, argv in commands:
        if argv and argv[0] != "run":
            assert result_dir is not None or "DIR" not in argv, f"{block.where(line)}: DIR before any run"
            argv = [str(result_dir) if word == "DIR" else word for word in argv]
        before = set((tmp_path / "ttfr-results").glob("*"))
        code = cli.main(argv, executors=Executors(worker=FakeExecutor()))
        captured = capsys.readouterr()
        assert code == 0, f"{block.where(line)}: `ttfr {shlex.join(argv)}` exit {code}\n{captured.err[-2000:]}"
        if argv and argv[0] == "run":
            (result_dir,) = set((tmp_path / "ttfr-results").glob("*")) - before


def test_the_readme_stays_short():
    lines = len(README.read_text().splitlines())
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines (at most {README_MAX_LINES}): move the detail to docs/"


def _nav_pages(nav) -> list[str]:
    out = []
    for entry in nav:
        value = next(iter(entry.values())) if isinstance(entry, dict) else entry
        out.extend(_nav_pages(value) if isinstance(value, list) else [value])
    return out


def test_every_page_is_in_the_navigation_and_every_entry_is_a_page():
    nav = _nav_pages(_config()["nav"])
    pages = {p.relative_to(DOCS).as_posix() for p in _pages() if p != README}
    assert len(nav) == len(set(nav)), f"a page is in the navigation twice: {nav}"
    unreached = sorted(pages - set(nav))
    assert not unreached, f"pages no one can reach (add them to mkdocs.yml's nav, or to exclude_docs): {unreached}"
    missing = set(nav) - pages - GENERATED
    assert not missing, f"navigation entries without a page: {sorted(missing)}"
    assert not GENERATED & pages, f"generated at build, never committed: {sorted(GENERATED & pages)}"


def test_the_build_fetches_nothing_and_is_strict_about_links():
    config = _config()
    assert config["theme"].get("font") is False, "Google fonts would be fetched at build"
    plugins = [p if isinstance(p, str) else next(iter(p)) for p in config.get("plugins", [])]
    assert not {"privacy", "social", "offline"} & set(plugins), plugins
    validation = config["validation"]
    for key in ("not_found", "anchors", "unrecognized_links", "absolute_links"):
        assert validation["links"][key] == "warn", key  # --strict turns each warning into an error
    for key in ("omitted_files", "not_found"):
        assert validation["nav"][key] == "warn", key


def _pins(path: Path) -> dict[str, str]:
    pins = {}
    for line in path.read_text().splitlines():
        if "==" in line and not line.startswith("#"):
            name, version = line.split("==", 1)
            pins[re.sub(r"[-_.]+", "-", name.strip()).lower()] = version.strip()
    return pins


def test_the_docs_lock_agrees_with_the_cpu_lock():
    """Both are installed into .venv: a package pinned twice must be pinned alike."""
    docs, cpu = _pins(ROOT / "requirements" / "docs-lock.txt"), _pins(ROOT / "requirements" / "cpu-lock.txt")
    assert {"mkdocs", "mkdocs-material"} <= set(docs)
    differ = {name: (docs[name], cpu[name]) for name in set(docs) & set(cpu) if docs[name] != cpu[name]}
    assert not differ, f"docs-lock vs cpu-lock: {differ}"


def test_the_site_builds_strict(tmp_path):
    """`make docs` is CI's gate (after the tests, on a clone where nothing installed MkDocs yet: this
    skips there, saying why); where `make docs` has installed it into .venv, the same strict build
    runs here too (~2 s), into a temporary directory."""
    pytest.importorskip("mkdocs", reason="MkDocs is not installed here: `make docs` installs it (CI builds the site there)")
    pytest.importorskip("material", reason="mkdocs-material is not installed here: `make docs` installs it")
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                          cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]
    assert (tmp_path / "site" / "index.html").is_file()
