"""Block costs of one layer against closed forms and scaling."""

from simulators.analytical._layer import layer_blocks, per_layer_plan
from simulators.hardware import get_gpu
from simulators.models import get_model
from simulators.workload import ParallelPlan

H100 = get_gpu("H100-SXM")


def plan(**kw):
    base = dict(tp=4, pp=1, dp=8, micro_batch=2, global_batch=16, seq_len=4096)
    return ParallelPlan(**{**base, **kw})


def test_blocks_split_the_layer_and_cost_less_per_rank_as_tp_grows():
    model = get_model("llama3-8b")
    one = layer_blocks(model, H100, per_layer_plan(plan(tp=1, dp=32, global_batch=64)), 0)
    four = layer_blocks(model, H100, per_layer_plan(plan(tp=4)), 0)
    assert [b.name for b in one] == ["attention", "mlp"]
    for a, b in zip(one, four):
        assert b.gemm_s < a.gemm_s
        assert b.forward_s > 0 and b.input_grad_s > 0 and b.weight_grad_s > 0
    assert one[1].attention_fwd_s == 0.0 < one[0].attention_fwd_s


def test_per_layer_plan_keeps_only_what_a_layer_depends_on():
    a = per_layer_plan(plan(pp=4, vpp=2, global_batch=64, dp=8))
    b = per_layer_plan(plan(pp=1, global_batch=16, dp=8))
    assert a == b
    assert per_layer_plan(plan(micro_batch=1)) != b


def test_context_parallel_ranks_share_the_attention_at_smaller_kernel_sizes():
    model = get_model("llama3-8b")
    one = layer_blocks(model, H100, per_layer_plan(plan(tp=1, dp=8, global_batch=16, seq_len=8192)), 0)[0]
    two = layer_blocks(model, H100, per_layer_plan(plan(tp=1, cp=2, dp=4, global_batch=8, seq_len=8192)), 0)[0]
    # Half the causal work each, but in smaller kernels: a little more than half the time.
    assert 0.5 * one.attention_fwd_s < two.attention_fwd_s < 0.6 * one.attention_fwd_s
    assert 0.5 * one.attention_bwd_s < two.attention_bwd_s < 0.6 * one.attention_bwd_s
