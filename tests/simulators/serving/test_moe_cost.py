"""Mixture-of-experts replicas: the routed experts a batch reads, where the weights and the KV
cache live under each expert placement, and the all-to-all of data-parallel attention."""

import numpy as np
import pytest

from simulators._errors import PlanError
from simulators.hardware import gemm_time_s, get_gpu
from simulators.models import get_model
from simulators.network import Network, collective_time_s
from simulators.serving import MOE_PARALLEL, replica_cost
from simulators.serving._cost import ACTIVATION_BYTES, Layout, _routed_s

H100, H200 = get_gpu("H100-SXM"), get_gpu("H200")
MIXTRAL, DEEPSEEK = get_model("mixtral-8x7b"), get_model("deepseek-v3")


def expert_s(model, gpu, m, width):
    """One expert's up (gate + up) and down GEMMs at m tokens: the independent reference."""
    up = gemm_time_s(gpu, m, 2 * width, model.hidden, 1, "bf16")
    return up + gemm_time_s(gpu, m, model.hidden, width, 1, "bf16")


def test_one_decoding_token_reads_only_its_top_k_experts():
    """Mixtral routes a token to 2 of 8 experts: at one token the routed cost is two experts'
    GEMMs at m = 1, on every tensor-parallel rank at 1/tp of their width."""
    for tp in (1, 4):
        routed = _routed_s(MIXTRAL, H100, Layout.of(MIXTRAL, tp, "tp"), np.array([1]), "bf16", 1.0)[0]
        assert routed == pytest.approx(2 * expert_s(MIXTRAL, H100, 1, MIXTRAL.moe_ffn_hidden // tp), rel=1e-12)


def test_a_large_batch_spreads_its_slots_evenly_over_the_experts():
    """1024 tokens x 2 slots over 8 experts: 256 tokens each. Spread whole over 4 GPUs, each
    holds 2 experts and the busiest carries `expert_imbalance` times the mean share."""
    t = np.array([1024])
    tp_mode = _routed_s(MIXTRAL, H100, Layout.of(MIXTRAL, 4, "tp"), t, "bf16", 1.0)[0]
    assert tp_mode == pytest.approx(8 * expert_s(MIXTRAL, H100, 256, MIXTRAL.moe_ffn_hidden // 4), rel=1e-12)
    spread = _routed_s(MIXTRAL, H100, Layout.of(MIXTRAL, 4, "tp_ep"), t, "bf16", 1.0)[0]
    assert spread == pytest.approx(2 * expert_s(MIXTRAL, H100, 256, MIXTRAL.moe_ffn_hidden), rel=1e-12)
    skewed = _routed_s(MIXTRAL, H100, Layout.of(MIXTRAL, 4, "tp_ep"), t, "bf16", 1.5)[0]
    assert skewed == pytest.approx(2 * expert_s(MIXTRAL, H100, 384, MIXTRAL.moe_ffn_hidden), rel=1e-12)


@pytest.mark.parametrize("mode", list(MOE_PARALLEL))
def test_the_weights_of_a_replica_add_up_to_the_model(mode):
    """Summed over the GPUs, the weights are the model's once, except data-parallel attention,
    which holds everything but the routed experts on every GPU."""
    gpus = 4
    cost = replica_cost(MIXTRAL, H100, gpus, 1, Network.from_gpu(H100), max_batch_tokens=512, moe_parallel=mode)
    experts = MIXTRAL.moe_layers * MIXTRAL.moe_experts * MIXTRAL.expert_params
    copies = gpus if mode == "dp_ep" else 1
    expected = ((MIXTRAL.total_params - experts) * copies + experts) * 2  # bf16
    assert cost.weight_bytes_per_gpu * gpus == pytest.approx(expected, rel=1e-12)


def test_latent_attention_caches_one_latent_per_token_and_layer():
    """DeepSeek-V3 caches kv_lora_rank + qk_rope_head_dim = 576 values per token and layer
    (DeepSeek-V2 report, Table 1: (d_c + d_h^R) l), 70,272 bytes per token in bf16; with
    tensor-parallel attention every GPU holds it whole, with data-parallel attention each GPU
    its own requests', so the replica caches 8 times as many tokens and more."""
    network = Network.from_gpu(H200)
    kw = dict(max_batch_tokens=2048, precision="fp8")
    tp = replica_cost(DEEPSEEK, H200, 8, 1, network, moe_parallel="tp", **kw)
    dp = replica_cost(DEEPSEEK, H200, 8, 1, network, moe_parallel="dp_ep", **kw)
    assert tp.kv_bytes_per_token == dp.kv_bytes_per_token == 61 * 576 * 2
    assert dp.kv_capacity_tokens > 4 * tp.kv_capacity_tokens


def test_data_parallel_attention_dispatches_and_combines_by_all_to_all_in_moe_layers_only():
    """DeepSeek-V3's 58 MoE layers of 61 each pay two all-to-alls of their GPU's token slots
    (top_k x hidden activations); its 3 dense layers, replicated, pay none: the layer table
    is the mean."""
    network = Network.from_gpu(H200)
    cost = replica_cost(DEEPSEEK, H200, 8, 1, network, max_batch_tokens=1024, moe_parallel="dp_ep", precision="fp8")
    t = 1024
    slots_bytes = -(-t // 8) * DEEPSEEK.moe_top_k * DEEPSEEK.hidden * ACTIVATION_BYTES
    expected = 58 / 61 * 2 * collective_time_s("all_to_all", slots_bytes, 8, 1, network)
    assert cost.allreduce_s[t] == pytest.approx(float(expected), rel=1e-12)


def test_experts_that_do_not_split_over_the_gpus_are_refused():
    with pytest.raises(PlanError, match=r"^moe_parallel=tp_ep: 3 GPUs do not share the 8 experts$"):
        Layout.of(MIXTRAL, 3, "tp_ep")


def test_with_data_parallel_attention_one_request_must_fit_one_gpus_cache():
    """Each GPU caches its own requests, so a request larger than one GPU's share of the
    replica's cache is refused even where the replica's total would hold it."""
    from simulators.serving import Deployment, Pool, Requests, simulate_deployment
    from simulators.serving._deployment import pool_costs

    deployment = Deployment(MIXTRAL, H100, Pool("sarathi", tp=4, max_batch_tokens=2048, moe_parallel="dp_ep"))
    cost = pool_costs(deployment, 1024)[0]
    assert cost.request_blocks * 4 == cost.kv_blocks
    prompt = cost.request_blocks * cost.block_tokens  # plus one output token: one block too many
    assert prompt + 1 < cost.kv_capacity_tokens
    with pytest.raises(PlanError, match=r"does not fit the KV cache of a tp=4 pp=1 replica \(\d+ tokens for one"):
        simulate_deployment(deployment, Requests(np.array([0.0]), np.array([prompt]), np.array([1])))
