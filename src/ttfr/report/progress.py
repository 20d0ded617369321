"""The live progress display of a run (`ttfr run`, `ab`, `replicate`): case, run and ETA.

Run costs differ by orders of magnitude (a NumPy run ~0.3 s, a cold torch.compile ~20 s),
so the ETA sums per-kind estimates, replaced by the mean of observed runs of that kind.
"""

from __future__ import annotations

import html
import io
import statistics
import time

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from ttfr.measure.plan import EXPLAIN, MAKE, Task
from ttfr.model.journal import JournalEntry
from ttfr.model.policies import WARM_CACHE, cache_state
from ttfr.report.formatting import fmt_seconds, printable


def _cost_key(task: Task) -> str:
    backend = task.case.backend_info
    warm_start = cache_state(task.policy) == WARM_CACHE or task.uses_template
    # A loop's strategies cost alike and nothing like the backend's single calls.
    loop = task.case.workload_info.loop
    # A precompiled mechanism's maker and loads cost nothing like a compile's (AOTInductor: 20 s to make, a
    # serialized executable: nothing to compile).
    start = "template" if warm_start and backend.compiles else "fresh"
    return f"{backend.name}|{loop}|{task.kind}|{start}|{task.mechanism or ''}"


def _prior(task: Task) -> float:
    """The catalog's guess (seconds per run) until a run of the same kind has been observed."""
    fresh, from_template = task.case.backend_info.cost_prior_s
    return from_template if task.uses_template else fresh


class RunEstimator:
    def __init__(self):
        self.observed: dict[str, list[float]] = {}

    def observe(self, task: Task, seconds: float) -> None:
        self.observed.setdefault(_cost_key(task), []).append(seconds)

    def estimate(self, task: Task) -> float:
        seen = self.observed.get(_cost_key(task))
        return statistics.mean(seen) if seen else _prior(task)


def task_label(task: Task) -> str:
    """What a task is, after its case: a measured run's policy and number, `check #1`, `explain <policy>` for
    --explain's diagnostic process (one per policy: it has no number, and is no measured run), or `make <mechanism>
    artifact` for a precompiled mechanism's priming process."""
    if task.kind == EXPLAIN:
        return f"{EXPLAIN} {task.policy}"
    if task.kind == MAKE:
        return f"make {task.mechanism} artifact"
    return f"{task.policy or task.kind} #{task.index + 1}"


def _describe(task: Task) -> str:
    return f"{task.case.id} [dim]{task_label(task)}[/dim]"


class ProgressDisplay:
    """Scheduler progress: a live bar on a terminal, one line per run otherwise."""

    def __init__(self, console: Console):
        self.console = console
        self.remaining: dict[str, Task] = {}
        self.estimator = RunEstimator()
        self.live = console.is_terminal
        self.progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("ETA {task.fields[eta]}"),
            console=console,
            transient=False,
        )
        self.bar = None
        self.started_at = None
        self.count = 0
        self.total = 0

    def _eta(self) -> str:
        return fmt_seconds(sum(self.estimator.estimate(t) for t in self.remaining.values())) if self.remaining else "0 s"

    def start(self, total: int, pending: list[Task]) -> None:
        self.total, self.count = total, total - len(pending)
        self.remaining = {t.key: t for t in pending}
        if self.live:
            self.progress.start()
            self.bar = self.progress.add_task("starting", total=total, completed=self.count, eta=self._eta())

    def add(self, tasks: list[Task]) -> None:
        """Runs added after the plan (--precision): the bar's total and ETA grow with them."""
        self.total += len(tasks)
        self.remaining.update((t.key, t) for t in tasks)
        if self.bar is not None:
            self.progress.update(self.bar, total=self.total, eta=self._eta())

    def remove(self, tasks: list[Task]) -> None:
        """Added runs that will not run (the budget is spent)."""
        for task in tasks:
            if self.remaining.pop(task.key, None) is not None:
                self.total -= 1
        if self.bar is not None:
            self.progress.update(self.bar, total=self.total, eta=self._eta())

    def task_started(self, task: Task) -> None:
        self.started_at = time.monotonic()
        if self.bar is not None:
            self.progress.update(self.bar, description=_describe(task), eta=self._eta())

    def task_finished(self, task: Task, entry: JournalEntry | None, skipped: str | None = None) -> None:
        """`entry` None: the task did not run, for `skipped` (else: its case stopped earlier)."""
        self.remaining.pop(task.key, None)
        self.count += 1
        if entry is not None and self.started_at is not None:
            self.estimator.observe(task, time.monotonic() - self.started_at)
        if self.bar is not None:
            self.progress.update(self.bar, advance=1, eta=self._eta())
        else:  # every task gets its line, so the count never skips and ends at N/N
            detail = (f"skipped: {skipped or 'its case stopped earlier (see its reason)'}" if entry is None else
                      entry.outcome + (f" ({printable(entry.reason)})" if entry.reason else ""))  # fmt: skip
            line = f"[{self.count}/{self.total}] {task.case.id} {task_label(task)}: {detail}"
            self.console.print(line, markup=False, highlight=False)

    def stop(self) -> None:
        """End the live bar (again: nothing)."""
        if self.bar is not None:
            self.progress.stop()
            self.bar = None


def in_notebook() -> bool:
    """Running in a Jupyter kernel (IPython's ZMQ shell), where terminal codes would print as text."""
    import sys

    shell = sys.modules.get("IPython")
    ipython = getattr(shell, "get_ipython", lambda: None)() if shell else None
    return type(ipython).__name__ == "ZMQInteractiveShell"


class NotebookProgress(ProgressDisplay):
    """The scheduler's progress as an HTML progress bar in a notebook's output, updated in place (IPython's display
    handles): the count, the run that just finished, the ETA. No terminal codes, no server, offline."""

    def __init__(self):
        super().__init__(Console(file=io.StringIO()))  # the lines a non-terminal would get go nowhere
        self.live = False
        from IPython.display import HTML, display

        self._html = HTML
        self._handle = display(HTML(self._render("starting")), display_id=True)

    def _render(self, last: str) -> str:
        done, total = self.count, max(self.total, 1)
        return (f"<div><progress value='{done}' max='{total}' style='width:24em'></progress> {done}/{self.total} "
                f"· ETA {html.escape(self._eta())}<br><small>{html.escape(last)}</small></div>")  # fmt: skip

    def start(self, total: int, pending: list[Task]) -> None:
        super().start(total, pending)
        self._handle.update(self._html(self._render("")))

    def task_finished(self, task: Task, entry: JournalEntry | None, skipped: str | None = None) -> None:
        super().task_finished(task, entry, skipped)
        outcome = "skipped" if entry is None else entry.outcome
        self._handle.update(self._html(self._render(f"{task.case.id} {task_label(task)}: {outcome}")))


def for_python_api():
    """The progress a `ttfr.run()` call shows: a bar in a notebook, lines on stderr elsewhere."""
    import sys

    return NotebookProgress() if in_notebook() else ProgressDisplay(Console(file=sys.stderr))
