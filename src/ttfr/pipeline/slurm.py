"""`ttfr run --executor slurm --shards N`: the run's plan as a Slurm job array of N shards,
one node each (`--exclusive`: shards never share a machine's cores), waited for with progress
and merged (`ttfr merge`) into one result directory.

Each array task runs this same `ttfr run` (this interpreter, this working directory, the
submitting environment: sbatch's default `--export=ALL`) with `--shard K/N`, the run's seed
and its own result directory under the job's work directory, and writes its exit code beside
its log. Nothing home-made schedules anything: Slurm does (`sbatch --array`, `squeue`,
`scancel` on Ctrl-C).
"""

from __future__ import annotations

import os
import shlex
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from ttfr.measure import slurm_client
from ttfr.artifacts.store import make_directories, new_stamped_directory, remove_tree, write_bytes_atomic
from ttfr.pipeline import shards
from ttfr.errors import UsageError
from ttfr.exit_codes import EXIT_CASE_FAILED

# Options of `ttfr run` that concern the submission, not a shard's run (with a value, or a flag).
_SUBMISSION_OPTIONS = {"--executor": True, "--shards": True, "--slurm-partition": True, "--slurm-time": True,
                       "--slurm-account": True, "--out": True, "--seed": True, "--shard": True}  # fmt: skip
MAX_SHARDS = 1000
_POLL_S = 2.0
_SQUEUE_PATIENCE_S = 300.0


class ShardsFailed(UsageError):
    """Shards that ran but did not finish (cancelled, killed, crashed): nothing to merge."""

    exit_code = EXIT_CASE_FAILED


@dataclass(frozen=True)
class SlurmOptions:
    shards: int
    each: slurm_client.SlurmOptions = field(default_factory=slurm_client.SlurmOptions)  # every shard's (a node each)


def check(options: SlurmOptions, n_cases: int | None = None) -> None:
    """Before anything is written: Slurm's commands are here, the shard count is sane (two or
    more, and no more than the cases: a shard without a case has nothing to run)."""
    slurm_client.require("--executor slurm")
    most = min(MAX_SHARDS, n_cases) if n_cases is not None else MAX_SHARDS
    if not 2 <= options.shards <= most:
        why = f" (this run has {n_cases} case(s): a shard holds at least one)" if n_cases is not None else ""
        raise UsageError(f"--shards must be 2..{most}{why}, got {options.shards}; one shard is a plain `ttfr run`")


def common_argv(run_argv: list[str], seed: int) -> list[str]:
    """`ttfr run`'s own options with those of the submission removed, and the run's seed."""
    kept, skip = [], False
    for word in run_argv:
        if skip:
            skip = False
            continue
        name, sep, _value = word.partition("=")
        if name in _SUBMISSION_OPTIONS:
            skip = _SUBMISSION_OPTIONS[name] and not sep
            continue
        kept.append(word)
    return [*kept, "--seed", str(seed)]


def shard_argv(run_argv: list[str], index: int, count: int, seed: int, out: Path) -> list[str]:
    """The options of shard `index` of `count` (what its array task runs)."""
    return [*common_argv(run_argv, seed), "--shard", f"{index}/{count}", "--out", str(out)]


def _script(work: Path, run_argv: list[str], count: int, seed: int) -> Path:
    """The array task: run its shard, keep its log, write its exit code."""
    # Every word quoted for the shell; the task's number and the work directory are shell variables
    # expanded inside double quotes (a `$` or a space in a path is never read as anything else).
    line = shlex.join([sys.executable, "-m", "ttfr", "run", *common_argv(run_argv, seed)])
    script = work / "shard.sh"
    text = (
        "#!/bin/bash\n"
        "# One shard of a ttfr run (a Slurm array task): written by `ttfr run --executor slurm`.\n"
        "K=${SLURM_ARRAY_TASK_ID:?not a Slurm array task}\n"
        f"WORK={shlex.quote(str(work))}\n"
        f'{line} --shard "$K/{count}" --out "$WORK/shards/$K" > "$WORK/logs/shard-$K.log" 2>&1\n'
        'echo $? > "$WORK/status/$K.tmp" && mv "$WORK/status/$K.tmp" "$WORK/status/$K"\n'
    )
    write_bytes_atomic(script, text.encode(), mode=0o755)
    return script


def _sbatch(script: Path, work: Path, options: SlurmOptions) -> str:
    words = [f"--array=1-{options.shards}", "--nodes=1", "--ntasks=1", "--job-name=ttfr", f"--chdir={os.getcwd()}",
             f"--output={work / 'logs' / 'slurm-%a.out'}",
             *options.each.sbatch_words()]  # fmt: skip
    try:
        return slurm_client.submit(words, str(script))
    except slurm_client.Refused:
        remove_tree(work)  # nothing was submitted: nothing to keep
        raise


def run(run_argv: list[str], seed: int, options: SlurmOptions, out_parent: Path, command_line=None, say=print) -> Path:
    """Submit, wait (with progress), merge; the merged result directory."""
    check(options)
    work = new_stamped_directory(Path(out_parent).resolve(), "slurm")
    make_directories(*(work / sub for sub in ("shards", "logs", "status")))
    script = _script(work, run_argv, options.shards, seed)
    job = _sbatch(script, work, options)
    say(f"slurm: job {job}, {options.shards} shard(s), one node each; work directory {work}")
    shown, unanswered = -1, 0
    try:
        while True:
            finished = len([p for p in (work / "status").iterdir() if p.name.isdigit()])
            if finished != shown:
                say(f"slurm: {finished}/{options.shards} shard(s) done")
                shown = finished
            if finished == options.shards:
                break
            active = slurm_client.active(job)
            unanswered = unanswered + 1 if active is None else 0
            if active == 0:
                break
            if unanswered * _POLL_S > _SQUEUE_PATIENCE_S:
                raise ShardsFailed(f"squeue has not answered about job {job} for {_SQUEUE_PATIENCE_S:g} s; the job may "
                                   f"still run: `squeue -j {job}`, then `ttfr merge {work / 'shards'}/*/*`")  # fmt: skip
            time.sleep(_POLL_S)
    except KeyboardInterrupt:
        cancelled = slurm_client.cancel(job)
        say(f"slurm: interrupted: job {job} " + ("cancelled" if cancelled else "NOT cancelled (scancel failed): "
            f"`scancel {job}`") + f"; its shards so far are in {work / 'shards'}")  # fmt: skip
        raise
    return _merge(work, options.shards, out_parent, command_line)


def _merge(work: Path, count: int, out_parent: Path, command_line) -> Path:
    problems, dirs = [], []
    for index in range(1, count + 1):
        status = work / "status" / str(index)
        code = status.read_text().strip() if status.is_file() else None
        found = [p for p in (work / "shards" / str(index)).glob("*") if p.is_dir()]
        # exit 1 is a run whose cases failed: its artifacts are complete and merge like any
        if code not in ("0", "1") or len(found) != 1:
            log = work / "logs" / f"shard-{index}.log"
            if code is None:
                why = "never finished (cancelled, or killed by Slurm)"
            elif code not in ("0", "1"):
                why = f"exit code {code}"
            else:
                why = f"exit code {code}, but {len(found)} result directories instead of one"
            problems.append(f"shard {index}/{count}: {why}; see {log}")
        else:
            dirs.append(found[0])
    if problems:
        raise ShardsFailed("the Slurm job's shards did not all finish: " + "; ".join(problems))
    return shards.merge(dirs, Path(out_parent), command_line)
