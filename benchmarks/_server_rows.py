"""MLPerf Inference Server rows of ../shared/validation/serving.csv as simulator runs.

Why a module of its own: the accuracy benchmark and its test share the mapping from a row to a
run (replicas, rate, data set, engine limits), and one run answers all eight metrics of a
submission (requests/s, output tokens/s, TTFT avg/p50/p99, ITL avg/p99, end-to-end avg).

The mapping, each part a stated assumption of the replay:
- Replicas: `replicas` independent tp x pp instances (replicas*tp*pp = num_gpus), behind the
  least-outstanding-requests router, as a real load balancer dispatches (nginx least_conn,
  Envoy LEAST_REQUEST); the NVIDIA harness's own dispatch is not stated in the files read.
- Load: open-loop Poisson arrivals at the row's `qps` (LoadGen's Server scenario) for LoadGen's
  minimum Server duration, 600 s (mlperf.conf `*.Server.min_duration = 600000`).
- Lengths: the row's data set from simulators/serving/datasets.yaml (its assumption is printed).
- Engine: in-flight batching with context chunking, as the offline TensorRT-LLM rows; the
  in-flight cap is the config's gpu_batch_size and the token budget its max_num_tokens where the
  row's notes state them, else TensorRT-LLM's defaults (2,048 sequences, 8,192 tokens).
- ITL is LoadGen's "Time to Output Token", a per-request TPOT ((end - first token) / (output -
  1)), so it maps to the simulator's per-request TPOT, not to its pooled token gaps (TBT).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache

import numpy as np

from simulators.hardware import get_gpu, sustained_compute_fraction
from simulators.models import get_model
from simulators.serving import Deployment, Pool, get_dataset, make_requests, simulate_deployment

SERVER_SECONDS = 600.0  # LoadGen's minimum Server run
ROUTER = "least_outstanding"
DEFAULT_MAX_REQUESTS = 2048  # TensorRT-LLM's largest default max_batch_size
DEFAULT_TOKEN_BUDGET = 8192  # TensorRT-LLM's default max_num_tokens
SERVER_METRICS = (
    "requests_per_s",
    "throughput_tokens_per_s",
    "ttft_ms_avg",
    "ttft_ms_p50",
    "ttft_ms_p99",
    "itl_ms_avg",
    "itl_ms_p99",
    "e2e_s_avg",
)


@dataclass(frozen=True)
class ServerRun:
    """One Server submission as the simulator replays it."""

    model: str
    gpu: str
    precision: str
    tp: int
    pp: int
    replicas: int
    qps: float
    dataset: str  # canonical name in datasets.yaml
    max_batch_requests: int
    max_batch_tokens: int


def _stated(notes: str, knob: str, default: int) -> int:
    found = re.search(rf"\b{knob} (\d+)", notes)
    return int(found.group(1)) if found else default


def server_run(row: dict[str, str], zoo_model: str, precision: str) -> ServerRun:
    """The run of an open-loop (qps) row; ValueError when replicas*tp*pp is not num_gpus."""
    tp, pp, gpus = int(row["tp"] or 1), int(row["pp"] or 1), int(row["num_gpus"])
    replicas = int(row["replicas"]) if row.get("replicas") else gpus // (tp * pp)
    if replicas * tp * pp != gpus:
        raise ValueError(f"{row['id']}: replicas {replicas} x tp {tp} x pp {pp} != num_gpus {gpus}")
    return ServerRun(
        model=zoo_model,
        gpu=row["gpu"],
        precision=precision,
        tp=tp,
        pp=pp,
        replicas=replicas,
        qps=float(row["qps"]),
        dataset=get_dataset(row["dataset"]).name,
        max_batch_requests=_stated(row["notes"], "gpu_batch_size", DEFAULT_MAX_REQUESTS),
        max_batch_tokens=_stated(row["notes"], "max_num_tokens", DEFAULT_TOKEN_BUDGET),
    )


@cache
def server_metrics(run: ServerRun, seconds: float = SERVER_SECONDS, seed: int = 0) -> dict[str, float]:
    """The eight Server metrics of `run`, in the CSV's names and units (ms, s, /s)."""
    pool = Pool(
        "sarathi",
        tp=run.tp,
        pp=run.pp,
        count=run.replicas,
        max_batch_requests=run.max_batch_requests,
        max_batch_tokens=run.max_batch_tokens,
    )
    gpu = get_gpu(run.gpu)
    deployment = Deployment(
        get_model(run.model),
        gpu,
        pool,
        router=ROUTER,
        precision=run.precision,
        kv_precision="fp8" if run.precision == "fp8" else "bf16",
        compute_fraction=sustained_compute_fraction(gpu),
    )
    prompt, output = get_dataset(run.dataset).lengths()
    n = max(1, round(run.qps * seconds))
    requests = make_requests(n, seed, rate_qps=run.qps, prompt=prompt, output=output)
    result = simulate_deployment(deployment, requests, seed=seed)
    arrival_ns = (requests.arrival_s - requests.arrival_s[0]) * 1e9
    ttft_ms = (result.first_token_ns - arrival_ns) / 1e6
    e2e_s = (result.done_ns - arrival_ns) / 1e9
    many = requests.output_tokens > 1
    tpot_ms = (result.done_ns - result.first_token_ns)[many] / 1e6 / (requests.output_tokens[many] - 1)
    return {
        "requests_per_s": result.metrics["requests_per_s"],
        "throughput_tokens_per_s": result.metrics["throughput_tok_s"],
        "ttft_ms_avg": float(ttft_ms.mean()),
        "ttft_ms_p50": float(np.percentile(ttft_ms, 50)),
        "ttft_ms_p99": float(np.percentile(ttft_ms, 99)),
        "itl_ms_avg": float(tpot_ms.mean()),
        "itl_ms_p99": float(np.percentile(tpot_ms, 99)),
        "e2e_s_avg": float(e2e_s.mean()),
    }
