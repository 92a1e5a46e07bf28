"""Memory against hand computations and Korthikanti et al.'s activation formula."""

import pytest

from simulators.models import ModelSpec, get_model
from simulators.workload import ParallelPlan, layer_activation_bytes, training_memory


def plan(**kw):
    base = dict(tp=1, pp=1, dp=8, micro_batch=1, global_batch=64, seq_len=4096)
    return ParallelPlan(**{**base, **kw})


def test_llama3_8b_single_stage_by_hand():
    model = get_model("llama3-8b")
    n = 8_030_261_248  # 32*(2*4096^2 + 2*4096*1024 + 3*4096*14336 + 2*4096) + 2*128256*4096 + 4096
    assert model.total_params == n
    s, h = 4096, 4096
    layer = 2 * s * (2 * 4096 + 2 * 1024) + 4 * s * 32 + 2 * s * 3 * 14336 + 4 * 2 * s * h
    logits = 6 * s * 128256
    memory = training_memory(model, plan(), memory_reserve_gib=4.0)
    assert memory.weights_bytes == 2 * n
    assert memory.gradients_bytes == 4 * n
    assert memory.optimizer_bytes == 12 * n / 8
    assert memory.activations_bytes == 32 * layer + logits
    assert memory.total_bytes == pytest.approx(18 * n - 12 * n * 7 / 8 + 32 * layer + logits + 4 * 2**30)


@pytest.mark.parametrize("tp", [1, 2, 4, 8])
@pytest.mark.parametrize("sp", [False, True])
def test_gpt_style_layer_matches_korthikanti_without_dropout(tp, sp):
    # Korthikanti et al. 2022 (arXiv:2205.05198) eq. 2/4: sbh(10 + 24/t + 5as/(ht)) without SP and
    # sbh(34/t + 5as/(ht)) with SP. Removing dropout masks (2sbh) and replacing the kept softmax
    # (5as/h) with FlashAttention's fp32 log-sum-exp (4ab s bytes) gives the formula below.
    s, b, h, a = 2048, 2, 1024, 16
    model = ModelSpec(
        name="gpt", layers=4, hidden=h, ffn_hidden=4 * h, heads=a, kv_heads=a, vocab=1000, gated_mlp=False
    )
    expected = s * b * h * ((32 / tp) if sp else (8 + 24 / tp)) + 4 * s * b * a / tp
    got = layer_activation_bytes(model, plan(tp=tp, seq_len=s, micro_batch=b, sequence_parallel=sp))
    assert got == pytest.approx(expected)


def test_full_recompute_keeps_only_layer_inputs_plus_one_layer():
    model = get_model("llama3-8b")
    none = training_memory(model, plan(), 0.0)
    full = training_memory(model, plan(recompute="full"), 0.0)
    s, h = 4096, 4096
    logits = 6 * s * 128256
    assert full.activations_bytes == pytest.approx(32 * 2 * s * h + layer_activation_bytes(model, plan()) + logits)
    assert full.activations_bytes - logits < (none.activations_bytes - logits) / 5


def test_first_pipeline_stage_keeps_pp_microbatches_in_flight():
    model = get_model("llama3-8b")
    one = training_memory(model, plan(pp=1, dp=4, global_batch=64), 0.0)
    four = training_memory(model, plan(pp=4, dp=4, global_batch=64), 0.0)
    per_layer = layer_activation_bytes(model, plan())
    # First stage: 8 layers x 4 micro-batches in flight = the same 32 layer-activations as pp=1.
    assert four.activations_bytes >= 32 * per_layer
    assert four.weights_bytes < one.weights_bytes / 3


@pytest.mark.parametrize("pp,vpp", [(1, 1), (2, 1), (4, 1), (2, 3), (4, 2)])
def test_stage_layer_kinds_count_the_layers_of_each_stage(pp, vpp):
    from simulators.workload import stage_layer_kinds, stage_layers

    model = get_model("deepseek-v3").model_copy(update={"layers": 24, "dense_layers": 3})
    assert model.layers % (pp * vpp) == 0
    plan_ = ParallelPlan(tp=1, pp=pp, dp=1, vpp=vpp, micro_batch=1, global_batch=pp * 4, seq_len=4096)
    seen = []
    for stage in range(pp):
        layers = stage_layers(model, plan_, stage)
        seen += layers
        kinds = stage_layer_kinds(model, plan_, stage)
        assert kinds.get(True, 0) == sum(model.is_moe_layer(i) for i in layers)
        assert sum(kinds.values()) == len(layers)
    assert sorted(seen) == list(range(24))


