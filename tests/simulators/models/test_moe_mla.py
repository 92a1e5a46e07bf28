"""MoE and MLA models: parameter counts against published sizes and by hand, and field checks."""

import pytest

from simulators._errors import SpecError
from simulators.models import ModelSpec, get_model, model_catalog

MOE = ["mixtral-8x7b", "mixtral-8x22b", "deepseek-v3"]


@pytest.mark.parametrize("name", [n for n in model_catalog() if model_catalog()[n].active_params_b])
def test_active_parameters_match_the_published_count(name):
    model = get_model(name)
    assert model.active_params / 1e9 == pytest.approx(model.active_params_b, rel=0.02)


@pytest.mark.parametrize(
    ("name", "total_b", "active_b"),
    [("mixtral-8x7b", 46.7, 12.9), ("mixtral-8x22b", 141, 39), ("deepseek-v3", 671, 37), ("qwen2-72b", 72.7, 72.7)],
)
def test_counts_match_the_headline_numbers(name, total_b, active_b):
    model = get_model(name)
    assert model.total_params / 1e9 == pytest.approx(total_b, rel=0.02)
    assert model.active_params / 1e9 == pytest.approx(active_b, rel=0.02)


def test_deepseek_v3_activated_weights_without_input_embedding_are_the_36_6b_of_readme_weights():
    model = get_model("deepseek-v3")
    assert (model.active_params - model.embedding_params) / 1e9 == pytest.approx(36.6, rel=0.002)


def test_qwen2_72b_non_embedding_count_is_the_published_70_21b():
    model = get_model("qwen2-72b")
    non_embedding = model.total_params - model.embedding_params - model.output_params
    assert non_embedding / 1e9 == pytest.approx(70.21, abs=0.005)


def test_deepseek_v3_layers_by_hand():
    h, heads = 7168, 128
    attention = (
        h * 1536 + 1536 + 1536 * heads * (128 + 64)  # q down, q latent norm, q up
        + h * (512 + 64) + 512 + 512 * heads * (128 + 128)  # kv down (+ shared RoPE key), kv norm, kv up
        + heads * 128 * h  # output
    )  # fmt: skip
    expert = 3 * h * 2048
    model = get_model("deepseek-v3")
    assert model.attention_params == attention
    assert model.layer_params(2) == attention + 3 * h * 18432 + 2 * h
    assert model.layer_params(3) == attention + h * 256 + 257 * expert + 2 * h  # router, 256 routed + 1 shared
    assert model.total_params == 3 * model.layer_params(0) + 58 * model.layer_params(60) + 2 * 129280 * h + h
    assert model.total_params - model.active_params == 58 * (256 - 8) * expert


def test_mixtral_layer_by_hand():
    h = 4096
    layer = h * (2 * 4096 + 2 * 1024) + h * 8 + 8 * 3 * h * 14336 + 2 * h
    model = get_model("mixtral-8x7b")
    assert model.params_per_layer == model.layer_params(0) == layer
    assert model.total_params == 32 * layer + 2 * 32000 * h + h


def test_qwen2_counts_biases_on_q_k_v():
    model = get_model("qwen2-72b")
    no_bias = model.model_copy(update={"qkv_bias": False})
    assert model.params_per_layer - no_bias.params_per_layer == 8192 + 2 * 1024


def test_dense_models_keep_their_per_layer_count_and_are_fully_active():
    model = get_model("llama3-70b")
    assert model.params_per_layer == 2 * 8192**2 + 2 * 8192 * 1024 + 3 * 8192 * 28672 + 2 * 8192
    assert model.active_params == model.total_params
    assert model.layer_runs == ((0, 80),)


def test_mixed_layers_have_no_single_per_layer_count():
    model = get_model("deepseek-v3")
    assert model.layer_runs == ((0, 3), (3, 58))
    with pytest.raises(SpecError, match="layer_params"):
        _ = model.params_per_layer


def test_layer_index_is_checked():
    with pytest.raises(SpecError, match=r"allowed: 0\.\.60"):
        get_model("deepseek-v3").layer_params(61)


@pytest.mark.parametrize(
    ("alias", "name"),
    [
        ("deepseek-ai/DeepSeek-V3", "deepseek-v3"),
        ("mistralai/Mixtral-8x7B-v0.1", "mixtral-8x7b"),
        ("mistralai/Mixtral-8x22B-Instruct-v0.1", "mixtral-8x22b"),
        ("Qwen/Qwen2-72B-Instruct", "qwen2-72b"),
    ],
)
def test_hugging_face_repo_ids_are_aliases(alias, name):
    assert get_model(alias).name == name


BASE = dict(name="x", layers=4, hidden=64, ffn_hidden=128, heads=4, kv_heads=4, vocab=100)
MOE_BASE = {**BASE, "moe_experts": 8, "moe_top_k": 2, "moe_ffn_hidden": 32}
MLA_BASE = {**BASE, "kv_lora_rank": 16, "qk_nope_head_dim": 8, "qk_rope_head_dim": 4, "v_head_dim": 8}


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({**BASE, "moe_top_k": 2}, "moe_top_k set without moe_experts"),
        ({**BASE, "dense_layers": 1}, "dense_layers set without moe_experts"),
        ({**BASE, "active_params_b": 1.0}, "active_params_b set without moe_experts"),
        ({**MOE_BASE, "moe_top_k": None}, "moe_top_k is required when moe_experts=8"),
        ({**MOE_BASE, "moe_ffn_hidden": None}, "moe_ffn_hidden is required"),
        ({**MOE_BASE, "moe_top_k": 9}, "moe_top_k=9 exceeds moe_experts=8"),
        ({**MOE_BASE, "dense_layers": 4}, r"dense_layers=4 leaves no MoE layer; allowed: 0\.\.3"),
        ({**MOE_BASE, "moe_shared_ffn_hidden": 64}, "moe_shared_ffn_hidden=64 is set but moe_shared_experts=0"),
        ({**BASE, "q_lora_rank": 16}, "q_lora_rank set without kv_lora_rank"),
        ({**MLA_BASE, "v_head_dim": None}, "v_head_dim required when kv_lora_rank=16"),
        ({**MLA_BASE, "kv_heads": 2}, "kv_heads=2 must equal heads=4"),
        ({**MLA_BASE, "head_dim": 8}, "head_dim=8 differs from qk_nope_head_dim"),
        ({**MLA_BASE, "qkv_bias": True}, "MLA projections have no biases"),
    ],
)
def test_inconsistent_moe_and_mla_fields_are_rejected(fields, message):
    with pytest.raises(ValueError, match=message):
        ModelSpec(**fields)


def test_shared_experts_default_to_the_routed_width():
    model = ModelSpec(**MOE_BASE, moe_shared_experts=2)
    assert model.shared_experts_ffn_hidden == 64
    assert ModelSpec(**MOE_BASE, moe_shared_experts=2, moe_shared_ffn_hidden=48).shared_experts_ffn_hidden == 96


def test_mla_without_query_latent_uses_a_plain_query_projection():
    model = ModelSpec(**MLA_BASE)
    h, heads = 64, 4
    key_value = h * (16 + 4) + 16 + 16 * heads * (8 + 8)
    assert model.attention_params == h * heads * 12 + key_value + heads * 8 * h
    assert model.d_head == 12
