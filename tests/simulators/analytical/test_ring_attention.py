"""The context-parallel ring priced step by step: each of the cp - 1 overlapped steps costs the
slower of one block's attention kernel and one K/V exchange (closed forms)."""

import pytest

from simulators.analytical._layer_costs import _ring_exposed


def test_exchange_faster_than_each_step_is_hidden():
    # 8 ranks: 7 exchanges of 0.9 ms under 8 steps of 1 ms each.
    assert _ring_exposed(7 * 0.9e-3, 8 * 1e-3, 8) == 0.0


def test_each_slow_exchange_exposes_its_excess():
    # 7 exchanges of 1.5 ms, steps of 1 ms: every overlapped step waits 0.5 ms.
    assert _ring_exposed(7 * 1.5e-3, 8 * 1e-3, 8) == pytest.approx(7 * 0.5e-3)


def test_step_by_step_exposes_what_a_whole_ring_overlap_hides():
    # The ring in all (7 x 1.1 ms) is shorter than all of attention (8 ms), but every
    # exchange outlasts its step's 1 ms kernel: 7 x 0.1 ms wait.
    assert 7 * 1.1e-3 < 8e-3
    assert _ring_exposed(7 * 1.1e-3, 8e-3, 8) == pytest.approx(7 * 0.1e-3)


def test_no_ring_without_context_parallelism():
    assert _ring_exposed(0.0, 1e-3, 1) == 0.0
