"""pareto.png: the main Pareto plot (first two objectives) as a picture for slides and issues.

Drawn on a bare matplotlib Figure (Agg canvas), not pyplot: no global backend or figure state,
so reports can be written from any thread or worker.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from matplotlib.figure import Figure

from dse._text import short
from dse.spec.resolved import ResolvedStudy


def write_pareto_png(trials: pd.DataFrame, front: pd.DataFrame, resolved: ResolvedStudy, path: Path) -> None:
    """Feasible trials in grey, the front on top; with one objective, its value per trial."""
    objectives, directions = resolved.objectives, resolved.directions
    x, y = objectives[:2] if len(objectives) > 1 else ("trial", objectives[0])
    fig = Figure(figsize=(8, 5.5), dpi=120, layout="constrained")
    ax = fig.add_subplot()
    feasible = trials[trials["feasible"]]
    if feasible.empty:
        ax.text(0.5, 0.5, "No feasible trial: nothing to plot", ha="center", va="center", transform=ax.transAxes)
        ax.set_axis_off()
    else:
        ax.scatter(feasible[x], feasible[y], s=14, color="0.75", label=f"feasible trials ({len(feasible)})")
        ordered = front.sort_values(x)
        ax.plot(
            ordered[x],
            ordered[y],
            "o-" if len(objectives) == 2 else "o",
            color="tab:red",
            label=f"Pareto front ({len(front)})",
        )
        ax.set_xlabel(x if x == "trial" else f"{x} ({directions[0]})")
        ax.set_ylabel(f"{y} ({directions[1] if len(objectives) > 1 else directions[0]})")
        ax.grid(alpha=0.3)
        ax.legend()
    more = f"; front over all {len(objectives)} objectives" if len(objectives) > 2 else ""
    ax.set_title(f"{short(resolved.study.name)}: Pareto front{more}")
    fig.savefig(path)
