"""The flow level: the compiled flow simulator (simulators.flow) runs every group's flows at once
on the fabric graph with ECMP routes (adaptive routing, where the family has it, as load spread
over every equal-cost path). No PFC or congestion control: it sees where routes collide and
links are oversubscribed, in a fraction of the packet level's time. Its `model` says how a link
is shared (simulators.flow.MODELS): `fifo` by default, queues that hold all that senders at line
rate send, which meets the packet engine without congestion control within 0.2 %
(benchmarks/flow_vs_packet.py) and the packet level's DCQCN on a ladder's capped messages
(DCQCN has hardly cut a rate by their end) better than max-min does; `max_min`, fair rates
without queues, the fabric of a transport that keeps queues short. The simulator loads on
first use."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from simulators._errors import SpecError
from simulators.fidelity._level import NetworkLevel, SimulatedLevel, register
from simulators.network import FlowArrays, Link


@dataclasses.dataclass(frozen=True)
class FlowLevel(SimulatedLevel):
    name = "flow"
    spreads_adaptive_routing = True  # a fluid spreads over every equal-cost path as per-packet AR does
    model: str = "fifo"

    def configured(self, options: Mapping[str, Any]) -> NetworkLevel:
        from simulators.flow import MODELS

        unknown = [k for k in options if k != "model"]
        if unknown:
            raise SpecError(f"fidelity.flow.{unknown[0]}: not allowed; allowed: model")
        model = options.get("model", self.model)
        if model not in MODELS:
            raise SpecError(f"fidelity.flow.model: {model!r} is not allowed; allowed: {', '.join(MODELS)}")
        return FlowLevel(model)

    def makespan_s(self, links: Sequence[Link], flows: FlowArrays, switches: set[int]) -> float:
        from simulators.flow import simulate

        return float(simulate(links, flows, model=self.model).finish_s.max())

    def kernels(self) -> tuple:
        from simulators.flow._engine import simulate_flows, simulate_queued

        return (simulate_queued if self.model == "fifo" else simulate_flows,)


register(FlowLevel())
