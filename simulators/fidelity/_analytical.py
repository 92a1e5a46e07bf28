"""The analytical level: each collective priced alone, as the training model does (no factor)."""

from __future__ import annotations

from simulators.fidelity._level import NetworkLevel, register
from simulators.network import CongestionFactor, Fabric
from simulators.workload import TrainingCandidate


class AnalyticalLevel(NetworkLevel):
    """The ladder's ground floor: bus bandwidth per collective, so no contention to report."""

    name = "analytical"

    def congestion_factors(
        self, candidate: TrainingCandidate, fabric: Fabric, message_cap_bytes: int
    ) -> list[CongestionFactor]:
        return []


register(AnalyticalLevel())
