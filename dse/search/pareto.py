"""Pareto fronts: which points no other point beats in every objective."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def direction_signs(directions: Sequence[str]) -> np.ndarray:
    """+1 for minimised objectives, -1 for maximised: multiplied in, everything is minimised."""
    return np.array([1.0 if d == "minimize" else -1.0 for d in directions])


def pareto_mask(values: np.ndarray, directions: Sequence[str]) -> np.ndarray:
    """Boolean mask of the non-dominated rows of `values` (n points x k objectives).

    A point is dominated when another is at least as good in every objective and strictly
    better in one. Equal points do not dominate each other, so duplicates stay on the front.
    Vectorised in blocks: O(n^2 k) comparisons, fine for the ~1e4 points a study holds.
    """
    points = np.asarray(values, dtype=float)
    if points.ndim != 2 or points.shape[1] != len(directions):
        raise ValueError(f"values of shape {points.shape} do not match {len(directions)} directions")
    costs = points * direction_signs(directions)  # everything minimised from here on
    n = len(costs)
    mask = np.ones(n, dtype=bool)
    block = max(1, 4_000_000 // max(1, n * costs.shape[1]))
    for start in range(0, n, block):
        part = costs[start : start + block, None, :]  # (b, 1, k)
        no_worse = np.all(costs[None, :, :] <= part, axis=2)  # others no worse than each point
        better = np.any(costs[None, :, :] < part, axis=2)
        mask[start : start + block] = ~np.any(no_worse & better, axis=1)
    return mask
