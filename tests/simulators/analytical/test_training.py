"""The first analytical training model against hand computations and scaling laws."""

import numpy as np
import pytest

from simulators.analytical import simulate_training
from simulators.hardware import get_gpu
from simulators.models import get_model
from simulators.workload import ParallelPlan, TrainingCandidate, TrainingSystem


def run(model="llama3-8b", gpu="H100-SXM", num_gpus=8, reserve=0.0, host_launch_s=None, **plan):
    base = dict(tp=1, pp=1, dp=num_gpus, micro_batch=1, global_batch=num_gpus, seq_len=4096)
    system = TrainingSystem(get_gpu(gpu), num_gpus, reserve, host_launch_s=host_launch_s)
    candidate = TrainingCandidate(get_model(model), system, ParallelPlan(**{**base, **plan}))
    return simulate_training(candidate)


def test_single_gpu_step_is_the_sum_of_its_kernels_by_hand():
    """One GPU, one micro-batch: 32 layers of (F, dgrad, wgrad) GEMMs with hand-written shapes,
    FlashAttention forward and backward, memory-bound kernels, the logit layer with the final
    norm and cross entropy, Adam."""
    from simulators.hardware import attention_time_s, elementwise_time_s, gemm_time_s, layer_memory_kernels

    h100, model = get_gpu("H100-SXM"), get_model("llama3-8b")
    s, h, f, v = 2048, 4096, 14336, 128256
    shapes = [(s, 4096 + 2 * 1024, h), (s, h, 4096), (s, 2 * f, h), (s, h, f)]  # qkv, out, gate+up, down

    def gemms(m, n, k):  # forward, input gradient, weight gradient
        return gemm_time_s(h100, m, n, k) + gemm_time_s(h100, m, k, n) + gemm_time_s(h100, k, n, m)

    attention = dict(batch=1, heads=32, seq_q=s, seq_kv=s, head_dim=128, causal=True, kv_heads=8)
    kernels = layer_memory_kernels(s, h, f, 32, 8, 128, v)
    layer = (
        sum(gemms(*shape) for shape in shapes)
        + attention_time_s(h100, phase="fwd", **attention)
        + attention_time_s(h100, phase="bwd", **attention)
        + sum(elementwise_time_s(h100, k.nbytes) for k in kernels)
    )
    final = [
        k
        for k in layer_memory_kernels(s, h, 1, 1, 1, 1, v, last_layer=True)
        if k.name in ("final_norm", "cross_entropy")
    ]
    output = gemms(s, v, h) + sum(elementwise_time_s(h100, k.nbytes) for k in final)
    expected = 32 * layer + output + model.total_params * 30 / 3350e9
    result = run(num_gpus=1, seq_len=s)
    assert result.metrics["iteration_time_s"] == pytest.approx(expected, rel=1e-6)  # timeline runs in integer ns
    assert result.breakdown_s["tp_comm_s"] == result.breakdown_s["dp_comm_s"] == 0.0


def test_mfu_equals_hfu_without_recompute_and_is_lower_with_it():
    plain = run(global_batch=64)
    full = run(global_batch=64, recompute="full")
    assert plain.metrics["mfu"] == pytest.approx(plain.metrics["hfu"])
    assert full.metrics["hfu"] > full.metrics["mfu"]
    assert full.metrics["mfu"] < plain.metrics["mfu"]
    # Recompute adds one forward to three passes: about a third more layer time.
    ratio = full.breakdown_s["gemm_s"] / plain.breakdown_s["gemm_s"]
    assert ratio == pytest.approx(1.295, abs=0.045)  # between 1.25 and 1.34


def test_pipeline_bubble_is_about_pp_minus_one_over_m_and_interleaving_divides_it():
    # Llama-2-7B: the logit layer (vocab 32000) adds little to the last stage.
    plain = run(model="llama2-7b", num_gpus=8, tp=1, pp=4, dp=2, global_batch=32)  # 16 micro-batches
    busy = sum(plain.breakdown_s[k] for k in ("gemm_s", "attention_and_memory_bound_s", "tp_comm_s"))
    # (p-1)/m of the busy time, up to the last stage's extra logit layer.
    assert plain.breakdown_s["pipeline_bubble_s"] / busy == pytest.approx(3 / 16, rel=0.15)
    interleaved = run(model="llama2-7b", num_gpus=8, tp=1, pp=4, dp=2, global_batch=32, vpp=2)
    assert interleaved.breakdown_s["pipeline_bubble_s"] < 0.6 * plain.breakdown_s["pipeline_bubble_s"]


