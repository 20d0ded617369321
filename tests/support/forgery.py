"""What a forger does to a published snapshot, for the tests that hold it must not verify."""

import json

from ttfr.artifacts import snapshot

from ttfr.artifacts import snapshot_layout


def writable(path):
    """Undo publishing's read-only modes, as anyone owning the files can."""
    for item in [path, *path.rglob("*")]:
        item.chmod(0o755 if item.is_dir() else 0o644)


def reindex(path):
    """Rewrite ttfr's snapshot index to match the edited files."""
    index = json.loads((path / snapshot_layout.INDEX).read_text())
    for entry in index["artifacts"]:
        data = (path / entry["path"]).read_bytes()
        entry.update(bytes=len(data), sha256=snapshot.sha256_bytes(data))
    (path / snapshot_layout.INDEX).write_text(json.dumps(index))


def edit_case(root, case_id: str, mutate) -> None:
    """Edit one case file of a result directory (`mutate` changes its JSON in place) and put its new
    hash into suite.json, as a careful forger would: only the figures' own consistency can tell."""
    from ttfr.artifacts.store import sha256_file

    suite = json.loads((root / "suite.json").read_text())
    ref = next(r for r in suite["cases"] if r["case"] == case_id)
    path = root / ref["path"]
    case = json.loads(path.read_text())
    mutate(case)
    path.write_text(json.dumps(case))
    ref["sha256"] = sha256_file(path)
    (root / "suite.json").write_text(json.dumps(suite))
