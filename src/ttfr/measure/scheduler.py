"""Execute a plan's tasks in order: set up each run's cache state, run it through an
executor (a real process, or a fake in tests), journal it, and stop a case early when it
cannot produce trustworthy figures (unavailable, failed template producer or check).
A user's command runs through the command executor, after its untimed --prepare."""

from __future__ import annotations

import datetime as dt
import threading
import time
from pathlib import Path

from msgspec import structs

from ttfr.child import precompiled as precompiled_files
from ttfr.measure.cache import CacheDirs
from ttfr.measure.host_window import host_fields, host_reading
from ttfr.measure.journal import Journal
from ttfr.measure import command_imports
from ttfr.measure.plan import (
    EXPLAIN,
    GROUP,
    GROUP_CHECK,
    MAKE,
    PRIME,
    Plan,
    Task,
    gate_failure,
    maker_policy,
    fold_makers,
    replay,
)
from ttfr.measure.executors import REAL, Executors
from ttfr.measure.group_task import TaskRun
from ttfr.measure.spawn import ERROR, RunResult
from ttfr.measure.workerenv import build_env, build_job
from ttfr.model.base import UNSET, copied
from ttfr.model.journal import CacheDir, JournalEntry
from ttfr.model.policies import COLD_PRIVATE, WARM_SHARED


class NullProgress:
    def start(self, total: int, pending: list[Task]) -> None: ...
    def task_started(self, task: Task) -> None: ...
    def task_finished(self, task: Task, entry: JournalEntry | None, skipped: str | None = None) -> None: ...
    def add(self, tasks: list[Task]) -> None: ...  # runs added after the plan (--precision)
    def remove(self, tasks: list[Task]) -> None: ...  # added runs that will not run after all


def _quietly(work) -> None:
    """`alongside` only saves time: what fails in it fails again where the work is needed."""
    try:
        work()
    except Exception:  # noqa: BLE001, S110 - see above
        pass


