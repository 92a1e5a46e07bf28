"""Inference studies end to end: spec, knobs, capacity per candidate, reports."""

import dataclasses
import re
from pathlib import Path

import numpy as np
import pytest

from dse.errors import DseError
from dse.evaluation.evaluate import Evaluator
from dse.evaluation.serving import deployment_of, request_stream
from dse.evaluation.space import SERVING_KNOBS, SearchSpace
from dse.report.files import write_reports
from dse.search.engine import RunSettings, run_search
from dse.spec import load_study
from dse.study import resolve_study
from simulators.hardware import get_gpu
from simulators.models import get_model
from simulators.serving import Deployment, Pool, Requests, capacity_search, simulate_deployment
from simulators.serving._deployment import pool_costs
from tests.conftest import SERVING_SPEC


def candidate(**changes):
    """A trial's params: tp 2 x 2 sarathi replicas of H100s, not disaggregated, unless changed."""
    params = dict(
        gpu="H100-SXM",
        tp=2,
        pp=1,
        moe_parallel="tp",
        replicas=2,
        scheduler="sarathi",
        max_batch_requests=128,
        max_batch_tokens=512,
        prefix_caching=False,
        speculative_tokens=0,
        speculative_acceptance=0.7,
        router="round_robin",
        disaggregated=False,
        decode_tp=1,
        decode_replicas=1,
    )
    return params | changes


def test_an_inference_spec_searches_serving_knobs_with_serving_objectives(write_spec):
    resolved = resolve_study(load_study(write_spec(SERVING_SPEC)))
    space = SearchSpace.from_study(resolved)
    assert space.knobs == SERVING_KNOBS
    assert resolved.objectives == ("qps_per_usd_hour", "ttft_p90_s")  # the inference defaults
    # without disaggregation the decode knobs are inert: 2 x 2 x 2 plans, plus 2 x 2 x 2 x 2 split ones
    assert len(space.grid()) == 24


def test_a_candidates_qps_per_dollar_is_its_capacity_over_its_price(write_spec):
    resolved = resolve_study(load_study(write_spec(SERVING_SPEC)))
    params = candidate()
    outcome = Evaluator(SearchSpace.from_study(resolved)).evaluate(params)
    deployment = deployment_of(resolved, params)
    found = capacity_search(
        deployment, request_stream(resolved.study.serving, 5), ttft_p90_s=1.0, tbt_p99_s=0.1, seed=5
    )
    price = 4 * 2.99
    assert outcome.metrics["capacity_qps"] == found.qps > 0
    assert outcome.metrics["qps_per_usd_hour"] == pytest.approx(found.qps / price)
    assert outcome.metrics["usd_per_hour"] == pytest.approx(price) and outcome.feasible


@pytest.mark.parametrize(
    "extra,message",
    [
        ("objectives: [tokens_per_s]\n", "objectives[0].metric: 'tokens_per_s' is not a known inference metric"),
        ("", None),
    ],
)
def test_inference_metrics_are_their_own_vocabulary(write_spec, extra, message):
    text = SERVING_SPEC + extra
    if message is None:
        resolve_study(load_study(write_spec(text)))
        return
    with pytest.raises(DseError, match=message.replace("[", r"\[").replace("]", r"\]")):
        resolve_study(load_study(write_spec(text)))


def test_capacity_metrics_need_the_capacity_search(write_spec):
    text = SERVING_SPEC.replace("  requests: 300\n", "  requests: 300\n  qps: 2.0\n")
    with pytest.raises(DseError, match="leave serving.qps unset"):
        resolve_study(load_study(write_spec(text)))


def test_an_inference_study_runs_and_writes_its_reports(write_spec, tmp_path):
    resolved = resolve_study(load_study(write_spec(SERVING_SPEC)))
    summary = run_search(resolved, RunSettings(tmp_path / "out", None, "off", False))
    trials, front = write_reports(summary.study, resolved, tmp_path / "out")
    assert len(trials) == 12 and not front.empty
    assert (front["capacity_qps"] > 0).all()
    assert {"report.html", "summary.md", "pareto.csv"} <= {p.name for p in (tmp_path / "out").iterdir()}


