"""Message sizes of a plan against Megatron's closed forms."""

import pytest

from simulators.models import get_model
from simulators.workload import (
    ParallelPlan,
    cp_kv_bytes,
    ep_dispatch_bytes,
    optimizer_local_params,
    pipeline_send_bytes,
    tp_activation_bytes,
)


def plan(**kw):
    base = dict(tp=4, pp=1, dp=8, micro_batch=2, global_batch=16, seq_len=4096)
    return ParallelPlan(**{**base, **kw})


def test_tensor_parallel_messages_are_the_block_activation():
    # Megatron: each attention/MLP block all-reduces (or reduce-scatters + all-gathers under SP)
    # its b x s x h output in bf16, whatever tp is; context parallelism splits s.
    model = get_model("llama3-70b")
    assert tp_activation_bytes(model, plan()) == 2 * 4096 * 8192 * 2
    assert tp_activation_bytes(model, plan(cp=2, dp=4)) == 2 * 2048 * 8192 * 2


def test_expert_dispatch_sends_each_token_to_top_k_experts():
    # Each rank dispatches its 1/tp share of the micro-batch's tokens, top_k copies of h values.
    model = get_model("mixtral-8x7b")
    assert ep_dispatch_bytes(model, plan(ep=8)) == 2 * 4096 // 4 * 2 * 4096 * 2


def test_ring_attention_and_pipeline_messages():
    model = get_model("llama3-70b")  # kv_width = 8 * 128
    assert cp_kv_bytes(model, plan(cp=2, dp=4)) == 2 * 2 * 2048 * 1024 // 4 * 2
    assert pipeline_send_bytes(model, plan()) == 2 * 4096 * 8192 * 2 // 4  # sequence-parallel share
    assert pipeline_send_bytes(model, plan(sequence_parallel=False)) == 2 * 4096 * 8192 * 2


def test_optimizer_updates_its_zero_shard():
    assert optimizer_local_params(plan(zero_stage=0), 8e9, 0.0) == 8e9
    assert optimizer_local_params(plan(zero_stage=1), 8e9, 0.0) == pytest.approx(1e9)
