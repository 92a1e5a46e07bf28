"""Faults of single links and switches, and the routes ECMP finds around them.

Why: a failed link or switch loses every frame sent into it until the fabric's routing has
converged; from then on ECMP sends new packets over the shortest paths that avoid it (a flow
already in flight keeps going, its lost packets recovered by the NICs). The engine reads a
flow's routes with the time each takes effect; this module computes them from the link list,
so a caller states only what failed and when.
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from simulators._errors import SpecError
from simulators.network import FlowArrays, Link

PS_PER_S = 1e12
NEVER_PS = np.iinfo(np.int64).max


@dataclass(frozen=True)
class LinkFaults:
    """Faults by index in the link list (links) or node number (switches): `loss_rate` a link's
    own chance of losing a frame (in place of RoceSettings.loss_rate); `down_s` the interval
    [from, until) in which a link loses every frame it finishes sending (until inf: for good);
    `switch_down_s` the same for every link into and out of a switch; `reroute_after_s` the
    routing's convergence time: that long after a link fails, flows using it take an
    equal-cost shortest path around every link failed by then (None: routes never change)."""

    loss_rate: Mapping[int, float] = field(default_factory=dict)
    down_s: Mapping[int, tuple[float, float]] = field(default_factory=dict)
    switch_down_s: Mapping[int, tuple[float, float]] = field(default_factory=dict)
    reroute_after_s: float | None = None

    def __post_init__(self) -> None:
        if self.reroute_after_s is not None and not 0.0 <= self.reroute_after_s < 1e3:
            raise SpecError(
                f"faults.reroute_after_s: {self.reroute_after_s!r} is not allowed; allowed: None or 0 to 1000"
            )

    def link_arrays(
        self, links: Sequence[Link], loss_rate: float, down: Mapping[int, tuple[int, int]]
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per link: loss rate, and the interval it is down in picoseconds (NEVER_PS: never),
        `down` being `down_ps(links)`."""
        n_links = len(links)
        rates = np.full(n_links, float(loss_rate))
        down_from, down_until = np.full(n_links, NEVER_PS, np.int64), np.full(n_links, NEVER_PS, np.int64)
        for link, rate in _checked(self.loss_rate, n_links, "loss_rate").items():
            if not 0.0 <= rate < 1.0:
                raise SpecError(f"faults.loss_rate[{link}]: {rate!r} is not allowed; allowed: 0 <= rate < 1")
            rates[link] = rate
        for link, (start_ps, end_ps) in down.items():
            down_from[link], down_until[link] = start_ps, end_ps
        return rates, down_from, down_until

    def down_ps(self, links: Sequence[Link]) -> dict[int, tuple[int, int]]:
        """Each failed link's interval in picoseconds; a link down twice keeps the earlier."""
        down = dict(_checked(self.down_s, len(links), "down_s"))
        nodes = {node for link in links for node in (link.src, link.dst)} if self.switch_down_s else set()
        for node, interval in self.switch_down_s.items():
            if node not in nodes:
                raise SpecError(f"faults.switch_down_s: node {node!r} is not allowed; allowed: a node of the links")
            for i, link in enumerate(links):
                if node in (link.src, link.dst):
                    down[i] = min(down.get(i, interval), interval)
        out = {}
        for link, (start_s, end_s) in down.items():
            if not 0.0 <= start_s < end_s:
                raise SpecError(
                    f"faults.down_s[{link}]: {(start_s, end_s)!r} is not allowed; allowed: 0 <= from < until"
                )
            out[link] = (round(start_s * PS_PER_S), NEVER_PS if end_s == np.inf else round(end_s * PS_PER_S))
        return out

    def routes(
        self,
        links: Sequence[Link],
        flows: FlowArrays,
        switches: set[int],
        down: Mapping[int, tuple[int, int]],
        adaptive: bool = False,
    ) -> Routes:
        """Every flow's routes: its own path first, then one around the failures each time the
        routing converges on a path it uses (module docstring); with `adaptive`, then every
        other equal-cost path of the fabric between its ends, which only adaptive routing at the
        switches takes (never at the sender), skipping a link while it is down. `down` is
        `down_ps(links)`."""
        extra = self._reroutes(links, flows, switches, down)
        if adaptive:
            finder = _PathFinder(links, set(), switches)  # the switches skip a link while it is down
            for f in range(flows.count):
                own = flows.path(f)
                if len(own) < 3:
                    continue  # one switch or none on the way: no choice to make
                others = [p for p in finder.all_paths(links[own[0]].src, links[own[-1]].dst) if p != own]
                extra.setdefault(f, []).extend((NEVER_PS, p) for p in others)
        return Routes.of(flows).with_extra(extra)

    def _reroutes(
        self, links: Sequence[Link], flows: FlowArrays, switches: set[int], down: Mapping[int, tuple[int, int]]
    ) -> dict[int, list[tuple[int, tuple[int, ...]]]]:
        """For each flow that needs them, its routes around failures with the time each takes
        effect."""
        extra: dict[int, list[tuple[int, tuple[int, ...]]]] = {}
        if self.reroute_after_s is None:
            return extra
        after_ps = round(self.reroute_after_s * PS_PER_S)
        # the times routing converges, each with the links down by then (and still down)
        times = sorted({start + after_ps for start, end in down.values() if end > start + after_ps})
        for at_ps in times:
            dead = {link for link, (start, end) in down.items() if start + after_ps <= at_ps < end}
            finder = _PathFinder(links, dead, switches)
            on_dead = np.concatenate(([0], np.cumsum(np.isin(flows.path_links, list(dead)))))
            crossing = np.flatnonzero(on_dead[flows.path_start[1:]] > on_dead[flows.path_start[:-1]])
            for f in set(crossing.tolist()) | set(extra):
                current = extra[f][-1][1] if f in extra else flows.path(f)
                if dead.isdisjoint(current):
                    continue
                path = finder.path(links[current[0]].src, links[current[-1]].dst, f)
                if path is not None:
                    extra.setdefault(f, []).append((at_ps, path))
        return extra


