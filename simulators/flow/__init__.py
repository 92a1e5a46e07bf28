"""Flow-level network simulation: max-min fair sharing of link bandwidth among concurrent flows,
event-driven over flow starts and completions (a compiled kernel). It runs the plain links and
flows of simulators.network (re-exported here, with collective_flows, for callers of
`simulate`), as the packet simulator does, in far less time: no packets, one rate per flow."""

from simulators.flow._run import MODELS, FlowResult, simulate
from simulators.network import Flow, Link, collective_flows

__all__ = ["MODELS", "Flow", "FlowResult", "Link", "collective_flows", "simulate"]
