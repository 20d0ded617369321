"""The architecture, checked: stage packages import only downwards, nothing outside the
catalog keys on a backend's or framework's name, and the light modules stay light."""

import ast
import re
import os
import subprocess
import sys
from pathlib import Path

import pytest

import ttfr
from ttfr.measure import catalog

SOURCE = Path(ttfr.__file__).parent
# The catalog describes backends; the child side *is* the per-runtime code (adapters, and
# workloads with one function per framework).
OWNERS = (SOURCE / "measure" / "catalog.py", SOURCE / "child")
NAMES = set(catalog.BACKENDS) | {b.framework for b in catalog.BACKENDS.values()}
# A dict key "python" is an interpreter (manifest, ab arms), not the diagnostic backend.
INTERPRETER_KEY = "python"


def _outside_owners():
    for path in sorted(SOURCE.rglob("*.py")):
        if not any(path == owner or owner in path.parents for owner in OWNERS):
            yield path


def _constants(node):
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        yield node.value
    elif isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        for element in node.elts:
            yield from _constants(element)


def keyed_on_backend_names(path: Path, root: Path = SOURCE) -> list[str]:
    """Comparisons with a backend or framework name, tables keyed by one, and reads of a
    backend's framework (what the adapters and workloads switch on), in one module."""
    relative = path.relative_to(root).as_posix()
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        candidates = []
        if isinstance(node, ast.Compare):
            candidates = [c for side in (node.left, *node.comparators) for c in _constants(side)]
        elif isinstance(node, ast.Dict):
            keys = [c for key in node.keys if key is not None for c in _constants(key)]
            candidates = [c for c in keys if c != INTERPRETER_KEY]
        elif isinstance(node, ast.Attribute) and node.attr == "framework":
            found.append(f"{relative}:{node.lineno} reads .framework")
        found += [f"{relative}:{node.lineno} keys on {c!r}" for c in candidates if c in NAMES]
    return found


def test_nothing_outside_the_catalog_keys_on_backend_or_framework_names():
    found = [hit for path in _outside_owners() for hit in keyed_on_backend_names(path)]
    assert found == [], "backend facts belong in measure/catalog.py's Backend:\n" + "\n".join(found)


def test_the_name_check_finds_what_it_forbids(tmp_path):
    # the scan above must be able to fail: a framework-keyed table, a comparison and a read
    bad = SOURCE / "report" / "_probe_for_test.py"
    bad.write_text(
        '_PRIOR = {"pyhf": 1.0}\ndef f(backend):\n    return backend.framework == "jax" or backend.name in ("numpy", "x")\n'
    )
    try:
        found = keyed_on_backend_names(bad)
    finally:
        bad.unlink()
    assert len([f for f in found if "keys on" in f]) == 3 and any("reads .framework" in f for f in found)


# Who may write files besides artifacts/, and why. Everything else renders, decides or
# measures, and hands what is to be kept to artifacts/ (results, exports, comparisons, a
# Slurm job's directory: ttfr.artifacts.store and ResultDir).
WRITERS = {
    "child": "the worker's own compiled-program and reference caches (stdlib side of the pipe)",
    "measure/journal.py": "the journal, appended and fsynced while measuring (a layer below artifacts/)",
    "measure/cache.py": "the compilation-cache directories whose state is the cache policy measured",
    "measure/release_envs.py": "the releases' environments (`history --releases`), built whole in ttfr's own cache",
    "pytest_plugin.py": "the lock budget tests take in turn under pytest-xdist, in --ttfr-out",
    "measure/slurm_groups.py": "a group's task files and release barrier on the user's shared filesystem",
    "measure/group_task.py": "an array task's ready and result files, written in place on that filesystem",
    "artifacts": "the artifacts",
    "commands/closed_pipe.py": "/dev/null for what is left of a closed stdout (the Python docs' Note on SIGPIPE)",
}
_WRITING_CALLS = {"write_text", "write_bytes", "mkdir", "makedirs", "rmtree", "copyfile", "copytree", "copy2",
                  "move", "rename", "unlink", "rmdir", "touch", "chmod", "symlink_to", "dump"}  # fmt: skip
_WRITING_FLAGS = {"O_WRONLY", "O_RDWR", "O_CREAT", "O_APPEND", "O_TRUNC"}
_STORE_WRITERS = {"write_bytes_atomic", "write_json", "copy_file", "remove_tree", "make_directories", "new_directory",
                  "new_stamped_directory"}  # fmt: skip