def test_uneven_pipelines_give_the_first_and_last_stages_fewer_layers():
    from simulators.workload import stage_layer_kinds, stage_layers

    model = get_model("deepseek-v3")  # 61 layers: 3 dense, then 58 MoE
    plan_ = ParallelPlan(tp=1, pp=16, dp=1, micro_batch=1, global_batch=16, seq_len=4096)
    sizes = [len(stage_layers(model, plan_, s)) for s in range(16)]
    assert sizes == [3, 3] + [4] * 13 + [3]
    assert sorted(i for s in range(16) for i in stage_layers(model, plan_, s)) == list(range(61))
    assert stage_layer_kinds(model, plan_, 0) == {False: 3}
    assert stage_layer_kinds(model, plan_, 1) == {True: 3}


def test_zero3_shards_weights_but_holds_two_gathered_layers():
    model = get_model("llama3-8b")
    one = training_memory(model, plan(zero_stage=1), 0.0)
    three = training_memory(model, plan(zero_stage=3), 0.0)
    layer = model.layer_params(0) * 2  # bf16, tp=1
    assert three.weights_bytes == pytest.approx(one.weights_bytes / 8 + 2 * layer)
    assert three.gradients_bytes == pytest.approx(one.gradients_bytes / 8)


# Korthikanti et al. 2022, Figure 1 (as profiled; Calculon's validation, calculon/llm/validation.py,
# lists the same GiB): Megatron-22B (h 6144, 64 heads, 48 layers, s 2048) on tp 8, micro-batch 4,
# unfused attention with dropout: activations 59.25 GiB without recomputation, 9.5625 GiB with
# sequence parallelism and selective recomputation; parameters and optimizer 45.5625 GiB.
MEGATRON_22B = ModelSpec(
    name="megatron-22b",
    layers=48,
    hidden=6144,
    ffn_hidden=24576,
    heads=64,
    kv_heads=64,
    vocab=51200,
    gated_mlp=False,
    tied_embeddings=True,
)


@pytest.mark.parametrize("recompute,sp,gib", [("none", False, 59.25), ("selective", True, 9.5625)])
def test_megatron_22b_activations_match_korthikanti_figure_1(recompute, sp, gib):
    p = plan(
        tp=8,
        dp=1,
        micro_batch=4,
        global_batch=4,
        seq_len=2048,
        recompute=recompute,
        sequence_parallel=sp,
        flash_attention=False,
        dropout=True,
    )
    # Their eq.: sbh(10 + 24/t + 5as/(ht)) per layer without SP; sbh * 34/t with SP and selective.
    s, b, h, a, t = 2048, 4, 6144, 64, 8
    closed = s * b * h * ((10 + 24 / t + 5 * a * s / (h * t)) if recompute == "none" else 34 / t)
    assert layer_activation_bytes(MEGATRON_22B, p) == pytest.approx(closed, rel=1e-12)
    assert 48 * layer_activation_bytes(MEGATRON_22B, p) / 2**30 == pytest.approx(gib, rel=0.002)


def test_megatron_22b_parameters_and_optimizer_match_korthikanti_figure_1():
    """Without a distributed optimizer a GPU keeps 18 bytes per parameter (Megatron docs,
    'Distributed Optimizer': bf16/fp16 weights + fp32 gradients + fp32 master weights and Adam)."""
    p = plan(tp=8, dp=1, micro_batch=4, global_batch=4, seq_len=2048, zero_stage=0)
    memory = training_memory(MEGATRON_22B, p, 0.0)
    states = memory.weights_bytes + memory.gradients_bytes + memory.optimizer_bytes
    # The figure's 45.5625 GiB is 18 bytes x 12*L*h^2 / 8: it leaves out the embedding's shard
    # (51200 x 6144 / 8 = 39M parameters), the norms and biases, which the model keeps (+1.4 %).
    assert states / 2**30 == pytest.approx(45.5625, rel=0.02)
    assert states == pytest.approx(18 * MEGATRON_22B.total_params / 8, rel=0.002)


def test_distributed_optimizer_bytes_follow_megatrons_table():
    """bf16 parameters with fp32 gradients: 6 + 12/d bytes per parameter over d data-parallel ranks."""
    model = get_model("llama3-8b")
    for d in (1, 2, 8):
        memory = training_memory(model, plan(dp=d, global_batch=d, zero_stage=1), 0.0)
        states = memory.weights_bytes + memory.gradients_bytes + memory.optimizer_bytes
        assert states == pytest.approx((6 + 12 / d) * model.total_params, rel=1e-12)


