"""Speed of the serving simulator on Vidur's reference run, and of a capacity search.

Why: issue 5 targets start-up under 1 s, at least 20,000 simulated requests per CPU-second for
Llama-2-70B, TP4 x 2 replicas, Sarathi-Serve, 10,000 arXiv-length requests (Vidur: about 200),
and a capacity search under 10 s per configuration on one core; issue 17 keeps the rate with
MoE and prefix caching on (Mixtral-8x7B on H100, data-parallel attention with expert
parallelism, a quarter of each prompt cached). CPU seconds are this process's
(time.process_time), measured after a warm-up call that loads the compiled engine.

    python benchmarks/serving_speed.py
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from _serving_setups import REQUESTS, arxiv_requests, deployment

from simulators.hardware import get_gpu, sustained_compute_fraction
from simulators.models import get_model
from simulators.serving import Deployment, Pool, capacity_search, simulate_deployment

STARTUP = """
import time; start = time.perf_counter()
import sys; sys.path.insert(0, {here!r})
from _serving_setups import arxiv_requests, deployment
from simulators.serving import simulate_deployment
simulate_deployment(deployment("sarathi", 4, 1, 2, 512), arxiv_requests(1.5, n=100))
print(time.perf_counter() - start)
"""


def main() -> None:
    here = str(Path(__file__).resolve().parent)
    startup_s = float(
        subprocess.run(
            [sys.executable, "-c", STARTUP.format(here=here)], capture_output=True, text=True, check=True
        ).stdout
    )
    print(f"start-up (imports, cost tables, cached engine, 100 requests): {startup_s:.2f} s")
    sarathi = deployment("sarathi", 4, 1, 2, 512)
    requests = arxiv_requests(1.5)
    simulate_deployment(sarathi, arxiv_requests(1.5, n=200))  # warm
    start = time.process_time()
    simulate_deployment(sarathi, requests)
    cpu_s = time.process_time() - start
    print(
        f"Sarathi 512, TP4 x 2, {REQUESTS} arXiv requests at 1.5 QPS: {cpu_s:.2f} CPU-s = "
        f"{REQUESTS / cpu_s:,.0f} requests per CPU-second"
    )
    h100 = get_gpu("H100-SXM")
    moe = Deployment(
        get_model("mixtral-8x7b"),
        h100,
        Pool("sarathi", tp=4, count=2, max_batch_requests=128, max_batch_tokens=512, moe_parallel="dp_ep"),
        compute_fraction=sustained_compute_fraction(h100),
        prefix_hit=0.25,
    )
    simulate_deployment(moe, arxiv_requests(3.0, n=200))  # warm: its cost tables
    start = time.process_time()
    simulate_deployment(moe, arxiv_requests(3.0))
    cpu_s = time.process_time() - start
    print(
        f"Mixtral-8x7B dp_ep, Sarathi 512, TP4 x 2, prefix caching 0.25, {REQUESTS} arXiv requests at 3 QPS: "
        f"{cpu_s:.2f} CPU-s = {REQUESTS / cpu_s:,.0f} requests per CPU-second"
    )
    four = deployment("sarathi", 4, 1, 4, 512, "least_outstanding")
    start = time.process_time()
    found = capacity_search(four, lambda qps: arxiv_requests(qps, n=2000))
    cpu_s = time.process_time() - start
    print(
        f"capacity search, Sarathi 512, TP4 x 4 (2,000 requests per probe, TTFT p90 <= 2 s, TBT p99 <= 200 ms): "
        f"{found.qps:.3g} QPS in {len(found.probes)} probes, {cpu_s:.2f} CPU-s"
    )


if __name__ == "__main__":
    main()