def _checked(values: Mapping[int, object], n_links: int, name: str) -> Mapping[int, object]:
    for link in values:
        if not isinstance(link, int) or not 0 <= link < n_links:
            raise SpecError(f"faults.{name}: link {link!r} is not allowed; allowed: 0 to {n_links - 1}")
    return values


class Routes(NamedTuple):
    """Routes as the engine reads them (Flows' docstring): route f is flow f's own path, routes
    from n_flows on are reroutes."""

    path_start: np.ndarray
    path_links: np.ndarray
    route_start: np.ndarray
    route_list: np.ndarray
    route_from_ps: np.ndarray

    @classmethod
    def of(cls, flows: FlowArrays) -> Routes:
        n = flows.count
        ids = np.arange(n + 1, dtype=np.int64)
        return cls(flows.path_start, flows.path_links, ids, ids[:-1].copy(), np.zeros(n, np.int64))

    def with_extra(self, extra: Mapping[int, list[tuple[int, tuple[int, ...]]]]) -> Routes:
        """These routes and, for flow f, the routes extra[f] (from time, links), in time order."""
        if not extra:
            return self
        n = len(self.route_start) - 1
        counts = np.ones(n, np.int64)
        flows = sorted(extra)
        counts[flows] += [len(extra[f]) for f in flows]
        route_start = np.concatenate(([0], np.cumsum(counts)))
        added = [route for f in flows for route in extra[f]]
        is_own = np.zeros(route_start[-1], np.bool_)
        is_own[route_start[:-1]] = True
        route_list = np.empty(route_start[-1], np.int64)
        route_list[is_own] = np.arange(n)
        route_list[~is_own] = np.arange(n, n + len(added))  # flows in order, each's in time order
        lengths = np.fromiter((len(path) for _, path in added), np.int64, len(added))
        links = np.fromiter(itertools.chain.from_iterable(path for _, path in added), np.int64, int(lengths.sum()))
        from_ps = np.fromiter((at_ps for at_ps, _ in added), np.int64, len(added))
        return Routes(
            np.concatenate((self.path_start, self.path_start[-1] + np.cumsum(lengths))),
            np.concatenate((self.path_links, links)),
            route_start,
            route_list,
            np.concatenate((self.route_from_ps, from_ps)),
        )


class _PathFinder:
    """Equal-cost shortest paths over the live links, through switches only; of the ties at
    each hop ECMP's hash (of the flow and the hop) picks one, so a flow keeps to one path."""

    def __init__(self, links: Sequence[Link], dead: set[int], switches: set[int]) -> None:
        self._links = links
        self._switches = switches
        self._into: dict[int, list[int]] = {}
        for i, link in enumerate(links):
            if i not in dead:
                self._into.setdefault(link.dst, []).append(i)
        self._hops_to: dict[int, tuple[dict[int, int], dict[int, list[int]]]] = {}
        self._paths: dict[tuple[int, int], list[tuple[int, ...]]] = {}

    def _distances(self, dst: int) -> tuple[dict[int, int], dict[int, list[int]]]:
        """Hops from each node to `dst`, through switches only (breadth first, backwards), and
        each node's live links one hop nearer, in link order."""
        if dst not in self._hops_to:
            hops, nearer, queue = {dst: 0}, {}, deque([dst])
            while queue:
                node = queue.popleft()
                if node != dst and node not in self._switches:
                    continue  # a host is a path's end, never a way through
                for i in self._into.get(node, ()):
                    src = self._links[i].src
                    if src not in hops:
                        hops[src] = hops[node] + 1
                        queue.append(src)
                    if hops[src] == hops[node] + 1:
                        nearer.setdefault(src, []).append(i)
            for ties in nearer.values():
                ties.sort()
            self._hops_to[dst] = hops, nearer
        return self._hops_to[dst]

    def all_paths(self, src: int, dst: int, cap: int = 256) -> list[tuple[int, ...]]:
        """Every equal-cost shortest path from `src` to `dst` (at most `cap`, in link order)."""
        if (src, dst) in self._paths:
            return self._paths[src, dst]
        hops, nearer = self._distances(dst)
        paths, stack = self._paths.setdefault((src, dst), []), [(src, ())] if src in hops else []
        while stack and len(paths) < cap:
            node, path = stack.pop()
            if node == dst:
                paths.append(path)
                continue
            stack.extend((self._links[i].dst, (*path, i)) for i in reversed(nearer[node]))
        return paths

    def path(self, src: int, dst: int, flow: int) -> tuple[int, ...] | None:
        hops, nearer = self._distances(dst)
        if src not in hops:
            return None  # cut off
        path, node = [], src
        while node != dst:
            ties = nearer[node]
            link = ties[(flow * 2654435761 + len(path) * 40503) % len(ties)]
            path.append(link)
            node = self._links[link].dst
        return tuple(path)
