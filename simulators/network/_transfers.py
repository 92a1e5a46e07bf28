"""Point-to-point transfers on a fabric, the input every contention-aware simulator shares.

`Link` is one directed link (endpoints, rate, delay); `Flow` a transfer along a path of link ids
(indices into the list of links) that starts at a time or after other flows complete. The packet
simulator (simulators.packet) and the flow simulator (simulators.flow) take the same values.

`collective_flows` turns a collective on every group of a placement into such a flow DAG, laid
out as arrays (`FlowArrays`, what the compiled engines read; a 512-rank ring is half a million
flows, too many to build as objects): the algorithm's schedule (simulators.network
.collective_schedule: the same transfers whose steps the analytical model prices), one flow per
transfer, each started when the flows of the transfers it depends on have arrived; so
collectives that share the fabric slow each other exactly where their traffic meets.
`route(src, dst)` gives the link ids between two nodes (ECMP over a fabric graph, say). A transfer
of k of the schedule's C chunks carries max(1, nbytes * k // C) bytes. An algorithm that reduces
in the switch (NVLS) sends to and from a node per NVLink domain: a group's `switches[d]`, the
NVSwitch of members d * per_domain to (d + 1) * per_domain - 1, where the graph has it (a flow
ends there and the switch's result starts there, the reduction itself taking no time).

`flow_arrays` checks flows (Flow values or such arrays) against their links and lays them out as
the arrays both compiled engines read (one place for the checks and their messages).
"""

from __future__ import annotations

import functools
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