@pytest.mark.parametrize(
    "plan",
    [
        dict(num_gpus=8, tp=8, dp=1, global_batch=8),
        dict(num_gpus=16, tp=2, pp=4, dp=2, global_batch=32, recompute="full"),
        dict(num_gpus=16, tp=2, pp=4, dp=2, global_batch=32, vpp=2, zero_stage=0),
        dict(num_gpus=16, tp=2, pp=4, dp=2, global_batch=32, schedule="zb-h1", recompute="selective"),
        dict(num_gpus=16, tp=2, pp=2, dp=4, global_batch=32, schedule="gpipe", zero_stage=3),
        dict(num_gpus=32, tp=2, pp=2, cp=2, dp=4, global_batch=32, seq_len=8192),
    ],
)
def test_breakdown_adds_up_to_the_iteration_time(plan):
    result = run(**plan)
    assert sum(result.breakdown_s.values()) == pytest.approx(result.metrics["iteration_time_s"], rel=1e-9)
    assert all(v >= 0.0 for v in result.breakdown_s.values()), result.breakdown_s


def test_zero_bubble_beats_1f1b_and_gpipe_holds_more_activations():
    base = dict(num_gpus=16, tp=2, pp=4, dp=2, global_batch=32)
    one_f_one_b, zb, gpipe = (run(**base, schedule=s) for s in ("1f1b", "zb-h1", "gpipe"))
    assert zb.metrics["iteration_time_s"] < one_f_one_b.metrics["iteration_time_s"]
    assert gpipe.memory.activations_bytes > one_f_one_b.memory.activations_bytes
    assert zb.memory.activations_bytes == one_f_one_b.memory.activations_bytes


def test_data_parallel_weak_scaling_keeps_per_gpu_throughput():
    small = run(num_gpus=64, tp=8, dp=8, global_batch=64)
    large = run(num_gpus=128, tp=8, dp=16, global_batch=128)
    assert large.metrics["tokens_per_s"] == pytest.approx(2 * small.metrics["tokens_per_s"], rel=0.05)
    assert large.metrics["tokens_per_s_per_gpu"] <= small.metrics["tokens_per_s_per_gpu"]


def test_plan_that_does_not_fit_is_infeasible_with_its_reason():
    result = run(model="llama3-70b", num_gpus=8, global_batch=8)
    assert not result.feasible
    assert "GiB per GPU" in result.infeasible_reason and "H100-SXM" in result.infeasible_reason
    assert result.metrics["iteration_time_s"] > 0  # still a time: what it would take if it fit


def test_more_hbm_bandwidth_and_same_peak_is_never_slower():
    h100 = run(model="llama3-8b", num_gpus=8, tp=8, dp=1, global_batch=8)
    h200 = run(model="llama3-8b", gpu="H200", num_gpus=8, tp=8, dp=1, global_batch=8)
    assert h200.metrics["iteration_time_s"] <= h100.metrics["iteration_time_s"]


def test_expert_parallel_moe_pays_all_to_all_and_shards_experts():
    one = run(model="mixtral-8x7b", num_gpus=64, tp=2, pp=4, dp=8, ep=1, global_batch=64)
    eight = run(model="mixtral-8x7b", num_gpus=64, tp=2, pp=4, dp=8, ep=8, global_batch=64)
    assert one.breakdown_s["ep_comm_s"] == 0.0 < eight.breakdown_s["ep_comm_s"]
    assert eight.memory.weights_bytes < one.memory.weights_bytes / 3  # 8 experts over 8 ranks
    assert sum(eight.breakdown_s.values()) == pytest.approx(eight.metrics["iteration_time_s"], rel=1e-9)


def test_dense_then_moe_model_is_priced_layer_by_layer():
    result = run(model="deepseek-v3", num_gpus=256, tp=1, pp=1, dp=256, ep=64, global_batch=256, recompute="full")
    assert result.metrics["iteration_time_s"] > 0 and result.breakdown_s["ep_comm_s"] > 0


