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

`flow_arrays` checks flows against their links and lays them out as the arrays both compiled
engines read (one place for the checks and their messages).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

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


class RunTimes:
    """What the flow and packet simulators' results share: each flow's start and finish
    (`start_s`, `finish_s`), each link's bytes and rate (`link_bytes`, `link_gbps`), the run's
    end (`end_s`); a result dataclass mixes this in for the quantities derived from them."""

    start_s: np.ndarray
    finish_s: np.ndarray
    link_bytes: np.ndarray
    link_gbps: np.ndarray
    end_s: float

    @property
    def fct_s(self) -> np.ndarray:
        return self.finish_s - self.start_s

    @property
    def link_utilisation(self) -> np.ndarray:
        """Bytes each link carried over the run, as a share of what it could carry."""
        return self.link_bytes * 8 / (self.link_gbps * 1e9 * self.end_s) if self.end_s > 0 else self.link_bytes * 0.0


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


class FlowArrays(NamedTuple):
    """Flows as the arrays a compiled engine reads (int64; times in picoseconds), paths and
    dependants as CSR lists: flow f's links are path_links[path_start[f]:path_start[f + 1]], the
    flows waiting for it dependents[dependents_start[f]:dependents_start[f + 1]] (in index
    order); dep_count the distinct flows each waits for."""

    nbytes: np.ndarray
    mtu: np.ndarray
    start_ps: np.ndarray
    gap_ps: np.ndarray
    path_start: np.ndarray
    path_links: np.ndarray
    dep_count: np.ndarray
    dependents_start: np.ndarray
    dependents: np.ndarray


def _ints(values, count: int = -1) -> np.ndarray:
    return np.fromiter(values, np.int64, count)


def _ps(seconds) -> np.ndarray:
    return np.round(np.array(seconds, np.float64) * 1e12).astype(np.int64)


def flow_arrays(links: Sequence[Link], flows: Sequence[Flow]) -> FlowArrays:
    """`flows` on `links` as arrays, after checking them (a SpecError naming the first bad
    field). Vectorised: a 512-GPU ring all-reduce is half a million flows."""
    if not flows or not links:
        raise SpecError("flows, links: at least one of each is needed")
    n = len(flows)
    nbytes, mtu = _ints((f.nbytes for f in flows), n), _ints((f.mtu_bytes for f in flows), n)
    lengths = _ints((len(f.path) for f in flows), n)
    bad = np.flatnonzero((lengths < 1) | (nbytes < 1) | (mtu < 1))
    if len(bad):
        raise SpecError(f"flows[{bad[0]}]: needs a path, nbytes >= 1 and mtu_bytes >= 1")
    path_start = np.zeros(n + 1, np.int64)
    np.cumsum(lengths, out=path_start[1:])
    path_links = _ints((a for f in flows for a in f.path), int(path_start[-1]))
    owner = np.repeat(np.arange(n), lengths)
    bad = np.flatnonzero((path_links < 0) | (path_links >= len(links)))
    if len(bad):
        raise SpecError(
            f"flows[{owner[bad[0]]}].path: link {path_links[bad[0]]} is not allowed; "
            f"allowed: link ids 0..{len(links) - 1}"
        )
    src, dst = _ints((link.src for link in links), len(links)), _ints((link.dst for link in links), len(links))
    inner = np.ones(len(path_links) - 1, np.bool_)  # position j and j + 1 on one path
    inner[path_start[1:-1] - 1] = False
    bad = np.flatnonzero(inner & (dst[path_links[:-1]] != src[path_links[1:]]))
    if len(bad):
        a, b = path_links[bad[0]], path_links[bad[0] + 1]
        raise SpecError(f"flows[{owner[bad[0]]}].path: link {a} ends at node {dst[a]}, link {b} starts at {src[b]}")
    waits = _ints((len(f.after) for f in flows), n)
    after = _ints((d for f in flows for d in f.after), int(waits.sum()))
    waiter = np.repeat(np.arange(n), waits)
    bad = np.flatnonzero((after < 0) | (after >= n) | (after == waiter))
    if len(bad):
        raise SpecError(f"flows[{waiter[bad[0]]}].after: {after[bad[0]]} is not another flow's index")
    pairs = np.sort(after * n + waiter)  # (awaited, waiter) by awaited then waiter, each once
    pairs = pairs[np.diff(pairs, prepend=-1) != 0]
    awaited, waiting = pairs // n, pairs % n
    dependents_start = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(awaited, minlength=n), out=dependents_start[1:])
    return FlowArrays(
        nbytes,
        mtu,
        _ps([f.start_s for f in flows]),
        _ps([f.gap_s for f in flows]),
        path_start,
        path_links,
        np.bincount(waiting, minlength=n).astype(np.int64),
        dependents_start,
        waiting.astype(np.int64),
    )
