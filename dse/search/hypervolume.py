"""Hypervolume: how much of the objective space a front dominates, one number to watch a study converge.

Exact, by slicing: the volume in k objectives is a sum of slabs along the last objective, each
slab the (k-1)-objective volume of the points below it; two objectives are a sorted sweep.
That costs O(n^(k-1) log n) for n front points, cheap up to four objectives; beyond four the
history is not computed. The history adds each new front point's own share, so a study of
600 trials whose front holds every point still takes seconds (3 or 4 objectives)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from dse.search.pareto import direction_signs, pareto_mask

MAX_OBJECTIVES = 4
REFERENCE_MARGIN = 0.1  # the reference point lies this share of |worst value| beyond the worst


def hypervolume(points: np.ndarray, reference: Sequence[float]) -> float:
    """Volume dominated by `points` (n x k, every objective minimised) and bounded by `reference`.

    Points not strictly better than the reference in every objective add nothing.
    """
    ref = np.asarray(reference, dtype=float)
    if not 1 <= len(ref) <= MAX_OBJECTIVES:
        raise ValueError(f"hypervolume of {len(ref)} objectives: exact for 1 to {MAX_OBJECTIVES}")
    costs = np.asarray(points, dtype=float).reshape(-1, len(ref))
    return _volume(costs[np.all(costs < ref, axis=1)], ref)


def _volume(costs: np.ndarray, ref: np.ndarray) -> float:
    if len(costs) == 0:
        return 0.0
    if costs.shape[1] == 1:
        return float(ref[0] - costs[:, 0].min())
    order = np.argsort(costs[:, -1], kind="stable")
    costs = costs[order]
    depths = np.diff(np.append(costs[:, -1], ref[-1]))
    if costs.shape[1] == 2:  # sweep: below each y, the best x reached so far
        widths = ref[0] - np.minimum.accumulate(costs[:, 0])
        return float(np.dot(widths, depths))
    return float(sum(depth * _volume(costs[: i + 1, :-1], ref[:-1]) for i, depth in enumerate(depths) if depth > 0))


@dataclass(frozen=True)
class HypervolumeHistory:
    """Hypervolume of the feasible front after each finished trial, in trial order.

    Each objective is scaled so the best value any feasible trial reached is 0 and the
    reference point is 1; the hypervolume is then the share of that box the front dominates
    (0 to 1, whatever the units and directions of the objectives).
    """

    trials: tuple[int, ...]
    values: tuple[float, ...]
    reference: tuple[float, ...]  # in the objectives' own units

    @property
    def final(self) -> float:
        return self.values[-1]


def reference_point(values: np.ndarray, directions: Sequence[str]) -> np.ndarray:
    """The worst value of each objective among `values` (feasible points), pushed
    REFERENCE_MARGIN of its magnitude further out (by 1 when the worst value is 0)."""
    values = np.asarray(values, dtype=float)
    sign = direction_signs(directions)
    worst = (values * sign).max(axis=0) * sign
    margin = REFERENCE_MARGIN * np.where(worst != 0, np.abs(worst), 1.0)
    return worst + sign * margin


def hypervolume_history(
    trials: Sequence[int], values: np.ndarray, feasible: Sequence[bool], directions: Sequence[str]
) -> HypervolumeHistory:
    """The history over finished trials (`values` n x k in objective units, one row per trial;
    infeasible rows are ignored). Needs one feasible trial and at most MAX_OBJECTIVES."""
    values = np.asarray(values, dtype=float)
    feasible = np.asarray(feasible, dtype=bool)
    if not feasible.any():
        raise ValueError("hypervolume history: no feasible trial")
    sign = direction_signs(directions)
    reference = reference_point(values[feasible], directions)
    best = (values[feasible] * sign).min(axis=0)
    costs = (values * sign - best) / (reference * sign - best)  # best seen -> 0, reference -> 1
    front = np.empty((0, len(directions)))
    volume, history = 0.0, []
    for cost, ok in zip(costs, feasible):
        if ok and not np.any(np.all(front <= cost, axis=1)):  # not dominated: the front grows
            volume += _contribution(cost, front)
            front = np.vstack([front[~np.all(cost <= front, axis=1)], cost])
        history.append(volume)
    return HypervolumeHistory(tuple(int(t) for t in trials), tuple(history), tuple(reference.tolist()))


def _contribution(point: np.ndarray, front: np.ndarray) -> float:
    """The volume `point` adds to `front` under the reference (1, ..., 1): its own box less what
    the front already covers of it, i.e. the front clipped to the box. Adding points one at a
    time this way keeps each exact computation small, as clipped points mostly dominate each other."""
    clipped = np.maximum(front, point)
    if len(clipped):
        clipped = clipped[pareto_mask(clipped, ["minimize"] * len(point))]
    return max(0.0, float(np.prod(1.0 - point)) - hypervolume(clipped, np.ones(len(point))))