def test_compute_fraction_slows_every_kernel_and_nothing_else():
    def single(fraction):
        system = TrainingSystem(get_gpu("H100-SXM"), 1, 0.0, compute_fraction=fraction)
        plan = ParallelPlan(tp=1, pp=1, dp=1, micro_batch=1, global_batch=1, seq_len=2048)
        return simulate_training(TrainingCandidate(get_model("llama3-8b"), system, plan))

    full, half = single(1.0), single(0.5)
    kernels = ("gemm_s", "attention_and_memory_bound_s")
    assert sum(half.breakdown_s[k] for k in kernels) == pytest.approx(2 * sum(full.breakdown_s[k] for k in kernels))
    assert half.breakdown_s["optimizer_s"] == full.breakdown_s["optimizer_s"]
    assert half.memory == full.memory


def test_expert_tensor_parallelism_splits_experts_and_pays_its_collectives():
    base = dict(model="mixtral-8x7b", num_gpus=64, tp=2, pp=4, dp=8, ep=4, global_batch=64)
    whole, split = run(**base, etp=1), run(**base, etp=2)
    assert split.memory.weights_bytes < whole.memory.weights_bytes
    assert split.breakdown_s["ep_comm_s"] > whole.breakdown_s["ep_comm_s"]


def test_expert_ranks_must_fold_onto_the_stage():
    from simulators._errors import PlanError

    with pytest.raises(PlanError, match=r"ep\*etp=8\*2 does not divide tp\*cp\*dp=2\*1\*4"):
        ParallelPlan(tp=2, pp=1, dp=4, ep=8, etp=2, micro_batch=1, global_batch=8, seq_len=4096)
    with pytest.raises(PlanError, match="etp=2 needs a mixture-of-experts model"):
        run(num_gpus=8, tp=2, dp=4, etp=2, global_batch=8)


def test_deepseek_v3_runs_on_an_uneven_pipeline():
    result = run(model="deepseek-v3", num_gpus=512, tp=1, pp=16, dp=32, ep=32, global_batch=512, recompute="full")
    assert sum(result.breakdown_s.values()) == pytest.approx(result.metrics["iteration_time_s"], rel=1e-9)
    assert result.breakdown_s["pipeline_bubble_s"] > 0


def test_gradient_reduction_and_gather_not_overlapped_are_paid_in_full():
    """ZeRO-1 on one stage: without overlap the step grows by exactly the gradient
    reduce-scatter (fp32) and the weight all-gather (bf16) of every parameter, priced by hand."""
    from simulators.network import Network, collective_time_s

    base = dict(num_gpus=8, dp=8, global_batch=16, zero_stage=1)
    hidden = run(**base)
    serial = run(**base, overlap_grad_reduce=False, overlap_param_gather=False)
    params, network = get_model("llama3-8b").total_params, Network.from_gpu(get_gpu("H100-SXM"))
    by_hand = collective_time_s("reduce_scatter", params * 4, 8, 1, network) + collective_time_s(
        "all_gather", params * 2, 8, 1, network
    )
    assert serial.breakdown_s["dp_comm_s"] == pytest.approx(float(by_hand), rel=1e-6)
    compute = ("gemm_s", "attention_and_memory_bound_s")
    assert all(serial.breakdown_s[k] == hidden.breakdown_s[k] for k in compute)
    assert hidden.breakdown_s["dp_comm_s"] < serial.breakdown_s["dp_comm_s"]


def test_zero3_without_overlap_pays_every_gather_and_reduction_of_every_layer():
    """ZeRO-3 moves each layer's weights in (forward, and again for the backward) and its
    gradients out, in DeepSpeed-sized buckets; nothing hidden means all of it is exposed."""
    from simulators.network import Network, collective_time_s

    model, network = get_model("llama3-8b"), Network.from_gpu(get_gpu("H100-SXM"))
    base = dict(num_gpus=16, dp=16, global_batch=16, zero_stage=3, seq_len=2048)
    hidden = run(**base)
    serial = run(**base, overlap_grad_reduce=False, overlap_param_gather=False)

    def bucketed(op, nbytes, bucket_bytes):
        full, rest = divmod(nbytes, bucket_bytes)
        return full * collective_time_s(op, bucket_bytes, 16, 1, network) + collective_time_s(op, rest, 16, 1, network)

    layer_params = (model.total_params - 2 * model.vocab * model.hidden - model.hidden) / model.layers
    per_layer = 2 * bucketed("all_gather", layer_params * 2, 50_000_000 * 2) + bucketed(
        "reduce_scatter", layer_params * 4, 500_000_000 * 4
    )
    layers_only = serial.breakdown_s["dp_comm_s"] - hidden.breakdown_s["dp_comm_s"]
    assert serial.breakdown_s["dp_comm_s"] >= model.layers * float(per_layer) * 0.999
    assert layers_only > 0
    assert sum(serial.breakdown_s.values()) == pytest.approx(serial.metrics["iteration_time_s"], rel=1e-9)


