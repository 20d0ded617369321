"""What `ttfr publish` writes beside a result directory's own artifacts: its index of every file
(`ttfr.snapshot_index.v1`) and what the snapshot was measured with (`ttfr.baseline_manifest.v1`)."""

from __future__ import annotations

from typing import Annotated, Literal

from msgspec import Meta

from ttfr.model.base import UNSET, Artifact, Count, Sha256, UnsetType
from ttfr.model.manifest import CpuInfo, Gpu, MemoryInfo, OsInfo, PythonInfo

INDEX_SCHEMA = "ttfr.snapshot_index.v1"
BASELINE_SCHEMA = "ttfr.baseline_manifest.v1"
RelativePath = Annotated[str, Meta(min_length=1, pattern=r"^(?!/)(?!.*(^|/)\.\.(/|$)).+$")]  # inside the snapshot


class FileEntry(Artifact):
    path: RelativePath
    """The file's path inside the snapshot (relative: never absolute, never through `..`)."""
    bytes: Count
    """The file's size in bytes."""
    sha256: Sha256
    """The sha256 of the file's bytes."""


class SnapshotIndex(Artifact):
    schema: Literal["ttfr.snapshot_index.v1"]
    """The schema this file follows."""
    snapshot_id: Annotated[str, Meta(pattern=r"^ttfr-[0-9a-f]{20}$")]
    """The snapshot's id: `ttfr-` and the first 20 hex digits of `content_sha256` (the same results, the same id)."""
    generated_at: str
    """When it was published: UTC, ISO 8601."""
    source: str
    """The path of the result directory it was published from."""
    content_sha256: Sha256
    """The sha256 over the result directory's own artifacts (each one's path and sha256): the id's source."""
    artifacts: list[FileEntry]
    """Every file of the snapshot with its size and sha256, but this index and NextStat's (snapshot_index.json)."""


class BaselineHarness(Artifact):
    name: Literal["ttfr"]
    """The harness that measured the snapshot."""
    version: str
    """The ttfr version that measured the run (from its manifest)."""
    git_commit: str
    """The commit of the ttfr checkout that measured the run (from its manifest), or `unknown` without a checkout."""
    git_dirty: bool | None | UnsetType = UNSET
    """Whether that checkout's tracked files differed from the commit; null without a checkout."""


class LockFile(Artifact):
    path: str
    """The lock file's path in ttfr's source tree (`requirements/cpu-lock.txt`)."""
    sha256: Sha256
    """The sha256 of its bytes at publishing (the snapshot holds a copy, rerun/cpu-lock.txt)."""


class Hardware(Artifact):
    cpu: CpuInfo
    """The CPU the run was measured on, from its manifest."""
    memory: MemoryInfo
    """The machine's memory, from the run's manifest."""
    gpu: Gpu
    """The GPUs, driver and CUDA stack, from the run's manifest."""
    os: OsInfo
    """The operating system, from the run's manifest."""


class BaselineManifest(Artifact):
    schema: Literal["ttfr.baseline_manifest.v1"]
    """The schema this file follows."""
    harness: BaselineHarness
    """The ttfr that measured the snapshot: version and git commit."""
    lock_file: LockFile | None
    """The pinned lock file of the publishing ttfr's source checkout, with its sha256; null where that ttfr is an
    installed package (no checkout)."""
    python: PythonInfo
    """The Python that ran ttfr and the one its workers ran under, from the run's manifest."""
    runtimes: dict[str, str | None]
    """Each runtime package's version as ttfr's own Python had it installed (from the run's manifest); null where
    not installed."""
    hardware: Hardware
    """The machine the run was measured on."""
    cache_policies: list[str]
    """The cache policies the run measured."""
    cache_settings: dict[str, str]
    """What every worker got for its caches, variable -> value (JAX's persistent-cache thresholds); empty where
    the manifest has none."""
    sync_policies: dict[str, str]
    """Per backend: how its timed calls wait for their results (from the manifest); empty where it has none."""
    seed: Count
    """The run's seed (suite.json's): the rounds' order, the generated workspaces and inputs derive from it."""
    deterministic: bool
    """Whether the run was --deterministic (suite.json's)."""
