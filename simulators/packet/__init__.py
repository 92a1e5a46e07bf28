"""Packet-level network simulation: a compiled discrete-event engine with PFC, ECN and DCQCN."""

from simulators.packet._run import Flow, Link, PacketResult, RoceSettings, simulate

__all__ = ["Flow", "Link", "PacketResult", "RoceSettings", "simulate"]
