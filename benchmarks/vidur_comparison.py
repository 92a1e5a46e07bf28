"""dse's serving simulator beside Vidur's reference runs (../shared/reference/vidur/README.md).

Why: Vidur is the tool dse replaces for serving; on the same model, GPUs, lengths, arrival rate
and scheduler the two should tell the same story. Prints, per run, Vidur's figures and ours.

    python benchmarks/vidur_comparison.py
"""

from __future__ import annotations

from _serving_setups import VIDUR_RUNS, arxiv_requests

from simulators.serving import simulate_deployment

COLUMNS = (
    ("TTFT p50 s", "ttft_p50_s", 1),
    ("TTFT p90 s", "ttft_p90_s", 1),
    ("TTFT p99 s", "ttft_p99_s", 1),
    ("TBT p50 ms", "tbt_p50_s", 1e3),
    ("TBT p90 ms", "tbt_p90_s", 1e3),
    ("TBT p99 ms", "tbt_p99_s", 1e3),
    ("TPOT p50 ms", "tpot_p50_s", 1e3),
    ("E2E p50 s", "e2e_p50_s", 1),
    ("E2E p99 s", "e2e_p99_s", 1),
    ("req/s", "requests_per_s", 1),
    ("out tok/s", "throughput_tok_s", 1),
    ("MFU %", "mfu", 100),
)


def main() -> None:
    for name, (make, qps, vidur) in VIDUR_RUNS.items():
        metrics = simulate_deployment(make(), arxiv_requests(qps)).metrics
        print(f"\n{name}")
        print(f"  {'':12} {'Vidur':>9} {'dse':>9}")
        for (label, key, scale), theirs in zip(COLUMNS, vidur):
            shown = "-" if theirs is None else f"{theirs:.4g}"
            print(f"  {label:12} {shown:>9} {metrics[key] * scale:9.4g}")


if __name__ == "__main__":
    main()
