"""Flow-level network simulation: max-min fair sharing of link bandwidth among concurrent flows,
event-driven over flow starts and completions (a compiled kernel). It runs the plain links and
flows of simulators.network, as the packet simulator does, in far less time (no packets)."""

from simulators.flow._run import FlowResult, simulate

__all__ = ["FlowResult", "simulate"]
