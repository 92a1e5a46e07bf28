import pytest

from simulators.models import ModelSpec, get_model, model_catalog

REQUIRED = [
    "llama2-7b",
    "llama2-13b",
    "llama2-70b",
    "llama3-8b",
    "llama3-70b",
    "llama3-405b",
    "gpt3-175b",
    "mixtral-8x7b",
    "mixtral-8x22b",
    "deepseek-v3",
    "qwen2-72b",
]


def test_zoo_holds_every_required_model():
    assert set(REQUIRED) <= set(model_catalog())


@pytest.mark.parametrize("name", REQUIRED)
def test_parameter_count_from_shapes_matches_published_size(name):
    model = get_model(name)
    assert model.total_params / 1e9 == pytest.approx(model.params_b, rel=0.02)


def test_llama3_70b_parameters_by_hand():
    # Embedding and untied output 2*128256*8192; per layer q,o 8192^2 each, k,v 8192*1024 each,
    # SwiGLU 3*8192*28672, two norms; a final norm.
    per_layer = 2 * 8192**2 + 2 * 8192 * 1024 + 3 * 8192 * 28672 + 2 * 8192
    expected = 80 * per_layer + 2 * 128256 * 8192 + 8192
    assert get_model("llama3-70b").total_params == expected


def test_shapes_are_checked_at_construction():
    with pytest.raises(ValueError, match="kv_heads"):
        ModelSpec(name="x", layers=2, hidden=64, ffn_hidden=128, heads=8, kv_heads=3, vocab=100)
