"""What a forger does to a published snapshot, for the tests that hold it must not verify."""

import json

from ttfr.artifacts import snapshot


def writable(path):
    """Undo publishing's read-only modes, as anyone owning the files can."""
    for item in [path, *path.rglob("*")]:
        item.chmod(0o755 if item.is_dir() else 0o644)


def reindex(path):
    """Rewrite ttfr's snapshot index to match the edited files."""
    index = json.loads((path / snapshot.INDEX).read_text())
    for entry in index["artifacts"]:
        data = (path / entry["path"]).read_bytes()
        entry.update(bytes=len(data), sha256=snapshot.sha256_bytes(data))
    (path / snapshot.INDEX).write_text(json.dumps(index))
