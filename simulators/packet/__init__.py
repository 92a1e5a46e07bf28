"""Packet-level network simulation: a compiled discrete-event engine with PFC, ECN and a
registry of congestion control algorithms (none, DCQCN, TIMELY, HPCC), loss with its recovery (go-back-N,
selective repeat, timeouts), failed links and switches routed around, and adaptive routing.
It runs the plain links and flows of simulators.network (re-exported here, with
collective_flows, for callers of `simulate`)."""

from simulators.network import Flow, Link, collective_flows
from simulators.packet import _cc_dcqcn, _cc_hpcc, _cc_none, _cc_timely  # noqa: F401  (each registers its algorithm)
from simulators.packet._congestion import CONGESTION_CONTROLS, CongestionControl, Params, register
from simulators.packet._run import LinkFaults, PacketResult, RoceSettings, simulate

__all__ = [
    "CONGESTION_CONTROLS",
    "CongestionControl",
    "Flow",
    "Link",
    "LinkFaults",
    "PacketResult",
    "Params",
    "RoceSettings",
    "collective_flows",
    "register",
    "simulate",
]
