"""The live view of a search: trials done, feasible count and the best of each objective."""

from __future__ import annotations

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from dse.checks import ResolvedStudy
from dse.evaluate import Outcome


class SearchProgress:
    """A rich progress bar fed by the engine's callbacks (one per told trial)."""

    def __init__(self, resolved: ResolvedStudy, console: Console) -> None:
        self._resolved = resolved
        self._best: dict[str, float] = {}
        self._feasible = 0
        self._progress = Progress(
            TextColumn("[bold]trials"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("{task.fields[status]}"),
            console=console,
            transient=False,
        )
        self._task = None

    def __enter__(self) -> SearchProgress:
        self._progress.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self._progress.__exit__(*exc)

    def start(self, total: int, prior: list[Outcome]) -> None:
        """Show the bar; `prior` are the outcomes a resumed study already holds."""
        for outcome in prior:
            self._record(outcome)
        self._task = self._progress.add_task("search", total=total, completed=len(prior), status=self._status())

    def trial(self, number: int, outcome: Outcome) -> None:
        self._record(outcome)
        self._progress.update(self._task, advance=1, status=self._status())

    def _record(self, outcome: Outcome) -> None:
        if outcome.feasible:
            self._feasible += 1
            for name, direction in zip(self._resolved.objectives, self._resolved.directions):
                value = outcome.metrics[name]
                old = self._best.get(name)
                if old is None or (value < old if direction == "minimize" else value > old):
                    self._best[name] = value

    def _status(self) -> str:
        best = "  ".join(f"{name}={value:.4g}" for name, value in self._best.items()) or "no feasible trial yet"
        return f"feasible {self._feasible}  best: {best}"
