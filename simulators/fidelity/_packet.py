"""The packet level: the compiled packet engine (simulators.packet) runs every group's flows at
once on the fabric graph with ECMP routes, with PFC, ECN and the chosen congestion control on
(RoceSettings' defaults: DCQCN; `congestion_control`, `pfc`, `ecn` and the other RoceSettings
fields are its options). The engine loads on first use, so importing the ladder stays light."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from simulators._errors import SpecError
from simulators.fidelity._level import NetworkLevel, SimulatedLevel, register
from simulators.network import FlowArrays, Link


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

    def makespan_s(self, links: Sequence[Link], flows: FlowArrays, switches: set[int]) -> float:
        from simulators.packet import RoceSettings, simulate

        result = simulate(links, flows, self.roce or RoceSettings(), switches)
        return float(result.finish_s.max())


register(PacketLevel())
