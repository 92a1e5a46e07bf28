"""Breakdown parts that are differences of two sums: round-off reads 0, a real negative raises."""

import pytest

from simulators.analytical._training import ROUND_OFF_FRACTION, difference_s


def test_round_off_below_zero_reads_zero():
    # the reported case: a pipeline bubble of -6.1e-10 s on a step of about a second
    busy_s = 0.8123456789
    assert difference_s("pipeline_bubble_s", busy_s - 6.1e-10, busy_s, 1.02) == 0.0


def test_positive_difference_is_kept_exactly():
    assert difference_s("pp_comm_s", 1.5, 1.25, 2.0) == 0.25


def test_negative_beyond_round_off_raises_naming_the_part():
    step_s = 2.0
    beyond = 10 * ROUND_OFF_FRACTION * step_s
    with pytest.raises(ArithmeticError, match="pipeline_bubble_s"):
        difference_s("pipeline_bubble_s", 1.0, 1.0 + beyond, step_s)


def test_the_timelines_whole_nanoseconds_allow_half_a_nanosecond_per_operation():
    """The reported case: a 2.019 ms makespan of 24 operations each rounded to a whole ns, 3.07
    ns below the unrounded busy time (1.5e-6 of the step: beyond the relative allowance)."""
    makespan_s, busy_s = 0.002019444, 0.0020194470704563636
    assert busy_s - makespan_s > ROUND_OFF_FRACTION * busy_s
    assert difference_s("pipeline_bubble_s", makespan_s, busy_s, busy_s, operations=24) == 0.0
    with pytest.raises(ArithmeticError, match="pipeline_bubble_s"):
        difference_s("pipeline_bubble_s", makespan_s, busy_s, busy_s, operations=6)  # 3 ns allowed


@pytest.mark.parametrize("plan", [dict(pp=1), dict(num_gpus=16, tp=2, pp=4, dp=2, global_batch=32)])
def test_breakdown_of_a_real_step_has_no_negative_part(plan):
    from tests.simulators.analytical.test_training import run

    parts = run(**plan).breakdown_s
    assert all(value >= 0.0 for value in parts.values()), parts