def test_selective_recomputation_with_flash_attention_keeps_all_but_the_attention_core():
    """With FlashAttention the core keeps only its fp32 log-sum-exp (4 bytes per head and token),
    so Megatron's selective recomputation saves exactly that."""
    model = get_model("llama3-8b")
    none, selective = (layer_activation_bytes(model, plan(recompute=r)) for r in ("none", "selective"))
    assert none - selective == 4 * 4096 * 1 * model.heads


def test_zero3_keeps_at_most_deepspeeds_live_parameters_gathered():
    """GPT-3 175B layers hold 1.8B parameters each: two gathered would be 3.6B, but DeepSpeed keeps
    at most stage3_max_live_parameters = 1e9 live, so 2e9 bytes in bf16."""
    model = get_model("gpt3-175b")
    one = training_memory(model, plan(zero_stage=1, seq_len=2048), 0.0)
    three = training_memory(model, plan(zero_stage=3, seq_len=2048), 0.0)
    assert 2 * model.layer_params(0) > 1e9
    assert three.weights_bytes == pytest.approx(one.weights_bytes / 8 + 2e9)


def _gpt(**kw):
    fields = dict(
        name="gpt", layers=4, hidden=1024, ffn_hidden=4096, heads=16, kv_heads=16, vocab=1000, gated_mlp=False
    )
    return ModelSpec(**{**fields, **kw})


def test_fp8_keeps_each_gemm_input_in_one_byte():
    """Transformer Engine saves the quantized input of every fp8 GEMM for its weight gradient: the
    two norm outputs (QKV and fc1 inputs, h each), the attention output (h) and the GeLU output
    (fc2 input, 4h) -- 7h elements per token at 1 byte instead of 2."""
    s, b, h = 2048, 2, 1024
    kw = dict(seq_len=s, micro_batch=b, sequence_parallel=False)
    bf16, fp8 = (layer_activation_bytes(_gpt(), plan(precision=p, **kw)) for p in ("bf16", "fp8"))
    assert bf16 - fp8 == 7 * s * b * h


@pytest.mark.parametrize(
    "modules, saved_per_token",
    [
        (("layernorm",), 2 * 2 * 1024),  # the two norm outputs, bf16
        (("mlp",), (4096 + 4096) * 2),  # fc1 output and its GeLU
        (("core_attn", "layernorm", "mlp"), 4 * 16 + 2 * 2 * 1024 + (4096 + 4096) * 2),
        (("core_attn", "moe", "moe_act", "shared_experts"), 4 * 16),  # a dense model has no MoE block
    ],
)
def test_recompute_modules_drop_exactly_what_they_rerun(modules, saved_per_token):
    s, b = 2048, 1
    kw = dict(seq_len=s, micro_batch=b, sequence_parallel=False)
    none = layer_activation_bytes(_gpt(), plan(**kw))
    selective = layer_activation_bytes(_gpt(), plan(recompute="selective", recompute_modules=modules, **kw))
    assert none - selective == s * b * saved_per_token


def test_moe_recompute_modules_drop_the_experts_tensors():
    """Qwen3-30B-A3B (top-8 of experts 768 wide, hidden 2048, no shared expert), bf16, tp 1:
    `moe_act` drops the 8 experts' activation outputs (8 * 768 per token), `moe` the whole MoE
    block: permuted tokens and expert outputs (2 * 8 * 2048) and gate, up, activation (3 * 8 * 768)."""
    model = get_model("qwen3-30b-a3b")
    s = 4096

    def keep(*modules):
        recompute = "selective" if modules else "none"
        return layer_activation_bytes(model, plan(recompute=recompute, recompute_modules=modules), moe=True)

    assert keep() - keep("moe_act") == s * 2 * 8 * 768
    assert keep() - keep("moe") == s * 2 * (2 * 8 * 2048 + 3 * 8 * 768)


def test_bf16_gradient_reduction_halves_the_gradient_buffer():
    model = get_model("llama3-8b")
    fp32, bf16 = (training_memory(model, plan(grad_reduce_in_bf16=g), 0.0) for g in (False, True))
    assert fp32.gradients_bytes == 4 * model.total_params
    assert bf16.gradients_bytes == 2 * model.total_params
    assert bf16.weights_bytes == fp32.weights_bytes and bf16.optimizer_bytes == fp32.optimizer_bytes
