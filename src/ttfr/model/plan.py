"""A result directory's plan (`ttfr.plan.v1`, plan.json): the run specification it was started with,
what `--resume` re-plans from, `ttfr merge` matches shards by and `ttfr replicate` runs again.
Written before anything runs (pipeline/suite.py); fields added in later releases are optional."""

from __future__ import annotations

from typing import Annotated, Literal

from msgspec import Meta

from ttfr.model.base import UNSET, Artifact, Sha256, UnsetType
from ttfr.model.manifest import Arm

PLAN_SCHEMA = "ttfr.plan.v1"
CaseId = Annotated[str, Meta(pattern=r"^[a-z0-9]+(?:_[a-z0-9]+)*_[0-9]+_(?:f32|f64|bf16)$")]
Policy = Literal["cold-process/cold-cache", "cold-process/warm-cache", "warm-process"]
Text = Annotated[str, Meta(min_length=1)]
WorkspaceFile = Annotated[str, Meta(pattern=r"^workspaces/[^/]+\.json$")]  # inside the result directory


class RecordedCase(Artifact):
    """A case file's case as read when the run was planned (0.1.2+): a reader of the plan knows it
    without importing (running) the file."""

    name: Text
    frameworks: list[str]
    sizes: list[Annotated[int, Meta(ge=1)]]
    dtypes: list[str]
    description: str


class CaseFile(Artifact):
    """--case-file: a user's case file the cases come from, with the sha256 the run started with."""

    path: Text
    sha256: Sha256
    cases: list[RecordedCase] | UnsetType = UNSET


class ProgramFile(Artifact):
    path: Text
    sha256: Sha256


class RecordedCommand(Artifact):
    """--command: the program of a `command` case (case id command_<name>_1_f64), as recorded: through
    the one redaction (`redacted`: a secret was replaced, so the run cannot be resumed)."""

    name: Annotated[str, Meta(pattern=r"^[a-z][a-z0-9]*(?:_[a-z0-9]+)*$", max_length=64)]
    argv: Annotated[list[str], Meta(min_length=1)]
    cwd: Text
    first_result: Annotated[str | None, Meta(description="a regex on its output: the first matching line is its "
                                                          "first result")]  # fmt: skip
    mark: Annotated[bool, Meta(description="its first result is its call of ttfr_mark.first_result()")]
    prepare: Annotated[Annotated[list[str], Meta(min_length=1)] | None, Meta(description="run before each of its runs, "
                                                                                         "untimed")]  # fmt: skip
    redacted: bool
    stop_at_first_result: Annotated[bool, Meta(description="ttfr ends each run (kills its process group) at its first "
                                                            "result")] | UnsetType = UNSET  # fmt: skip
    files: Annotated[list[ProgramFile], Meta(max_length=16, description=(
        "its program and the files its arguments name, with their sha256 when the run started: a resume of a changed "
        "or missing one is refused"))] | UnsetType = UNSET  # fmt: skip


class PlanSpec(Artifact):
    """The run's specification, as RunSpec.recorded records it (measure/spec.py)."""

    cases: Annotated[list[CaseId], Meta(min_length=1)]
    policies: Annotated[list[Policy], Meta(min_length=1)]
    profile: str
    cold_runs: Annotated[int, Meta(ge=1, le=1000)]
    warm_procs: Annotated[int, Meta(ge=1, le=100)]
    warm_samples: Annotated[int, Meta(ge=3, le=100_000)]
    min_sample_s: Annotated[float, Meta(gt=0)]
    max_warmup_s: Annotated[float, Meta(ge=0)]
    timeout_s: Annotated[float, Meta(gt=0, le=86_400)]
    deterministic: bool
    seed: Annotated[int, Meta(ge=0, le=2**32 - 1)]
    threads: Annotated[int, Meta(ge=1, le=1024)] | None | UnsetType = UNSET
    shard: Annotated[list[Annotated[int, Meta(ge=1)]], Meta(min_length=2, max_length=2)] | None | UnsetType = UNSET
    python: Text | None | UnsetType = UNSET
    workspace: Text | None | UnsetType = UNSET
    signal: str | None | UnsetType = UNSET
    custom_size: Annotated[int, Meta(ge=1)] | None | UnsetType = UNSET
    precision: Annotated[float, Meta(gt=0, lt=1)] | None | UnsetType = UNSET
    budget_s: Annotated[float, Meta(ge=1, le=604_800)] | None | UnsetType = UNSET
    keep_contended: Annotated[bool, Meta(description="--keep-contended: contended runs stay in the figures, "
                                                      "flagged")] | UnsetType = UNSET  # fmt: skip
    case_files: list[CaseFile] | UnsetType = UNSET
    commands: list[RecordedCommand] | UnsetType = UNSET
    plan_cases: Annotated[list[CaseId], Meta(description="--shard K/N: every case of the plan the shards share (this "
                                                         "shard's are `cases`)")] | UnsetType = UNSET  # fmt: skip
    concurrency: (
        Annotated[
            list[Annotated[int, Meta(ge=1, le=64)]], Meta(description="--concurrency: group sizes N (processes started at once)")
        ]
        | UnsetType
    ) = UNSET
    concurrency_rounds: (
        Annotated[
            int, Meta(ge=1, le=100, description=("groups per case, sharing mode and N (ttfr ab: its --rounds, at most 100)"))
        ]
        | UnsetType
    ) = UNSET


class DatasetFiles(Artifact):
    point: WorkspaceFile  # the evaluation point's file
    workspace: WorkspaceFile


class PlannedDataset(Artifact):
    """A HistFactory workspace the cases use, written into the result directory before anything runs."""

    name: Text  # the preset's name, or the --workspace file's
    size: Annotated[int, Meta(ge=1)]  # its parameter count
    signal: str  # CHANNEL/SAMPLE
    files: DatasetFiles
    sha256: Sha256  # the workspace's content
    dataset_id: str | UnsetType = UNSET


class MergedShard(Artifact):
    shard: str  # K/N
    path: str  # its result directory


class PlanDocument(Artifact):
    spec: PlanSpec
    created_at: str  # UTC, ISO 8601
    ttfr_version: str  # a resume is refused by another ttfr (its workers would measure differently)
    datasets: Annotated[dict[Annotated[str, Meta(pattern=r"^(?:custom_)?[0-9]+$")], PlannedDataset], Meta(description=(
        "HistFactory workspaces by the cases' size token: `8` (the preset with 8 parameters) or `custom_8` (the "
        "--workspace file)"))] | UnsetType = UNSET  # fmt: skip
    arm: Arm | UnsetType = UNSET  # `ttfr ab`: which arm this directory is
    merged_from: list[MergedShard] | UnsetType = UNSET  # `ttfr merge`: the shards it was merged from
