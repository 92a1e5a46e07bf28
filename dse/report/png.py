"""pareto.png: the main Pareto plot (first two objectives) as a picture for slides and issues.

Drawn on a bare matplotlib Figure (Agg canvas), not pyplot: no global backend or figure state,
so reports can be written from any thread or worker. What is drawn (`ParetoPlot`, plain values)
is taken from the study apart from the drawing, so `dse search` can draw it in another process
(`PngProcess`): importing matplotlib and drawing take ~0.5 s of one core, which the search's
other core spends while this process writes the other files (benchmarks/RESULTS.md, issue 20).
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from dse._text import short

if TYPE_CHECKING:
    import pandas as pd

    from dse.spec.resolved import ResolvedStudy


@dataclass(frozen=True)
class ParetoPlot:
    """What pareto.png shows: the feasible trials in grey and the front on top (None: no
    feasible trial), the axis labels, the title, and whether the front is drawn as a line."""

    title: str
    xlabel: str
    ylabel: str
    feasible: tuple[np.ndarray, np.ndarray] | None
    front: tuple[np.ndarray, np.ndarray]
    joined: bool


def pareto_plot(trials: pd.DataFrame, front: pd.DataFrame, resolved: ResolvedStudy) -> ParetoPlot:
    """Feasible trials and the front on the first two objectives; with one objective, its value per trial."""
    objectives, directions = resolved.objectives, resolved.directions
    x, y = objectives[:2] if len(objectives) > 1 else ("trial", objectives[0])
    feasible = trials[trials["feasible"]]
    ordered = front.sort_values(x)
    more = f"; front over all {len(objectives)} objectives" if len(objectives) > 2 else ""
    return ParetoPlot(
        title=f"{short(resolved.study.name)}: Pareto front{more}",
        xlabel=x if x == "trial" else f"{x} ({directions[0]})",
        ylabel=f"{y} ({directions[1] if len(objectives) > 1 else directions[0]})",
        feasible=None if feasible.empty else (feasible[x].to_numpy(), feasible[y].to_numpy()),
        front=(ordered[x].to_numpy(), ordered[y].to_numpy()),
        joined=len(objectives) == 2,
    )


def draw_pareto_png(plot: ParetoPlot, path: Path) -> None:
    """Write `plot` to `path` as a PNG."""
    from matplotlib.figure import Figure  # a third of a second to import: only where a picture is drawn

    fig = Figure(figsize=(8, 5.5), dpi=120, layout="constrained")
    ax = fig.add_subplot()
    if plot.feasible is None:
        ax.text(0.5, 0.5, "No feasible trial: nothing to plot", ha="center", va="center", transform=ax.transAxes)
        ax.set_axis_off()
    else:
        ax.scatter(*plot.feasible, s=14, color="0.75", label=f"feasible trials ({len(plot.feasible[0])})")
        ax.plot(
            *plot.front, "o-" if plot.joined else "o", color="tab:red", label=f"Pareto front ({len(plot.front[0])})"
        )
        ax.set_xlabel(plot.xlabel)
        ax.set_ylabel(plot.ylabel)
        ax.grid(alpha=0.3)
        ax.legend()
    ax.set_title(plot.title)
    fig.savefig(path)


class PngProcess:
    """A process that imports matplotlib as soon as it starts, then draws the one ParetoPlot it
    is sent (`send`, then `wait`). Started early, its import overlaps work that keeps only one
    core busy here; `close()` ends it if it is still running (never sent one)."""

    def __init__(self) -> None:
        command = [sys.executable, "-m", "dse.report.png"]
        # its own session: a Ctrl-C meant for the search does not end it before the reports
        self._process = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True
        )
        self._sent: tuple[ParetoPlot, Path] | None = None

    def send(self, plot: ParetoPlot, path: Path) -> None:
        """Have `plot` drawn to `path` there; `wait()` for it."""
        self._sent = (plot, Path(path).resolve())
        try:
            self._process.stdin.write(pickle.dumps(self._sent))
            self._process.stdin.close()
        except OSError:  # it ended before reading (BrokenPipeError): wait() draws it here
            pass

    def wait(self) -> None:
        """Until the plot sent is drawn. Should that process have failed, the plot is drawn here,
        which raises the failure itself if it was not the process's own."""
        self._process.stderr.read()
        if self._process.wait() != 0:
            draw_pareto_png(*self._sent)

    def close(self) -> None:
        if self._process.poll() is None:
            self._process.kill()
            self._process.wait()
        for pipe in (self._process.stdin, self._process.stderr):
            pipe.close()


def _serve() -> None:
    """The other process: matplotlib first (while the search runs), then the plot from stdin."""
    import matplotlib.figure  # noqa: F401 - loaded before the plot arrives, which is the point

    plot, path = pickle.load(sys.stdin.buffer)
    draw_pareto_png(plot, path)
    os._exit(0)  # drawn and written: the search waits for this exit, not for matplotlib's teardown


if __name__ == "__main__":
    _serve()
