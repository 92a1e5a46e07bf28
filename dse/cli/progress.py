"""The live view of a search: per study, the trials done, their rate, the feasible count and the
best of each objective; for a batch, one row per study and a total row."""

from __future__ import annotations

import threading
import time

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from dse.evaluation.outcome import Outcome
from dse.search.exhaustive import ExhaustiveRun
from dse.spec.resolved import ResolvedStudy


def rate_text(trials: int, elapsed_s: float) -> str:
    """How fast trials finish, readable at any pace: `1,234 trials/s`, `2.5 trials/s`, or below
    one a second the seconds each takes (`2.5 s/trial`), never a `0 trials/s` for a slow run."""
    rate = trials / max(elapsed_s, 1e-9)
    if rate >= 10:
        return f"{rate:,.0f} trials/s"
    if rate >= 1:
        return f"{rate:.1f} trials/s"
    return f"{1 / rate:,.1f} s/trial" if rate > 0 else ""


class SearchProgress:
    """A rich progress display fed by the engine's callbacks (one per told trial); its rows may
    be fed from several threads (a batch runs one study per thread)."""

    def __init__(self, console: Console) -> None:
        self._progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("{task.fields[rate]}"),
            TextColumn("{task.fields[status]}"),
            console=console,
            transient=False,
        )
        self._lock = threading.Lock()
        self._total: StudyRow | None = None

    def __enter__(self) -> SearchProgress:
        self._progress.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self._progress.__exit__(*exc)

    def row(self, resolved: ResolvedStudy | None, label: str = "trials") -> StudyRow:
        """A row for one study (or, with `resolved` None, the total of a batch's rows)."""
        row = StudyRow(self, resolved, label)
        if resolved is None:
            self._total = row
        return row

    def _advance(self, row: StudyRow, outcome: Outcome | None) -> None:
        with self._lock:
            row.record(outcome)
            if self._total is not None and row is not self._total:
                self._total.record(None)


class StudyRow:
    """One study's line: `start` when its study is open, `trial` for each told trial."""

    def __init__(self, view: SearchProgress, resolved: ResolvedStudy | None, label: str) -> None:
        self._view = view
        self._resolved = resolved
        self._best: dict[str, float] = {}
        self._feasible = 0
        self._done_here = 0
        self._started = time.monotonic()
        # hidden until its study opens: a run that fails first (a bad address, an existing study)
        # shows its one-line error, not an empty bar
        self._task = view._progress.add_task(label, total=None, rate="", status="", start=False, visible=False)

    def start(self, total: int, prior: list[Outcome]) -> None:
        """Show the bar; `prior` are the outcomes a resumed study already holds."""
        for outcome in prior:
            self._judge(outcome)
        self._started = time.monotonic()
        progress = self._view._progress
        progress.start_task(self._task)
        progress.update(self._task, total=total, completed=len(prior), status=self._status(), visible=True)

    def add_total(self, total: int, done: int) -> None:
        """For the total row: a study has opened with `total` trials, `done` already finished."""
        progress = self._view._progress
        task = progress.tasks[self._task]
        if not task.started:
            progress.start_task(self._task)
            self._started = time.monotonic()
        progress.update(self._task, total=(task.total or 0) + total, completed=task.completed + done, visible=True)

    def trial(self, number: int, outcome: Outcome) -> None:
        self._view._advance(self, outcome)

    def ranges(self, run: ExhaustiveRun) -> None:
        """The exact mode's progress (dse.search.exhaustive): ranges of combinations recorded,
        the plans found feasible and the front's best; its trials are only what the ladder promotes."""
        self._feasible, self._best = run.feasible, run.best()
        rate = rate_text(run.plans, time.monotonic() - self._started).replace("trial", "plan")
        self._view._progress.update(self._task, completed=run.recorded, rate=rate, status=self._status())

    def record(self, outcome: Outcome | None) -> None:
        if outcome is not None:
            self._judge(outcome)
        self._done_here += 1
        rate = rate_text(self._done_here, time.monotonic() - self._started)
        self._view._progress.update(self._task, advance=1, rate=rate, status=self._status())

    def _judge(self, outcome: Outcome) -> None:
        if self._resolved is None or not outcome.feasible:
            return
        self._feasible += 1
        for name, direction in zip(self._resolved.objectives, self._resolved.directions):
            value = outcome.metrics[name]
            old = self._best.get(name)
            if old is None or (value < old if direction == "minimize" else value > old):
                self._best[name] = value

    def _status(self) -> str:
        if self._resolved is None:
            return ""
        best = "  ".join(f"{name}={value:.4g}" for name, value in self._best.items()) or "no feasible trial yet"
        return f"feasible {self._feasible}  best: {best}"
