"""The flow simulator against the packet simulator at line rate: makespans and CPU seconds.

Why: issue 16 puts a flow level (a fluid, simulators.flow) between the analytical model and the
packet level, and asks that it agrees with the packet engine within 5 % where transfers are
bandwidth-bound at >= 100x less CPU. Scenarios: the ns-3 reference scenarios
(benchmarks/packet_vs_ns3.py: p2p, incast, leaf-spine), then collectives at 16-512 GPUs of
H100-SXM servers (8 GPUs, 8 NICs of 400 Gb/s) on fabric graphs, every group of a placement
running at once with ECMP routes, as the fidelity levels run a candidate's groups
(simulators/fidelity/_contention.py). The packet engine runs at line rate (no congestion
control, PFC or ECN, unlimited buffers: RoceSettings.line_rate()); the flow simulator runs
`--model` (simulators.flow.MODELS: `fifo` by default, its model of that fabric, FIFO queues
behind senders at line rate; `max_min`, fair rates without queues). CPU is time.process_time of
one run of each, after a warm-up call that loads the compiled kernels; both engines take the
collectives as the arrays simulators.network.collective_flows lays out (the ladder's levels
build them once per collective and hand them to either engine), so each side's CPU includes the
checks of those arrays against the links, and the `build s` column is that layout (the
schedule's columns are cached per group shape, as a level reuses them from one candidate to the
next; the reference scenarios are Flow values, converted by each engine). Message sizes are capped so that no packet
run takes more than about half a minute (256 MiB up to 256 GPUs; at 512, 64 MiB for eight
64-rank rings and 128 MiB for one 512-rank ring); the whole benchmark takes about three minutes
on one core (one with --skip-large). Ends with `max relative difference <x>% over <n>
scenarios; CPU ratio <r>`: x the largest |flow / packet - 1| of the makespans, r the packet
engine's CPU seconds over the flow engine's, summed over the scenarios (the line before gives
the least ratio of one scenario: the smallest runs are fixed overhead on both sides). With
--transports the table adds the packet engine's makespans with PFC and no congestion control,
and with DCQCN (RoceSettings' defaults, what the packet level runs), both without per-packet
ACKs, for context.

    python benchmarks/flow_vs_packet.py [--skip-large] [--model fifo|max_min] [--transports]
"""

from __future__ import annotations

import argparse
import functools
import time

from packet_vs_ns3 import CASES

from simulators.fidelity._contention import group_flows
from simulators.flow import MODELS
from simulators.flow import simulate as simulate_flows
from simulators.hardware import get_gpu
from simulators.network import Fabric, fabric_graph, fabric_links
from simulators.packet import RoceSettings
from simulators.packet import _scenarios as scenarios
from simulators.packet import simulate as simulate_packets

MIB = 1 << 20
GPU = get_gpu("H100-SXM")
LINE = RoceSettings.line_rate()
# --transports: the packet engine as the packet level may run it, for where the flow level sits
# (without ACKs: p2p has no link back; a CNP then takes the reverse path's latency)
TRANSPORTS = {"pfc ms": RoceSettings(congestion_control="none", acks=False), "dcqcn ms": RoceSettings(acks=False)}

# (name, family, oversubscription, GPUs, op, ranks, stride, algorithm, bytes)
COLLECTIVES = [
    ("ls16-ring-ar-16x1-256M", "leaf-spine", 1.0, 16, "all_reduce", 16, 1, "ring", 256 * MIB),
    ("ls64-ring-ar-8x8-256M", "leaf-spine", 1.0, 64, "all_reduce", 8, 8, "ring", 256 * MIB),
    ("ls64os2-ring-ar-8x8-256M", "leaf-spine", 2.0, 64, "all_reduce", 8, 8, "ring", 256 * MIB),
    ("ls64os2-hd-ar-8x8-256M", "leaf-spine", 2.0, 64, "all_reduce", 8, 8, "halving_doubling", 256 * MIB),
    ("ls64os2-pairwise-a2a-8x8-256M", "leaf-spine", 2.0, 64, "all_to_all", 8, 8, "pairwise", 256 * MIB),
    ("ro128-ring-rs-16x8-256M", "rail-optimized", 1.0, 128, "reduce_scatter", 16, 8, "ring", 256 * MIB),
    ("ft256os2-ring-ag-32x8-256M", "fat-tree", 2.0, 256, "all_gather", 32, 8, "ring", 256 * MIB),
    ("ft512-ring-ar-64x8-64M", "fat-tree", 1.0, 512, "all_reduce", 64, 8, "ring", 64 * MIB),
    ("ft512-ring-ar-512x1-128M", "fat-tree", 1.0, 512, "all_reduce", 512, 1, "ring", 128 * MIB),
]
LARGE = {"ft512-ring-ar-64x8-64M", "ft512-ring-ar-512x1-128M"}


