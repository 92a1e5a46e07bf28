"""The Vidur reference setups (../shared/reference/vidur/README.md), shared by the serving
speed and comparison scripts: Llama-2-70B on A100-80GB, arXiv-summarisation lengths capped at
4,096 tokens, Poisson arrivals, 10,000 requests, batch cap 128."""

from __future__ import annotations

from functools import cache
from pathlib import Path

from simulators.hardware import get_gpu, sustained_compute_fraction
from simulators.models import get_model
from simulators.serving import Deployment, Pool, load_trace, make_requests

TRACE = (
    Path(__file__).resolve().parents[1]
    / "../shared/reference/traces/arxiv_summarization_stats_llama2_tokenizer_filtered_v2.csv"
).resolve()
REQUESTS = 10_000


@cache
def _arxiv_trace():
    return load_trace(TRACE, max_tokens=4096)


def arxiv_requests(qps: float, n: int = REQUESTS, seed: int = 0):
    """The trace is read once per process: a capacity search asks for a stream at every rate it probes."""
    return make_requests(n, seed, rate_qps=qps, trace=_arxiv_trace())


def deployment(scheduler: str, tp: int, pp: int, replicas: int, budget: int, router: str = "round_robin"):
    pool = Pool(scheduler, tp=tp, pp=pp, count=replicas, max_batch_requests=128, max_batch_tokens=budget)
    gpu = get_gpu("A100-80GB")
    return Deployment(
        get_model("llama2-70b"),
        gpu,
        pool,
        router=router,
        precision="fp16",
        compute_fraction=sustained_compute_fraction(gpu),
    )


# name -> (deployment, qps, Vidur's figures: TTFT p50/p90/p99 s, TBT p50/p90/p99 ms, TPOT p50 ms,
# E2E p50/p99 s, req/s, output tok/s, MFU %)
VIDUR_RUNS = {
    "Sarathi 512, TP4 x 2, 1.5 QPS": (
        lambda: deployment("sarathi", 4, 1, 2, 512),
        1.5,
        (0.816, 1.272, 2.031, 42.0, 124.6, 128.4, 60.5, 11.2, 197, 1.55, 451, 23.0),
    ),
    "vLLM 4096, TP4 x 2, 1.5 QPS": (
        lambda: deployment("vllm", 4, 1, 2, 4096),
        1.5,
        (0.624, 0.872, 1.404, 41.1, 42.3, 808, 67.2, 12.1, 221, 1.55, 451, 23.5),
    ),
    "Sarathi 512, TP4 x 4, LOR, 3 QPS": (
        lambda: deployment("sarathi", 4, 1, 4, 512, "least_outstanding"),
        3.0,
        (1.059, 1.687, 2.039, None, None, None, 90.8, 15.7, 306, 3.04, 884, 22.6),
    ),
    "Sarathi 512, TP2-PP2 x 2, 1.5 QPS": (
        lambda: deployment("sarathi", 2, 2, 2, 512),
        1.5,
        (1.335, 1.806, 2.349, 63.9, 216, 283, 124.4, 22.2, 399, 1.53, 446, 22.8),
    ),
}
