"""The packet engine's event queue (a radix heap with FIFO buckets) against sorting by (time,
order of scheduling): the order ns-3 and the engine promise for events at equal times."""

import numpy as np
import pytest

from simulators.packet._engine import _Q_ENTRY, _grow_queue, _pop, _push, _queue


@pytest.mark.parametrize("seed", range(5))
def test_events_come_out_by_time_then_order_of_scheduling(seed):
    """A simulation's pattern: each event taken out schedules 0-3 more at or after its time, many
    at equal times (a few distinct delays, some zero); the queue grows past its first room."""
    rng = np.random.default_rng(seed)
    queue = _queue(32)
    scheduled = []  # (time, sequence, payload) of every event, in order of scheduling
    now = 0
    for a in range(20):
        t = int(rng.choice([0, 5, 5, 1 << 20]))
        _push(queue, t, a % 9, a)
        scheduled.append((t, len(scheduled), a))
    taken = []
    while queue[1, 0] > 0:
        if queue[1, 0] + 8 >= len(queue) - _Q_ENTRY:  # room for what one event schedules, as the engine keeps
            queue = _grow_queue(queue)
        t, kind, a = _pop(queue)
        assert t >= now
        now = t
        taken.append((t, a))
        if len(scheduled) < 3000:
            for _ in range(int(rng.integers(0, 4))):
                b = len(scheduled)
                at = now + int(rng.choice([0, 1, 120_160, 60_080, 1_000_000, 1 << 40]))
                _push(queue, at, b % 9, b)
                scheduled.append((at, b, b))
    assert len(taken) == len(scheduled)
    assert taken == [(t, a) for t, _, a in sorted(scheduled)]


def test_the_kind_and_argument_come_back():
    queue = _queue(4)
    _push(queue, 7, 8, 123_456_789)
    assert _pop(queue) == (7, 8, 123_456_789)
    assert queue[1, 0] == 0
