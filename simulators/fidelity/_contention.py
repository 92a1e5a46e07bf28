"""Congestion factors of a training candidate's collectives from a contention-aware simulator.

For each distinct collective of the step that leaves a server (simulators.analytical
.plan_collectives), every group of the plan runs it at once on the candidate's fabric graph (all
data-parallel rings of the iteration together, say), with ECMP routes; the same collective of one
group alone, on the very paths it takes beside the others, is the baseline. The factor is their
ratio of completion times: 1 where groups never meet, above 1 where their flows share links
(ECMP collisions, oversubscription). Each collective runs the algorithm the analytical model
chose for it (its `CollectiveUse.algorithm`), as that algorithm's schedule on the group's
placement. Messages are capped (the factor is a property of the routes, not of the size, once
transfers are bandwidth-bound) so the runs stay short; collectives that differ only in a size
above the cap share one run. Each collective of the step keeps its own factor (keyed by op,
group and size), so two sizes of one op on one group are priced apart.

The graph is the fabric less its failed switches and links (`Fabric.failures`), so ECMP routes
over what survives; the analytical network has already lost their capacity, so a factor here is
the contention that the failure's surviving paths add. A level that `spreads` models adaptive
routing (a family with that trait) as load spread over every equal-cost path (`fabric_links`).

Runs are shared by every candidate in the process: the candidates a ladder promotes mostly
differ in knobs the fabric never sees (micro-batch, recompute, schedule), so the same collective
on the same GPU count and fabric comes back again and again (in the README's main job 108 of the
flow level's 144 runs and 8 of the packet level's 24). ECMP numbers a candidate's connections
in the order its collectives first use them, so a collective's paths depend on the collectives
routed before it: a collective is keyed by everything its graph is built from and by the
candidate's crossing collectives up to it, in order, and one that must be timed anew first
routes those before it, as a candidate timing every run itself does. Its flows (paths included)
are then keyed by their content, since different collectives can move the very same flows (a
ring's reduce-scatter and all-gather: a third of the main job's packet runs). Each is kept as a
future, so threads that ask for one at once time it once. A candidate's factors are the same
whatever ran before it in the process.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

import networkx as nx

from simulators.analytical import plan_collectives
from simulators.network import (
    CongestionFactor,
    Fabric,
    FlowArrays,
    Group,
    Network,
    Route,
    collective_flows,
    fabric_graph,
    fabric_links,
    groups_of,
    nvswitch_of,
    surviving_graph,
)
from simulators.workload import TrainingCandidate

if TYPE_CHECKING:
    from simulators.fidelity._level import SimulatedLevel

MTU_BYTES = 4096

# (level, fabric, gpu, GPU count, network, op, ranks, stride, bytes, algorithm) -> future of
# (alone s, together s, groups), and (level, ..., network, digest of flows) -> future of their
# makespan: the runs timed in this process (module docstring)
_RUNS: dict[tuple, Future] = {}
_RUNS_LOCK = threading.Lock()


def congestion_factors(
    candidate: TrainingCandidate, fabric: Fabric, message_cap_bytes: int, level: SimulatedLevel
) -> list[CongestionFactor]:
    """The factor of each collective of `candidate` that crosses servers, each run timed by
    `level`'s simulator (a level with its settings is part of a run's key); a level that
    spreads adaptive routing spreads flows (module docstring)."""
    system = candidate.system
    uses = [
        u for u in plan_collectives(candidate) if u.ranks > 1 and u.ranks * u.stride > fabric.gpus_per_server
    ]  # a collective inside one server: the fabric plays no part
    use_keys = [(u.op, u.ranks, u.stride, int(min(u.nbytes, message_cap_bytes)), u.algorithm) for u in uses]
    keys = list(dict.fromkeys(use_keys))  # each distinct run, in the order a candidate first meets it
    fabric_key = (level, fabric, system.gpu, system.num_gpus, system.fabric_network)
    routing = _Routing(fabric, candidate, level.spreads_adaptive_routing)

    def timed(i: int) -> tuple[float, float, int]:
        alone, together, count = routing.flows(keys, i)
        alone_s, together_s = (
            _shared_run((*fabric_key, _digest(f)), lambda f=f: level.makespan_s(routing.links, f, routing.switches))
            for f in (alone, together)
        )
        return alone_s, together_s, count

    runs = [_shared_run((*fabric_key, *keys[: i + 1]), lambda i=i: timed(i)) for i in range(len(keys))]
    by_key = dict(zip(keys, runs))
    return [
        CongestionFactor(u.op, u.ranks, u.stride, int(u.nbytes), by_key[k][2], by_key[k][0], by_key[k][1], u.algorithm)
        for u, k in zip(uses, use_keys)
    ]


class _Routing:
    """One candidate's graph and ECMP routes, built on first need; `flows(keys, i)` routes the
    collectives before the i-th first, in order, as they would have been had the candidate
    timed each itself (module docstring)."""

    def __init__(self, fabric: Fabric, candidate: TrainingCandidate, spread: bool) -> None:
        self.fabric, self.system, self.spread = fabric, candidate.system, spread
        self.graph: nx.Graph | None = None
        self.routed = 0  # collectives of `keys` routed so far

    def flows(self, keys: list[tuple], i: int) -> tuple[FlowArrays, FlowArrays, int]:
        if self.graph is None:
            graph = fabric_graph(self.fabric, self.system.gpu, self.system.num_gpus)
            self.graph = surviving_graph(graph, self.fabric.failures) if self.fabric.failures else graph
            self.links, self.switches, self.route = fabric_links(self.graph, spread=self.spread)
        while True:
            key, self.routed = keys[self.routed], self.routed + 1
            out = group_flows(self.graph, self.route, self.system.fabric_network, *key)
            if self.routed > i:
                return out


def _shared_run(key: tuple, run: Callable[[], Any]) -> Any:
    """`run()`'s result, timed once per process for `key` (module docstring); a run that fails
    is forgotten, so the next candidate to ask meets the same error itself."""
    with _RUNS_LOCK:
        future = _RUNS.get(key)
        owner = future is None
        if owner:
            future = _RUNS[key] = Future()
    if owner:
        try:
            future.set_result(run())
        except BaseException as exc:
            with _RUNS_LOCK:
                del _RUNS[key]
            future.set_exception(exc)
    return future.result()


def _digest(flows: FlowArrays) -> bytes:
    """A digest of every array of `flows` (their content, not their identity); SHA-256, which
    CPUs with SHA extensions hash twice as fast as BLAKE2b."""
    h = hashlib.sha256()
    for array in flows:
        h.update(len(array).to_bytes(8, "little"))
        h.update(array.tobytes())
    return h.digest()


def group_flows(
    graph: nx.Graph, route: Route, network: Network, op: str, ranks: int, stride: int, nbytes: int, algorithm: str
) -> tuple[FlowArrays, FlowArrays, int]:
    """`op` by `algorithm` for every group of `ranks` members `stride` apart on the GPUs of
    `graph` (placed as on `network`): the first group's flows alone, on the very paths it takes
    with the others; every group's flows together; the number of groups."""
    per_domain = int(Group.place(ranks, stride, network).per_domain)
    groups = groups_of(graph.graph["num_gpus"], ranks, stride)
    switches = [[nvswitch_of(graph, gpu) for gpu in group[::per_domain]] for group in groups]
    kw = {"algorithm": algorithm, "per_domain": per_domain, "mtu_bytes": MTU_BYTES}
    together = collective_flows(op, groups, nbytes, route, switches=switches, **kw)
    alone = collective_flows(op, groups[:1], nbytes, route, switches=switches[:1], **kw)  # routes already chosen
    return alone, together, len(groups)
