"""A flow-level run from plain values: links and flows with paths and dependencies
(simulators.network.Link, Flow), the inputs the packet simulator takes (less its RoCE settings
and switches: nothing is paused, marked or dropped). What is modelled, and what is not, is in
_engine.py's docstring: FIFO queues or max-min fair rates, a store-and-forward tail per flow,
the packet engine's dependency rule."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from simulators._errors import SpecError
from simulators.flow._engine import HELPERS, PS_PER_S, Links, simulate_buffered, simulate_flows, simulate_queued
from simulators.network import Flow, FlowArrays, Link
from simulators.network._transfers import RunTimes, flow_arrays


@dataclass(frozen=True)
class FlowResult(RunTimes):
    """Seconds per flow (start, finish: its last byte at the receiver, completion time), bytes
    per link, and the run's work: heap events; rate recomputations and the water-filling rounds
    they took (max_min), or link updates and the queue segments they opened (fifo)."""

    start_s: np.ndarray
    finish_s: np.ndarray
    link_bytes: np.ndarray
    events: int
    recomputations: int
    rounds: int
    end_s: float
    link_gbps: np.ndarray = field(repr=False)


# How links share their bandwidth (simulators/flow/_engine.py): FIFO queues that hold every byte
# sent to them (a lossless fabric whose senders go at line rate), or max-min fair rates without
# queues (a transport that keeps queues short); and the compiled kernel each runs.
MODELS = {"fifo": simulate_buffered, "max_min": simulate_flows}
_KERNELS = {"fifo": simulate_queued, "max_min": simulate_flows}


def simulate(links: Sequence[Link], flows: Sequence[Flow] | FlowArrays, *, model: str) -> FlowResult:
    """Run `flows` (Flow values, or arrays from simulators.network.collective_flows) over
    `links` with `model`, a key of MODELS. Bad input raises a one-line SpecError naming the
    field, as simulators.packet.simulate does."""
    if model not in MODELS:
        raise SpecError(f"model: {model!r} is not allowed; allowed: {', '.join(MODELS)}")
    arrays = flow_arrays(links, flows)
    for i, link in enumerate(links):
        if not link.gbps > 0:
            raise SpecError(f"links[{i}].gbps: {link.gbps!r} is not allowed; allowed: > 0")
        if not link.delay_s >= 0:
            raise SpecError(f"links[{i}].delay_s: {link.delay_s!r} is not allowed; allowed: >= 0")
    rates = np.array([link.gbps * 1e9 for link in links])
    engine_links = Links(rates, np.array([round(link.delay_s * PS_PER_S) for link in links], np.int64))
    HELPERS.before(_KERNELS[model])
    begin, finish, link_bytes, events, recomputations, rounds, end = MODELS[model](engine_links, arrays)
    unfinished = int((finish < 0).sum())
    if unfinished:
        raise SpecError(f"flows: {unfinished} never completed (a dependency cycle?)")
    return FlowResult(
        begin / PS_PER_S,
        finish / PS_PER_S,
        link_bytes,
        int(events),
        int(recomputations),
        int(rounds),
        end / PS_PER_S,
        rates / 1e9,
    )
