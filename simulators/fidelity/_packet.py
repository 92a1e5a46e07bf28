"""The packet level: the compiled packet engine (simulators.packet) runs every group's flows at
once on the fabric graph with ECMP routes, with PFC, ECN and the chosen congestion control on
(RoceSettings' defaults: DCQCN, no random loss, go-back-N; `congestion_control`, `pfc`, `ecn`,
`loss_rate`, `loss_recovery` and the other RoceSettings fields are its options). On an
adaptive-routing family the engine's switches spray packets (RoceSettings.adaptive_routing).
The engine loads on first use, so importing the ladder stays light."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from simulators._errors import SpecError
from simulators.fidelity._level import NetworkLevel, SimulatedLevel, register
from simulators.network import CongestionFactor, Fabric, FlowArrays, Link, get_family
from simulators.workload import TrainingCandidate


@dataclasses.dataclass(frozen=True)
class PacketLevel(SimulatedLevel):
    name = "packet"
    roce: Any = None  # simulators.packet.RoceSettings; None: its defaults

    def configured(self, options: Mapping[str, Any]) -> NetworkLevel:
        from simulators.packet import RoceSettings

        allowed = [f.name for f in dataclasses.fields(RoceSettings)]
        unknown = [k for k in options if k not in allowed]
        if unknown:
            raise SpecError(f"fidelity.packet.{unknown[0]}: not allowed; allowed: {', '.join(allowed)}")
        return PacketLevel(RoceSettings(**options))

    def congestion_factors(
        self, candidate: TrainingCandidate, fabric: Fabric, message_cap_bytes: int
    ) -> list[CongestionFactor]:
        """As every simulated level, with the switches of an adaptive-routing family (Spectrum-X)
        spraying packets per packet in the engine, on the fabric's real links."""
        from simulators.packet import RoceSettings

        roce = self.roce or RoceSettings()
        if get_family(fabric.family).adaptive_routing and not roce.adaptive_routing:
            sprayed = dataclasses.replace(self, roce=dataclasses.replace(roce, adaptive_routing=True))
            return sprayed.congestion_factors(candidate, fabric, message_cap_bytes)
        return super().congestion_factors(candidate, fabric, message_cap_bytes)

    def makespan_s(self, links: Sequence[Link], flows: FlowArrays, switches: set[int]) -> float:
        from simulators.packet import RoceSettings, simulate

        roce = self.roce or RoceSettings()
        result = simulate(links, flows, roce, switches)
        if result.failed.any():
            raise SpecError(
                f"fidelity.packet: {int(result.failed.sum())} flows failed after {roce.retries} retransmission "
                "timeouts in a row (the job would stop); allowed: a fabric that delivers"
            )
        if np.isnan(result.finish_s).any():
            raise SpecError(
                f"fidelity.packet.loss_recovery: {roce.recovery()!r} left flows that lost packets unfinished; "
                "allowed here: go_back_n, selective_repeat"
            )
        return float(result.finish_s.max())

    def kernels(self) -> tuple:
        from simulators.packet._engine import _simulate

        return (_simulate,)


register(PacketLevel())
