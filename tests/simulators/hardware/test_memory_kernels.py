"""Byte counts of a layer's memory-bound kernels against a hand count for Llama-3-8B."""

import numpy as np
import pytest

from simulators import DseError
from simulators.hardware import layer_memory_kernels

# Llama-3-8B (Meta model card / config.json): hidden 4096, SwiGLU FFN 14336, 32 heads, 8 KV heads,
# head_dim 128, vocabulary 128256. One sequence of 8192 tokens on one GPU (tp = 1), bf16.
T, H, F, HEADS, KV, D, V = 8192, 4096, 14336, 32, 8, 128, 128256
Q, G = HEADS * D, KV * D  # 4096, 1024


def llama3_8b(**kw):
    return layer_memory_kernels(T, H, F, HEADS, KV, D, V, **kw)


def total(kernels, phase):
    return sum(k.nbytes for k in kernels if k.phase == phase)


def test_llama3_8b_layer_bytes_match_a_hand_count():
    kernels = llama3_8b()
    # Forward, 2-byte activations: two norms (read x, write y), RoPE on q and k (read, write),
    # two residual adds (read two, write one), SwiGLU (read gate and up, write one).
    norms = 2 * (2 * T * H * 2)  # 268,435,456
    rope = 2 * T * (Q + G) * 2  # 167,772,160
    residuals = 2 * (3 * T * H * 2)  # 402,653,184
    swiglu = 3 * T * F * 2  # 704,643,072
    assert total(kernels, "fwd") == norms + rope + residuals + swiglu == 1_543_503_872
    # Backward: norms read x and dy and write dx; SwiGLU reads gate, up, dy and writes two.
    bwd = 2 * (3 * T * H * 2) + rope + residuals + 5 * T * F * 2
    assert total(kernels, "bwd") == bwd == 2_147_483_648
    assert [k.name for k in kernels if k.phase == "fwd"] == [
        "input_norm",
        "rope_qk",
        "attention_residual_add",
        "mlp_norm",
        "swiglu",
        "mlp_residual_add",
    ]


def test_fp8_adds_cast_transposes_of_every_gemm_input_and_output_gradient():
    extra_fwd = total(llama3_8b(precision="fp8"), "fwd") - total(llama3_8b(), "fwd")
    assert extra_fwd == 4 * T * (H + Q + H + F)  # read 2 bytes, write fp8 and its transpose
    extra_bwd = total(llama3_8b(precision="fp8"), "bwd") - total(llama3_8b(), "bwd")
    assert extra_bwd == 4 * T * ((Q + 2 * G) + H + 2 * F + H)


def test_last_layer_adds_the_final_norm_and_the_cross_entropy():
    extra = {k.name: k.nbytes for k in llama3_8b(last_layer=True) if k.phase == "fwd"}
    assert extra["final_norm"] == 2 * T * H * 2
    assert extra["cross_entropy"] == 2 * T * V * 2  # 4.2 GB: more than the rest of the layer


def test_sequence_parallel_dropout_and_gelu_variants():
    tp = 8
    sp = layer_memory_kernels(T, H, F // tp, HEADS // tp, KV // tp, D, V // tp, norm_tokens=T // tp)
    by_name = {k.name: k.nbytes for k in sp if k.phase == "fwd"}
    assert by_name["input_norm"] == 2 * (T // tp) * H * 2
    assert by_name["rope_qk"] == 2 * T * (Q + G) // tp * 2
    dropout = {k.name: k.nbytes for k in llama3_8b(dropout=True) if k.phase == "bwd"}
    assert dropout["mlp_residual_add"] == 3 * T * H * 2 + T * H  # the 1-byte mask, read back
    gelu = {k.name: k.nbytes for k in llama3_8b(gated=False)}
    assert gelu["gelu"] == 3 * T * F * 2  # backward entry (the dict keeps the last)


def test_arrays_broadcast_like_scalars():
    tokens = np.array([1024, 8192])
    kernels = layer_memory_kernels(tokens, H, F, HEADS, KV, D, V, precision="fp8")
    for i, t in enumerate(tokens):
        scalar = layer_memory_kernels(int(t), H, F, HEADS, KV, D, V, precision="fp8")
        assert [k.nbytes[i] for k in kernels] == [k.nbytes for k in scalar]


def test_bad_arguments_name_the_field():
    with pytest.raises(DseError, match=r"layer_memory_kernels\.hidden: 0 is not allowed"):
        layer_memory_kernels(T, 0, F, HEADS, KV, D, V)
    with pytest.raises(DseError, match=r"layer_memory_kernels\.precision: 'int8' is not allowed"):
        layer_memory_kernels(T, H, F, HEADS, KV, D, V, precision="int8")
