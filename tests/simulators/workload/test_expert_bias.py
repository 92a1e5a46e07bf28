"""GPT-OSS's expert output bias as Megatron-Core's TEGroupedMLP._apply_bias runs it, against the
bytes and launches counted op by op from the tensors' dtypes (bf16 activations, fp32 router
probabilities), not from the module's constants."""

import pytest

from simulators.models import ModelSpec, get_model
from simulators.workload import ParallelPlan, layer_kernels

BF16, FP32 = 2, 4


def plan(**kw):
    base = dict(tp=1, pp=1, dp=8, ep=8, micro_batch=2, global_batch=16, seq_len=4096)
    return ParallelPlan(**{**base, **kw})


def bias_kernels(model, p):
    return [k for k in layer_kernels(model, p, 0) if k.name.startswith("moe_expert_bias")]


def test_bytes_and_launches_follow_the_eager_ops_per_local_expert():
    model = get_model("gpt-oss-120b")
    p = plan()
    local = 128 // 8
    rows = 2 * 4096 * 4  # micro-batch x sequence x top-4, the rank's routed rows under balance
    elements = rows * 2880
    # forward, per element: b*p writes fp32; t + bp reads bf16 + fp32, writes fp32; the cat
    # copies fp32; .to(bf16) reads fp32, writes bf16
    forward = FP32 + (BF16 + FP32 + FP32) + 2 * FP32 + (FP32 + BF16)
    # backward: the bf16 gradient cast up; the add's gradient for t cast down; for b and for p a
    # multiply (read and write fp32) and a reduction (read fp32); the split's gradients joined in bf16
    backward = (BF16 + FP32) + (FP32 + BF16) + 2 * (2 * FP32 + FP32) + 2 * BF16
    kernels = bias_kernels(model, p)
    fwd = [k for k in kernels if k.phase == "fwd"]
    bwd = [k for k in kernels if k.phase == "bwd"]
    assert sum(k.nbytes for k in fwd) == pytest.approx(forward * elements)
    assert sum(k.nbytes for k in bwd) == pytest.approx(backward * elements)
    # launches: a multiply and an add per expert, one cat and one cast; backward five per expert
    # (cast of t's gradient, two multiplies, two reductions), one cast and one cat
    assert len(fwd) == 2 * local + 2
    assert len(bwd) == 5 * local + 2


def test_fewer_local_experts_launch_fewer_kernels_for_the_same_bytes():
    model = get_model("gpt-oss-120b")
    wide, narrow = bias_kernels(model, plan(ep=8)), bias_kernels(model, plan(ep=64, dp=64, global_batch=128))
    assert len(wide) - len(narrow) == 7 * (128 // 8 - 128 // 64)
    assert sum(k.nbytes for k in wide) == pytest.approx(sum(k.nbytes for k in narrow))


def test_no_bias_kernels_in_the_fused_grouped_mlp_or_without_expert_biases():
    model = get_model("gpt-oss-120b")
    assert bias_kernels(model, plan(moe_grouped_gemm="fused")) == []
    unbiased = model.model_copy(update={"moe_expert_bias": False})
    assert bias_kernels(unbiased, plan()) == []


def test_expert_bias_without_experts_is_refused():
    with pytest.raises(ValueError, match="moe_expert_bias"):
        ModelSpec(name="x", layers=2, hidden=64, ffn_hidden=128, heads=4, kv_heads=4, vocab=100, moe_expert_bias=True)
