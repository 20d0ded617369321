"""`ttfr merge SHARD_DIR... --out DIR`: one result directory from the `--shard K/N` runs of
one plan (a CI matrix, a Slurm array).

Refused (exit 2, saying what differs) unless every shard validates and is complete, all were
planned from the same spec (apart from their share of the cases), seed, ttfr version and
runtime versions, and the shards cover the plan exactly once: shard K of N holds exactly the
K-th interleaved slice of the cases all of them hold. The merged directory's runs are the
shards' journals, analysed again as one run: its case files, suite index and reports are what
a single run of the same plan would have written from the same runs; its manifest records each
shard's host, session and share.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import replace
from pathlib import Path

import msgspec

import ttfr
from ttfr.artifacts import reader
from ttfr.artifacts.reader import load_finished, validate_dir
from ttfr.artifacts.result_dir import ResultDir, snapshot_id
from ttfr.artifacts.store import MANIFEST_SCHEMA, PLAN_SCHEMA, StorageError, copy_file, write_json
from ttfr.errors import UsageError
from ttfr.measure.journal import Journal
from ttfr.measure.plan import build_plan
from ttfr.measure.spec import RunSpec
from ttfr.model.base import UNSET, encode
from ttfr.model.manifest import ShardOrigin
from ttfr.model.plan import MergedShard, PlanDocument, PlanSpec
from ttfr.pipeline.suite import write_results
from ttfr.redaction import redact_argv


class _Shard:
    def __init__(self, root: Path):
        problems = validate_dir(root)
        if problems:
            raise UsageError(f"shard {root} does not validate: {'; '.join(problems[:2])}")
        self.verified = load_finished(root)
        self.root = self.verified.result_dir.root
        if self.verified.suite.state != "complete":
            raise UsageError(f"shard {root} is incomplete: finish it with `ttfr run --resume {root}` first")
        self.plan = reader.read_plan(self.root)
        self.spec = RunSpec.from_recorded(self.plan.spec)
        if self.spec.shard is None:
            raise UsageError(f"{root} is not a shard (it was not run with --shard K/N)")
        self.manifest = self.verified.manifest


def _shown(value):
    """A field of a plan's spec as its JSON has it (None: absent)."""
    return None if value is UNSET else encode(value)


def _differences(first: _Shard, other: _Shard) -> list[str]:
    """What differs between two shards' plans and environments, in words."""
    found = []
    for name in sorted(set(PlanSpec.__struct_fields__) - {"cases", "shard", "plan_cases"}):
        a, b = (_shown(getattr(s.plan.spec, name)) for s in (first, other))
        if a != b:
            found.append(f"spec.{name}: {a!r} in {first.root.name}, {b!r} in {other.root.name}")
    if first.plan.ttfr_version != other.plan.ttfr_version:
        found.append(f"ttfr version: {first.plan.ttfr_version} vs {other.plan.ttfr_version}")
    if first.manifest.ttfr.git != other.manifest.ttfr.git:
        found.append("ttfr git commit: " + " vs ".join(str(s.manifest.ttfr.git.commit) for s in (first, other)))
    for name in sorted(set(first.manifest.runtimes) | set(other.manifest.runtimes)):
        x, y = first.manifest.runtimes.get(name), other.manifest.runtimes.get(name)
        if x != y:
            found.append(f"runtime {name}: {x} vs {y}")
    if first.manifest.python.version != other.manifest.python.version:
        found.append(f"python: {first.manifest.python.version} vs {other.manifest.python.version}")
    return found


