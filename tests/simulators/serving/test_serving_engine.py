"""The serving simulator against queueing theory, conservation laws and hand-built traces."""

import numpy as np
import pytest

from simulators._errors import SpecError
from simulators.hardware import get_gpu
from simulators.models import get_model
from simulators.serving import (
    SLO,
    Deployment,
    Pool,
    Requests,
    capacity_search,
    fixed,
    kv_transfer_s,
    make_requests,
    simulate_deployment,
    uniform,
)
from simulators.serving._deployment import pool_costs

H100, LLAMA8B = get_gpu("H100-SXM"), get_model("llama3-8b")


def deploy(scheduler="sarathi", decode=None, **pool):
    return Deployment(LLAMA8B, H100, Pool(scheduler, **pool), decode=decode)


def trace(arrival_s, prompt, output):
    return Requests(np.asarray(arrival_s, float), np.asarray(prompt), np.asarray(output))


def mixed(n=400, rate=20.0, seed=3):
    return make_requests(n, seed, rate_qps=rate, prompt=uniform(16, 1500), output=uniform(1, 300))


def test_single_server_batch_of_one_waits_as_m_d_1():
    """Batch cap 1, fixed prompts, one output token: a single server with deterministic service
    D; Poisson arrivals at load rho wait rho * D / (2 (1 - rho)) on average (Pollaczek-Khinchine)."""
    alone = simulate_deployment(deploy("vllm", max_batch_requests=1, max_batch_tokens=1024), trace([0.0], [512], [1]))
    service_s = alone.metrics["ttft_p50_s"]
    rate = 0.5 / service_s
    requests = make_requests(40_000, 11, rate_qps=rate, prompt=fixed(512), output=fixed(1))
    result = simulate_deployment(deploy("vllm", max_batch_requests=1, max_batch_tokens=1024), requests)
    ttft = (result.first_token_ns - np.round((requests.arrival_s - requests.arrival_s[0]) * 1e9)) / 1e9
    expected_wait = 0.5 * service_s / (2 * (1 - 0.5))
    assert ttft.mean() - service_s == pytest.approx(expected_wait, rel=0.08)


@pytest.mark.parametrize("scheduler", ["static", "orca", "vllm", "sarathi"])
def test_every_request_gets_exactly_its_output_tokens(scheduler):
    requests = mixed()
    result = simulate_deployment(deploy(scheduler, count=2, max_batch_requests=32, max_batch_tokens=2048), requests)
    gaps = result.gaps_ns
    assert len(gaps) == int((requests.output_tokens - 1).sum()) and (gaps > 0).all()
    arrival_ns = np.round((requests.arrival_s - requests.arrival_s[0]) * 1e9)
    assert (result.first_token_ns > arrival_ns).all() and (result.done_ns >= result.first_token_ns).all()
    per_request = np.add.reduceat(gaps, np.r_[0, np.cumsum(requests.output_tokens - 1)[:-1]]) if len(gaps) else []
    decoding = requests.output_tokens > 1
    assert np.array_equal(
        np.asarray(per_request)[decoding], (result.done_ns - result.first_token_ns)[decoding]
    )  # the gaps of a request tile its decode time exactly


def test_vllm_preempts_when_memory_runs_out_and_every_request_still_finishes():
    tight = Deployment(LLAMA8B, H100, Pool("vllm", max_batch_requests=256, max_batch_tokens=4096), memory_fraction=0.23)
    requests = make_requests(300, 5, rate_qps=200.0, prompt=uniform(200, 1200), output=uniform(200, 600))
    result = simulate_deployment(tight, requests)
    assert result.metrics["preemptions"] > 0
    assert result.metrics["kv_utilisation_peak"] <= 1.0
    assert len(result.gaps_ns) == int((requests.output_tokens - 1).sum()) and (result.done_ns > 0).all()


def test_sarathi_iterations_never_exceed_the_token_budget():
    result = simulate_deployment(deploy("sarathi", max_batch_requests=64, max_batch_tokens=256), mixed(rate=50.0))
    assert result.engine.batch_tokens_max.max() <= 256
    assert result.metrics["kv_utilisation_peak"] <= 1.0


def test_static_batching_makes_late_arrivals_wait_for_the_whole_batch():
    requests = trace([0.0, 0.0, 0.001], [100, 100, 100], [50, 20, 1])
    static = simulate_deployment(deploy("static", max_batch_requests=4, max_batch_tokens=4096), requests)
    assert static.first_token_ns[2] > static.done_ns[:2].max()
    orca = simulate_deployment(deploy("orca", max_batch_requests=4, max_batch_tokens=4096), requests)
    assert orca.first_token_ns[2] < orca.done_ns[1]  # iteration-level scheduling lets it in at once


