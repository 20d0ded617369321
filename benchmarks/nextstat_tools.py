"""NextStat's own publishing tools, unchanged, on ttfr's snapshots: the check that a ttfr snapshot
is a NextStat snapshot (issue 26), in one command.

    .venv/bin/python benchmarks/nextstat_tools.py PATH/TO/nextstat-public-benchmarks [--keep DIR]

With a copy of github.com/NextStat/nextstat-public-benchmarks (its scripts are standard-library
Python; the schema checks use this environment's jsonschema, as its Makefile's `validate` does):
1. two small real runs (numpy and JAX matmul, two sizes), each published;
2. replication/compare_snapshots.py: the same snapshot twice is ok with its datasets and results;
   two snapshots of different work are not ok and name the differing datasets;
3. scripts/update_snapshot_registry.py on a snapshot, and `ttfr publish --registry` agreeing;
4. `ttfr replicate` of the first snapshot, the replica published, then
   scripts/write_replication_report.py on the pair;
5. suites/ml/report.py on a snapshot's ML suite file;
6. every file NextStat's Makefile validates (a snapshot's baseline_manifest.json,
   snapshot_index.json, replication_report.json; the registry) against its schemas.
Prints one line per check and exits 1 when any fails.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import jsonschema

TTFR = [sys.executable, "-m", "ttfr"]
RUN = ["--backends", "numpy,jax_jit_cpu", "--workloads", "matmul", "--cold-runs", "2", "--warm-procs", "2",
       "--warm-samples", "3", "--no-html", "--seed", "1"]  # fmt: skip


def sh(argv, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=900, **kwargs)


def only_dir(parent: Path) -> Path:
    (found,) = [p for p in parent.iterdir() if p.is_dir() and not p.name.startswith(".")]
    return found


def run_and_publish(work: Path, name: str, size: str) -> Path:
    done = sh([*TTFR, "run", *RUN, "--sizes", size, "--out", work / name])
    if done.returncode != 0:
        raise SystemExit(f"ttfr run failed ({done.returncode}): {done.stderr[-2000:]}")
    return publish(work, only_dir(work / name))


def publish(work: Path, result: Path, *extra) -> Path:
    done = sh([*TTFR, "publish", result, "--out", work / "snapshots", *extra])
    if done.returncode != 0:
        raise SystemExit(f"ttfr publish failed: {done.stderr[-2000:]}")
    return Path(done.stdout.split(": ", 1)[1].split(" (gates")[0].strip())


def schema_errors(repo: Path, path: Path, name: str) -> list[str]:
    schema = json.loads((repo / "manifests" / "schema" / f"{name}.schema.json").read_text())
    return [e.message for e in jsonschema.Draft202012Validator(schema).iter_errors(json.loads(path.read_text()))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("nextstat", type=Path, help="a checkout of NextStat/nextstat-public-benchmarks")
    ap.add_argument("--keep", type=Path, help="work here and keep it (default: a temporary directory)")
    args = ap.parse_args()
    repo = args.nextstat.resolve()
    if not (repo / "replication" / "compare_snapshots.py").is_file():
        raise SystemExit(f"{repo}: not a nextstat-public-benchmarks checkout (no replication/compare_snapshots.py)")
    work = Path(args.keep or tempfile.mkdtemp(prefix="ttfr-nextstat-"))
    work.mkdir(parents=True, exist_ok=True)
    results: list[tuple[str, bool, str]] = []

    def check(name: str, ok: bool, detail: str = "") -> None:
        results.append((name, ok, detail))
        print(f"{'ok  ' if ok else 'FAIL'} {name}" + (f": {detail}" if detail else ""), flush=True)

    first = run_and_publish(work, "run-a", "64")
    other = run_and_publish(work, "run-b", "128")

    compare = [sys.executable, repo / "replication" / "compare_snapshots.py"]
    same = sh([*compare, "--a", first, "--b", first])
    report = json.loads(same.stdout) if same.stdout.strip().startswith("{") else {}
    check("compare_snapshots: the same snapshot twice", same.returncode == 0 and report.get("ok") is True
          and bool(report["datasets"]["same"]) and bool(report["suites"]),
          f"exit {same.returncode}, {len(report.get('datasets', {}).get('same', []))} datasets, "
          f"{len(report.get('suites', []))} result suites")  # fmt: skip
    differ = sh([*compare, "--a", first, "--b", other])
    report = json.loads(differ.stdout) if differ.stdout.strip().startswith("{") else {}
    named = report.get("datasets", {})
    check("compare_snapshots: snapshots of different work", differ.returncode == 2 and report.get("ok") is False
          and bool(named.get("only_a")) and bool(named.get("only_b")),
          f"exit {differ.returncode}, only in A: {[d[0] for d in named.get('only_a', [])]}")  # fmt: skip

    registry = work / "registry" / "snapshot_registry.json"
    done = sh([sys.executable, repo / "scripts" / "update_snapshot_registry.py", "--snapshot-dir", first,
               "--registry", registry])  # fmt: skip
    theirs = json.loads(registry.read_text())["snapshots"] if registry.is_file() else []
    check("update_snapshot_registry.py", done.returncode == 0 and len(theirs) == 1, done.stderr.strip()[-300:])
    ours = work / "registry" / "by_ttfr.json"
    publish(work, only_dir(work / "run-a"), "--registry", ours)  # the same snapshot, already published
    mine = json.loads(ours.read_text())["snapshots"]
    keys = ("snapshot_id", "suite", "generated_at", "git", "workflow", "artifacts")
    check("ttfr publish --registry agrees with it", bool(theirs) and [{k: e[k] for k in keys} for e in mine]
          == [{k: e[k] for k in keys} for e in theirs])  # fmt: skip
    check("the registry against its schema", not schema_errors(repo, registry, "snapshot_registry_v1"))

    done = sh([*TTFR, "replicate", first, "--out", work / "replica"])
    replica = publish(work, only_dir(work / "replica")) if (work / "replica").is_dir() else None
    check("ttfr replicate, its replica published", replica is not None, f"replicate exit {done.returncode}")
    if replica is not None:
        out = work / "replication_report.json"
        made = sh([sys.executable, repo / "scripts" / "write_replication_report.py", "--original-index",
                   first / "snapshot_index.json", "--replica-index", replica / "snapshot_index.json", "--out", out])  # fmt: skip
        check("write_replication_report.py on the pair", made.returncode == 0 and out.is_file()
              and not schema_errors(repo, out, "replication_report_v1"), made.stderr.strip()[-300:])  # fmt: skip

    md = work / "ml.md"
    suite_file = first / "nextstat" / "ml" / "suite_result.json"
    done = sh([sys.executable, repo / "suites" / "ml" / "report.py", "--suite", suite_file, "--out", md])
    listed = [c["case"] for c in json.loads(suite_file.read_text())["cases"]]  # a busy machine may leave none
    text = md.read_text() if md.is_file() else ""
    check("suites/ml/report.py", done.returncode == 0 and all(f"`{case}" in text for case in listed),
          f"{len(listed)} cases listed; {done.stderr[-300:]}")  # fmt: skip

    # the Makefile's `validate` loop over a snapshot directory
    for snap in [first, other] + ([replica] if replica else []):
        for name, schema in (("baseline_manifest.json", "baseline_manifest_v1"), ("snapshot_index.json",
                             "snapshot_index_v1"), ("replication_report.json", "replication_report_v1")):  # fmt: skip
            path = snap / name
            if path.exists():
                errors = schema_errors(repo, path, schema)
                check(f"{snap.name}/{name} against {schema}", not errors, "; ".join(errors[:2]))
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    failed = [name for name, ok, _ in results if not ok]
    print(f"{len(results) - len(failed)} of {len(results)} checks pass" + (f"; failed: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
