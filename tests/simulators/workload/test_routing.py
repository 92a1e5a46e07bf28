"""The busiest expert-parallel rank's share of routed tokens, against exact order statistics and
a simulation of random top-k routing (Megatron's forced load balancing) run here."""

import math

import numpy as np
import pytest

from simulators.models import ModelSpec
from simulators.workload import ParallelPlan, busiest_rank_share, expected_max_standard_normal


def moe(experts: int, top_k: int) -> ModelSpec:
    return ModelSpec(
        name="moe", layers=2, hidden=256, ffn_hidden=512, heads=4, kv_heads=4, vocab=512,
        moe_experts=experts, moe_top_k=top_k, moe_ffn_hidden=128,
    )  # fmt: skip


def plan(ep: int, tokens: int) -> ParallelPlan:
    return ParallelPlan(tp=1, pp=1, dp=ep, ep=ep, micro_batch=1, global_batch=ep, seq_len=tokens)


def test_expected_maximum_of_normals_is_near_the_exact_order_statistics():
    # E[max of 2] = 1/sqrt(pi), E[max of 3] = 3/(2 sqrt(pi)); E[max of 10] = 1.5388 (tabulated)
    assert expected_max_standard_normal(1) == 0.0
    assert expected_max_standard_normal(2) == pytest.approx(1 / math.sqrt(math.pi), rel=0.05)
    assert expected_max_standard_normal(3) == pytest.approx(3 / (2 * math.sqrt(math.pi)), rel=0.03)
    assert expected_max_standard_normal(10) == pytest.approx(1.5388, rel=0.02)


def test_one_rank_or_a_dense_model_has_no_busiest_rank():
    assert busiest_rank_share(moe(16, 2), plan(1, 512)) == 1.0
    dense = ModelSpec(name="d", layers=2, hidden=256, ffn_hidden=512, heads=4, kv_heads=4, vocab=512)
    assert busiest_rank_share(dense, plan(4, 512)) == 1.0


@pytest.mark.parametrize(("experts", "top_k", "ep", "tokens"), [(16, 2, 8, 256), (64, 8, 16, 128), (8, 2, 4, 512)])
def test_busiest_share_matches_a_simulation_of_random_top_k_routing(experts, top_k, ep, tokens):
    """Each of ep * tokens tokens picks top_k distinct experts at random (random logits); the
    busiest rank's load over the mean, averaged over trials, against the closed form."""
    rng = np.random.default_rng(7)
    trials, n = 400, ep * tokens
    per_rank = experts // ep
    excess = []
    for _ in range(trials):
        chosen = np.argsort(rng.random((n, experts)), axis=1)[:, :top_k]  # a uniform k-subset per token
        loads = np.bincount(chosen.ravel() // per_rank, minlength=ep)
        excess.append(loads.max() / (tokens * top_k) - 1)
    simulated = float(np.mean(excess))
    modelled = busiest_rank_share(moe(experts, top_k), plan(ep, tokens)) - 1
    assert modelled == pytest.approx(simulated, rel=0.15)