def test_moving_layers_off_the_first_stage_moves_their_cost():
    """Per-stage costs are linear in the layers a stage holds: with first_stage_layers=5 on 4
    stages of llama3-8b (32 layers), stage 0 loses 3 layers of the even split (8) and each middle
    stage gains one (9), so stage 0's forward drops by exactly three middle-stage increments."""
    from simulators.analytical._stage_costs import stage_costs as _stage_costs

    def stages(**split):
        plan = ParallelPlan(tp=1, pp=4, dp=2, micro_batch=1, global_batch=8, seq_len=4096, **split)
        return _stage_costs(TrainingCandidate(get_model("llama3-8b"), TrainingSystem(get_gpu("H100-SXM"), 8), plan))

    even, uneven = stages(), stages(first_stage_layers=5)
    one_layer = uneven[1].forward_s - even[1].forward_s
    assert one_layer > 0
    assert even[0].forward_s - uneven[0].forward_s == pytest.approx(3 * one_layer, rel=1e-9)
    assert uneven[1].forward_s == pytest.approx(uneven[2].forward_s, rel=1e-12)


def test_memory_peak_is_the_most_loaded_stage_even_in_the_middle():
    """first/last_stage_layers=2 on 4 stages of llama3-8b leave 14 layers on each middle stage:
    the peak is a middle stage's, whose weights are its 14 layers' bf16 parameters."""
    from simulators.workload import stage_params, training_memory

    plan = ParallelPlan(
        tp=1,
        pp=4,
        dp=1,
        micro_batch=1,
        global_batch=4,
        seq_len=4096,
        zero_stage=0,
        first_stage_layers=2,
        last_stage_layers=2,
    )
    model = get_model("llama3-8b")
    memory = training_memory(model, plan, 0.0)
    assert memory.weights_bytes == pytest.approx(2 * sum(stage_params(model, plan, 1)), rel=1e-12)
    assert sum(stage_params(model, plan, 1)) == pytest.approx(14 * model.layer_params(0), rel=1e-12)


def test_selective_recomputation_reruns_the_named_modules_forward():
    """One GPU, pp 1: selective recomputation of the dense MLP adds, per layer and micro-batch, its
    forward -- gate+up and down GEMMs, SwiGLU (and nothing of the attention block)."""
    from simulators.hardware import elementwise_time_s, gemm_time_s, layer_memory_kernels

    h100, s, h, f = get_gpu("H100-SXM"), 2048, 4096, 14336
    kernels = layer_memory_kernels(s, h, f, 32, 8, 128, 128256)
    mlp_fwd = gemm_time_s(h100, s, 2 * f, h) + gemm_time_s(h100, s, h, f)
    mlp_fwd += sum(elementwise_time_s(h100, k.nbytes) for k in kernels if k.name == "swiglu" and k.phase == "fwd")
    none = run(num_gpus=1, seq_len=s, global_batch=2)
    mlp = run(num_gpus=1, seq_len=s, global_batch=2, recompute="selective", recompute_modules=("mlp",))
    extra = mlp.metrics["iteration_time_s"] - none.metrics["iteration_time_s"]
    assert extra == pytest.approx(2 * 32 * mlp_fwd, rel=1e-4)


