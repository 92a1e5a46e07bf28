"""FLOPs counted from GEMM shapes against closed forms of the literature."""

import pytest

from simulators._errors import PlanError, SpecError
from simulators.models import ModelSpec, get_model
from simulators.workload import Gemm, layer_forward_gemms, model_flops


def megatron_flops(model, batch, seq):
    """Megatron-LM's num_floating_point_operations (shared/validation/README.md, general form)."""
    l, h, a, g, d, f, v = (
        model.layers,
        model.hidden,
        model.heads,
        model.kv_heads,
        model.d_head,
        model.ffn_hidden,
        model.vocab,
    )
    m = 1.5 if model.gated_mlp else 1.0
    return 12 * batch * seq * l * h**2 * ((1 + g / a + seq / h) * (a * d / h) + (f / h) * m + v / (2 * l * h))


@pytest.mark.parametrize("name", ["llama2-7b", "llama2-70b", "llama3-8b", "llama3-70b", "llama3-405b", "gpt3-175b"])
@pytest.mark.parametrize("seq", [2048, 8192])
def test_flops_match_megatron_closed_form(name, seq):
    model = get_model(name)
    assert model_flops(model, 16, seq) == pytest.approx(megatron_flops(model, 16, seq), rel=1e-12)


def test_gpt3_flops_are_six_n_tokens_within_three_percent():
    # 72Bslh^2(1 + s/6h + V/12lh) vs 6NT: the attention-score term adds s/(6h) = 2.8 %.
    model = get_model("gpt3-175b")
    tokens = 1536 * 2048
    ratio = model_flops(model, 1536, 2048) / (6 * model.total_params * tokens)
    assert ratio == pytest.approx(1.015, abs=0.015)  # above 1, below 1.03


def test_tensor_parallel_ranks_share_the_flops_exactly():
    model = get_model("llama3-70b")
    whole = sum(g.flops for g in layer_forward_gemms(model, 2, 4096, tp=1))
    for tp in (2, 4, 8):
        assert tp * sum(g.flops for g in layer_forward_gemms(model, 2, 4096, tp=tp)) == whole


def test_causal_attention_executes_half_of_the_score_flops():
    gemms = {g.name: g for g in layer_forward_gemms(get_model("llama3-8b"), 1, 4096, tp=1)}
    assert gemms["attn_scores"].executed_flops == gemms["attn_scores"].flops / 2
    assert gemms["qkv_proj"].executed_flops == gemms["qkv_proj"].flops


def megatron_transformer_flops(model, batch, seq):
    """Megatron-LM's `transformer_flops` (megatron/training/training.py, read at 001b00c2) for models
    without MTP, with the score and value GEMMs counted whole (validation convention) instead of halved."""
    h, a, v = model.hidden, model.heads, model.vocab
    ffn_factor = 3 if model.gated_mlp else 2
    dense_layers, moe_layers = model.layers - model.moe_layers, model.moe_layers
    mlp = (
        model.ffn_hidden * ffn_factor * dense_layers
        + (model.moe_ffn_hidden or 0) * (model.moe_top_k or 0) * ffn_factor * moe_layers
        + model.shared_experts_ffn_hidden * ffn_factor * moe_layers
    )
    if model.is_mla:
        nope, rope, v_dim, q_lora, kv_lora = (
            model.qk_nope_head_dim,
            model.qk_rope_head_dim,
            model.v_head_dim,
            model.q_lora_rank,
            model.kv_lora_rank,
        )
        q_term = h * a * (nope + rope) if q_lora is None else q_lora * (h + a * (nope + rope) + 1)
        attention = 6 * (
            q_term
            + kv_lora * (h + a * (nope + v_dim) + 1)
            + h * rope
            + a * v_dim * h
            + seq * a * (nope + rope)
            + seq * a * v_dim
        )
    else:
        q, kv = model.q_width, model.kv_width
        attention = 6 * (h * (q + 2 * kv) + q * seq * 2 + q * h)
    return batch * seq * (6 * h * mlp + model.layers * attention + 6 * h * v)


