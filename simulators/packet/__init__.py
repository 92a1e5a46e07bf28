"""Packet-level network simulation: a compiled discrete-event engine with PFC, ECN and DCQCN."""

from simulators.packet._collectives import collective_flows
from simulators.packet._fidelity import congestion_factors, groups_of
from simulators.packet._run import Flow, Link, PacketResult, RoceSettings, simulate

__all__ = [
    "Flow",
    "Link",
    "PacketResult",
    "RoceSettings",
    "collective_flows",
    "congestion_factors",
    "groups_of",
    "simulate",
]
