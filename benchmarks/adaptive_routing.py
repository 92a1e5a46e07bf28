"""Adaptive routing against ECMP hashing at the packet level: where per-packet load balancing
wins, and by how much.

Why: issue 18 asks to show where adaptive routing (per-packet, least-queued next hop, as
Spectrum-X and InfiniBand adaptive routing do) beats ECMP's per-flow hash: hash collisions put
two flows on one uplink while another idles, which all-to-all and rings whose neighbours sit
under different leaves suffer. Scenarios: collectives of H100-SXM servers (8 GPUs, 8 NICs of
400 Gb/s) on the fabric graphs the fidelity levels use, every group at once, on ECMP routes
(simulators/fidelity/_contention.py); then the same flows with RoceSettings.adaptive_routing.
Both runs are lossless (PFC), without congestion control, and the receivers place reordered
packets (selective repeat, a NAK only for a gap 64 packets deep). Ends with `adaptive routing:
faster than ECMP in a of n scenarios, by up to x%; slower by more than 1% in k`.

    python benchmarks/adaptive_routing.py
"""

from __future__ import annotations

import time

from simulators.fidelity._contention import group_flows
from simulators.hardware import get_gpu
from simulators.network import Fabric, fabric_graph, fabric_links
from simulators.packet import RoceSettings, simulate

GPU = get_gpu("H100-SXM")
MIB = 1 << 20
BASE = dict(ecn=False, congestion_control="none", loss_recovery="selective_repeat", reorder_packets=64)
# (family, GPUs, op, ranks, stride, algorithm, bytes per rank)
SCENARIOS = [
    ("leaf-spine", 128, "all_to_all", 16, 8, "direct", 16 * MIB),
    ("leaf-spine", 256, "all_to_all", 32, 8, "direct", 8 * MIB),
    ("leaf-spine", 128, "all_reduce", 16, 8, "ring", 32 * MIB),
    ("leaf-spine", 256, "all_reduce", 32, 8, "ring", 32 * MIB),
    ("rail-optimized", 256, "all_to_all", 32, 8, "direct", 8 * MIB),
    ("rail-optimized", 256, "all_reduce", 32, 8, "ring", 32 * MIB),
]


def run(family: str, num_gpus: int, op: str, ranks: int, stride: int, algorithm: str, nbytes: int):
    fabric = Fabric(family=family)
    graph = fabric_graph(fabric, GPU, num_gpus)
    links, switches, route = fabric_links(graph)
    _, flows, _ = group_flows(graph, route, fabric.network(GPU, num_gpus), op, ranks, stride, nbytes, algorithm)
    out = []
    for adaptive in (False, True):
        start = time.process_time()
        result = simulate(links, flows, RoceSettings(adaptive_routing=adaptive, **BASE), switches)
        out.append((float(result.finish_s.max()), time.process_time() - start, int(result.retransmits.sum())))
    return out


def main() -> None:
    print(f"{'scenario':48} {'ECMP ms':>9} {'AR ms':>9} {'AR/ECMP':>8} {'resends':>8} {'cpu s':>7}")
    gains, slower = [], 0
    for family, num_gpus, op, ranks, stride, algorithm, nbytes in SCENARIOS:
        (ecmp_s, ecmp_cpu, _), (ar_s, ar_cpu, resent) = run(family, num_gpus, op, ranks, stride, algorithm, nbytes)
        name = f"{family} {num_gpus} GPUs {op}/{algorithm} {ranks}x{stride} {nbytes // MIB} MiB"
        cpu_s = ecmp_cpu + ar_cpu
        print(f"{name:48} {ecmp_s * 1e3:9.3f} {ar_s * 1e3:9.3f} {ar_s / ecmp_s:8.3f} {resent:8d} {cpu_s:7.1f}")
        gains.append(1 - ar_s / ecmp_s)
        slower += ar_s > ecmp_s * 1.01
    wins = sum(g > 0.01 for g in gains)
    print(
        f"adaptive routing: faster than ECMP in {wins} of {len(gains)} scenarios, by up to {max(gains) * 100:.1f}%; "
        f"slower by more than 1% in {slower}"
    )


if __name__ == "__main__":
    main()
