"""How the TCP replay's time grows with message size on this machine (loopback, local processes).

Why: a test cannot assert on this (`large > 2 x small` failed 6 of 21 times on a busy machine),
but whether the replay measures bandwidth at all, not just per-message overhead, is worth a
number: an all-reduce of 128x the bytes should take many times longer, and each rank's steps
for the large message should all take longer than any rank's for the small one.

    python benchmarks/tcp_replay.py [--ranks 2] [--iters 5]
"""

from __future__ import annotations

import argparse

from simulators.rdma import Traffic, replay_many

SIZES = (64 << 10, 1 << 20, 8 << 20)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--iters", type=int, default=5)
    args = parser.parse_args()
    results = replay_many([Traffic("all_reduce", n) for n in SIZES], "tcp", args.ranks, iters=args.iters)
    print(f"all_reduce over TCP on {args.ranks} local ranks, median of {args.iters} iterations")
    print(f"{'bytes':>10} {'time ms':>9} {'busbw GB/s':>11} {'x time of smallest':>19}")
    for nbytes, res in zip(SIZES, results):
        ratio = res.time_s / results[0].time_s
        print(f"{nbytes:>10} {res.time_s * 1e3:>9.3f} {res.busbw_gbytes_per_s:>11.3f} {ratio:>19.1f}")
    small, large = results[0], results[-1]
    separated = large.step_s.sum(axis=2).min() > small.step_s.sum(axis=2).max()
    print(f"every rank's and iteration's {SIZES[-1]} B steps slower than any {SIZES[0]} B ones: {separated}")


if __name__ == "__main__":
    main()
