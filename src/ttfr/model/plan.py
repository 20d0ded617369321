"""A result directory's plan (`ttfr.plan.v1`, plan.json): the run specification it was started with,
what `--resume` re-plans from, `ttfr merge` matches shards by and `ttfr replicate` runs again.
Written before anything runs (pipeline/suite.py); fields added in later releases are optional."""

from __future__ import annotations

from typing import Annotated

from msgspec import Meta

from ttfr.model.base import UNSET, Artifact, Sha256, UnsetType
from ttfr.model.manifest import Arm
from ttfr.model.run_figures import PolicyName

PLAN_SCHEMA = "ttfr.plan.v1"
CaseId = Annotated[str, Meta(pattern=r"^[a-z0-9]+(?:_[a-z0-9]+)*_[0-9]+_(?:f32|f64|bf16)$")]
Policy = PolicyName
Text = Annotated[str, Meta(min_length=1)]
WorkspaceFile = Annotated[str, Meta(pattern=r"^workspaces/[^/]+\.json$")]  # inside the result directory


class RecordedCase(Artifact):
    """A case file's case as read when the run was planned (0.1.2+): a reader of the plan knows it
    without importing (running) the file."""

    name: Text
    """The case's name, as its `ttfr.cases.Case` declares it: the workload part of its case ids."""
    frameworks: list[str]
    """The frameworks the case has a builder for (numpy, jax, torch): the backends of its case ids."""
    sizes: list[Annotated[int, Meta(ge=1)]]
    """The sizes the case declares: whole numbers of its own size parameter, each the size in a case id."""
    dtypes: list[str]
    """The dtypes the case declares (float32, float64)."""
    description: str
    """The case's description in words, as its file gives it; empty where it gives none."""


class CaseFile(Artifact):
    """--case-file: a user's case file the cases come from, with the sha256 the run started with."""

    path: Text
    """The case file's absolute path."""
    sha256: Sha256
    """The sha256 of the file's content when the run was planned: a resume or replication of a changed or missing file
    is refused."""
    cases: list[RecordedCase] | UnsetType = UNSET
    """Every case the file defines, as read when the run was planned; absent in plans before ttfr 0.1.2 (reading
    them would mean importing the file)."""


class ProgramFile(Artifact):
    path: Text
    """The file's absolute path, symlinks resolved."""
    sha256: Sha256
    """The sha256 of the file's content when the run was planned."""


class RecordedCommand(Artifact):
    """--command: the program of a `command` case (case id command_<name>_1_f64), as recorded: through
    the one redaction (`redacted`: a secret was replaced, so the run cannot be resumed)."""

    name: Annotated[str, Meta(pattern=r"^[a-z][a-z0-9]*(?:_[a-z0-9]+)*$", max_length=64)]
    """The command's name (--command-name, else made from its script or program): its case id is
    command_<name>_1_f64."""
    argv: Annotated[list[str], Meta(min_length=1)]
    """The command split like a shell would (shlex), program first, word by word; a secret reads `<redacted>`."""
    cwd: Text
    """The absolute directory the command runs in: where `ttfr run` was started (a resume must start there too)."""
    first_result: str | None
    """--first-result: a regular expression matched against its output (stdout and stderr) line by line; the first
    matching line is its first result. Null: its first result is its mark, or else its exit."""
    mark: bool
    """--first-result-mark: its first result is its call of ttfr_mark.first_result()."""
    prepare: Annotated[list[str], Meta(min_length=1)] | None
    """--prepare: a command run before each of its runs, untimed, split and redacted like argv; null: none."""
    redacted: bool
    """Whether a secret in argv or prepare was replaced by `<redacted>`: such a command is not the one that ran, so a
    resume or replication of it is refused."""
    stop_at_first_result: bool | UnsetType = UNSET
    """--stop-at-first-result: ttfr ends each run at its first result (kills its process group) instead of waiting
    for its exit; absent in older plans (false)."""
    files: Annotated[list[ProgramFile], Meta(max_length=16)] | UnsetType = UNSET
    """Its program and the files its arguments name (at most 16; none over 512 MiB), with their sha256 when the run was
    planned: a resume or replication of a changed or missing one is refused."""


