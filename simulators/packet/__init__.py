"""Packet-level network simulation: a compiled discrete-event engine with PFC, ECN and a
registry of congestion control algorithms (none, DCQCN)."""

from simulators.packet import _cc_dcqcn, _cc_none  # noqa: F401  (each registers its algorithm)
from simulators.packet._collectives import collective_flows
from simulators.packet._congestion import CONGESTION_CONTROLS, CongestionControl, Params, register
from simulators.packet._fidelity import congestion_factors, groups_of
from simulators.packet._run import Flow, Link, PacketResult, RoceSettings, simulate

__all__ = [
    "CONGESTION_CONTROLS",
    "CongestionControl",
    "Flow",
    "Link",
    "PacketResult",
    "Params",
    "RoceSettings",
    "collective_flows",
    "congestion_factors",
    "groups_of",
    "register",
    "simulate",
]
