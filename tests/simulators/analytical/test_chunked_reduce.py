"""Data-parallel gradient reduction per model chunk under the interleaved cool-down
(closed forms of the queue: chunk c starts at -c*spacing*b - b, each reduction takes sync/vpp)."""

import numpy as np
import pytest

from simulators.analytical._training import _chunked_reduce_exposed


def _exposed(sync_s, b_s, vpp, spacing):
    return float(_chunked_reduce_exposed(np.array([sync_s]), np.array([b_s]), np.array([vpp]), np.array([spacing]))[0])


def _queue(sync_s, b_s, vpp, spacing):
    """The queue simulated reduction by reduction, earliest chunk first (independent of the closed form)."""
    end = -np.inf
    for c in reversed(range(vpp)):
        end = max(end, -c * spacing * b_s - b_s) + sync_s / vpp
    return max(0.0, end)


def test_without_interleaving_the_reduction_hides_under_the_last_backward():
    assert _exposed(3.0, 1.0, 1, 4) == pytest.approx(2.0)
    assert _exposed(0.5, 1.0, 1, 4) == 0.0


def test_only_the_last_chunks_share_is_exposed_when_the_cool_down_hides_the_rest():
    # 12 chunks of 0.3 s each, backwards of 0.1 s, 4 apart (0.4 s between chunk ends): only
    # 0.3 - 0.1 exposed, not 3.6 - 12 x 0.1 as under the last micro-batch's backward alone.
    assert _exposed(3.6, 0.1, 12, 4) == pytest.approx(0.2)


def test_a_queue_longer_than_the_cool_down_is_exposed():
    # Chunks of 1.2 s against 0.4 s between chunk ends: 12 x 1.2 - 11 x 0.4 - 0.1.
    assert _exposed(14.4, 0.1, 12, 4) == pytest.approx(9.9)


@pytest.mark.parametrize(
    "sync_s, b_s, vpp, spacing", [(14.4, 0.1, 12, 4), (2.0, 0.3, 4, 2), (0.1, 1.0, 3, 8), (9.0, 0.01, 6, 4)]
)
def test_closed_form_matches_the_queue(sync_s, b_s, vpp, spacing):
    assert _exposed(sync_s, b_s, vpp, spacing) == pytest.approx(_queue(sync_s, b_s, vpp, spacing))