class PlanSpec(Artifact):
    """The run's specification, as RunSpec.recorded records it (measure/spec.py)."""

    cases: Annotated[list[CaseId], Meta(min_length=1)]
    """The ids of the cases this run measures (with --shard, this shard's slice)."""
    policies: Annotated[list[Policy], Meta(min_length=1)]
    """The cache policies the run measures (--cache-policy, or the default)."""
    profile: str
    """The run profile (`quick`, `standard`, `publish`) that gave the settings' defaults."""
    cold_runs: Annotated[int, Meta(ge=1, le=1000)]
    """Number of fresh processes planned per cold policy and case (the profile's, or --cold-runs; `ttfr ab`: its
    rounds); --precision may add more."""
    warm_procs: Annotated[int, Meta(ge=1, le=100)]
    """Number of warm processes planned per case (the profile's, or --warm-procs; `ttfr ab`: its rounds); --precision
    may add more."""
    warm_samples: Annotated[int, Meta(ge=3, le=100_000)]
    """Number of samples each warm process takes (the profile's, or --warm-samples)."""
    min_sample_s: Annotated[float, Meta(gt=0)]
    """The least a warm sample lasts (the profile's): its inner loop's call count is calibrated to reach it."""
    max_warmup_s: Annotated[float, Meta(ge=0)]
    """A warm process's warm-up time limit (the profile's): past it, warm-up stops unsettled (flagged
    warmup_unstable)."""
    timeout_s: Annotated[float, Meta(gt=0, le=86_400)]
    """Each worker process's time limit (--timeout, else the profile's; some workloads' checking process gets a
    multiple): past it, its process group is killed."""
    deterministic: bool
    """--deterministic: seed 0 unless given, PYTHONHASHSEED=0 in every worker and a result directory name derived
    from the spec, so the JSON is byte-stable but for timings and timestamps."""
    seed: Annotated[int, Meta(ge=0, le=2**32 - 1)]
    """The seed of the input data and of the runs' shuffled order: --seed; without it 0 with --deterministic, else
    drawn at random."""
    threads: Annotated[int, Meta(ge=1, le=1024)] | None | UnsetType = UNSET
    """--threads: the thread count set in every worker as OMP_NUM_THREADS, MKL_NUM_THREADS and OPENBLAS_NUM_THREADS;
    null: the libraries' defaults."""
    shard: Annotated[list[Annotated[int, Meta(ge=1)]], Meta(min_length=2, max_length=2)] | None | UnsetType = UNSET
    """--shard K/N as [K, N]: this run measures the K-th (1-based index) of N interleaved slices of the plan's cases;
    null: not sharded."""
    python: Text | None | UnsetType = UNSET
    """--python: the absolute path of the interpreter the workers run under (symlinks kept); null: ttfr's own."""
    workspace: Text | None | UnsetType = UNSET
    """--workspace: the absolute path of the user's pyhf JSON workspace file; null: HistFactory presets only."""
    signal: str | None | UnsetType = UNSET
    """The CHANNEL/SAMPLE of that workspace the signal gradients refer to (--signal, else found in the file); null
    without --workspace."""
    custom_size: Annotated[int, Meta(ge=1)] | None | UnsetType = UNSET
    """That workspace's number of parameters: the size of its cases (`custom_<N>` in their ids); null without
    --workspace."""
    precision: Annotated[float, Meta(gt=0, lt=1)] | None | UnsetType = UNSET
    """--precision: the relative half-width of the 95% interval every headline statistic should reach, as a fraction
    of its median (0.05: ±5%), runs being added until then; null: none."""
    budget_s: Annotated[float, Meta(ge=1, le=604_800)] | None | UnsetType = UNSET
    """--budget: the run's wall-time limit for the runs --precision adds (its profile's runs always complete); null:
    no budget."""
    keep_contended: bool | UnsetType = UNSET
    """--keep-contended: contended runs stay in the figures, flagged (false: the figures use the clean runs, or are
    withheld where too few remain)."""
    explain: bool | UnsetType = UNSET
    """--explain: after its measured runs, each case ran one unmeasured diagnostic process per cold policy, under
    `-X importtime`, whose imports explain the cold start (absent in older plans: false)."""
    case_files: list[CaseFile] | UnsetType = UNSET
    """--case-file: the users' case files whose cases the run measures; empty without."""
    commands: list[RecordedCommand] | UnsetType = UNSET
    """--command: the programs of the run's `command` cases; empty without."""
    plan_cases: list[CaseId] | UnsetType = UNSET
    """--shard K/N: every case of the plan the shards share (this shard's are `cases`), by which `ttfr merge` tells
    one plan's shards from slices of different ones; empty without --shard."""
    concurrency: list[Annotated[int, Meta(ge=1, le=64)]] | UnsetType = UNSET
    """--concurrency: the group sizes N (processes started at once) at which each compiling case is also measured, per
    sharing mode; empty without."""
    concurrency_rounds: Annotated[int, Meta(ge=1, le=100)] | UnsetType = UNSET
    """Number of groups per case, sharing mode and N: the profile's (1 quick, 3 standard, 5 publish); `ttfr ab`: its
    rounds."""


