"""The documentation's case-file example (docs/guide/case-files.md, once the README's), executed
as a reader would run it: its file written out from the page and its commands run as printed
(measured processes answered by a fake executor), so an example that drops a backend, or no
longer parses, fails here."""

import re
import shlex
from pathlib import Path

from support.fakes import FakeExecutor

from ttfr.commands import cli
from ttfr.measure.executors import Executors

PAGE = Path(__file__).resolve().parents[1] / "docs" / "guide" / "case-files.md"


def _example():
    text = PAGE.read_text()
    source = re.search(r"```python\n# bench_mine\.py\n(.*?)```", text, re.S)
    commands = re.search(r"```bash\n((?:ttfr [^\n]*bench_mine\.py[^\n]*\n)+)```", text)
    assert source and commands, "the bench_mine.py example moved from docs/guide/case-files.md: update this test"
    lines = [line.split("  #")[0].strip() for line in commands.group(1).splitlines()]
    return source.group(1), [shlex.split(line)[1:] for line in lines]


def test_the_case_file_example_runs_as_printed(tmp_path, monkeypatch, capsys):
    source, commands = _example()
    (tmp_path / "bench_mine.py").write_text(source)
    monkeypatch.chdir(tmp_path)
    assert [argv[0] for argv in commands] == ["list", "run"]
    for argv in commands:
        extra = ["--out", str(tmp_path / "out"), "--cold-runs", "1", "--warm-procs", "1", "--no-html"] if argv[0] == "run" else []
        code = cli.main([*argv, *extra], executors=Executors(worker=FakeExecutor()))
        captured = capsys.readouterr()
        assert code == 0, f"`ttfr {shlex.join(argv)}`: exit {code}\n{captured.err}"
    backends = commands[1][commands[1].index("--backends") + 1].split(",")
    (root,) = (tmp_path / "out").iterdir()
    ran = {path.name for path in (root / "cases").glob("*.json")}
    for backend in backends:  # every backend the example names measured the case
        assert any(name.startswith(f"{backend}_softplus_sum_") for name in ran), (backend, sorted(ran))
