"""--explain: which installed distribution each imported top-level package belongs to, with its
version (importlib.metadata), read in the diagnostic process after its last timed phase, where
its imports happened (another interpreter than ttfr's own under --python).

The standard library is `python` (its version), a top-level name no distribution installs is
left out: the explanation calls its time unattributed.
"""

import sys

STDLIB = "python"


def imported_distributions() -> dict:
    """{top-level module: [distribution, version]} for every package in sys.modules."""
    return distributions_of({name.partition(".")[0] for name in list(sys.modules)})


def distributions_of(tops) -> dict:
    """{top-level module: [distribution, version]} for these top-level names, in this interpreter. Standard
    library only, and the module runs as a script too (a --command's interpreter, where ttfr is not installed:
    measure/command_imports.py sends the names on stdin)."""
    from importlib import metadata

    tops = set(tops)
    python = ".".join(str(part) for part in sys.version_info[:3])
    found = {top: [STDLIB, python] for top in tops if top in sys.stdlib_module_names or top in sys.builtin_module_names}
    try:
        owners = metadata.packages_distributions()
    except Exception:  # a broken installation's metadata: what it cannot say stays unattributed
        owners = {}
    versions = {}
    for top in sorted(tops - set(found)):
        names = owners.get(top) or []
        if not names:
            continue
        name = names[0]
        if name not in versions:
            try:
                versions[name] = metadata.version(name)
            except Exception:
                versions[name] = None
        found[top] = [name, versions[name]]
    return found


if __name__ == "__main__":
    import json

    json.dump(distributions_of(json.load(sys.stdin)), sys.stdout)
