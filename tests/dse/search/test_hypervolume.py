"""Hypervolume: hand-computed volumes, brute force on integer grids, and the study history."""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dse.search.hypervolume import MAX_OBJECTIVES, hypervolume, hypervolume_history, reference_point


def test_three_points_in_two_objectives():
    # Staircase under (4, 4): columns of width 1 and heights 1, 2, 3.
    assert hypervolume([(1, 3), (2, 2), (3, 1)], (4, 4)) == pytest.approx(6.0)


def test_three_objectives_by_slices():
    # (1,2,1) and (2,1,1) under (3,3,3): boxes of 2*1*2 and 1*2*2 sharing 1*1*2, so 6. Adding
    # (1,1,2): for z in [1,2) the first two cover 3 of the xy square, for z in [2,3) it covers 4.
    assert hypervolume([(1, 2, 1), (2, 1, 1)], (3, 3, 3)) == pytest.approx(6.0)
    assert hypervolume([(1, 2, 1), (2, 1, 1), (1, 1, 2)], (3, 3, 3)) == pytest.approx(7.0)


def test_one_and_four_objectives_and_points_beyond_the_reference():
    assert hypervolume([(2,), (3,)], (5,)) == pytest.approx(3.0)
    assert hypervolume([(1, 1, 1, 1)], (2, 3, 4, 5)) == pytest.approx(24.0)
    assert hypervolume([(5, 0), (0, 4)], (4, 4)) == 0.0  # each outside the box in one objective
    assert hypervolume(np.empty((0, 2)), (1, 1)) == 0.0


def test_more_objectives_than_the_exact_method_covers_is_refused():
    with pytest.raises(ValueError, match=f"exact for 1 to {MAX_OBJECTIVES}"):
        hypervolume([(1,) * 5], (2,) * 5)


def _cells(points, reference):
    """Brute force for integer points: count the unit cells some point dominates."""
    cells = itertools.product(*(range(r) for r in reference))
    return sum(any(all(p <= c for p, c in zip(point, cell)) for point in points) for cell in cells)


@settings(max_examples=60, deadline=None)
@given(st.integers(2, 4).flatmap(lambda k: st.lists(st.tuples(*[st.integers(0, 4)] * k), min_size=1, max_size=7)))
def test_matches_brute_force_on_integer_grids(points):
    reference = (5,) * len(points[0])
    assert hypervolume(points, reference) == pytest.approx(_cells(points, reference))


def test_reference_is_the_worst_feasible_value_ten_percent_further_out():
    values = np.array([[10.0, 2.0], [20.0, 1.0]])
    assert reference_point(values, ["maximize", "minimize"]) == pytest.approx([9.0, 2.2])


def _random_study(seed, n=80, k=3):
    rng = np.random.default_rng(seed)
    return np.arange(n), rng.uniform(1, 10, size=(n, k)), rng.random(n) < 0.7


@pytest.mark.parametrize("seed", range(5))
def test_history_never_decreases_and_ends_at_the_front_of_all_feasible_trials(seed):
    trials, values, feasible = _random_study(seed)
    directions = ["minimize", "maximize", "minimize"]
    history = hypervolume_history(trials, values, feasible, directions)
    steps = np.diff(history.values)
    assert (steps >= 0).all() and (steps > 0).any()
    assert history.trials == tuple(trials)
    # The last value, recomputed from scratch: every feasible point scaled to best 0, reference 1.
    sign = np.array([1.0, -1.0, 1.0])
    costs = values[feasible] * sign
    best = costs.min(axis=0)
    scaled = (costs - best) / (np.array(history.reference) * sign - best)
    assert history.final == pytest.approx(hypervolume(scaled, (1, 1, 1)))
    assert 0 < history.final <= 1


def test_history_is_the_same_for_a_maximised_objective_and_its_negated_minimised_twin():
    trials, values, feasible = _random_study(11, k=2)
    maximised = hypervolume_history(trials, values, feasible, ["maximize", "minimize"])
    minimised = hypervolume_history(trials, values * [-1, 1], feasible, ["minimize", "minimize"])
    assert maximised.values == pytest.approx(minimised.values)
    assert maximised.reference == pytest.approx(np.array(minimised.reference) * [-1, 1])


def test_history_holds_zero_until_the_first_feasible_trial():
    values = np.array([[1.0, 1.0], [2.0, 3.0], [3.0, 2.0], [1.0, 1.0]])
    history = hypervolume_history([0, 1, 2, 3], values, [False, True, True, False], ["minimize"] * 2)
    assert history.values[0] == 0
    assert history.values[1] > 0 and history.values[3] == history.values[2]  # an infeasible trial changes nothing


def test_history_needs_a_feasible_trial():
    with pytest.raises(ValueError, match="no feasible trial"):
        hypervolume_history([0], [[1.0, 2.0]], [False], ["minimize", "minimize"])