def check_shards(shards: list[_Shard]) -> tuple[RunSpec, list[str]]:
    """The whole plan's spec (shard None, every case) and its case ids, or UsageError."""
    counts = {s.spec.shard[1] for s in shards}
    if len(counts) != 1:
        raise UsageError(f"the shards were cut into different numbers of slices: {sorted(counts)}")
    (count,) = counts
    indexes = sorted(s.spec.shard[0] for s in shards)
    if indexes != list(range(1, count + 1)):
        missing = sorted(set(range(1, count + 1)) - set(indexes))
        twice = sorted({i for i in indexes if indexes.count(i) > 1})
        raise UsageError(f"the shards do not cover the plan exactly once: {count} slices; missing {missing or 'none'}, "
                         f"given twice {twice or 'none'}")  # fmt: skip
    for other in shards[1:]:
        differences = _differences(shards[0], other)
        if differences:
            raise UsageError("the shards were not planned and run alike: " + "; ".join(differences[:4]))
    cases = sorted({case for s in shards for case in s.spec.cases})
    plans = {s.spec.plan_cases for s in shards}
    if len(plans) > 1 or (plans and next(iter(plans)) and set(next(iter(plans))) != {c.id for c in cases}):
        sizes = ", ".join(f"shard {s.spec.shard[0]}/{s.spec.shard[1]} of a {len(s.spec.plan_cases) or '?'}-case plan"
                          for s in shards)  # fmt: skip
        raise UsageError(f"the shards are slices of different plans ({sizes}; together they hold {len(cases)} cases)")
    for shard in shards:
        index = shard.spec.shard[0]
        expected = [c for position, c in enumerate(cases) if position % count == index - 1]
        if list(shard.spec.cases) != expected:
            raise UsageError(f"shard {index}/{count} ({shard.root}) holds {len(shard.spec.cases)} case(s), not the "
                             f"{len(expected)} its slice of the {len(cases)} cases is")  # fmt: skip
    spec = replace(shards[0].spec, cases=tuple(cases), shard=None, plan_cases=())
    return spec, [c.id for c in cases]


def merge(shard_dirs, out_parent: Path, command_line=None) -> Path:
    if len(shard_dirs) < 2:
        raise UsageError("ttfr merge takes the result directories of at least two shards")
    shards = sorted((_Shard(Path(d)) for d in shard_dirs), key=lambda s: s.spec.shard[0])
    spec, _case_ids = check_shards(shards)
    datasets = {}
    for shard in shards:
        for key, info in (shard.plan.datasets or {}).items():
            if key in datasets and datasets[key].sha256 != info.sha256:
                raise UsageError(f"the shards' workspace {key} differs ({datasets[key].name}): not one plan")
            datasets[key] = info
    now = dt.datetime.now(dt.timezone.utc)
    recorded = spec.recorded()
    result_dir = ResultDir.create(Path(out_parent), "merged-" + snapshot_id(now, encode(recorded), spec.deterministic))
    try:
        merged_from = [MergedShard(shard=f"{s.spec.shard[0]}/{s.spec.shard[1]}", path=str(s.root)) for s in shards]
        plan = PlanDocument(spec=recorded, created_at=now.isoformat(timespec="seconds"),
                            ttfr_version=ttfr.__version__, datasets=datasets, merged_from=merged_from)  # fmt: skip
        for shard in shards:
            for info in (shard.plan.datasets or {}).values():
                for rel in (info.files.point, info.files.workspace):
                    target = result_dir.root / rel
                    if not target.exists():
                        copy_file(shard.root / rel, target)
        write_json(result_dir.plan, plan, PLAN_SCHEMA)
        first = shards[0].manifest
        manifest = msgspec.structs.replace(
            first,
            # the merge's own command line, through the one redaction like every recorded one
            command_line=redact_argv(command_line) if command_line else first.command_line,
            shards=[ShardOrigin(shard=f"{s.spec.shard[0]}/{s.spec.shard[1]}", machine_id=s.manifest.machine_id,
                                session_id=s.manifest.session_id, cpu=s.manifest.cpu, platform=s.manifest.os.platform,
                                snapshot_id=s.root.name) for s in shards],
        )  # fmt: skip
        write_json(result_dir.manifest, manifest, MANIFEST_SCHEMA)
        journal = Journal(result_dir.journal)
        for shard in shards:
            for entry in Journal(shard.root / "journal.jsonl").entries():
                journal.append(entry)
        write_results(result_dir, build_plan(spec), journal.entries())
    except BaseException as exc:  # a merge that did not finish leaves nothing behind
        result_dir.discard()
        if isinstance(exc, OSError):
            raise StorageError(f"{exc.filename or result_dir.root}: cannot be written ({exc.strerror}); nothing was "
                               "merged") from None  # fmt: skip
        raise
    result_dir.unlock()
    return result_dir.root
