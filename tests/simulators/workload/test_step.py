"""The step's operation inventory against the closed-form FLOP count and the plan's messages."""

import pytest

from simulators.hardware import get_gpu
from simulators.models import get_model
from simulators.workload import (
    ParallelPlan,
    TrainingCandidate,
    TrainingSystem,
    layer_forward_gemms,
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
