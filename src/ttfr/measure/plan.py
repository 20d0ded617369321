"""Expand a RunSpec into ordered tasks (one fresh process each).

Ordering, so that drift on a shared machine hits every case alike:
- round 0 holds each case's *template producer*: its first cold-cache run (measured), or
  an unmeasured priming run when cold-cache is not selected. Its cache directory becomes
  the template that warm-cache runs and warm processes start from.
- round 1 holds each case's first warm process, or an unmeasured check process when
  warm-process is not selected: the result check gates the rest of the case early.
- round 0 also holds a priming process per precompiled mechanism a case runs (issue 39): on an empty cache it
  compiles the case's function and writes the artifact its policies' runs load (unmeasured; where it cannot,
  those policies are unsupported, the case goes on).
- rounds 2.. interleave the remaining runs: round r holds the next run of every
  (case, policy) stream, in an order shuffled per round from the spec's seed.
Backends without a persistent compile cache (NumPy, eager torch) need no template.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from ttfr.measure import catalog
from ttfr.model.base import UNSET
from ttfr.model.journal import JournalEntry
from ttfr.model.policies import (
    COLD_CACHE,
    COLD_PRIVATE,
    CONCURRENCY_MODES,
    PRECOMPILED,
    WARM_CACHE,
    WARM_PROCESS,
    WARM_SHARED,
    cache_state,
    precompiled_parts,
)
from ttfr.measure.spec import RunSpec

# Task kinds: what the worker is asked to do and whether its figures are published.
COLD = "cold"  # cold-process run under a cache policy (measured)
WARM = "warm"  # warm-regime process: samples + result check (measured)
PRIME = "prime"  # fills the cache template (unmeasured)
CHECK = "check"  # result check only (unmeasured)
GROUP = "group"  # N cold processes released at once (--concurrency; measured, one journal entry each)
GROUP_CHECK = "group_check"  # a fresh process after a group, on the cache it left (unmeasured): is it whole?
EXPLAIN = "explain"  # --explain: a cold policy's diagnostic process, -X importtime on its cache (unmeasured)
MAKE = "make"  # a precompiled mechanism's priming process: compiles and writes the artifact (unmeasured)
GROUP_KINDS = (GROUP, GROUP_CHECK)


def runs_check(kind: str, index: int) -> bool:
    """The process that checks the case's result: its first warm process, or the check
    process of a case without warm processes."""
    return kind == CHECK or (kind == WARM and index == 0)


def is_gate(kind: str, index: int, makes_template: bool) -> bool:
    """A task whose failure ends its case: the template producer, a priming run, the check."""
    return makes_template or kind == PRIME or runs_check(kind, index)


@dataclass(frozen=True)
class Task:
    kind: str
    case: catalog.Case
    policy: str | None
    index: int
    round: int
    makes_template: bool = False
    concurrency: int = 0  # a group's size N (GROUP tasks only)

    @property
    def measured(self) -> bool:
        return self.kind in (COLD, WARM, GROUP)

    @property
    def uses_template(self) -> bool:
        """It starts from the case's cache template: when there is one (the check), or always
        (`requires_template`)."""
        return self.requires_template or self.kind == CHECK

    @property
    def requires_template(self) -> bool:
        """Its policy is measured on a primed cache: a missing template is made again. The check
        takes one only where the plan made it: priming one for it would be a whole extra process
        compiling what the check compiles anyway."""
        return cache_state(self.policy) in (WARM_CACHE, WARM_PROCESS) or self.policy == WARM_SHARED

    @property
    def mechanism(self) -> str | None:
        """The precompiled mechanism whose artifact it makes (MAKE) or loads (a precompiled policy's run)."""
        if self.kind == MAKE:
            return self.policy.split("/", 1)[1]
        parts = precompiled_parts(self.policy)
        return parts[0] if parts else None

    @property
    def runs_check(self) -> bool:
        return runs_check(self.kind, self.index)

    @property
    def key(self) -> str:
        if self.kind == GROUP:
            return f"{self.case.id}|{self.policy}x{self.concurrency}|{self.index}"
        if self.kind == EXPLAIN:
            return f"{self.case.id}|{self.policy}|{EXPLAIN}"
        return f"{self.case.id}|{self.policy or self.kind}|{self.index}"


@dataclass(frozen=True)
class Plan:
    spec: RunSpec
    tasks: tuple[Task, ...]
    unavailable: dict  # case id -> warn reason, decided without spawning anything

    def tasks_for(self, case_id: str) -> list[Task]:
        return [t for t in self.tasks if t.case.id == case_id]


def maker_policy(mechanism: str) -> str:
    """A MAKE task's `policy` (its journal entry's): `precompiled/<mechanism>`."""
    return f"{PRECOMPILED}/{mechanism}"


def case_policies(case: catalog.Case, spec: RunSpec) -> list[str]:
    """The spec's policies that apply to the case: a precompiled one only where its backend offers the mechanism."""
    return [p for p in spec.policies if not (parts := precompiled_parts(p)) or parts[0] in case.backend_info.precompiled]


def _case_streams(case: catalog.Case, spec: RunSpec) -> tuple[list[Task], Task | None, list[list[Task]]]:
    """(round 0's tasks: template producer and artifact makers, gate, remaining streams) of one case, rounds not yet
    assigned (a command's spec has no warm-process policy: measure/spec.py refuses it)."""
    policies = case_policies(case, spec)
    shipped = [p for p in policies if precompiled_parts(p)]
    needs_template = case.backend_info.compiles and (
        any(cache_state(p) in (WARM_CACHE, WARM_PROCESS) for p in policies) or bool(spec.concurrency)
    )  # warm-shared groups start from it
    producer = None
    streams = []
    if COLD_CACHE in spec.policies:
        cold = [Task(COLD, case, COLD_CACHE, i, -1) for i in range(spec.cold_runs)]
        producer = Task(COLD, case, COLD_CACHE, 0, 0, makes_template=needs_template)
        streams.append(cold[1:])
    elif needs_template:
        producer = Task(PRIME, case, None, 0, 0, makes_template=True)
    if WARM_CACHE in spec.policies:
        streams.append([Task(COLD, case, WARM_CACHE, i, -1) for i in range(spec.cold_runs)])
    makers = [Task(MAKE, case, maker_policy(m), 0, 0) for m in dict.fromkeys(precompiled_parts(p)[0] for p in shipped)]
    streams += [[Task(COLD, case, policy, i, -1) for i in range(spec.cold_runs)] for policy in shipped]
    first = [producer] if producer else []
    if not case.backend_info.in_process:  # a command: nothing to call in a warm process, no result to check
        return first + makers, None, streams
    if WARM_PROCESS in spec.policies:
        warm = [Task(WARM, case, WARM_PROCESS, i, -1) for i in range(spec.warm_procs)]
        gate, streams = warm[0], streams + [warm[1:]]
    else:
        gate = Task(CHECK, case, None, 0, 1)
    return first + makers, gate, streams


def build_plan(spec: RunSpec, availability=catalog.availability) -> Plan:
    unavailable = {}
    producers, gates, streams = [], [], []
    for case in spec.cases:
        reason = availability(case.backend_info, case.workload)
        if reason:
            unavailable[case.id] = reason
            continue
        first, gate, case_streams = _case_streams(case, spec)
        producers.extend(first)
        if gate:
            gates.append(gate)
        streams.extend(s for s in case_streams if s)

    rounds = [producers, gates]
    depth = max((len(s) for s in streams), default=0)
    for position in range(depth):
        rounds.append([s[position] for s in streams if position < len(s)])
    available = [c for c in spec.cases if c.id not in unavailable]
    if spec.explain:  # after every measured run of the round-robin, never beside one
        rounds.append([Task(EXPLAIN, case, policy, 0, -1) for case in available for policy in case_policies(case, spec)
                       if policy != WARM_PROCESS])  # fmt: skip
    rounds += _group_rounds(spec, available)

    ordered = []
    for number, tasks in enumerate(rounds):
        tasks = sorted(tasks, key=lambda t: t.key)
        random.Random(f"{spec.seed}:{number}").shuffle(tasks)
        ordered.extend(_with_round(t, number) for t in tasks)
    return Plan(spec=spec, tasks=tuple(ordered), unavailable=unavailable)


def _group_rounds(spec: RunSpec, cases) -> list[list[Task]]:
    """--concurrency: after every other run, the profile's rounds of groups; round r holds the r-th group of
    each (compiling case, sharing mode, N). A group needs the case's runs before it (its template, its
    gate), and would disturb any run beside it."""
    if not spec.concurrency:
        return []
    compiling = [c for c in cases if c.runs_groups]
    # One process on a private empty directory is one process on a shared empty one: cold-private x1 is
    # cold-shared x1's experiment, run once (analysis gives both points from it).
    points = [(mode, n) for mode in CONCURRENCY_MODES for n in spec.concurrency if (mode, n) != (COLD_PRIVATE, 1)]
    return [[Task(GROUP, case, mode, r, -1, concurrency=n) for case in compiling for mode, n in points]
            for r in range(spec.concurrency_rounds)]  # fmt: skip


def _with_round(task: Task, number: int) -> Task:
    return Task(task.kind, task.case, task.policy, task.index, number, task.makes_template, task.concurrency)


def gate_failure(entry: JournalEntry) -> str | None:
    """Why a journaled task ends its case early, or None.

    Unavailable anywhere ends the case (`warn`); so does any failure of the template
    producer or of the gate (first warm process or check), and a failed result check.
    """
    if entry.kind == MAKE:  # an artifact not made: its policies are unsupported or failed, the case goes on
        return None
    if entry.outcome == "unavailable":
        return entry.reason
    if is_gate(entry.kind, entry.index, entry.makes_template) and entry.outcome != "ok":
        return entry.reason or entry.outcome
    check = entry.record.check if entry.record else None
    if check and check.passed is False:  # None: nothing to compare with (not checked), not a failure
        return "result check failed"
    return None


def replay(plan: Plan, entries: list[JournalEntry]) -> tuple[list[Task], dict[str, str]]:
    """What a journal leaves to do: the plan's tasks it does not hold yet, and the cases it
    stopped (case id -> why). Resuming runs the first; analysing treats both as unfinished."""
    done, stopped = set(), {}
    grouped: dict[str, set] = {}
    unmade = unmade_artifacts(entries)
    for entry in entries:
        if entry.kind in GROUP_KINDS:  # a group is done when each member and its check are journaled
            if entry.kind == GROUP and entry.member == 0:
                grouped[entry.task] = set()  # a group run again starts over
            grouped.setdefault(entry.task, set()).add(entry.member)
            if len(grouped[entry.task]) == entry.concurrency + 1:
                done.add(entry.task)
            continue
        done.add(entry.task)
        reason = gate_failure(entry)
        if reason:
            stopped.setdefault(entry.case, reason)
    # a precompiled policy's runs whose artifact was not made are done: there is nothing for them to load
    return [t for t in plan.tasks if t.key not in done and (t.case.id, t.mechanism) not in unmade], stopped


def fold_makers(entries: list[JournalEntry], made: dict[tuple[str, str], str | None],
                unmade: dict[tuple[str, str], str]) -> None:  # fmt: skip
    """Each priming process's entry, in order, into (case id, mechanism) -> `made`: the sha256 its last successful
    maker recorded (None: an older journal's, which recorded none) or `unmade`: why its last try failed."""
    for entry in entries:
        if entry.kind != MAKE:
            continue
        key = (entry.case, entry.policy.split("/", 1)[1])
        if entry.outcome == "ok":
            artifact = entry.record.artifact if entry.record else None
            made[key] = artifact.sha256 if artifact and artifact.sha256 is not UNSET else None
            unmade.pop(key, None)
        else:
            made.pop(key, None)
            unmade[key] = f"{entry.outcome}: {entry.reason}" if entry.reason else entry.outcome


def unmade_artifacts(entries: list[JournalEntry]) -> dict[tuple[str, str], str]:
    """(case id, mechanism) -> why, for each artifact whose priming process failed (its last try)."""
    unmade: dict[tuple[str, str], str] = {}
    fold_makers(entries, {}, unmade)
    return unmade


def pending_cases(plan: Plan, entries: list[JournalEntry]) -> list[str]:
    """Cases with tasks neither journaled nor skipped because their case was stopped."""
    remaining, stopped = replay(plan, entries)
    return sorted({t.case.id for t in remaining if t.case.id not in stopped})


def added_tasks(plan: Plan, counts: dict[tuple[str, str], int], next_index: dict[tuple[str, str], int],
                first_round: int) -> list[Task]:  # fmt: skip
    """Tasks for runs added after the plan (`--precision`): `counts[(case, policy)]` more runs
    from `next_index[(case, policy)]` on, spread like the plan's rounds: round r holds the
    r-th added run of every stream that gets one, in an order shuffled from the seed."""
    cases = {c.id: c for c in plan.spec.cases}
    depth = max(counts.values(), default=0)
    tasks = []
    for position in range(depth):
        number = first_round + position
        streams = sorted(key for key, count in counts.items() if count > position)
        random.Random(f"{plan.spec.seed}:{number}").shuffle(streams)
        for case_id, policy in streams:
            kind = WARM if policy == WARM_PROCESS else COLD
            tasks.append(Task(kind, cases[case_id], policy, next_index[(case_id, policy)] + position, number))
    return tasks
