"""The registered congestion control algorithms side by side on the ns-3 reference scenarios.

Why: issue 18 registers TIMELY and HPCC beside DCQCN and none (simulators/packet/_cc_*.py) and
asks how they compare where congestion happens: the incasts (8, 16, 32 senders of 1 MB into one
100 Gb/s port) and the leaf-spine all-to-all (16 hosts, 1 MB to each other host) of
../shared/reference/ns3, framed as there (benchmarks/packet_vs_ns3.py builds them). Every run
is RoCE as the packet level runs it: RoceSettings' defaults (32 MB shared buffer, PFC, ECN,
per-packet ACKs) with the algorithm's paper parameters. Per scenario and algorithm: the flow
completion times (p50, p99, max, us), the highest queue of any switch port (KB: a host's NIC
queue grows without bound while PFC pauses it, or when its flows together outpace it, as the
all-to-all's 15 line-rate flows a host do), the PFC pause frames
sent, and CPU seconds (time.process_time, best of three runs after a warm-up that loads the
compiled engine), beside ns-3's CPU for the scenario (its UDP run at line rate, the best of its
stored repetitions, as packet_vs_ns3.py reads it; its DCTCP run too, for context). Ends with
`cc: <n> scenarios × <k> algorithms; packet CPU ratio vs ns-3 <y>`, y the smallest ns-3 UDP
CPU / packet CPU over every scenario and algorithm.

    python benchmarks/congestion_control.py [--reference FILE]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from packet_vs_ns3 import CASES, REFERENCE_DIR, load  # noqa: E402

from simulators.packet import CONGESTION_CONTROLS, RoceSettings, simulate  # noqa: E402

SCENARIOS = ["incast8-udp-1MB", "incast16-udp-1MB", "incast32-udp-1MB", "ls16-udp-a2a-up200-1MB"]


def tcp_cpu_s(path: Path) -> dict[str, float]:
    """ns-3's DCTCP run of each scenario (best CPU of its repetitions), by the UDP run's name."""
    best: dict[str, float] = {}
    for line in path.read_text().splitlines():
        row = json.loads(line)
        if row["transport"] == "tcp":
            name = row["name"].replace("-tcp-", "-udp-")
            best[name] = min(best.get(name, np.inf), row["run_cpu_s"])
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default = REFERENCE_DIR / "ns3_results.jsonl"
    parser.add_argument("--reference", type=Path, default=default, help="stored ns-3 results (jsonl)")
    args = parser.parse_args()
    udp, tcp = load(args.reference), tcp_cpu_s(args.reference)
    warm = CASES["incast8-udp-1MB"]()
    for name in CONGESTION_CONTROLS:
        simulate(warm[0], warm[1][:2], RoceSettings(congestion_control=name), warm[2])
    head = f"{'p50 us':>9} {'p99 us':>9} {'max us':>9} {'queue KB':>9} {'pauses':>7} {'cpu s':>7}"
    print(f"{'scenario':24} {'cc':7} {head} {'ns-3 udp/tcp cpu s':>19} {'ratio':>6}")
    ratios = []
    for scenario in SCENARIOS:
        links, flows, switches = CASES[scenario]()
        ports = [i for i, link in enumerate(links) if link.src in switches]
        for name in CONGESTION_CONTROLS:
            settings = RoceSettings(congestion_control=name)
            cpu = []
            for _ in range(3):
                start = time.process_time()
                result = simulate(links, flows, settings, switches)
                cpu.append(time.process_time() - start)
            fct_us = np.percentile(result.fct_s * 1e6, [50, 99, 100])
            ratios.append(udp[scenario]["run_cpu_s"] / min(cpu))
            cells = " ".join(f"{v:9.1f}" for v in fct_us)
            ns3 = f"{udp[scenario]['run_cpu_s']:.3f}/{tcp.get(scenario, np.nan):.3f}"
            print(
                f"{scenario:24} {name:7} {cells} {result.queue_max_bytes[ports].max() / 1e3:9.1f} "
                f"{int(result.pause_frames.sum()):7d} {min(cpu):7.4f} {ns3:>19} {ratios[-1]:6.1f}"
            )
    print(
        f"cc: {len(SCENARIOS)} scenarios × {len(CONGESTION_CONTROLS)} algorithms; "
        f"packet CPU ratio vs ns-3 {min(ratios):.1f}"
    )


if __name__ == "__main__":
    main()
