"""Flow-level network simulation: flows as fluids sharing link bandwidth, by FIFO queues at every
link (a lossless fabric behind senders at line rate) or max-min fair rates without queues (a
transport that keeps queues short), event-driven (compiled kernels; MODELS). It runs the plain
links and flows of simulators.network (re-exported here, with collective_flows, for callers of
`simulate`), as the packet simulator does, in far less time: no packets, rates per flow."""

from simulators.flow._run import MODELS, FlowResult, simulate
from simulators.network import Flow, Link, collective_flows

__all__ = ["MODELS", "Flow", "FlowResult", "Link", "collective_flows", "simulate"]
