import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from dse.search.pareto import pareto_mask


def brute_force(points, directions):
    sign = np.array([1 if d == "minimize" else -1 for d in directions])
    costs = points * sign
    keep = []
    for i, p in enumerate(costs):
        dominated = any(np.all(q <= p) and np.any(q < p) for j, q in enumerate(costs) if j != i)
        keep.append(not dominated)
    return np.array(keep)


@settings(max_examples=200, deadline=None)
@given(
    arrays(np.float64, st.tuples(st.integers(1, 40), st.integers(1, 4)), elements=st.integers(0, 6).map(float)),
    st.data(),
)
def test_mask_matches_brute_force(points, data):
    directions = data.draw(
        st.lists(st.sampled_from(["minimize", "maximize"]), min_size=points.shape[1], max_size=points.shape[1])
    )
    assert np.array_equal(pareto_mask(points, directions), brute_force(points, directions))


def test_known_front():
    points = np.array([[1.0, 5.0], [2.0, 2.0], [3.0, 3.0], [5.0, 1.0], [2.0, 2.0]])
    assert pareto_mask(points, ["minimize", "minimize"]).tolist() == [True, True, False, True, True]
    assert pareto_mask(points, ["maximize", "maximize"]).tolist() == [True, False, True, True, False]
