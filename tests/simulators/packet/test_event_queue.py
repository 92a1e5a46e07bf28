"""The packet engine's event queue (a timing wheel of ordered slots for near events, a radix heap
with FIFO buckets for far ones) against sorting by (time, order of scheduling): the order ns-3
and the engine promise for events at equal times."""

import numpy as np
import pytest

from simulators.packet._engine import _COUNT, _Q_SHIFT, _Q_SLOTS, _grow_queue, _pop, _push, _queue, _room

HORIZON = _Q_SLOTS << _Q_SHIFT  # the wheel's reach: beyond it an event waits in the radix heap


@pytest.mark.parametrize("seed", range(5))
def test_events_come_out_by_time_then_order_of_scheduling(seed):
    """A simulation's pattern: each event taken out schedules 0-3 more at or after its time, many
    at equal times (a few distinct delays, some zero; some within one slot of the wheel, some at
    and beyond its reach); the queue grows past its first room."""
    rng = np.random.default_rng(seed)
    queue = _queue(32)
    scheduled = []  # (time, sequence, payload) of every event, in order of scheduling
    now = 0
    for a in range(20):
        t = int(rng.choice([0, 5, 5, 1 << 20]))
        _push(queue, t, a % 9, a)
        scheduled.append((t, len(scheduled), a))
    taken = []
    while queue[_COUNT] > 0:
        if _room(queue) <= 8:  # room for what one event schedules, as the engine keeps
            queue = _grow_queue(queue)
        t, kind, a = _pop(queue)
        assert t >= now
        now = t
        taken.append((t, a))
        if len(scheduled) < 3000:
            for _ in range(int(rng.integers(0, 4))):
                b = len(scheduled)
                delays = [0, 1, 600, 700, 120_160, 60_080, 1_000_000, HORIZON - 1, HORIZON, 3 * HORIZON, 1 << 40]
                at = now + int(rng.choice(delays))
                _push(queue, at, b % 9, b)
                scheduled.append((at, b, b))
    assert len(taken) == len(scheduled)
    assert taken == [(t, a) for t, _, a in sorted(scheduled)]


def test_the_kind_and_argument_come_back():
    queue = _queue(4)
    _push(queue, 7, 8, 123_456_789)
    assert _pop(queue) == (7, 8, 123_456_789)
    assert queue[_COUNT] == 0


def test_a_far_event_goes_before_a_near_one_at_its_time_scheduled_after_it():
    """Scheduled beyond the wheel's reach, an event waits in the radix heap; one scheduled later
    for the same time lands on the wheel, and still comes out second."""
    queue = _queue(8)
    _push(queue, 2 * HORIZON, 1, 10)  # far
    _push(queue, 3 * HORIZON // 2, 2, 20)  # far
    assert _pop(queue) == (3 * HORIZON // 2, 2, 20)
    _push(queue, 2 * HORIZON, 3, 30)  # now within reach: on the wheel
    _push(queue, 2 * HORIZON - 1, 4, 40)
    assert [_pop(queue) for _ in range(3)] == [(2 * HORIZON - 1, 4, 40), (2 * HORIZON, 1, 10), (2 * HORIZON, 3, 30)]
    assert queue[_COUNT] == 0