def files_written(path: Path, root: Path = SOURCE) -> list[str]:
    """Calls in one module that write, move or remove files (a renderer may not even call
    artifacts/'s writers: it returns text)."""
    relative = path.relative_to(root).as_posix()
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        owner = func.value.id if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) else ""
        mode = [a.value for a in node.args[1:2] if isinstance(a, ast.Constant)]
        mode += [k.value.value for k in node.keywords if k.arg == "mode" and isinstance(k.value, ast.Constant)]
        flags = {n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)} & _WRITING_FLAGS
        if (
            name in _WRITING_CALLS
            or (owner in ("os", "shutil") and name in ("replace", "remove", "copy"))
            or (name == "open" and owner != "os" and any(set(str(m)) & set("wax+") for m in mode))
            or (name == "open" and owner == "os" and flags)
            or (relative.startswith("report/") and name in _STORE_WRITERS)
        ):
            found.append(f"{relative}:{node.lineno} {owner + '.' if owner else ''}{name}")
    return found


def test_only_artifacts_writes_files():
    found = [
        hit
        for path in sorted(SOURCE.rglob("*.py"))
        if not any(path.relative_to(SOURCE).as_posix().startswith(w) for w in WRITERS)
        for hit in files_written(path)
    ]
    assert found == [], "write through ttfr.artifacts (store, ResultDir):\n" + "\n".join(found)


def test_the_write_check_finds_what_it_forbids():
    bad = SOURCE / "report" / "_probe_for_test.py"
    bad.write_text(
        "import os, shutil\nfrom ttfr.artifacts.store import write_json\n"
        "def f(p, t):\n    p.write_text(t)\n    open(p, 'a')\n    os.open(p, os.O_WRONLY | os.O_CREAT)\n"
        "    shutil.rmtree(p)\n    os.replace(p, t)\n    write_json(p, {})\n    open(p)\n    os.open(p, os.O_RDONLY)\n"
    )
    try:
        found = files_written(bad)
    finally:
        bad.unlink()
    assert [hit.split()[-1] for hit in found] == ["p.write_text", "open", "os.open", "shutil.rmtree", "os.replace",
                                                  "write_json"]  # fmt: skip


