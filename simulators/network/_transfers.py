"""Point-to-point transfers on a fabric, the input every contention-aware simulator shares.

`Link` is one directed link (endpoints, rate, delay); `Flow` a transfer along a path of link ids
(indices into the list of links) that starts at a time or after other flows complete. The packet
simulator (simulators.packet) and the flow simulator (simulators.flow) take the same values.

`collective_flows` turns a collective into such a flow DAG on placed ranks: the algorithm's
schedule (simulators.network.collective_schedule: the same transfers whose steps the analytical
model prices), one flow per transfer, each started when the flows of the transfers it depends on
have arrived; so collectives that share the fabric slow each other exactly where their traffic
meets. `route(src, dst)` gives the link ids between two nodes (ECMP over a fabric graph, say). A
transfer of k of the schedule's C chunks carries max(1, nbytes * k // C) bytes. An algorithm that
reduces in the switch (NVLS) sends to and from a node per NVLink domain: `switches[d]`, the
NVSwitch of members d * per_domain to (d + 1) * per_domain - 1, where the graph has it (a flow
ends there and the switch's result starts there, the reduction itself taking no time).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from simulators._errors import SpecError
from simulators.network._algorithm import collective_schedule

Route = Callable[[int, int], tuple[int, ...]]


@dataclass(frozen=True)
class Link:
    src: int
    dst: int
    gbps: float
    delay_s: float


@dataclass(frozen=True)
class Flow:
    """`nbytes` from path[0]'s source to path[-1]'s destination, in packets of `mtu_bytes`
    payload (the last one shorter); it starts at `start_s`, or `gap_s` after the last flow of
    `after` completes."""

    path: tuple[int, ...]
    nbytes: int
    mtu_bytes: int = 4096
    start_s: float = 0.0
    after: tuple[int, ...] = ()
    gap_s: float = 0.0


def collective_flows(
    op: str,
    ranks: Sequence[int],
    nbytes: int,
    route: Route,
    *,
    algorithm: str = "ring",
    per_domain: int = 1,
    switches: Sequence[int] = (),
    mtu_bytes: int = 4096,
    start_s: float = 0.0,
    offset: int = 0,
) -> list[Flow]:
    """The flows of `op` by `algorithm` over GPU nodes `ranks` (in the group's member order),
    `per_domain` of them to an NVLink domain; flow indices in `after` are shifted by `offset`,
    the position of the first flow in the caller's combined list."""
    schedule = collective_schedule(op, len(ranks), algorithm, per_domain)
    if len(switches) < schedule.switches:
        raise SpecError(
            f"switches: {len(switches)} given; allowed: {schedule.switches} (one per NVLink domain) for {algorithm}"
        )
    nodes = list(ranks) + list(switches)
    sizes = {k: max(1, nbytes * k // schedule.chunks) for k in {len(t.chunks) for t in schedule.transfers}}
    return [
        Flow(
            route(nodes[t.src], nodes[t.dst]),
            sizes[len(t.chunks)],
            mtu_bytes,
            start_s,
            tuple([offset + a for a in t.after]),
        )
        for t in schedule.transfers
    ]
