"""The contract every registered serving scheduler keeps, and a toy scheduler added at run time."""

import numpy as np
import pytest

from simulators._errors import PlanError, SpecError
from simulators.hardware import get_gpu
from simulators.models import get_model
from simulators.serving import (
    SCHEDULERS,
    Deployment,
    Pool,
    Requests,
    Scheduler,
    get_scheduler,
    make_requests,
    simulate_deployment,
    uniform,
)
from simulators.serving._deployment import pool_costs

H100, LLAMA8B = get_gpu("H100-SXM"), get_model("llama3-8b")
REGISTERED = "static, orca, vllm, trtllm, trtllm_no_evict, sglang, sarathi"  # in registration order
# A combination no entry has: whole prompts beside the decodes (Orca) on a paged cache within a
# token budget, never chunked: a prompt that does not fit what the decodes left waits.
TOY = Scheduler(
    "fcfs_no_chunk",
    "whole prompts beside decodes within a budget (a test scheduler)",
    paged=True,
    mixed=True,
    token_budget=True,
)


def registered(monkeypatch, registry, entry):
    """`entry` in `registry` for one test only (monkeypatch undoes it)."""
    monkeypatch.setitem(registry._entries, entry.name, entry)
    monkeypatch.setitem(registry._keys, entry.name.lower(), entry.name)


@pytest.fixture(params=[*SCHEDULERS, TOY.name])
def scheduler(request, monkeypatch):
    """Every registered scheduler, and the toy one registered for this test only."""
    if request.param == TOY.name:
        registered(monkeypatch, SCHEDULERS, TOY)
    return get_scheduler(request.param)


def trace(arrival_s, prompt, output):
    return Requests(np.asarray(arrival_s, float), np.asarray(prompt), np.asarray(output))


def mixed(n=300, rate=25.0, seed=3):
    return make_requests(n, seed, rate_qps=rate, prompt=uniform(16, 1500), output=uniform(1, 300))


def arrival_ns(requests):
    return np.round((requests.arrival_s - requests.arrival_s[0]) * 1e9).astype(np.int64)


def check_served(result, requests):
    """Every request finishes with exactly its output tokens, its first token after its arrival,
    and the gaps between its tokens tile its decode time."""
    out = requests.output_tokens
    assert (result.done_ns >= result.first_token_ns).all() and (result.first_token_ns > arrival_ns(requests)).all()
    gaps = result.gaps_ns
    assert len(gaps) == int((out - 1).sum()) and (gaps > 0).all()
    per_request = np.add.reduceat(gaps, np.r_[0, np.cumsum(out - 1)[:-1]]) if len(gaps) else np.zeros(len(out))
    decoding = out > 1
    assert np.array_equal(per_request[decoding], (result.done_ns - result.first_token_ns)[decoding])
    ttft, e2e = result.first_token_ns - arrival_ns(requests), result.done_ns - arrival_ns(requests)
    assert (ttft <= e2e).all()


@pytest.mark.parametrize("pp", [1, 2])
def test_every_request_gets_its_tokens_within_the_batch_limits(scheduler, pp):
    requests = mixed()
    budget = 1024 if scheduler.chunked_prefill else 2048  # a whole request fits (1800 tokens at most)
    pool = Pool(scheduler.name, pp=pp, count=2, max_batch_requests=24, max_batch_tokens=budget)
    result = simulate_deployment(Deployment(LLAMA8B, H100, pool), requests)
    check_served(result, requests)
    engine = result.engine
    assert engine.batch_requests_sum.sum() <= engine.iterations.sum() * 24
    if scheduler.token_budget:
        assert engine.batch_tokens_max.max() <= budget
    assert (engine.replica >= 0).all() and (engine.replica < 2).all()