def collective(family: str, oversubscription: float, num_gpus: int, op, ranks, stride, algorithm, nbytes):
    """Every group's flows of the collective together on the fabric graph: (links, flows,
    switches), after a first layout that fills the schedule's cache (what a level reuses)."""
    fabric = Fabric(family=family, oversubscription=oversubscription)
    graph = fabric_graph(fabric, GPU, num_gpus)
    links, switches, route = fabric_links(graph)
    network = fabric.network(GPU, num_gpus)
    group_flows(graph, route, network, op, ranks, stride, nbytes, algorithm)
    (_, together, _), build_s = timed(group_flows, graph, route, network, op, ranks, stride, nbytes, algorithm)
    return links, together, switches, build_s


def timed(simulate, *args):
    start = time.process_time()
    result = simulate(*args)
    return result, time.process_time() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-large", action="store_true", help="skip the two 512-GPU runs (~1 minute of packet CPU)")
    parser.add_argument(
        "--model",
        choices=sorted(MODELS),
        default="fifo",
        help="the flow simulator's model (fifo: queues that hold what line-rate senders send, as the packet run does)",
    )
    parser.add_argument(
        "--transports", action="store_true", help="also the makespans with PFC alone and with DCQCN (~2x the time)"
    )
    args = parser.parse_args()
    others = TRANSPORTS if args.transports else {}
    cases = {name: (True, build) for name, build in CASES.items()}
    for name, *spec in COLLECTIVES:
        if not (args.skip_large and name in LARGE):
            cases[name] = (False, lambda spec=spec: collective(*spec))
    warm = scenarios.incast(2, 10_000)
    simulate_flows(warm[0], warm[1], model=args.model)
    simulate_packets(warm[0], warm[1], LINE, warm[2])
    differences: dict[str, float] = {}
    cpu = {"packet": 0.0, "flow": 0.0}
    ratios: dict[str, float] = {}
    print(
        f"{'scenario':30} {'flows':>7} {'packet ms':>9} {'flow ms':>9} {'rel diff':>8} "
        f"{'packet cpu s':>12} {'flow cpu s':>10} {'ratio':>6} {'build s':>7} {'updates':>14}"
        + "".join(f" {name:>9}" for name in others)
    )
    for name, (_, build) in cases.items():
        links, flows, switches, *build_s = build()
        packet, packet_cpu = timed(simulate_packets, links, flows, LINE, switches)
        flow, flow_cpu = timed(functools.partial(simulate_flows, model=args.model), links, flows)
        packet_s, flow_s = packet.finish_s.max(), flow.finish_s.max()
        differences[name] = flow_s / packet_s - 1
        cpu["packet"] += packet_cpu
        cpu["flow"] += flow_cpu
        ratios[name] = packet_cpu / flow_cpu
        print(
            f"{name:30} {len(flow.finish_s):7} {packet_s * 1e3:9.4f} {flow_s * 1e3:9.4f} {differences[name]:+8.2%} "
            f"{packet_cpu:12.3f} {flow_cpu:10.4f} {ratios[name]:6.0f} {sum(build_s):7.3f} {flow.recomputations:14}"
            + "".join(
                f" {simulate_packets(links, flows, roce, switches).finish_s.max() * 1e3:9.4f}"
                for roce in others.values()
            ),
            flush=True,
        )
    reference = max(abs(d) for name, d in differences.items() if cases[name][0])
    slowest = min(ratios, key=ratios.get)
    print(f"reference scenarios (all flows at once, bandwidth-bound): max relative difference {reference:.2%}")
    print(
        f"CPU s in all: packet {cpu['packet']:.2f}, flow {cpu['flow']:.3f}; "
        f"least ratio {ratios[slowest]:.0f} ({slowest})"
    )
    worst = max(abs(d) for d in differences.values())
    print(
        f"max relative difference {worst:.1%} over {len(cases)} scenarios; CPU ratio {cpu['packet'] / cpu['flow']:.0f}"
    )


if __name__ == "__main__":
    main()
