"""The packet level: the compiled packet engine runs every group's flows at once on the fabric
graph with ECMP routes (simulators.packet.congestion_factors). networkx and the engine load on
first use, so importing the ladder stays light."""

from __future__ import annotations

from simulators.fidelity._level import NetworkLevel, register
from simulators.network import CongestionFactor, Fabric
from simulators.workload import TrainingCandidate


class PacketLevel(NetworkLevel):
    name = "packet"

    def congestion_factors(
        self, candidate: TrainingCandidate, fabric: Fabric, message_cap_bytes: int
    ) -> list[CongestionFactor]:
        from simulators.packet import congestion_factors

        return congestion_factors(candidate, fabric, message_cap_bytes)


register(PacketLevel())