def test_limits_the_engine_would_refuse_are_refused_with_the_reason(scheduler):
    """vLLM's start-up checks: a token budget below the request cap, or (without chunked
    prefill) below the longest request, is refused before anything runs; TensorRT-LLM's: a
    budget below the longest prompt; a scheduler with no token budget has no such limit."""
    requests = trace([0.0, 0.1], [1000, 200], [500, 10])  # the longest request: 1500 tokens
    below_cap = Pool(scheduler.name, max_batch_requests=64, max_batch_tokens=32)
    below_request = Pool(scheduler.name, max_batch_requests=8, max_batch_tokens=1499)
    if not scheduler.token_budget:
        for pool in (below_cap, below_request):
            check_served(simulate_deployment(Deployment(LLAMA8B, H100, pool), requests), requests)
        return
    if scheduler.start_checks == "sglang":  # SGLang chunks any prompt and checks no budget
        for pool in (below_cap, below_request):
            check_served(simulate_deployment(Deployment(LLAMA8B, H100, pool), requests), requests)
        return
    if scheduler.start_checks == "tensorrt_llm" and scheduler.chunked_prefill:  # chunked contexts: no limit
        for pool in (below_cap, Pool(scheduler.name, max_batch_tokens=999)):
            check_served(simulate_deployment(Deployment(LLAMA8B, H100, pool), requests), requests)
        return
    if scheduler.start_checks == "tensorrt_llm":
        with pytest.raises(
            PlanError,
            match=rf"^scheduler {scheduler.name}: max_batch_tokens 999 is below the longest prompt \(1000 tokens\); "
            r".*allowed: max_batch_tokens >= 1000, or a scheduler with chunked prefill "
            r"\(trtllm_no_evict, sglang, sarathi\)$",
        ):
            simulate_deployment(Deployment(LLAMA8B, H100, Pool(scheduler.name, max_batch_tokens=999)), requests)
        fits = Pool(scheduler.name, max_batch_requests=64, max_batch_tokens=1000)  # no request-cap rule
        check_served(simulate_deployment(Deployment(LLAMA8B, H100, fits), requests), requests)
        return
    with pytest.raises(
        PlanError, match=rf"^scheduler {scheduler.name}: max_batch_tokens 32 is below max_batch_requests 64 "
    ):
        simulate_deployment(Deployment(LLAMA8B, H100, below_cap), requests)
    if scheduler.chunked_prefill:
        check_served(simulate_deployment(Deployment(LLAMA8B, H100, below_request), requests), requests)
    else:
        with pytest.raises(
            PlanError,
            match=rf"^scheduler {scheduler.name}: max_batch_tokens 1499 is below the longest request \(1500 tokens\); "
            r".*allowed: max_batch_tokens >= 1500, or a scheduler with chunked prefill "
            r"\(trtllm_no_evict, sglang, sarathi\)$",
        ):
            simulate_deployment(Deployment(LLAMA8B, H100, below_request), requests)
        fits = Pool(scheduler.name, max_batch_requests=8, max_batch_tokens=1500)
        check_served(simulate_deployment(Deployment(LLAMA8B, H100, fits), requests), requests)


def test_an_unset_token_budget_is_the_engines_default():
    """vLLM without chunked prefill: max(max_model_len, 2048); with chunked prefill: 512;
    TensorRT-LLM: 8192."""
    assert Pool("trtllm").token_budget(20000) == 8192
    assert Pool("vllm").token_budget(1500) == 2048 and Pool("vllm").token_budget(9000) == 9000
    assert Pool("sarathi").token_budget(9000) == 512 and Pool("vllm", max_batch_tokens=700).token_budget(9000) == 700


def test_the_kv_cache_never_overflows_and_only_paging_preempts(scheduler):
    tight = Deployment(
        LLAMA8B, H100, Pool(scheduler.name, max_batch_requests=256, max_batch_tokens=4096), memory_fraction=0.23
    )
    requests = make_requests(200, 5, rate_qps=200.0, prompt=uniform(200, 1200), output=uniform(200, 600))
    result = simulate_deployment(tight, requests)
    check_served(result, requests)
    blocks = pool_costs(tight, int(requests.prompt_tokens.max()))[0].kv_blocks
    assert (result.engine.peak_blocks <= blocks).all() and result.metrics["kv_utilisation_peak"] <= 1.0
    if not scheduler.paged:
        assert result.metrics["preemptions"] == 0  # memory for prompt + output is reserved up front


