"""summary.md: the best feasible candidate of each objective, the command that reproduces it, and
the final hypervolume; what a reader of a study wants first, in a file that diffs well."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from dse.evaluation.space import SearchSpace
from dse.search.hypervolume import MAX_OBJECTIVES, REFERENCE_MARGIN, HypervolumeHistory
from dse.search.level_records import LevelProgress
from dse.spec.resolved import ResolvedStudy


def summary_markdown(
    trials: pd.DataFrame,
    front: pd.DataFrame,
    resolved: ResolvedStudy,
    history: HypervolumeHistory | None,
    spec_path: Path,
    fidelity: pd.DataFrame | None = None,
    ladder: Sequence[LevelProgress] = (),
) -> str:
    lines = [
        f"# {resolved.study.name}",
        "",
        f"{len(trials)} finished trials, {int(trials['feasible'].sum())} feasible, "
        f"{len(front)} on the Pareto front. Objectives: {objectives_text(resolved)}.",
    ]
    if front.empty:
        lines += ["", "No feasible trial, so no best candidate."]
    else:
        lines += _best_sections(front, resolved, spec_path)
    if ladder:
        lines += ["", "## Fidelity ladder", "", *ladder_lines(ladder, fidelity, resolved)]
    lines += ["", "## Hypervolume", "", hypervolume_text(history, resolved), ""]
    return "\n".join(lines)


def objectives_text(resolved: ResolvedStudy) -> str:
    """The objectives with their directions on one line: `max tokens_per_s_per_gpu, min usd_per_mtok`."""
    return ", ".join(f"{d[:3]} {m}" for m, d in zip(resolved.objectives, resolved.directions))


def _best_sections(front: pd.DataFrame, resolved: ResolvedStudy, spec_path: Path) -> list[str]:
    """A section per objective: its best candidate's metrics and the command that reproduces it."""
    space = SearchSpace.from_study(resolved)
    named = dict.fromkeys([*resolved.objectives, *resolved.kind.metrics])
    metrics = [m for m in named if m in front.columns]
    lines = []
    for objective, direction in zip(resolved.objectives, resolved.directions):
        row = best_row(front, objective, direction)
        lines += [
            "",
            f"## Best {objective} ({direction})",
            "",
            f"Trial {row['trial']}: {objective} = **{row[objective]:.6g}**{_at_level(row)}",
            "",
            "| metric | value |",
            "|---|---|",
            *(f"| {m} | {row[m]:.6g} |" for m in metrics),
            "",
            "Reproduce:",
            "",
            "```",
            reproduce_command(row, space, spec_path),
            "```",
        ]
    return lines


def _at_level(row: pd.Series) -> str:
    return f" (at the {row['fidelity']} level)" if "fidelity" in row.index else ""


def ladder_lines(ladder: Sequence[LevelProgress], fidelity: pd.DataFrame | None, resolved: ResolvedStudy) -> list[str]:
    """How many candidates each level saw and how long it took, then each promoted candidate's
    first objective and rank at every level (fidelity.csv holds every objective)."""
    lines = [f"- {p.describe()}" for p in ladder]
    if fidelity is None or fidelity.empty:
        return lines
    levels = ["analytical", *(p.level for p in ladder)]
    first = resolved.objectives[0]
    lines += [
        "",
        f"Step time (iteration_time_s) at each level, and the rank by {first} there (among the "
        "candidates that level evaluated):",
        "",
        "| trial | ranked at | " + " | ".join(levels) + " |",
        "|---|---|" + "---|" * len(levels),
    ]
    for _, row in fidelity.iterrows():
        cells = [_level_cell(row, level) for level in levels]
        lines.append(f"| {row['trial']} | {row['fidelity']} | " + " | ".join(cells) + " |")
    return lines


def _level_cell(row: pd.Series, level: str) -> str:
    value, rank = row.get(f"iteration_time_s_{level}"), row.get(f"rank_{level}")
    if value is None or pd.isna(value):
        return "–"
    return f"{value:.4g} s (#{rank})" if rank is not None and not pd.isna(rank) else f"{value:.4g} s (infeasible)"


def best_row(front: pd.DataFrame, objective: str, direction: str) -> pd.Series:
    """The front's best candidate in one objective (the front always holds the best feasible
    value; among ties, the first row, i.e. the best in the first objective)."""
    column = front[objective]
    return front.loc[column.idxmin() if direction == "minimize" else column.idxmax()]


def reproduce_command(row: pd.Series, space: SearchSpace, spec_path: Path) -> str:
    """`dse simulate` with a `--set` for every knob the spec leaves open or the row sets apart
    from the spec's single value, so it evaluates exactly this candidate."""
    params = space.params_of_row(row)
    chosen = [
        k
        for k in space.knobs
        if params[k] is not None and (len(space.values[k]) > 1 or params[k] != space.values[k][0])
    ]
    return " ".join(["dse simulate", shlex.quote(str(spec_path)), *(f"--set {k}={_text(params[k])}" for k in chosen)])


def hypervolume_text(history: HypervolumeHistory | None, resolved: ResolvedStudy) -> str:
    """The final hypervolume with its reference point, or why there is none."""
    if len(resolved.objectives) > MAX_OBJECTIVES:
        return f"Not computed: the exact method covers up to {MAX_OBJECTIVES} objectives."
    if history is None:
        return "None: no feasible trial."
    reference = ", ".join(
        f"{m} = {r:.6g} ({d})" for m, r, d in zip(resolved.objectives, history.reference, resolved.directions)
    )
    return (
        f"{history.final:.6g} after {len(history.values)} trials: the share of the box between the best "
        f"feasible value of each objective and the reference point ({reference}; the worst feasible "
        f"value pushed {REFERENCE_MARGIN:.0%} further out) that the front dominates."
    )


def _text(value) -> str:
    """A knob value as `--set` reads it (booleans as YAML writes them)."""
    return str(value).lower() if isinstance(value, bool) else str(value)
