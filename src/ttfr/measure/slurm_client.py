"""Slurm's own commands, as ttfr uses them: submit a job array (`sbatch --parsable`), count its tasks
still pending or running (`squeue`), cancel it (`scancel`). Shards (pipeline/slurm.py) and groups
across nodes (measure/slurm_groups.py) both go through here; nothing home-made schedules anything."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass

from ttfr.errors import UsageError


@dataclass(frozen=True)
class SlurmOptions:
    """What the user asked of Slurm for each task (None: Slurm's default)."""

    partition: str | None = None
    time_limit: str | None = None
    account: str | None = None
    cpus_per_task: int | None = None  # None: --exclusive (a node to itself)

    def sbatch_words(self) -> list[str]:
        words = [f"--cpus-per-task={self.cpus_per_task}"] if self.cpus_per_task else ["--exclusive"]
        if self.partition:
            words.append(f"--partition={self.partition}")
        if self.time_limit:
            words.append(f"--time={self.time_limit}")
        if self.account:
            words.append(f"--account={self.account}")
        return words


def require(what: str) -> None:
    """Before anything is written: Slurm's commands are here."""
    for program in ("sbatch", "squeue", "scancel"):
        if shutil.which(program) is None:
            raise UsageError(f"{what}: {program} is not on PATH (no Slurm client here; `scripts/slurm-local.sh` "
                             "starts a single-node cluster for trying it)")  # fmt: skip


class Refused(UsageError):
    """sbatch did not take the job."""


def submit(words: list[str], script: str) -> str:
    """`sbatch --parsable WORDS SCRIPT`: the job id."""
    try:
        done = subprocess.run(["sbatch", "--parsable", *words, script], capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        raise Refused("sbatch did not answer within 120 s (a busy or unreachable controller); `squeue --me` "
                      "says whether it took the job") from None  # fmt: skip
    if done.returncode != 0:
        raise Refused(f"sbatch refused the job array: {(done.stderr or done.stdout).strip()[-500:]}")
    return done.stdout.strip().split(";")[0]


def test_only(words: list[str], what: str) -> None:
    """`sbatch --test-only`: would Slurm take a job with these options (partition, account, time, CPUs)?
    Asked before anything runs, so that a typo is refused then, not at the first group."""
    try:
        done = subprocess.run(["sbatch", "--test-only", *words, "--wrap=true"], capture_output=True, text=True,
                              timeout=120)  # fmt: skip
    except subprocess.TimeoutExpired:
        raise UsageError(f"{what}: `sbatch --test-only` did not answer within 120 s") from None
    if done.returncode != 0:
        raise UsageError(f"{what}: Slurm would refuse its jobs: {(done.stderr or done.stdout).strip()[-500:]}")


def active(job: str) -> int | None:
    """How many of the array's tasks Slurm still has (pending or running); None when squeue
    did not answer (a busy controller): not an answer that the job is gone."""
    try:
        done = subprocess.run(["squeue", "-h", "-j", job, "-o", "%T"], capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        return None
    if done.returncode != 0:
        # some Slurms answer a job that left the queue with an error: that one is an answer
        return 0 if "invalid job id" in done.stderr.lower() else None
    return len([line for line in done.stdout.splitlines() if line.strip()])


def cancel(job: str) -> bool:
    try:
        return subprocess.run(["scancel", job], capture_output=True, text=True, timeout=60).returncode == 0
    except subprocess.TimeoutExpired:
        return False