def test_stages_import_only_downwards():
    lint = Path(sys.executable).parent / "lint-imports"  # import-linter is in the test extra and the lock file
    done = subprocess.run([str(lint)], capture_output=True, text=True, cwd=SOURCE.parent.parent, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "4 kept, 0 broken" in done.stdout  # the layers, no command importing another, report acyclic, model bare


def _modules_after_import(module: str) -> set[str]:
    code = f"import sys, {module}; print('\\n'.join(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    return set(done.stdout.split())


@pytest.mark.parametrize("module", ["ttfr.report.markdown", "ttfr.model.policies", "ttfr.exit_codes"])
def test_reports_and_constants_load_no_numpy_and_no_histfactory_code(module):
    loaded = _modules_after_import(module)
    heavy = {m for m in loaded if m.split(".")[0] in ("numpy", "scipy", "jax", "torch", "pyhf", "nextstat")}
    heavy |= {m for m in loaded if m.startswith("ttfr.child.workloads")}
    assert heavy == set()


def test_the_worker_module_loads_only_the_standard_library_and_its_job():
    loaded = _modules_after_import("ttfr.child.worker")
    ours = {m for m in loaded if m.startswith("ttfr")}
    assert ours == {"ttfr", "ttfr.child", "ttfr.child.job", "ttfr.child.worker"}
    # (an editable install adds its `__editable__…` finder; `_`-prefixed modules are the
    # interpreter's own)
    third_party = {m for m in loaded if m.split(".")[0] not in sys.stdlib_module_names and m.split(".")[0] != "ttfr"}
    assert {m for m in third_party if not m.startswith("_")} == set()


def test_the_command_line_loads_no_statistics_or_runtime_before_a_command_needs_them():
    # `--help`, `list` and a mistyped option answer at once (SciPy alone costs ~0.7 s).
    loaded = _modules_after_import("ttfr.commands.cli")
    assert {m.split(".")[0] for m in loaded} & {"scipy", "jax", "torch", "pyhf", "nextstat"} == set()


@pytest.mark.slow  # imports pyhf and JAX in a child
@pytest.mark.parametrize("variant", ["numpy", "jax"])
def test_the_pyhf_adapter_imports_no_other_ttfr_module_in_its_timed_import(variant):
    # Its import_s is pyhf's: ttfr's HistFactory code used to ride along (pyhf_engine -> common -> dense).
    code = (
        "import sys\nfrom ttfr.child.job import Job\nfrom ttfr.child.backends import pyhf_backend\n"
        "before = set(sys.modules)\n"
        f"pyhf_backend.Runtime(Job(adapter='pyhf_backend', variant={variant!r}, workload='hf_nll_grad', size=3, "
        "dtype='float64')).import_stack()\n"
        "print('\\n'.join(sorted(m for m in set(sys.modules) - before if m.startswith('ttfr'))))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "JAX_PLATFORMS": "cpu"})  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == []


def _import_cycles(graph) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan), over every import a module
    makes, lazy ones inside functions included."""
    adjacent = {m: sorted(graph.find_modules_directly_imported_by(m)) for m in sorted(graph.modules)}
    index, low, stack, on_stack, cycles = {}, {}, [], set(), []

    def visit(module):
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for other in adjacent[module]:
            if other not in index:
                visit(other)
                low[module] = min(low[module], low[other])
            elif other in on_stack:
                low[module] = min(low[module], index[other])
        if low[module] == index[module]:
            group = []
            while not group or group[-1] != module:
                group.append(stack.pop())
                on_stack.discard(group[-1])
            if len(group) > 1:
                cycles.append(sorted(group))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for module in adjacent:
        if module not in index:
            visit(module)
    return cycles


def test_no_module_imports_its_way_back_to_itself():
    """No import circle anywhere in src/, lazy imports included: a circle ties two modules' jobs
    together (engines.py and native.py were, through the native input layout)."""
    grimp = pytest.importorskip("grimp")
    assert _import_cycles(grimp.build_graph("ttfr")) == []


def test_the_cycle_finder_finds_a_cycle():
    class Graph:  # a -> b -> c -> a, and d alone
        modules = {"a", "b", "c", "d"}
        edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}

        def find_modules_directly_imported_by(self, module):
            return self.edges[module]

    assert _import_cycles(Graph()) == [["a", "b", "c"]]


@pytest.mark.slow  # pylint reads the whole tree (~5 s): beside the HistFactory fits, not in the fast tier
def test_no_six_lines_of_src_repeat_elsewhere_in_src():
    """pylint's duplicate-code check (six lines or more, imports and signatures ignored): one piece of
    code serves where the logic is the same, rather than two copies that drift apart."""
    pytest.importorskip("pylint")
    done = subprocess.run([sys.executable, "-m", "pylint", "--disable=all", "--enable=duplicate-code",
                           "--min-similarity-lines=6", "--ignore-imports=yes", "--ignore-signatures=yes",
                           "--score=no", str(SOURCE)], capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0 and "R0801" not in done.stdout, done.stdout[-4000:]


# Where a document is read by key rightly: NextStat's own JSON (its snapshot index, as its registry script
# reads it), which ttfr does not type.
_READ_BY_KEY_RIGHTLY = {"artifacts/snapshot_registry.py": "NextStat's snapshot index (nextstat.snapshot_index.v1)",
                        "artifacts/history_sources.py": "a NextStat snapshot's index, baseline and ML results, and a "
                                                        "NextStat registry (nextstat.*.v1)"}  # fmt: skip


def test_ttfrs_own_documents_are_read_as_their_types_never_by_string_key():
    """plan.json (and its spec), manifest.json, a snapshot's index, baseline and validation pack, a self-test
    and a replication report become their types where they arrive (artifacts/reader.py); past that no reader
    indexes them by key (`plan["spec"]`), where a renamed field reads as missing. The names below are what
    the code calls them."""
    keyed = re.compile(
        r"\b(manifest|plan|plan_info|verified|index|baseline|validation|stored|recorded|document)"
        r"(\[[\"']|\.get\([\"'])"
    )
    found = [f"{path.relative_to(SOURCE)}:{number}: {line.strip()}"
             for path in sorted(SOURCE.rglob("*.py"))
             if path.relative_to(SOURCE).as_posix() not in _READ_BY_KEY_RIGHTLY and path != SOURCE / "artifacts" / "manifest.py"
             for number, line in enumerate(path.read_text().splitlines(), 1) if keyed.search(line)]  # fmt: skip
    assert found == []


def _decoded_dicts(path: Path) -> list[str]:
    """Where a module assembles a dict and then types it: decode() of a dict literal or of a to_json()."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) == "decode":
            first = node.args[0] if node.args else None
            to_json = isinstance(first, ast.Call) and getattr(first.func, "attr", None) == "to_json"
            if isinstance(first, ast.Dict) or to_json:
                found.append(f"{path.relative_to(SOURCE)}:{node.lineno}: decode({ast.unparse(first)[:60]}...)")
    return found


def test_ttfrs_own_documents_are_built_as_their_types_not_as_dicts_then_decoded():
    """A document ttfr writes (a plan's spec and arm, a self-test, a replication report) is constructed as
    its type: a dict assembled by string key and decoded afterwards names its fields where no type checks them."""
    assert [hit for path in sorted(SOURCE.rglob("*.py")) for hit in _decoded_dicts(path)] == []


def test_the_dict_check_finds_what_it_forbids():
    bad = SOURCE / "report" / "_probe_for_test.py"
    bad.write_text("def f(spec, x):\n    return decode({'a': x}, T), decode(spec.to_json(), T), decode(x, T)\n")
    try:
        found = _decoded_dicts(bad)
    finally:
        bad.unlink()
    assert len(found) == 2
