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
    bytes: Count
    sha256: Sha256


class SnapshotIndex(Artifact):
    schema: Literal["ttfr.snapshot_index.v1"]
    snapshot_id: Annotated[str, Meta(pattern=r"^ttfr-[0-9a-f]{20}$")]  # ttfr- and the content digest's start
    generated_at: str  # UTC, ISO 8601
    source: Annotated[str, Meta(description="the result directory it was published from")]
    content_sha256: Annotated[Sha256, Meta(description="sha256 of the result directory's artifacts (path and sha256 of "
                                                       "each): the id's source")]  # fmt: skip
    artifacts: list[FileEntry]  # every file of the snapshot but this index (and NextStat's)


class BaselineHarness(Artifact):
    name: Literal["ttfr"]
    version: str
    git_commit: str  # "unknown" without a checkout
    git_dirty: bool | None | UnsetType = UNSET


class LockFile(Artifact):
    path: str  # in ttfr's source tree
    sha256: Sha256


class Hardware(Artifact):
    cpu: CpuInfo
    memory: MemoryInfo
    gpu: Gpu
    os: OsInfo


class BaselineManifest(Artifact):
    schema: Literal["ttfr.baseline_manifest.v1"]
    harness: BaselineHarness
    lock_file: LockFile | None  # the pinned lock file the snapshot's ttfr was installed from (None: installed ttfr)
    python: PythonInfo
    runtimes: dict[str, str | None]
    hardware: Hardware
    cache_policies: list[str]
    cache_settings: dict[str, str]
    sync_policies: dict[str, str]
    seed: Count
    deterministic: bool