@functools.lru_cache(maxsize=32)
def _schedule_columns(op: str, ranks: int, algorithm: str, per_domain: int) -> tuple:
    """A schedule as columns (built once per group shape: a 512-rank ring lists half a million
    transfers; read-only, as the cache shares them): chunks carried by each transfer, the
    `after` lists as CSR, the schedule's chunk and switch counts, and its distinct (src, dst)
    member pairs in order of first use with each transfer's pair."""
    schedule = collective_schedule(op, ranks, algorithm, per_domain)
    transfers = schedule.transfers
    n = len(transfers)
    src = _ints((t.src for t in transfers), n)
    dst = _ints((t.dst for t in transfers), n)
    chunks = _ints((len(t.chunks) for t in transfers), n)
    waits = _ints((len(t.after) for t in transfers), n)
    after_start = np.zeros(n + 1, np.int64)
    np.cumsum(waits, out=after_start[1:])
    after = _ints((a for t in transfers for a in t.after), int(after_start[-1]))
    nodes = ranks + schedule.switches
    pairs, first, connection = np.unique(src * nodes + dst, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")  # connections in order of first use
    rank_of = np.empty(len(order), np.int64)
    rank_of[order] = np.arange(len(order))
    connections = np.stack([pairs[order] // nodes, pairs[order] % nodes], axis=1)
    columns = (chunks, after_start, after, connections, rank_of[connection])
    for column in columns:
        column.setflags(write=False)
    return (*columns, schedule.chunks, schedule.switches)


def collective_flows(
    op: str,
    groups: Sequence[Sequence[int]],
    nbytes: int,
    route: Route,
    *,
    algorithm: str = "ring",
    per_domain: int = 1,
    switches: Sequence[Sequence[int]] = (),
    mtu_bytes: int = 4096,
    start_s: float = 0.0,
) -> FlowArrays:
    """The flows of `op` by `algorithm` for each group of GPU nodes in `groups` (members in the
    group's order, `per_domain` of them to an NVLink domain; `switches[g]` the NVSwitch nodes of
    group g's domains where the algorithm reduces in the switch), all at once: group g's flows
    are rows g * T .. (g + 1) * T - 1 for a schedule of T transfers. Routes are asked for group
    by group, each connection in the order the schedule first uses it, so a route that hashes
    connections in the order it meets them places them as one transfer after another would."""
    if not groups or any(len(g) != len(groups[0]) for g in groups):
        raise SpecError(f"groups: sizes {sorted({len(g) for g in groups})}; allowed: one or more groups of one size")
    chunks, after_start, after, connections, connection, total_chunks, needs = _schedule_columns(
        op, len(groups[0]), algorithm, per_domain
    )
    given = min((len(switches[g]) if g < len(switches) else 0) for g in range(len(groups)))
    if given < needs:
        raise SpecError(f"switches: {given} given; allowed: {needs} (one per NVLink domain) for {algorithm}")
    count, transfers = len(groups), len(chunks)
    paths = []
    for g, group in enumerate(groups):
        nodes = list(group) + list(switches[g][:needs] if needs else ())
        paths += [route(nodes[a], nodes[b]) for a, b in connections]
    path_length = _ints((len(p) for p in paths), len(paths))
    path_begin = np.zeros(len(paths) + 1, np.int64)
    np.cumsum(path_length, out=path_begin[1:])
    every_link = _ints((link for p in paths for link in p), int(path_begin[-1]))
    which = (np.arange(count)[:, None] * len(connections) + connection[None, :]).ravel()
    lengths = path_length[which]
    path_start = np.zeros(len(which) + 1, np.int64)
    np.cumsum(lengths, out=path_start[1:])
    within = np.arange(int(path_start[-1])) - np.repeat(path_start[:-1], lengths)
    path_links = every_link[np.repeat(path_begin[which], lengths) + within]
    sizes = np.maximum(1, nbytes * chunks // total_chunks)
    waits = np.diff(after_start)
    all_after_start = np.zeros(count * transfers + 1, np.int64)
    np.cumsum(np.tile(waits, count), out=all_after_start[1:])
    shifted = (after[None, :] + transfers * np.arange(count)[:, None]).ravel()
    rows = count * transfers
    return laid_out(
        np.tile(sizes, count),
        np.full(rows, mtu_bytes, np.int64),
        np.full(rows, _ps(start_s), np.int64),
        np.zeros(rows, np.int64),
        path_start,
        path_links,
        all_after_start,
        shifted,
    )


class FlowArrays(NamedTuple):
    """Flows as the arrays a compiled engine reads (int64; times in picoseconds), paths,
    dependencies and dependants as CSR lists: flow f's links are
    path_links[path_start[f]:path_start[f + 1]], the flows it waits for
    after[after_start[f]:after_start[f + 1]], the flows waiting for it
    dependents[dependents_start[f]:dependents_start[f + 1]] (in index order); dep_count the
    distinct flows each waits for."""

    nbytes: np.ndarray
    mtu: np.ndarray
    start_ps: np.ndarray
    gap_ps: np.ndarray
    path_start: np.ndarray
    path_links: np.ndarray
    after_start: np.ndarray
    after: np.ndarray
    dep_count: np.ndarray
    dependents_start: np.ndarray
    dependents: np.ndarray

    @property
    def count(self) -> int:
        """The number of flows (len() of a NamedTuple counts its fields)."""
        return len(self.nbytes)

    def path(self, f: int) -> tuple[int, ...]:
        return tuple(int(a) for a in self.path_links[self.path_start[f] : self.path_start[f + 1]])

    def waits_for(self, f: int) -> tuple[int, ...]:
        return tuple(int(a) for a in self.after[self.after_start[f] : self.after_start[f + 1]])


def _ints(values, count: int = -1) -> np.ndarray:
    return np.fromiter(values, np.int64, count)


def _ps(seconds) -> np.ndarray:
    return np.round(np.array(seconds, np.float64) * 1e12).astype(np.int64)


def laid_out(nbytes, mtu, start_ps, gap_ps, path_start, path_links, after_start, after) -> FlowArrays:
    """Flows given as columns, checked for what needs no links (a SpecError naming the first
    bad field) and completed with their dependants."""
    n = len(nbytes)
    lengths = np.diff(path_start)
    bad = np.flatnonzero((lengths < 1) | (nbytes < 1) | (mtu < 1))
    if len(bad):
        raise SpecError(f"flows[{bad[0]}]: needs a path, nbytes >= 1 and mtu_bytes >= 1")
    waiter = np.repeat(np.arange(n), np.diff(after_start))
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
        start_ps,
        gap_ps,
        path_start,
        path_links,
        after_start,
        after,
        np.bincount(waiting, minlength=n).astype(np.int64),
        dependents_start,
        waiting.astype(np.int64),
    )


def flow_arrays(links: Sequence[Link], flows: Sequence[Flow] | FlowArrays) -> FlowArrays:
    """`flows` (Flow values, or arrays already laid out) on `links` as arrays, after checking
    them (a SpecError naming the first bad field). Vectorised: a 512-GPU ring all-reduce is half
    a million flows."""
    if not len(links) or not (flows.count if isinstance(flows, FlowArrays) else len(flows)):
        raise SpecError("flows, links: at least one of each is needed")
    if not isinstance(flows, FlowArrays):
        n = len(flows)
        lengths = _ints((len(f.path) for f in flows), n)
        path_start = np.zeros(n + 1, np.int64)
        np.cumsum(lengths, out=path_start[1:])
        waits = _ints((len(f.after) for f in flows), n)
        after_start = np.zeros(n + 1, np.int64)
        np.cumsum(waits, out=after_start[1:])
        flows = laid_out(
            _ints((f.nbytes for f in flows), n),
            _ints((f.mtu_bytes for f in flows), n),
            _ps([f.start_s for f in flows]),
            _ps([f.gap_s for f in flows]),
            path_start,
            _ints((a for f in flows for a in f.path), int(path_start[-1])),
            after_start,
            _ints((d for f in flows for d in f.after), int(after_start[-1])),
        )
    path_start, path_links = flows.path_start, flows.path_links
    owner = np.repeat(np.arange(flows.count), np.diff(path_start))
    bad = np.flatnonzero((path_links < 0) | (path_links >= len(links)))
    if len(bad):
        raise SpecError(
            f"flows[{owner[bad[0]]}].path: link {path_links[bad[0]]} is not allowed; "
            f"allowed: link ids 0..{len(links) - 1}"
        )
    src, dst = _ints((link.src for link in links), len(links)), _ints((link.dst for link in links), len(links))
    inner = np.ones(max(len(path_links) - 1, 0), np.bool_)  # position j and j + 1 on one path
    inner[path_start[1:-1] - 1] = False
    bad = np.flatnonzero(inner & (dst[path_links[:-1]] != src[path_links[1:]]))
    if len(bad):
        a, b = path_links[bad[0]], path_links[bad[0] + 1]
        raise SpecError(f"flows[{owner[bad[0]]}].path: link {a} ends at node {dst[a]}, link {b} starts at {src[b]}")
    return flows
