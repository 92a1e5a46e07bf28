"""No congestion control: every flow sends at the line rate of its first link, whatever the
fabric marks (the ns-3 UDP reference runs; PFC alone, when switched on, holds senders back)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simulators.packet._congestion import CongestionControl, Params, no_cnp, nothing, register


@dataclass(frozen=True)
class LineRate(Params):
    """No parameters."""

    def vector(self) -> np.ndarray:
        return np.zeros(0)

    def floor_bps(self, line_bps: float) -> float:
        return line_bps


NONE = register(
    CongestionControl(
        name="none",
        params=LineRate,
        columns=0,
        on_start=nothing,
        on_timer=nothing,
        on_marked=no_cnp,
        on_cnp=nothing,
        on_ack=nothing,
    )
)
