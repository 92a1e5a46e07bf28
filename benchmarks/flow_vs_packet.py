"""The flow simulator against the packet simulator at line rate: makespans and CPU seconds.

Why: issue 16 puts a flow level (max-min fair fluid, simulators.flow) between the analytical
model and the packet level, and asks that it agrees with the packet engine within 5 % where
transfers are bandwidth-bound at >= 100x less CPU. Scenarios: the ns-3 reference scenarios
(benchmarks/packet_vs_ns3.py: p2p, incast, leaf-spine), then collectives at 16-512 GPUs of
H100-SXM servers (8 GPUs, 8 NICs of 400 Gb/s) on fabric graphs, every group of a placement
running at once with ECMP routes, as the fidelity levels run a candidate's groups
(simulators/fidelity/_contention.py). The packet engine runs at line rate (no congestion
control, PFC or ECN, unlimited buffers: RoceSettings.line_rate()), the reference a fluid model
approximates. CPU is time.process_time of one run of each, after a warm-up call that loads the
compiled kernels; the flow column includes building its arrays from the Flow values, as a
caller pays it. Message sizes are capped (64 MiB, 16 MiB for the 512-GPU ring) so that no
packet run takes more than about a minute; the whole benchmark takes a few minutes on one core.
Ends with `max relative difference <x>% over <n> scenarios; CPU ratio <r>`: x the largest
|flow / packet - 1| of the makespans, r the smallest packet / flow CPU ratio over scenarios.

    python benchmarks/flow_vs_packet.py [--skip-large]
"""

from __future__ import annotations

import argparse
import time

from packet_vs_ns3 import CASES

from simulators.fidelity._contention import group_flows
from simulators.flow import simulate as simulate_flows
from simulators.hardware import get_gpu
from simulators.network import Fabric, fabric_graph, fabric_links
from simulators.packet import RoceSettings
from simulators.packet import _scenarios as scenarios
from simulators.packet import simulate as simulate_packets

MIB = 1 << 20
GPU = get_gpu("H100-SXM")

# (name, family, oversubscription, GPUs, op, ranks, stride, algorithm, bytes)
COLLECTIVES = [
    ("ls16-ring-ar-16x1-64M", "leaf-spine", 1.0, 16, "all_reduce", 16, 1, "ring", 64 * MIB),
    ("ls64-ring-ar-8x8-64M", "leaf-spine", 1.0, 64, "all_reduce", 8, 8, "ring", 64 * MIB),
    ("ls64os2-ring-ar-8x8-64M", "leaf-spine", 2.0, 64, "all_reduce", 8, 8, "ring", 64 * MIB),
    ("ls64os2-hd-ar-8x8-64M", "leaf-spine", 2.0, 64, "all_reduce", 8, 8, "halving_doubling", 64 * MIB),
    ("ls64os2-pairwise-a2a-8x8-64M", "leaf-spine", 2.0, 64, "all_to_all", 8, 8, "pairwise", 64 * MIB),
    ("ro128-ring-rs-16x8-64M", "rail-optimized", 1.0, 128, "reduce_scatter", 16, 8, "ring", 64 * MIB),
    ("ft256os2-ring-ag-32x8-64M", "fat-tree", 2.0, 256, "all_gather", 32, 8, "ring", 64 * MIB),
    ("ft512-ring-ar-64x8-64M", "fat-tree", 1.0, 512, "all_reduce", 64, 8, "ring", 64 * MIB),
    ("ft512-ring-ar-512x1-16M", "fat-tree", 1.0, 512, "all_reduce", 512, 1, "ring", 16 * MIB),
]
LARGE = {"ft512-ring-ar-64x8-64M", "ft512-ring-ar-512x1-16M"}


def collective(family: str, oversubscription: float, num_gpus: int, op, ranks, stride, algorithm, nbytes):
    """Every group's flows of the collective together on the fabric graph: (links, flows, switches)."""
    fabric = Fabric(family=family, oversubscription=oversubscription)
    graph = fabric_graph(fabric, GPU, num_gpus)
    links, switches, route = fabric_links(graph)
    network = fabric.network(GPU, num_gpus)
    _, together, _ = group_flows(graph, route, network, op, ranks, stride, nbytes, algorithm)
    return links, together, switches


def timed(run):
    start = time.process_time()
    result = run()
    return result, time.process_time() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-large", action="store_true", help="skip the 512-GPU runs (~2 minutes)")
    args = parser.parse_args()
    cases = dict(CASES)
    for name, *spec in COLLECTIVES:
        if not (args.skip_large and name in LARGE):
            cases[name] = lambda spec=spec: collective(*spec)
    warm = scenarios.incast(2, 10_000)
    simulate_flows(warm[0], warm[1])
    simulate_packets(warm[0], warm[1], RoceSettings.line_rate(), warm[2])
    worst, ratios = 0.0, []
    print(
        f"{'scenario':30} {'flows':>7} {'packet ms':>10} {'flow ms':>10} {'rel diff':>9} "
        f"{'packet cpu s':>12} {'flow cpu s':>10} {'ratio':>7} {'rate recomps':>12}"
    )
    for name, build in cases.items():
        links, flows, switches = build()
        packet, packet_cpu = timed(lambda: simulate_packets(links, flows, RoceSettings.line_rate(), switches))
        flow, flow_cpu = timed(lambda: simulate_flows(links, flows))
        difference = flow.finish_s.max() / packet.finish_s.max() - 1
        worst = max(worst, abs(difference))
        ratios.append(packet_cpu / flow_cpu)
        print(
            f"{name:30} {len(flows):7} {packet.finish_s.max() * 1e3:10.4f} {flow.finish_s.max() * 1e3:10.4f} {difference:+9.2%} "
            f"{packet_cpu:12.3f} {flow_cpu:10.4f} {ratios[-1]:7.0f} {flow.recomputations:12}",
            flush=True,
        )
    print(f"max relative difference {worst:.1%} over {len(cases)} scenarios; CPU ratio {min(ratios):.0f}")


if __name__ == "__main__":
    main()