def test_disaggregation_adds_exactly_the_kv_transfer_to_one_request():
    requests = trace([0.0], [1000], [20])
    unified = simulate_deployment(deploy("sarathi", max_batch_tokens=2048), requests)
    split = deploy("sarathi", max_batch_tokens=2048, decode=Pool("vllm", max_batch_tokens=2048))
    disaggregated = simulate_deployment(split, requests)
    transfer_ns = round(float(kv_transfer_s(split, pool_costs(split, 1000)[0], np.array([1000]))[0]) * 1e9)
    assert transfer_ns > 0
    assert disaggregated.first_token_ns[0] == unified.first_token_ns[0]
    assert disaggregated.done_ns[0] - unified.done_ns[0] == transfer_ns


def test_capacity_grows_with_replicas_and_is_the_edge_of_the_slo():
    def stream(qps):
        return make_requests(600, 1, rate_qps=qps, prompt=uniform(100, 2000), output=uniform(10, 300))

    slo = dict(ttft_p90_s=1.0, tbt_p99_s=0.1)
    one = capacity_search(deploy("sarathi", max_batch_tokens=512), stream, **slo, start_qps=2.0)
    two = capacity_search(deploy("sarathi", count=2, max_batch_tokens=512), stream, **slo, start_qps=2.0)
    assert 0 < one.qps < two.qps
    assert one.result.metrics["ttft_p90_s"] <= 1.0 and one.result.metrics["tbt_p99_s"] <= 0.1
    failed_above = [qps for qps, ok in one.probes if not ok]
    assert failed_above and min(failed_above) <= one.qps * 1.05  # bracketed within the tolerance


def test_slo_attainment_counts_requests_within_both_bounds():
    result = simulate_deployment(deploy(), mixed(rate=5.0), slo=SLO(ttft_s=10.0, tbt_s=10.0))
    assert result.metrics["slo_attainment"] == 1.0
    assert result.metrics["goodput_rps"] == pytest.approx(result.metrics["requests_per_s"])


def test_pipeline_parallel_replicas_keep_batches_in_flight_and_conserve_tokens():
    """With pp = 2 each stage holds half the layers and a second batch enters the first stage
    while the first is in the second: under a backlog the replica serves well over the tokens per
    second of one GPU (one batch at a time would serve about the same), losing none."""
    backlog = make_requests(400, 2, rate_qps=None, arrival="static", prompt=uniform(64, 512), output=uniform(50, 200))
    pool = dict(max_batch_requests=32, max_batch_tokens=512)
    one = simulate_deployment(deploy("sarathi", **pool), backlog)
    two = simulate_deployment(deploy("sarathi", pp=2, **pool), backlog)
    assert len(two.gaps_ns) == int((backlog.output_tokens - 1).sum()) and (two.gaps_ns > 0).all()
    ratio = two.metrics["throughput_tok_s"] / one.metrics["throughput_tok_s"]
    assert ratio > 1.5  # batches overlap in the stages; one batch at a time would give about 1
    assert ratio <= 2.0  # never more than twice: two GPUs (the last stage also runs the logits)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        (dict(precision="bf61"), "^precision: 'bf61' is not allowed; allowed: fp16, bf16, fp8, fp4$"),
        (dict(kv_precision="int4"), "^kv_precision: 'int4' is not allowed; allowed: bf16, fp16, fp8$"),
        (dict(block_tokens=0), "^block_tokens: 0 is not allowed; allowed: a positive integer$"),
        (dict(memory_fraction=0.0), r"^memory_fraction: 0.0 is not allowed; allowed: a number in \(0, 1\]$"),
        (dict(compute_fraction=1.5), r"^compute_fraction: 1.5 is not allowed; allowed: a number in \(0, 1\]$"),
    ],
)
def test_bad_deployment_fields_give_one_line_errors(fields, message):
    with pytest.raises(SpecError, match=message):
        Deployment(LLAMA8B, H100, Pool(), **fields)


def test_an_empty_request_stream_is_refused():
    empty = np.zeros(0, np.int64)
    with pytest.raises(SpecError, match="^requests: 0 requests; allowed: at least one$"):
        simulate_deployment(deploy(), Requests(np.zeros(0), empty, empty))