def test_guaranteed_no_evict_admits_what_fits_whole_and_never_pauses():
    """TensorRT-LLM's default capacity policy: a backlog of identical requests runs floor(blocks /
    blocks per whole request) at a time, each holding prompt + output from admission, and none is
    paused; the paged scheduler on the same cache admits more and preempts."""
    prompt, output = 300, 900

    def deployment(name):
        return Deployment(LLAMA8B, H100, Pool(name, max_batch_requests=256, max_batch_tokens=4096), memory_fraction=0.2)

    cost = pool_costs(deployment("trtllm_no_evict"), prompt)[0]
    per_request = -(-(prompt + output) // cost.block_tokens)
    fits = cost.kv_blocks // per_request
    # A backlog of four whole waves of `fits` requests: each iteration must run exactly `fits`,
    # never more (admitting beyond the cache), never fewer (admitting less than fits).
    n = 4 * fits
    requests = Requests(np.zeros(n), np.full(n, prompt), np.full(n, output))

    def run(name):
        return simulate_deployment(deployment(name), requests)

    no_evict = run("trtllm_no_evict")
    check_served(no_evict, requests)
    assert no_evict.metrics["batch_size_mean"] == pytest.approx(fits)
    assert no_evict.engine.peak_blocks[0] == fits * per_request
    assert no_evict.metrics["preemptions"] == 0
    paged = run("sarathi")
    assert paged.metrics["preemptions"] > 0 and paged.metrics["batch_size_mean"] > no_evict.metrics["batch_size_mean"]


def test_a_run_is_a_pure_function_of_its_inputs(scheduler):
    deployment = Deployment(LLAMA8B, H100, Pool(scheduler.name, count=3), router="random")
    requests = mixed(n=150)
    first, second = (simulate_deployment(deployment, requests, seed=9).engine for _ in range(2))
    for a, b in zip(first, second):
        assert np.array_equal(np.asarray(a), np.asarray(b))


def test_disaggregated_pools_serve_every_request(scheduler):
    """Each scheduler prefills for its decode pool; one that can decode also runs a decode pool."""
    requests = mixed(n=150)
    decode = Pool(scheduler.decode_pool, count=2, max_batch_requests=32)  # the engine's default budget
    split = Deployment(LLAMA8B, H100, Pool(scheduler.name, count=2, max_batch_tokens=2048), decode=decode)
    result = simulate_deployment(split, requests)
    check_served(result, requests)
    assert set(result.replica[requests.output_tokens > 1]) <= {2, 3}  # decoded in the decode pool
    if scheduler.can_decode:
        behind = Deployment(LLAMA8B, H100, Pool("sarathi"), decode=Pool(scheduler.name, count=2))
        check_served(simulate_deployment(behind, requests), requests)
    else:
        with pytest.raises(
            SpecError, match="^decode.scheduler: .* is not allowed; allowed: vllm, trtllm, sglang, sarathi"
        ):
            Deployment(LLAMA8B, H100, Pool("sarathi"), decode=Pool(scheduler.name))


def test_the_toy_scheduler_admits_one_whole_prompt_an_iteration(monkeypatch):
    """Six 600-token prompts at once, one output token each, a 900-token budget: the toy never
    cuts a prompt, so iteration j prefills request j alone and its first token comes at exactly
    (j + 1) times the first one's; Sarathi's chunks fill the budget, so the 3,600 tokens take it
    four iterations, not six. (Whether that is sooner depends on the GEMM model's partial waves,
    not on the scheduler: with stream-K on H100 a 900-row GEMM costs 1.5x a 600-row one.)"""
    registered(monkeypatch, SCHEDULERS, TOY)
    requests = trace([0.0] * 6, [600] * 6, [1] * 6)
    toy, sarathi = (
        simulate_deployment(Deployment(LLAMA8B, H100, Pool(name, max_batch_tokens=900)), requests)
        for name in (TOY.name, "sarathi")
    )
    step = toy.first_token_ns[0]
    assert np.array_equal(toy.first_token_ns, step * np.arange(1, 7))
    assert toy.engine.batch_tokens_max.max() == 600 and sarathi.engine.batch_tokens_max.max() == 900
    assert toy.engine.iterations.sum() == 6 and sarathi.engine.iterations.sum() == 4


def test_an_unknown_scheduler_is_one_line_naming_the_registered_ones():
    with pytest.raises(SpecError, match=f"^scheduler: 'vlm' is not a known scheduler .*; allowed: {REGISTERED}$"):
        Pool("vlm")
    with pytest.raises(SpecError, match="static_batch takes no other trait"):
        Scheduler("broken", "a static batch that pages", static_batch=True, paged=True)
    with pytest.raises(SpecError, match="chunked_prefill needs token_budget"):
        Scheduler("broken", "chunks without a budget", paged=True, mixed=True, chunked_prefill=True)


def test_a_scheduler_registered_at_run_time_reaches_the_spec(monkeypatch, write_spec):
    from dse.evaluation.serving import deployment_of
    from dse.evaluation.space import SearchSpace
    from dse.spec import load_study
    from dse.study import resolve_study
    from tests.conftest import SERVING_SPEC
    from tests.dse.evaluation.test_serving_study import candidate

    text = SERVING_SPEC.replace("scheduler: [vllm, sarathi]", f"scheduler: [{TOY.name}, static]")
    with pytest.raises(Exception, match=f"'{TOY.name}' is not allowed; allowed: {REGISTERED}"):
        load_study(write_spec(text))
    registered(monkeypatch, SCHEDULERS, TOY)
    resolved = resolve_study(load_study(write_spec(text)))
    assert SearchSpace.from_study(resolved).values["scheduler"] == (TOY.name, "static")
    split = deployment_of(resolved, candidate(scheduler=TOY.name, disaggregated=True))
    assert split.pool.scheduler == TOY.name and split.decode.scheduler == TOY.name  # it pages, so it decodes
    static = deployment_of(resolved, candidate(scheduler="static", disaggregated=True))
    assert static.decode.scheduler == get_scheduler("static").decode_pool == "vllm"