class Scheduler:
    def __init__(self, plan: Plan, journal: Journal, scratch: Path, executors: Executors = REAL, progress=None,
                 base_env: dict | None = None, dataset_fields: dict | None = None, alongside=None):  # fmt: skip
        self.plan = plan
        self.journal = journal
        self.scratch = Path(scratch)
        self.executors = executors
        self.progress = progress or NullProgress()
        self.base_env = base_env
        self.dataset_fields = dataset_fields or {}
        self.stopped: dict[str, str] = {}
        # (case id, mechanism) -> why its artifact was not made: its policies' runs have nothing to load
        self.unmade: dict[tuple[str, str], str] = {}
        # (case id, mechanism) -> the sha256 its maker recorded: a run loads the artifact only while it hashes to it
        self.made: dict[tuple[str, str], str | None] = {}
        self.lives_ns: list[int] = []  # spawn to exit of each worker it ran (journaled or re-priming)
        # Work of ttfr's own (importing what the analysis needs) started with the first unmeasured
        # process, so its wall time hides behind those processes'; joined before a measured one.
        self.alongside = alongside
        self._helper: threading.Thread | None = None

    def run(self) -> None:
        pending = self.pending()
        self.progress.start(len(self.plan.tasks), pending)
        try:
            for task in pending:
                self.run_task(task)
        finally:
            self.join_alongside()

    def pending(self) -> list[Task]:
        """Tasks the journal does not hold yet (replaying it to know which cases stopped)."""
        entries = self.journal.entries()
        remaining, stopped = replay(self.plan, entries)
        fold_makers(entries, self.made, self.unmade)
        for case_id, reason in stopped.items():
            self._note(case_id, reason)
        return remaining

    def run_task(self, task: Task) -> JournalEntry | None:
        """Run one task and journal it; None when its case has stopped."""
        if task.case.id in self.stopped:
            self.progress.task_finished(task, None)
            return None
        if self._unmade(task):  # nothing to load: its policy says why (unsupported, or not made)
            self.progress.task_finished(task, None, f"no {task.mechanism} artifact to load")
            return None
        if task.measured:
            self.join_alongside()
        else:
            self._start_alongside()
        self.progress.task_started(task)
        entries = self._execute_group(task) if task.kind == GROUP else [self._execute(task)]
        for entry in entries:
            self.journal.append(entry)
            if entry.reaped_ns is not None:
                self.lives_ns.append(entry.reaped_ns - entry.spawn_ns)
        entry = entries[0]
        if task.kind == MAKE:
            fold_makers([entry], self.made, self.unmade)
        self._note(task.case.id, gate_failure(entry))
        self.progress.task_finished(task, entry)
        return entry

    def _unmade(self, task: Task) -> bool:
        """A precompiled policy's run whose artifact could not be made (nor made again, where it went missing)."""
        if task.kind == MAKE or not task.mechanism:
            return False
        key = (task.case.id, task.mechanism)
        # gone (the scratch area cleaned before a resume), or changed since its maker hashed it: made again, never
        # loaded as it is (a pickle, for most mechanisms, runs what it holds)
        if key not in self.unmade and not self._intact(task):
            why = self._make_artifact(task)
            if why:
                self.unmade[key] = why
        return key in self.unmade

    def _intact(self, task: Task) -> bool:
        path = self.artifact(task)
        if not path.is_file():
            return False
        made = self.made.get((task.case.id, task.mechanism))
        return made is None or precompiled_files.digest(str(path), task.mechanism) == made

    def artifact(self, task: Task) -> Path:
        return CacheDirs(self.scratch, task.case.id).artifact(task.mechanism)

    def _make_artifact(self, task: Task) -> str | None:
        """One unmeasured priming process that makes the artifact again, journaled (the case's artifact is then
        this one's); why it failed, or None."""
        maker = Task(MAKE, task.case, maker_policy(task.mechanism), 0, task.round)
        entry = self._execute(maker)
        self.journal.append(entry)
        if entry.reaped_ns is not None:
            self.lives_ns.append(entry.reaped_ns - entry.spawn_ns)
        fold_makers([entry], self.made, self.unmade)
        return self.unmade.get((task.case.id, task.mechanism))

    def _start_alongside(self) -> None:
        work, self.alongside = self.alongside, None
        if work is not None:
            self._helper = threading.Thread(target=_quietly, args=(work,), name="ttfr-alongside", daemon=True)
            self._helper.start()

    def join_alongside(self) -> None:
        """Wait for the `alongside` work: before a measured process starts, and when the runs end."""
        if self._helper is not None:
            self._helper.join()
            self._helper = None

    def stop_case(self, case_id: str, reason: str) -> None:
        """Stop a case from outside (its other arm stopped)."""
        self._note(case_id, reason)

    def _note(self, case_id: str, reason: str | None) -> None:
        if reason and case_id not in self.stopped:
            self.stopped[case_id] = reason

    def _prepare_cache(self, task: Task, cache: CacheDirs) -> bool:
        """Put the case's cache directory into the task's policy state; True if restored."""
        if task.uses_template and task.case.backend_info.compiles:
            if not cache.has_template() and task.requires_template:
                self._reprime(task)  # e.g. resuming after the scratch area was removed
            if cache.has_template():
                cache.restore_template()
                return True
        cache.make_empty()
        return False

    def _reprime(self, task: Task) -> None:
        self._prime(task, CacheDirs(self.scratch, task.case.id))

    def _prime(self, task: Task, cache: CacheDirs, where_groups_run: bool = False) -> str | None:
        """One unmeasured process that leaves the case's template in `cache`; why it failed, or None.
        `where_groups_run`: on the machines (and the filesystem) of the groups, because a runtime's cache
        entries may depend on the directory's absolute path (JAX's keys do, through the XLA cache
        directories it sets under it): the run's own template, restored there, would not be found."""
        primer = Task(PRIME, task.case, None, 0, task.round, makes_template=True)
        cache.make_empty()
        timeout_s = self._timeout(primer)
        unprepared = self._prepare_failure(primer, cache, timeout_s)
        if unprepared:
            return unprepared
        if where_groups_run:
            job = build_job(primer, self.plan.spec, self._dataset(task))
            (run,) = self.executors.together.run([(job, self._env(primer, cache))], timeout_s, self.plan.spec.python)
            result = run.result
        else:
            result = self._spawn(primer, cache, timeout_s)
        if result.reaped_ns is not None:
            self.lives_ns.append(result.reaped_ns - result.spawn_ns)
        if result.outcome == "ok":
            cache.save_template()
            return None
        return f"{result.outcome}: {result.reason}" if result.reason else result.outcome

    def _timeout(self, task: Task) -> float:
        factor = task.case.workload_info.check_timeout_factor if task.runs_check else 1.0
        return self.plan.spec.timeout_s * factor

    def _env(self, task: Task, cache: CacheDirs) -> dict:
        return build_env(task.case, self.plan.spec, cache.env(), self.base_env)

    def _prepare_failure(self, task: Task, cache: CacheDirs, timeout_s: float) -> str | None:
        """A command's --prepare, run before the run (and before the host readings around it)."""
        if task.case.backend_info.in_process:
            return None
        return self.executors.prepare(self.plan.spec.command(task.case.workload), self._env(task, cache), timeout_s)

    def _spawn(self, task: Task, cache: CacheDirs, timeout_s: float) -> RunResult:
        spec = self.plan.spec
        env = self._env(task, cache)
        if not task.case.backend_info.in_process:
            if task.kind == EXPLAIN:  # a Python program reports its imports as -X importtime would
                env = {**env, command_imports.VARIABLE: "1"}
            return self.executors.command(spec.command(task.case.workload), env, timeout_s)
        artifact = self.artifact(task) if task.mechanism else None
        return self.executors.worker(build_job(task, spec, self._dataset(task), artifact), env, timeout_s, spec.python)

    def _group_caches(self, task: Task) -> list[CacheDirs]:
        """The group's cache directories, one shared or one per member: under the run's directory in
        --concurrency-cache-dir (the filesystem the user named, which Slurm's nodes mount), else in the
        run's scratch area."""
        root = self.executors.group_root or self.scratch
        if task.policy != COLD_PRIVATE:
            return [CacheDirs(root, task.case.id)]
        return [CacheDirs(root, f"{task.case.id}.member{i}") for i in range(task.concurrency)]

    def _execute_group(self, task: Task) -> list[JournalEntry]:
        """--concurrency: N fresh processes released at once, on one shared cache directory (empty, or the
        case's template) or on one empty directory each; then the check of the cache they left (is it
        whole: readable, and a hit for every program). One journal entry per member, the check's last."""
        n, mode, spec = task.concurrency, task.policy, self.plan.spec
        caches = self._group_caches(task)
        unprimed = None
        if mode == WARM_SHARED and self.executors.group_root is not None and not caches[0].has_template():
            unprimed = self._prime(task, caches[0], where_groups_run=True)
        restored = self._prepare_cache(task, caches[0]) if mode == WARM_SHARED and not unprimed else False
        if mode != WARM_SHARED:
            for cache in caches:
                cache.make_empty()
        timeout_s = self._timeout(task)
        mine = [caches[i if mode == COLD_PRIVATE else 0] for i in range(n)]  # each member's directory
        before = [c.survey() for c in caches]
        host = self.executors.host
        load = host.load_average()
        reading_before = host_reading(host)
        started = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
        if unprimed:  # a warm-shared group with nothing to start from is not run cold under its name
            why = f"the warm-shared template could not be made in {caches[0].root}: {unprimed}"
            runs = [TaskRun(RunResult(ERROR, why, None, time.monotonic_ns(), None, None), "", 0, None)] * n
        else:
            members = [(build_job(task, spec, self._dataset(task)), self._env(task, cache)) for cache in mine]
            runs = self.executors.together.run(members, timeout_s, spec.python)
        around = host_fields(host, load, started, reading_before, host_reading(host))
        after = [c.survey() for c in caches]
        common = {"task": task.key, "case": task.case.id, "policy": mode, "index": task.index, "round": task.round,
                  "makes_template": False, "timeout_s": timeout_s, "concurrency": n}  # fmt: skip
        entries = []
        for i, run in enumerate(runs):
            d = i if mode == COLD_PRIVATE else 0
            entries.append(_entry(
                **common, kind=GROUP, measured=True, member=i,
                cache_dir=CacheDir(entries_before=before[d].files, entries_after=after[d].files,
                                   restored_template=restored, bytes_before=before[d].bytes, bytes_after=after[d].bytes),
                **self._ran(run, around),
            ))  # fmt: skip
        check = {**common, "kind": GROUP_CHECK, "measured": False, "member": n}
        if unprimed:
            entries.append(_no_process(check, CacheDir(entries_before=0, entries_after=0), ERROR,
                                       f"not run: {runs[0].result.reason}"))  # fmt: skip
        else:
            unchanged = restored and after[0].fingerprint == before[0].fingerprint
            entries.append(self._group_check(task, check, caches, after, restored, timeout_s, unchanged))
        return entries

    @staticmethod
    def _ran(run: TaskRun, around) -> dict:
        """A member's journal fields from its run: the host readings around it (its node's, on Slurm),
        and where it ran on another machine, that machine and its clock's offset."""
        result = run.result
        fields = {"host": run.host or around, "messages": list(result.messages),
                  **copied(result, ("outcome", "reason", "record", "spawn_ns", "reaped_ns", "exit_code", "rusage",
                                    "output_tail"))}  # fmt: skip
        if run.node:  # "": it ran here, or never ran on a node (Slurm could not start it, or its task died before)
            fields.update(node=run.node, node_cpus=run.node_cpus, clock_offset_ns=run.clock_offset_ns)
        return fields

    def _group_check(self, task: Task, check: dict, caches: list[CacheDirs], after: list, restored: bool,
                     timeout_s: float, unchanged: bool) -> JournalEntry:  # fmt: skip
        """The cache a group left (`after`: its survey), before anything else touches it: every file must
        read to its end, and one fresh process on it find every program. No process where it would add
        nothing: a warm-shared group that changed no file (its N members were fresh processes on that very
        cache), and private directories, each written by one process (their files are read)."""
        basis = "private" if task.policy == COLD_PRIVATE else "members" if unchanged else "process"
        unreadable = [f"member {i}/{bad}" if basis == "private" else bad
                      for i, cache in enumerate(caches) for bad in cache.unreadable()]  # fmt: skip
        count, size = sum(a.files for a in after), sum(a.bytes for a in after)
        directory = CacheDir(entries_before=count, entries_after=count, restored_template=restored, bytes_before=size,
                             bytes_after=size, unreadable=unreadable)  # fmt: skip
        if basis != "process":
            return _no_process(check, directory, "ok", None, basis)
        cache = caches[0]
        checker = Task(GROUP_CHECK, task.case, task.policy, task.index, task.round, concurrency=task.concurrency)
        job, env = build_job(checker, self.plan.spec, self._dataset(task)), self._env(task, cache)
        (run,) = self.executors.together.run([(job, env)], timeout_s, self.plan.spec.python)  # where its members ran
        left = cache.survey()
        directory = structs.replace(directory, entries_after=left.files, bytes_after=left.bytes)
        return _entry(**check, cache_dir=directory, **{**self._ran(run, None), "host": None})

    def _dataset(self, task: Task) -> dict | None:
        return self.dataset_fields[task.case.size_token] if task.case.uses_workspace else None

    def _execute(self, task: Task) -> JournalEntry:
        cache = CacheDirs(self.scratch, task.case.id)
        restored = self._prepare_cache(task, cache)
        if task.kind == MAKE:
            cache.ready_artifact(task.mechanism)
        timeout_s = self._timeout(task)
        unprepared = self._prepare_failure(task, cache, timeout_s)
        before, by_directory = cache.count_entries(), cache.count_by_directory()
        host = self.executors.host
        load = host.load_average()
        reading_before = host_reading(host)
        started = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
        if unprepared:  # the program does not run: its run fails with why
            result = RunResult(ERROR, unprepared, None, time.monotonic_ns(), None, None)
        else:
            result = self._spawn(task, cache, timeout_s)
        around = host_fields(host, load, started, reading_before, host_reading(host))
        after = cache.count_entries()
        after_by_directory = cache.count_by_directory()
        by_directory = {sub: [n, after_by_directory.get(sub, 0)] for sub, n in by_directory.items()}
        if task.makes_template and result.outcome == "ok":
            cache.save_template()
        entry = JournalEntry(
            task=task.key,
            case=task.case.id,
            **copied(task, ("kind", "policy", "index", "round", "measured", "makes_template")),
            timeout_s=timeout_s,
            cache_dir=CacheDir(
                entries_before=before,
                entries_after=after,
                restored_template=restored,
                # per cache variable's directory (jax, inductor, ...): files before and after
                by_directory={sub: n for sub, n in by_directory.items() if any(n)},
            ),
            host=around,
            **copied(result, ("outcome", "reason", "record", "spawn_ns", "reaped_ns", "exit_code", "rusage", "output_tail")),
            **({"imports": result.imports} if result.imports is not None else {}),
            **({"process_tree": result.process_tree} if result.process_tree is not None else {}),
        )
        return entry


def _entry(**fields) -> JournalEntry:
    """A group's journal entry. A member's run may come back from a node through a file on a shared
    filesystem: where its values do not hold together (an ok run without a record, a result before its
    spawn), it is that member's error, never a crash of the run."""
    try:
        return JournalEntry(**fields)
    except (ValueError, TypeError) as exc:
        why = f"its result did not hold together ({exc})"
        return JournalEntry(**{**fields, "outcome": ERROR, "reason": why, "record": None, "reaped_ns": None,
                               "output_tail": None})  # fmt: skip


def _no_process(check: dict, directory: CacheDir, outcome: str, reason: str | None, basis=UNSET) -> JournalEntry:
    """A group's check entry where no process ran: its verdict rests on `basis` (the members, or private
    directories' files), or it could not run (`reason`)."""
    return JournalEntry(**check, host=None, cache_dir=directory, check_basis=basis, messages=[], outcome=outcome,
                        reason=reason, record=None, spawn_ns=time.monotonic_ns(), reaped_ns=None, exit_code=None,
                        rusage=None, output_tail=None)  # fmt: skip
