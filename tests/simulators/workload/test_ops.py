"""FLOPs counted from GEMM shapes against closed forms of the literature."""

import pytest

from simulators.models import get_model
from simulators.workload import layer_forward_gemms, model_flops


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
    assert 1.0 < ratio < 1.03


def test_tensor_parallel_ranks_share_the_flops_exactly():
    model = get_model("llama3-70b")
    whole = sum(g.flops for g in layer_forward_gemms(model, 2, 4096, tp=1))
    for tp in (2, 4, 8):
        assert tp * sum(g.flops for g in layer_forward_gemms(model, 2, 4096, tp=tp)) == whole


def test_causal_attention_executes_half_of_the_score_flops():
    gemms = {g.name: g for g in layer_forward_gemms(get_model("llama3-8b"), 1, 4096, tp=1)}
    assert gemms["attn_scores"].executed_flops == gemms["attn_scores"].flops / 2
    assert gemms["qkv_proj"].executed_flops == gemms["qkv_proj"].flops
