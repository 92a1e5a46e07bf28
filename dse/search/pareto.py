"""Pareto fronts: which points no other point beats in every objective."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np


def direction_signs(directions: Sequence[str]) -> np.ndarray:
    """+1 for minimised objectives, -1 for maximised: multiplied in, everything is minimised."""
    return np.array([1.0 if d == "minimize" else -1.0 for d in directions])


def dominates(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """[i, j]: row i of `a` dominates row j of `b` (costs, every objective minimised): at least
    as good in every objective and strictly better in one."""
    no_worse = np.all(a[:, None, :] <= b[None, :, :], axis=2)
    better = np.any(a[:, None, :] < b[None, :, :], axis=2)
    return no_worse & better


def pareto_mask(values: np.ndarray, directions: Sequence[str]) -> np.ndarray:
    """Boolean mask of the non-dominated rows of `values` (n points x k objectives).

    Equal points do not dominate each other, so duplicates stay on the front. Vectorised in
    blocks: O(n^2 k) comparisons, fine for the ~1e4 points a study holds.
    """
    points = np.asarray(values, dtype=float)
    if points.ndim != 2 or points.shape[1] != len(directions):
        raise ValueError(f"values of shape {points.shape} do not match {len(directions)} directions")
    costs = points * direction_signs(directions)  # everything minimised from here on
    n = len(costs)
    mask = np.ones(n, dtype=bool)
    block = max(1, 4_000_000 // max(1, n * costs.shape[1]))
    for start in range(0, n, block):
        mask[start : start + block] = ~dominates(costs, costs[start : start + block]).any(axis=0)
    return mask


def pareto_layers(values: np.ndarray, directions: Sequence[str], enough: int) -> Iterator[np.ndarray]:
    """Row indices of `values` layer by layer of non-dominated sorting (the front, then the front
    of the rest...), until the layers given hold at least `enough` rows or none are left."""
    left, given = np.arange(len(values)), 0
    while len(left) and given < enough:
        mask = pareto_mask(values[left], directions)
        yield left[mask]
        given += int(mask.sum())
        left = left[~mask]
