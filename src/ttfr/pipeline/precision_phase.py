"""`ttfr run --precision`: after the plan, runs where they buy the most precision per second,
until every headline statistic meets the target, nothing more can be bought, or the budget is
spent (analyse/precision.py decides where; this phase runs them)."""

from __future__ import annotations

from ttfr.analyse import case_result, precision
from ttfr.measure.journal import Journal
from ttfr.measure.plan import Plan, added_tasks
from ttfr.measure.scheduler import Scheduler
from ttfr.measure.limits import MAX_WORKER_PROCESSES
from ttfr.model.journal import JournalEntry
from ttfr.model.policies import precompiled_parts


BATCH_PER_ASSESSMENT = 10.0  # a batch of added runs lasts at least 10x the re-assessment before it


class PrecisionPurchase:
    """After the plan: batches of runs where they buy the most precision per second
    (analyse/precision.py), re-assessed from the journal after each batch, until every
    statistic meets the target, nothing more can be bought, or the budget is spent. What it
    decides comes from the journal, so a resumed run continues it; the budget and
    `elapsed_s` are this session's (a resume gets its budget again). A run is started only
    when its median cost fits in what is left, so one that runs long can overrun by that much."""

    def __init__(self, plan: Plan, journal: Journal, scheduler: Scheduler, started: float, clock):
        self.plan, self.journal, self.scheduler = plan, journal, scheduler
        self.spec = plan.spec
        self.started, self.clock = started, clock
        self.stopped_by = None

    def _left_s(self) -> float | None:
        return None if self.spec.budget_s is None else self.spec.budget_s - (self.clock() - self.started)

    def run(self) -> None:
        target = self.spec.precision
        while self.stopped_by is None:
            assessing = self.clock()
            entries = self.journal.entries()
            statistics = precision.assess(case_result.case_results(self.plan, entries), target)
            # a case the scheduler stopped (unavailable, failed gate), or a precompiled policy with no artifact to
            # load, takes no more runs
            open_ = [s for s in statistics if s.case not in self.scheduler.stopped
                     and (s.case, (precompiled_parts(s.policy) or ("",))[0]) not in self.scheduler.unmade]  # fmt: skip
            batch_floor = BATCH_PER_ASSESSMENT * (self.clock() - assessing)
            left = self._left_s()
            counts = precision.allocate(open_, target, limit_s=left, min_batch_s=batch_floor)
            room = MAX_WORKER_PROCESSES - len(entries)
            if not counts or room <= 0:
                self.stopped_by = "process_limit" if counts else self._why_nothing(statistics, open_, left)
                break
            costs = {s.key: s.cost_s for s in open_}
            tasks = added_tasks(self.plan, counts, _next_indexes(entries), 1 + max(e.round for e in entries))
            tasks = tasks[:room]
            progress = self.scheduler.progress
            progress.add(tasks)
            for position, task in enumerate(tasks):
                left = self._left_s()
                if left is not None and costs[(task.case.id, task.policy)] > left:
                    progress.remove(tasks[position:])
                    self.stopped_by = "budget"
                    break
                self.scheduler.run_task(task)

    @staticmethod
    def _why_nothing(statistics, open_, left: float | None) -> str:
        if statistics and all(s.state == precision.MET for s in statistics):
            return "target_met"
        if left is not None and any(precision.buyable(s) for s in open_):
            return "budget"  # a statistic could still improve, but not one of its runs fits in what is left
        return "cannot_improve"  # nothing measured, or the rest are unreachable, busy, failing or stopped

    def outcome(self, clock) -> precision.PhaseEnd:
        return precision.PhaseEnd(target=self.spec.precision, budget_s=self.spec.budget_s,
                                  stopped_by=self.stopped_by or "interrupted", elapsed_s=clock() - self.started)  # fmt: skip


def _next_indexes(entries: list[JournalEntry]) -> dict[tuple[str, str], int]:
    """The next free run index of every measured (case, policy) stream the journal holds."""
    nexts: dict[tuple[str, str], int] = {}
    for entry in entries:
        if entry.measured:
            key = (entry.case, entry.policy)
            nexts[key] = max(nexts.get(key, 0), entry.index + 1)
    return nexts