class DatasetFiles(Artifact):
    point: WorkspaceFile
    """The evaluation point's file (`workspaces/<name>.point.json`): the seeded parameter values, by name, at which
    every engine evaluates the NLL and its gradients."""
    workspace: WorkspaceFile
    """The workspace's file (`workspaces/<name>.json`, canonical JSON): the bytes every engine reads in its timed
    setup."""


class PlannedDataset(Artifact):
    """A HistFactory workspace the cases use, written into the result directory before anything runs."""

    name: Text
    """The workspace's name: the preset's (e.g. `complex8p`), or `custom-` and the first 8 hex digits of its sha256 for
    the --workspace file."""
    size: Annotated[int, Meta(ge=1)]
    """Its number of parameters (pyhf's counting): the size in its cases' ids."""
    signal: str
    """The CHANNEL/SAMPLE the signal gradients refer to (the preset's, or --signal, else found in the file)."""
    files: DatasetFiles
    """Its two files in the result directory, paths relative to it."""
    sha256: Sha256
    """The sha256 of the workspace's canonical JSON: the bytes of `files.workspace`."""
    dataset_id: str | UnsetType = UNSET
    """The id its inputs are published under: `histfactory-<preset>-<size>p-seed<n>` (`custom` for the --workspace
    file); absent in older plans."""


class MergedShard(Artifact):
    shard: str
    """Which shard it was, as `--shard` named it: "K/N" (shard K of N)."""
    path: str
    """The path of the shard's result directory, as the merge read it."""


class PlanDocument(Artifact):
    spec: PlanSpec
    """The run's specification: what it measures and how."""
    created_at: str
    """When the plan was written, before any run: UTC, ISO 8601 to the second."""
    ttfr_version: str
    """The version of ttfr that planned the run: a --resume by another version is refused (its workers would measure
    differently), and so is a merge of shards of different versions."""
    datasets: dict[Annotated[str, Meta(pattern=r"^(?:custom_)?[0-9]+$")], PlannedDataset] | UnsetType = UNSET
    """The HistFactory workspaces by the cases' size token: `8` (the preset with 8 parameters) or `custom_8` (the
    --workspace file); empty without HistFactory cases."""
    arm: Arm | UnsetType = UNSET
    """`ttfr ab`: which arm this directory is; absent otherwise."""
    merged_from: list[MergedShard] | UnsetType = UNSET
    """`ttfr merge`: the shards it was merged from, in shard order; absent otherwise."""
