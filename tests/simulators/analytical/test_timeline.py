"""Pipeline schedules against hand-drawn timelines (no communication unless stated)."""

import numpy as np
import pytest

from simulators.analytical._timeline import (
    GPIPE,
    INTERLEAVED,
    ONE_F_ONE_B,
    ZB_H1,
    make_pipeline_batch,
    simulate_pipelines,
)


def run(pp, m, schedule, f=1.0, b=2.0, w=0.0, v=1, send=0.0):
    batch = make_pipeline_batch([pp], [v], [m], [schedule], [send], [f] * pp, [b] * pp, [w] * pp)
    makespan, stage_end = simulate_pipelines(batch)
    return makespan[0], stage_end


@pytest.mark.parametrize("pp,m", [(1, 1), (1, 8), (2, 2), (4, 4), (4, 16), (8, 3), (8, 64)])
@pytest.mark.parametrize("schedule", [GPIPE, ONE_F_ONE_B])
def test_gpipe_and_1f1b_take_m_plus_p_minus_1_steps(pp, m, schedule):
    # Bubble = (p-1)/m of the ideal m*(f+b): the classic result (GPipe; Narayanan et al. 2021).
    makespan, _ = run(pp, m, schedule)
    assert makespan == pytest.approx((m + pp - 1) * 3.0)


@pytest.mark.parametrize("pp,m,v", [(2, 4, 2), (4, 8, 2), (4, 16, 4), (8, 16, 3)])
def test_interleaving_divides_the_bubble_by_v(pp, m, v):
    # Per-chunk times are the stage's times divided by v; bubble = (p-1)(f+b)/v.
    makespan, _ = run(pp, m, INTERLEAVED, f=1.0 / v, b=2.0 / v, v=v)
    assert makespan == pytest.approx(m * 3.0 + (pp - 1) * 3.0 / v)


def test_zero_bubble_h1_beats_1f1b_and_keeps_all_work():
    pp, m, f, b, w = 4, 8, 1.0, 1.0, 1.0
    one_f_one_b, _ = run(pp, m, ONE_F_ONE_B, f=f, b=b, w=w)
    zb, _ = run(pp, m, ZB_H1, f=f, b=b, w=w)
    ideal = m * (f + b + w)
    assert one_f_one_b == pytest.approx((m + pp - 1) * (f + b + w))
    assert ideal <= zb < one_f_one_b
    # ZB-H1's bubble is (p-1)(F + B - W) (Qi et al. 2024, Table 1) or better.
    assert zb - ideal <= (pp - 1) * (f + b - w) + 1e-9
    assert zb == 27.0  # pins the tie-break: earliest stage clock first, then lowest stage index


def test_zero_bubble_h1_holds_no_more_micro_batches_than_the_first_stage_of_1f1b():
    """pp 2, m 3, a slower forward on stage 1 (2 against 1; every B and W 1), drawn by hand with
    the rule "forwards run - weight gradients done <= min(pp, m) = 2 before a forward":
    stage 1: F0 1-3, B0 3-4, F1 4-6, B1 6-7, then two Ws deferred and two in flight: a W 7-8
    before F2 8-10, B2 10-11, Ws 11-13; stage 0: F0 0-1, F1 1-2, B0 4-5, a W 5-6 before F2 6-7,
    B1 7-8, a W 8-9 filling the wait, B2 11-12, W 12-13. Deferring without the bound, stage 0
    runs F2 at 5-6 and ends at 12."""
    batch = make_pipeline_batch([2], [1], [3], [ZB_H1], [0.0], [1.0, 2.0], [1.0, 1.0], [1.0, 1.0])
    makespan, stage_end = simulate_pipelines(batch)
    assert makespan[0] == 13.0 and stage_end.tolist() == [13.0, 13.0]


def test_sends_delay_each_stage_boundary():
    pp, m, send = 4, 1, 0.5
    makespan, _ = run(pp, m, ONE_F_ONE_B, send=send)
    # One micro-batch: forward through 4 stages and back, 2*(pp-1) transfers on the path.
    assert makespan == pytest.approx(pp * 3.0 + 2 * (pp - 1) * send)


def test_stage_end_times_and_batch_of_mixed_candidates():
    batch = make_pipeline_batch(
        [1, 4], [1, 1], [4, 8], [ONE_F_ONE_B, ONE_F_ONE_B], [0.0, 0.0], [1.0] * 5, [2.0] * 5, [0.0] * 5
    )
    makespan, stage_end = simulate_pipelines(batch)
    assert makespan.tolist() == pytest.approx([12.0, 33.0])
    # In 1F1B every stage ends with the last backward; stage 0 last, one step later than stage 1.
    assert stage_end[1:].tolist() == pytest.approx([33.0, 31.0, 29.0, 27.0])


def test_unequal_stages_wait_for_the_slowest():
    batch = make_pipeline_batch([2], [1], [8], [ONE_F_ONE_B], [0.0], [1.0, 2.0], [2.0, 4.0], [0.0, 0.0])
    makespan, _ = simulate_pipelines(batch)
    assert makespan[0] == pytest.approx(8 * 6.0 + 3.0)  # the slow stage is busy 8*6, plus stage 0's F and B


def test_invalid_batches_are_rejected():
    with pytest.raises(ValueError, match="divisible by pp"):
        make_pipeline_batch([4], [2], [6], [INTERLEAVED], [0.0], [1.0] * 4, [1.0] * 4, [0.0] * 4)
    with pytest.raises(ValueError, match="only the interleaved"):
        make_pipeline_batch([4], [2], [8], [ONE_F_ONE_B], [0.0], [1.0] * 4, [1.0] * 4, [0.0] * 4)
    with pytest.raises(ValueError, match="stage times"):
        make_pipeline_batch([4], [1], [8], [ONE_F_ONE_B], [0.0], np.ones(3), np.ones(3), np.ones(3))