def router_flops(model, batch, seq):
    """The router GEMM that model_flops counts and Megatron does not: fwd+bwd of tokens x h x experts."""
    return 6 * batch * seq * model.hidden * model.moe_experts * model.moe_layers


def latent_norm_flops(model, batch, seq):
    """Megatron's `+ 1` terms for MLA's two latent RMSNorms, which are not GEMMs."""
    return 6 * batch * seq * model.layers * ((model.q_lora_rank or 0) + model.kv_lora_rank)


@pytest.mark.parametrize("name", ["mixtral-8x7b", "mixtral-8x22b"])
@pytest.mark.parametrize("seq", [4096, 8192])
def test_moe_flops_are_megatrons_plus_the_router(name, seq):
    model = get_model(name)
    expected = megatron_transformer_flops(model, 16, seq) + router_flops(model, 16, seq)
    assert model_flops(model, 16, seq) == pytest.approx(expected, rel=1e-12)


def test_moe_megatron_form_is_the_readme_general_form_with_k_top_k():
    # README: 12Bslh^2[(1 + g/a + s/h)(ad/h) + (f/h) k m + V/(2lh)] with f = expert width, k = top_k.
    model, b, s = get_model("mixtral-8x7b"), 16, 4096
    l, h, a, g, d, f, v = 32, 4096, 32, 8, 128, 14336, 32000
    readme = 12 * b * s * l * h**2 * ((1 + g / a + s / h) * (a * d / h) + (f / h) * 2 * 1.5 + v / (2 * l * h))
    assert megatron_transformer_flops(model, b, s) == pytest.approx(readme, rel=1e-12)


def test_deepseek_v3_flops_are_megatrons_plus_router_minus_latent_norms():
    model, b, s = get_model("deepseek-v3"), 8, 4096
    expected = megatron_transformer_flops(model, b, s) + router_flops(model, b, s) - latent_norm_flops(model, b, s)
    assert model_flops(model, b, s) == pytest.approx(expected, rel=1e-12)


def test_qwen2_biases_do_not_change_the_flops():
    model = get_model("qwen2-72b")
    assert model_flops(model, 16, 4096) == pytest.approx(megatron_flops(model, 16, 4096), rel=1e-12)


def layer_flops(model, tp=1, ep=1, etp=1, micro_batch=2, seq=4096, index=None):
    gemms = layer_forward_gemms(model, micro_batch, seq, tp, layer_index=index, ep=ep, etp=etp)
    return sum(g.flops for g in gemms)


@pytest.mark.parametrize(("name", "index"), [("mixtral-8x7b", None), ("deepseek-v3", 0), ("deepseek-v3", 3)])
@pytest.mark.parametrize("tp", [1, 2, 4, 8])
@pytest.mark.parametrize("ep", [1, 2, 8])
@pytest.mark.parametrize("etp", [1, 2])
def test_tp_ep_etp_ranks_share_the_flops_exactly(name, index, tp, ep, etp):
    model = get_model(name)
    assert tp * layer_flops(model, tp, ep, etp, index=index) == layer_flops(model, index=index)


def test_uneven_expert_loads_still_conserve_flops():
    # 1 x 1000 tokens over tp=8: each rank routes 125 tokens to 8 experts = 1000 slots over 256
    # local experts: 232 experts see 4 tokens, 24 see 3.
    model = get_model("deepseek-v3")
    gemms = [g for g in layer_forward_gemms(model, 1, 1000, 8, layer_index=3) if g.name == "expert_in_proj"]
    assert [(g.batch, g.m) for g in gemms] == [(232, 4), (24, 3)]
    assert 8 * layer_flops(model, 8, micro_batch=1, seq=1000, index=3) == layer_flops(
        model, micro_batch=1, seq=1000, index=3
    )