def test_a_replayed_trace_keeps_its_burstiness_at_any_rate(write_spec):
    """Replay scales the recorded clock: gaps keep their pattern (ratios), the mean rate is the one
    asked, and the lengths are the trace's own, in order."""
    trace = Path(__file__).resolve().parents[3] / "../shared/reference/traces/splitwise_conv.csv"
    if not trace.is_file():
        pytest.skip("../shared/reference/traces is not beside this checkout")
    text = SERVING_SPEC.replace("  requests: 300\n", f"  requests: 300\n  arrival: replay\n  trace: {trace}\n")
    resolved = resolve_study(load_study(write_spec(text)))
    stream = request_stream(resolved.study.serving, 5)
    slow, fast = stream(1.0), stream(4.0)
    assert (len(slow) - 1) / (slow.arrival_s[-1] - slow.arrival_s[0]) == pytest.approx(1.0)
    assert np.allclose(np.diff(slow.arrival_s), 4 * np.diff(fast.arrival_s))
    assert np.array_equal(slow.prompt_tokens[:2], [374, 396])  # the trace's first rows


def test_round_robin_alternates_and_least_outstanding_balances():
    n = 40
    requests = Requests(np.arange(n) * 0.01, np.full(n, 256), np.full(n, 32))
    for router in ("round_robin", "least_outstanding", "random"):
        deployment = Deployment(get_model("llama3-8b"), get_gpu("H100-SXM"), Pool("sarathi", count=2), router=router)
        replicas = simulate_deployment(deployment, requests).replica
        if router == "round_robin":
            assert np.array_equal(replicas, np.arange(n) % 2)
        else:
            assert abs(int((replicas == 0).sum()) - n // 2) <= (2 if router == "least_outstanding" else 12)


def test_a_measured_profile_in_the_spec_replaces_the_operations_it_covers(write_spec):
    """Llama-2-70B at tp 4 with the MLP profile fixture: the deployment carries the profile and
    its decode steps take the measured linear times instead of the roofline ones."""
    data = Path(__file__).resolve().parents[2] / "simulators" / "serving" / "data"
    text = (
        SERVING_SPEC.replace("model: llama3-8b", "model: llama2-70b")
        .replace("gpu: [H100-SXM]", "gpu: [A100-80GB]")
        .replace("tp: [1, 2]", "tp: [4]")
        .replace("decode_tp: [1, 2]", "decode_tp: [4]")
        .replace("  requests: 300\n", f"  requests: 300\n  profile_mlp: {data / 'mlp.csv'}\n")
    )
    resolved = resolve_study(load_study(write_spec(text)))
    params = candidate(gpu="A100-80GB", tp=4, replicas=1, decode_tp=4)
    measured = deployment_of(resolved, params)
    assert measured.profile is not None
    plain = dataclasses.replace(measured, profile=None)
    assert pool_costs(measured, 1024)[0].linear_s[64] != pool_costs(plain, 1024)[0].linear_s[64]
    stream = request_stream(resolved.study.serving, 5)
    assert simulate_deployment(measured, stream(1.0)).metrics["tbt_p50_s"] > 0


def test_a_deployment_is_bought_in_whole_servers(write_spec):
    """4 H100s (tp 2 x 2 replicas) need one 8-GPU server: $294k, 8 NICs at $2k, one rail leaf per
    NIC (8 leaves, no spine: 8 switch ports at $562.5) and 8 links at $750 = $320,500."""
    resolved = resolve_study(load_study(write_spec(SERVING_SPEC)))
    params = candidate()
    metrics = Evaluator(SearchSpace.from_study(resolved)).evaluate(params).metrics
    assert metrics["capex_usd"] == pytest.approx(294_000 + 8 * 2_000 + 8 * 562.5 + 8 * 750)
    assert metrics["qps_per_owned_usd_hour"] == pytest.approx(metrics["capacity_qps"] / metrics["owned_usd_per_hour"])


def test_the_shipped_serving_spec_has_no_deployment_an_engine_would_refuse_on_its_front(write_spec, tmp_path):
    """search_spaces/llama70b-serving.yaml (fewer requests and trials): every vLLM candidate whose
    token budget is below the longest request is infeasible with that reason, and no front member
    is refused by its engine or collapses to about one request per batch (what vLLM at
    max_batch_tokens 512 with 4096-token prompts did before it was refused)."""
    shipped = (Path(__file__).resolve().parents[3] / "search_spaces" / "llama70b-serving.yaml").read_text()
    text = shipped.replace("requests: 1000", "requests: 200").replace("trials: 200", "trials: 40")
    resolved = resolve_study(load_study(write_spec(text)))
    summary = run_search(resolved, RunSettings(tmp_path / "out", None, "off", False))
    trials, front = write_reports(summary.study, resolved, tmp_path / "out")
    stream = request_stream(resolved.study.serving, resolved.study.seed)(1.0)
    longest = int((stream.prompt_tokens + stream.output_tokens).max())
    refused = trials[(trials["scheduler"] == "vllm") & (trials["max_batch_tokens"] < longest)]
    stated = refused["reason"].str.extract(r"below the longest request \((\d+) tokens\)")[0].astype(int)
    assert len(refused) and set(stated) <= {longest, int(stream.prompt_tokens.max()) + 1}  # a prefill pool: prompt + 1
    assert not front.empty and front["reason"].isna().all()
    for _, row in front.iterrows():
        params = {k: row[k] for k in SERVING_KNOBS}
        assert deployment_of(resolved, params).pool.refusal(longest, int(stream.prompt_tokens.max())) is None
    assert (front["batch_size_mean"] >= 2).all()


def test_latency_at_a_stated_load_is_a_run_at_that_share_of_the_capacity(write_spec):
    """The *_at_load_s metrics are the percentiles of one more run at serving.latency_load x
    capacity (here 0.5): the same numbers as simulating the deployment at that rate directly,
    and at half the rate the first token comes no later than at capacity."""
    text = SERVING_SPEC.replace("  requests: 300\n", "  requests: 300\n  latency_load: 0.5\n")
    resolved = resolve_study(load_study(write_spec(text)))
    params = candidate()
    metrics = Evaluator(SearchSpace.from_study(resolved)).evaluate(params).metrics
    capacity = metrics["capacity_qps"]
    assert capacity > 0 and metrics["load_qps"] == pytest.approx(0.5 * capacity)
    stream = request_stream(resolved.study.serving, resolved.study.seed)
    direct = simulate_deployment(deployment_of(resolved, params), stream(0.5 * capacity), resolved.study.seed).metrics
    for name in ("ttft_p90", "tbt_p99", "tpot_p50", "e2e_p99"):
        assert metrics[f"{name}_at_load_s"] == direct[f"{name}_s"]
    assert metrics["ttft_p90_at_load_s"] <= metrics["ttft_p90_s"]


def test_moe_models_are_served_under_each_expert_placement(write_spec, tmp_path):
    """search_spaces/mixtral-serving.yaml (fewer requests, one scheduler and batch limit, every
    GPU, size and placement in a grid) runs: candidates of every placement are feasible, and
    the placement is a column of the front."""
    shipped = (Path(__file__).resolve().parents[3] / "search_spaces" / "mixtral-serving.yaml").read_text()
    text = shipped.replace("requests: 1000", "requests: 200").replace("trials: 150", "trials: 24")
    for knob, values in (("scheduler", "[sarathi]"), ("replicas", "[1]"), ("max_batch_requests", "[128]")):
        text = re.sub(rf"  {knob}: \[.*\]", f"  {knob}: {values}", text)
    text = re.sub(r"  max_batch_tokens: \[.*\].*", "  max_batch_tokens: [2048]", text)
    text = re.sub(r"  prefix_caching: \[.*\]", "  prefix_caching: [true]", text).replace(
        "sampler: tpe", "sampler: grid"
    )
    resolved = resolve_study(load_study(write_spec(text)))
    summary = run_search(resolved, RunSettings(tmp_path / "out", None, "off", False))
    trials, front = write_reports(summary.study, resolved, tmp_path / "out")
    feasible = trials[trials["reason"].isna()]
    assert set(feasible["moe_parallel"]) == {"tp", "tp_ep", "dp_ep"} and (feasible["capacity_qps"] > 0).all()
    assert "moe_parallel" in front.columns and not front.empty


def test_a_dense_model_has_no_expert_placement_to_search(write_spec):
    text = SERVING_SPEC.replace("search:\n", "search:\n  moe_parallel: [tp, dp_ep]\n")
    with pytest.raises(DseError, match=r"search.moe_parallel: .* is a dense model; allowed: \[tp\]"):
        resolve_study(load_study(write_spec(text)))


def test_speculative_decoding_needs_a_draft_model(write_spec):
    text = SERVING_SPEC.replace("search:\n", "search:\n  speculative_tokens: [0, 4]\n")
    with pytest.raises(DseError, match=r"serving.draft_model: needed where search.speculative_tokens holds a value"):
        resolve_study(load_study(write_spec(text)))
    other = text.replace("  requests: 300\n", "  requests: 300\n  draft_model: llama2-7b\n")
    with pytest.raises(DseError, match=r"serving.draft_model: llama2-7b's vocabulary 32000 differs from llama3-8b's"):
        resolve_study(load_study(write_spec(other)))


def test_a_speculating_candidate_is_the_deployment_with_its_draft(write_spec):
    """The knobs reach the deployment: k draft tokens of the stated draft at the acceptance
    asked; without draft tokens there is no speculation, whatever the acceptance knob says."""
    text = SERVING_SPEC.replace("  requests: 300\n", "  requests: 300\n  draft_model: llama3-8b\n")
    resolved = resolve_study(load_study(write_spec(text)))
    speculating = deployment_of(resolved, candidate(speculative_tokens=4, speculative_acceptance=0.6))
    assert (speculating.speculation.draft.name, speculating.speculation.tokens) == ("llama3-8b", 4)
    assert speculating.speculation.tokens_per_step == pytest.approx((1 - 0.6**5) / 0.4)
    assert deployment_of(resolved, candidate(speculative_tokens=0)).speculation is None


def test_data_parallel_attention_takes_a_tp_the_heads_do_not_divide(write_spec):
    """Qwen3-30B-A3B has 4 KV heads: tp 8 cannot split its attention, but with data-parallel
    attention (dp_ep) 8 GPUs hold 16 of its 128 experts each and split no head. The spec takes
    tp 8 when dp_ep may use it; a tensor-parallel candidate at tp 8 is still refused, by its
    own reason."""
    text = SERVING_SPEC.replace("model: llama3-8b", "model: qwen3-30b-a3b").replace("tp: [1, 2]", "tp: [8]")
    text = text.replace("disaggregated: [false, true]", "disaggregated: [false]")
    with pytest.raises(DseError, match=r"search.tp: 8 does not divide kv_heads=4 of qwen3-30b-a3b"):
        resolve_study(load_study(write_spec(text)))
    mixed = resolve_study(load_study(write_spec(text.replace("search:\n", "search:\n  moe_parallel: [tp, dp_ep]\n"))))
    space = SearchSpace.from_study(mixed)
    params = candidate(tp=8, replicas=1, max_batch_tokens=2048)
    served = Evaluator(space).evaluate(params | {"moe_parallel": "dp_ep"})
    assert served.metrics["capacity_qps"] > 0 and "kv_heads" not in (served.reason or "")
    refused = Evaluator(space).evaluate(params | {"moe_parallel": "tp"})
    assert not refused.feasible and "does not divide kv_heads=4" in refused.reason
