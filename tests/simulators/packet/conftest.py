"""Fixtures of the packet simulator's tests: an algorithm registered for one test only, and one
whose ACKs' RTT samples are watched."""

from dataclasses import replace

import numba
import numpy as np
import pytest

from simulators.packet import CONGESTION_CONTROLS, register
from simulators.packet._congestion import OWN, RTT_PS


@pytest.fixture
def registered(monkeypatch):
    """`register`, undone when the test ends (the registry's tables are restored after it)."""
    monkeypatch.setattr(CONGESTION_CONTROLS, "_entries", dict(CONGESTION_CONTROLS._entries))
    monkeypatch.setattr(CONGESTION_CONTROLS, "_keys", dict(CONGESTION_CONTROLS._keys))
    return register


@pytest.fixture
def rtt_watched(registered):
    """(entry, from_s) -> `entry`, registered, with three more state columns after its own: the
    lowest and highest RTT sample its ACKs brought from `from_s` on, and their mean."""

    def watched(entry, from_s):
        lo, from_ps = OWN + entry.columns, round(from_s * 1e12)
        start, ack = entry.on_start, entry.on_ack

        @numba.njit
        def on_start(state, params, flow, now_ps):
            state[flow, lo], state[flow, lo + 1], state[flow, lo + 2], state[flow, lo + 3] = np.inf, 0.0, 0.0, 0.0
            start(state, params, flow, now_ps)

        @numba.njit
        def on_ack(state, params, flow, now_ps):
            ack(state, params, flow, now_ps)
            if now_ps >= from_ps:
                rtt = state[flow, RTT_PS]
                state[flow, lo] = min(state[flow, lo], rtt)
                state[flow, lo + 1] = max(state[flow, lo + 1], rtt)
                state[flow, lo + 3] += 1.0
                state[flow, lo + 2] += (rtt - state[flow, lo + 2]) / state[flow, lo + 3]

        columns = entry.columns + 4
        name = f"{entry.name}-rtt"
        return registered(replace(entry, name=name, aliases=(), columns=columns, on_start=on_start, on_ack=on_ack))

    return watched
