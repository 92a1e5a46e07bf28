"""The flow level: the compiled flow simulator (simulators.flow) runs every group's flows at once
on the fabric graph with ECMP routes (adaptive routing, where the family has it, as load spread
over every equal-cost path), each link's bandwidth shared max-min fairly among the flows
crossing it. No queues, PFC or congestion control: it sees where routes collide and links are
oversubscribed, in a fraction of the packet level's time. The simulator loads on first use."""

from __future__ import annotations

from collections.abc import Sequence

from simulators.fidelity._level import SimulatedLevel, register
from simulators.network import FlowArrays, Link


class FlowLevel(SimulatedLevel):
    name = "flow"
    spreads_adaptive_routing = True  # a fluid spreads over every equal-cost path as per-packet AR does

    def makespan_s(self, links: Sequence[Link], flows: FlowArrays, switches: set[int]) -> float:
        from simulators.flow import simulate

        return float(simulate(links, flows).finish_s.max())

    def kernels(self) -> tuple:
        from simulators.flow._engine import simulate_flows

        return (simulate_flows,)


register(FlowLevel())
