"""No congestion control: every flow sends at the line rate of its first link, whatever the
fabric marks (the ns-3 UDP reference runs; PFC alone, when switched on, holds senders back)."""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np

from simulators.packet._congestion import CongestionControl, Params, register


@dataclass(frozen=True)
class LineRate(Params):
    """No parameters."""

    def vector(self) -> np.ndarray:
        return np.zeros(0)

    def floor_bps(self, line_bps: float) -> float:
        return line_bps


@numba.njit(cache=True)
def _nothing(state, params, flow, now_ps):  # pragma: no cover - compiled
    pass


@numba.njit(cache=True)
def _no_cnp(state, params, flow, now_ps):  # pragma: no cover - compiled
    return False


NONE = register(
    CongestionControl(
        name="none",
        params=LineRate,
        columns=0,
        on_start=_nothing,
        on_timer=_nothing,
        on_marked=_no_cnp,
        on_cnp=_nothing,
        on_ack=_nothing,
    )
)
