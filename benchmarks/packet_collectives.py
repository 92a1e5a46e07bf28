"""Ring all-reduce in the packet simulator against the alpha-beta formula, and its speed.

Why: issue 6 asks that a ring all-reduce on 16-128 GPUs of a non-blocking fabric matches the
alpha-beta formula within 2 % for large messages, and that a 128-GPU ring all-reduce of 1 GiB is
simulated in under a minute on one core. The fabric is one 400 Gb/s switch (non-blocking); the
formula is Thakur et al.'s 2(n-1) alpha + 2 (n-1)/n S beta with beta = 1 / 400 Gb/s and alpha
the store-and-forward latency of a step (pace of the first packet, its serialisation on the
second hop, two 1 us links).

    python benchmarks/packet_collectives.py [--skip-large]
"""

from __future__ import annotations

import argparse
import time

from simulators.packet import RoceSettings, collective_flows, simulate
from simulators.packet._scenarios import star

GBPS, MTU, DELAY_S = 400, 4096, 1e-6


def ring(n: int, nbytes: int) -> tuple[float, float, float]:
    """(simulated s, formula s, CPU s) for a ring all-reduce of `nbytes` on n GPUs."""
    links, switches, route = star(n, GBPS, DELAY_S)
    flows = collective_flows("all_reduce", [list(range(n))], nbytes, route, mtu_bytes=MTU)
    start = time.process_time()
    result = simulate(links, flows, RoceSettings.line_rate(), switches)
    cpu = time.process_time() - start
    packet_s = MTU * 8 / (GBPS * 1e9)
    alpha = 2 * packet_s + 2 * DELAY_S
    formula = 2 * (n - 1) * alpha + 2 * (n - 1) / n * nbytes * 8 / (GBPS * 1e9)
    return float(result.finish_s.max()), formula, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-large", action="store_true", help="skip the 128-GPU 1 GiB run (~30 s)")
    args = parser.parse_args()
    ring(2, 1 << 16)  # load the compiled engine
    cases = [(16, 256 << 20), (32, 256 << 20), (64, 256 << 20)] + ([] if args.skip_large else [(128, 1 << 30)])
    print(f"{'GPUs':>5} {'bytes':>12} {'simulated s':>12} {'formula s':>12} {'difference':>10} {'CPU s':>7}")
    for n, nbytes in cases:
        simulated, formula, cpu = ring(n, nbytes)
        print(f"{n:5} {nbytes:12} {simulated:12.6f} {formula:12.6f} {simulated / formula - 1:+10.2e} {cpu:7.2f}")


if __name__ == "__main__":
    main()