def test_moe_recomputation_reruns_the_all_to_alls_too():
    # Without the host-launch floor: at one sequence per micro-batch the fitted H100 host time per
    # launch bounds every layer of this step and would hide the rerun.
    kw = dict(model="qwen3-30b-a3b", num_gpus=8, global_batch=16, ep=8, recompute="selective", host_launch_s=0.0)
    moe = run(**kw, recompute_modules=("moe",))
    act = run(**kw, recompute_modules=("moe_act",))
    none = run(**{**kw, "recompute": "none"})
    # dispatch and combine run in the forward and in the input-gradient pass; the rerun adds a third.
    assert moe.breakdown_s["ep_comm_s"] == pytest.approx(1.5 * none.breakdown_s["ep_comm_s"])
    assert act.breakdown_s["ep_comm_s"] == pytest.approx(none.breakdown_s["ep_comm_s"])
    assert none.metrics["iteration_time_s"] < act.metrics["iteration_time_s"] < moe.metrics["iteration_time_s"]


def test_mla_up_projection_recompute_needs_multi_latent_attention():
    from simulators import PlanError

    with pytest.raises(PlanError, match="mla_up_proj needs multi-latent attention"):
        run(recompute="selective", recompute_modules=("mla_up_proj",))
    with pytest.raises(PlanError, match="recompute_modules=.*allowed: a tuple of core_attn"):
        run(recompute="selective", recompute_modules=("attention",))


def test_hfu_counts_the_gemms_selective_recomputation_reruns():
    """Llama-3-8B, seq 4096: recomputing the dense MLP reruns its three GEMMs, 2*3*4096*14336 FLOPs
    per token and layer; the attention core (default) reruns the score and value GEMMs,
    2*2*4096*128*32 per token and layer counted whole (as model FLOPs count them)."""
    from simulators.workload import model_flops

    s, layers, tokens = 4096, 32, 4096 * 8
    useful = model_flops(get_model("llama3-8b"), 8, s)
    for modules, per_token_layer in ((("mlp",), 2 * 3 * 4096 * 14336), (("core_attn",), 2 * 2 * s * 128 * 32)):
        result = run(global_batch=8, recompute="selective", recompute_modules=modules)
        rerun = result.metrics["hfu"] / result.metrics["mfu"] - 1
        assert rerun == pytest.approx(layers * tokens * per_token_layer / useful, rel=1e-9)


@pytest.mark.parametrize(
    "gather, vpp, pp, fwd, exposed",
    [
        (10.0, 1, 4, 3.0, 7.0),  # no interleaving: what the first forward does not hide
        (12.0, 4, 2, 1.0, 5.0),  # gathers (3 each) slower than 2 forwards: the queue backs up to the last chunk
        (4.0, 4, 4, 1.0, 0.0),  # each chunk's gather (1) done within the 4 forwards before it is needed
        (8.0, 2, 4, 1.0, 3.0),  # chunk 0 (4) under its own first forward (1); chunk 1 done by 8, needed at 5
    ],
)
def test_interleaved_parameter_gathers_queue_per_chunk_as_megatron_dispatches_them(gather, vpp, pp, fwd, exposed):
    """Chunks 0 and 1 gathered from the step's start, chunk c + 1 from chunk c's first forward,
    one after another; chunk c is needed by the end of its first forward, after c * pp forwards
    (hand-worked: 12/4/2/1 -> ends 3, 6, 9, 12 against needs 1, 3, 5, 7: 5 late)."""
    from simulators.analytical._training import _chunked_gather_exposed

    got = _chunked_gather_exposed(np.array([gather]), np.array([fwd]), np.array([vpp]), np.array([pp]))
    assert got.tolist() == pytest.approx([exposed])


def test_the_gather_closed_form_equals_the_chunks_queued_one_by_one():
    """Against the queue itself: chunks 0 and 1 dispatched at 0, chunk c at (c - 1) * pp
    forwards, each gather after the one before, chunk c late by its end less (c pp + 1) f."""
    from simulators.analytical._training import _chunked_gather_exposed

    rng = np.random.default_rng(7)
    gather, fwd = rng.uniform(0, 10, 400), rng.uniform(0.01, 2, 400)
    vpp, pp = rng.integers(1, 13, 400), rng.integers(1, 17, 400)
    for g, f, v, p, got in zip(gather, fwd, vpp, pp, _chunked_gather_exposed(gather, fwd, vpp, pp)):
        end, late = 0.0, 0.0
        for chunk in range(v):
            end = max(end, 0.0 if chunk < 2 else (chunk - 1) * p * f) + g / v
            late = max(late, end - (chunk * p + 1) * f)
        assert got == pytest.approx(late, abs=1e-12)
