"""One collective alone on a fabric, timed by a fidelity level: what `dse collectives` tables.

The analytical level is the algorithm's alpha-beta recipe (simulators.network.collective_time_s).
A simulated level (flow, packet) runs the algorithm's schedule for one group of every GPU of the
fabric, in rank order, on the fabric graph with its routes (the flows a candidate's collective
runs in a study, laid out as the contention driver's `group_flows` does), and reports the last
flow's completion.
"""

from __future__ import annotations

from simulators.fidelity._level import LEVELS, SimulatedLevel
from simulators.hardware import GpuSpec
from simulators.network import Fabric, collective_time_s, fabric_graph, fabric_links


def collective_level_time_s(
    level: str, op: str, nbytes: int, num_gpus: int, algorithm: str, fabric: Fabric, gpu: GpuSpec
) -> float:
    """Seconds for `op` of `nbytes` by `algorithm` over `num_gpus` GPUs of `fabric` at `level`
    (inf where the algorithm cannot run on this placement, as the analytical model says)."""
    network = fabric.network(gpu, num_gpus)
    analytical = float(collective_time_s(op, nbytes, num_gpus, 1, network, algorithm))
    entry = LEVELS.lookup(level, "level")
    if not isinstance(entry, SimulatedLevel) or analytical in (0.0, float("inf")):
        return analytical
    from simulators.fidelity._contention import MTU_BYTES  # networkx loads on first use
    from simulators.network import Group, collective_flows, groups_of, nvswitch_of

    graph = fabric_graph(fabric, gpu, num_gpus)
    links, switches, route = fabric_links(graph, spread=entry.spreads_adaptive_routing)
    per_domain = int(Group.place(num_gpus, 1, network).per_domain)
    (group,) = groups_of(num_gpus, num_gpus, 1)  # one group: every GPU, in rank order
    domains = [nvswitch_of(graph, member) for member in group[::per_domain]]
    flows = collective_flows(
        op,
        [group],
        int(nbytes),
        route,
        algorithm=algorithm,
        per_domain=per_domain,
        switches=[domains],
        mtu_bytes=MTU_BYTES,
    )
    return float(entry.makespan_s(links, flows, switches))
