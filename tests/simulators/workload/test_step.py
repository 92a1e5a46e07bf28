"""The step's operation inventory against the closed-form FLOP count and the plan's messages."""

import pytest

from simulators.hardware import get_gpu
from simulators.models import get_model
from simulators.workload import (
    ParallelPlan,
    TrainingCandidate,
    TrainingSystem,
    layer_forward_gemms,
    layer_kernels,
    model_flops,
    step_operations,
)


def candidate(num_gpus=1, **plan):
    base = dict(tp=1, pp=1, dp=num_gpus, micro_batch=1, global_batch=num_gpus, seq_len=4096)
    system = TrainingSystem(get_gpu("H100-SXM"), num_gpus)
    return TrainingCandidate(get_model("llama3-8b"), system, ParallelPlan(**{**base, **plan}))


def test_one_gpu_step_has_the_models_flops_with_causal_attention_halved():
    model = get_model("llama3-8b")
    ops = step_operations(candidate())
    total = sum(op.flops for op in ops)
    attention_full = sum(g.flops for g in layer_forward_gemms(model, 1, 4096, 1) if g.causal)
    # Megatron's count has the full score matrix in 3 passes; a causal kernel executes half.
    assert total == pytest.approx(model_flops(model, 1, 4096) - 1.5 * model.layers * attention_full)


def test_tensor_parallel_layers_list_two_collectives_per_block_and_phase():
    ops = step_operations(candidate(num_gpus=8, tp=8, dp=1, global_batch=1))
    tp = [op for op in ops if op.group == "tp"]
    assert len(tp) == 32 * 2 * 2 * 2  # layers x blocks x (all-gather, reduce-scatter) x (fwd, bwd)
    assert {op.nbytes for op in tp} == {4096 * 4096 * 2}
    assert all(op.ranks == 8 for op in tp)


def test_step_level_lists_data_parallel_collectives_and_the_optimizer():
    ops = step_operations(candidate(num_gpus=8, dp=8, global_batch=8))
    step = {op.name: op for op in ops if op.scope == "step"}
    assert {"gradient reduce_scatter", "parameter all_gather", "adam"} <= set(step)
    params = get_model("llama3-8b").total_params
    assert step["gradient reduce_scatter"].nbytes == pytest.approx(4 * params)
    assert step["adam"].nbytes == pytest.approx(30 * params / 8)


def test_an_moe_layer_permutes_each_token_once_per_chosen_expert_and_back():
    """Qwen3-30B-A3B (top 8 of 128, hidden 2048) at tp 2, etp 1: 4096 tokens / 2 per rank, 8
    copies each; permute and unpermute each move (tokens + copies) x 2048 x 2 bytes, in both
    passes; a dense layer has none."""
    model = get_model("qwen3-30b-a3b")
    plan = ParallelPlan(tp=2, pp=1, dp=4, ep=8, micro_batch=1, global_batch=4, seq_len=4096)
    moved = (2048 + 8 * 2048) * 2048 * 2
    kernels = [k for k in layer_kernels(model, plan, 0) if k.name.startswith("moe_")]
    assert sorted((k.name, k.phase) for k in kernels) == [
        ("moe_permute", "bwd"),
        ("moe_permute", "fwd"),
        ("moe_unpermute", "bwd"),
        ("moe_unpermute", "fwd"),
    ]
    assert all(k.nbytes == moved for k in kernels)
    dense = get_model("llama3-8b")
    assert not [k for k in layer_kernels(dense, plan, 0) if k.name.startswith("moe_")]