def test_deepseek_v3_moe_layer_shapes_with_expert_parallelism():
    # 4096 tokens, top-8 of 256 experts, ep=8: 32 local experts see 4096*8*8/256 = 1024 tokens each.
    gemms = {g.name: g for g in layer_forward_gemms(get_model("deepseek-v3"), 1, 4096, 1, layer_index=3, ep=8)}
    assert gemms["router"] == Gemm("router", 4096, 256, 7168)
    assert gemms["expert_in_proj"] == Gemm("expert_in_proj", 1024, 2 * 2048, 7168, batch=32)
    assert gemms["expert_out_proj"] == Gemm("expert_out_proj", 1024, 7168, 2048, batch=32)
    assert gemms["shared_expert_in_proj"] == Gemm("shared_expert_in_proj", 4096, 2 * 2048, 7168)
    assert "mlp_in_proj" not in gemms


def test_expert_tensor_parallelism_narrows_experts_and_widens_their_token_lists():
    # tp=8 ranks of 512 tokens each; etp=8 shards every expert 8 ways, so each shard sees all
    # 4096*2 slots of its expert: 8192/8 = 1024 tokens per expert at width 14336/8.
    gemms = {g.name: g for g in layer_forward_gemms(get_model("mixtral-8x7b"), 1, 4096, 8, etp=8)}
    assert gemms["expert_in_proj"] == Gemm("expert_in_proj", 1024, 2 * 1792, 4096, batch=8)
    assert gemms["router"] == Gemm("router", 512, 8, 4096)


def test_mla_attention_flops_by_hand():
    model = ModelSpec(
        name="tiny-mla",
        layers=2,
        hidden=64,
        ffn_hidden=96,
        heads=4,
        kv_heads=4,
        vocab=100,
        q_lora_rank=16,
        kv_lora_rank=8,
        qk_nope_head_dim=8,
        qk_rope_head_dim=4,
        v_head_dim=6,
    )
    b, s, h, heads = 2, 32, 64, 4
    t = b * s
    projections = 2 * t * (
        h * 16 + 16 * heads * 12  # q down 64->16, q up 16->4*(8+4)
        + h * (8 + 4) + 8 * heads * (8 + 6)  # kv down 64->8+4, kv up 8->4*(8+6)
        + heads * 6 * h  # output 4*6->64
    )  # fmt: skip
    core = 2 * b * heads * s * s * 12 + 2 * b * heads * s * s * 6  # scores over qk 12, values of width 6
    mlp = 2 * t * 3 * h * 96
    gemms = layer_forward_gemms(model, b, s, tp=1)
    assert sum(g.flops for g in gemms) == projections + core + mlp
    scores = next(g for g in gemms if g.name == "attn_scores")
    assert scores.causal and scores.executed_flops == scores.flops / 2
    assert 2 * layer_flops(model, tp=2, micro_batch=b, seq=s) == projections + core + mlp


def test_layers_must_be_named_when_they_differ():
    with pytest.raises(PlanError, match="needs layer_index"):
        layer_forward_gemms(get_model("deepseek-v3"), 1, 4096, 1)
    with pytest.raises(SpecError, match="layer_index=61"):
        layer_forward_gemms(get_model("deepseek-v3"), 1, 4096, 1, layer_index=61)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (dict(tp=1, ep=3), "ep=3 does not divide moe_experts=8 of mixtral-8x7b; allowed: 1, 2, 4, 8"),
        (dict(tp=1, etp=5), "etp=5 does not divide moe_ffn_hidden=14336"),
        (dict(tp=1, ep=0), "ep=0 must be a positive integer"),
    ],
)
def test_bad_expert_parallel_plans_are_rejected(kwargs, message):
    with pytest.raises(PlanError, match=message):
        layer_forward_gemms(get_model("mixtral-8x7b"), 1, 4096, **kwargs)


@pytest.mark.parametrize("name", ["mixtral-8x7b", "deepseek-v3"])
def test_router_and_latent_tokens_must_split_over_tp(name):
    with pytest.raises(PlanError, match=r"micro_batch\*seq_len \(tokens, split over tp by sequence parallelism\)=4095"):
        layer_forward_gemms(get_model(name), 1, 4095, 2, layer_index=0)


def test_expert_parallelism_leaves_dense_models_alone():
    model = get_model("llama3-8b")
    assert layer_forward_gemms(model, 1, 4096, 2, ep=4, etp=2) == layer_forward_gemms(model, 1, 4096, 2)
