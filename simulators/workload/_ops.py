"""Compute operations of a transformer training step, as GEMM shapes on one tensor-parallel rank.

FLOPs are counted from the shapes (2*m*n*k per GEMM), so the closed forms of the literature
(6*N*tokens, Megatron's `num_floating_point_operations`) are independent checks, not the source.
"""

from __future__ import annotations

from dataclasses import dataclass

from simulators.models import ModelSpec


@dataclass(frozen=True)
class Gemm:
    """`batch` independent (m x k) @ (k x n) products; `causal` marks attention-score GEMMs
    whose upper triangle a causal kernel (FlashAttention) skips."""

    name: str
    m: int
    n: int
    k: int
    batch: int = 1
    causal: bool = False

    @property
    def flops(self) -> int:
        return 2 * self.m * self.n * self.k * self.batch

    @property
    def executed_flops(self) -> float:
        """FLOPs a causal kernel actually performs: half the score matrix."""
        return self.flops / 2 if self.causal else float(self.flops)


def layer_forward_gemms(model: ModelSpec, micro_batch: int, seq_len: int, tp: int) -> tuple[Gemm, ...]:
    """The forward GEMMs of one transformer layer on one of `tp` ranks."""
    tokens = micro_batch * seq_len
    h, d = model.hidden, model.d_head
    heads = model.heads // tp
    mlp_in = (2 if model.gated_mlp else 1) * model.ffn_hidden // tp
    return (
        Gemm("qkv_proj", tokens, (model.q_width + 2 * model.kv_width) // tp, h),
        Gemm("attn_scores", seq_len, seq_len, d, batch=micro_batch * heads, causal=True),
        Gemm("attn_values", seq_len, d, seq_len, batch=micro_batch * heads, causal=True),
        Gemm("attn_out_proj", tokens, h, model.q_width // tp),
        Gemm("mlp_in_proj", tokens, mlp_in, h),
        Gemm("mlp_out_proj", tokens, h, model.ffn_hidden // tp),
    )


def logits_gemm(model: ModelSpec, micro_batch: int, seq_len: int, tp: int) -> Gemm:
    """The output (logit) layer's forward GEMM on one of `tp` ranks (vocabulary-parallel)."""
    return Gemm("logits", micro_batch * seq_len, -(-model.vocab // tp), model.hidden)


def model_flops(model: ModelSpec, global_batch: int, seq_len: int) -> int:
    """Model FLOPs of one training step: forward plus backward (2x forward), no recomputation.

    Follows the convention of Megatron-LM's `num_floating_point_operations` (full s x s score
    matrix, logits included), which MFU figures in ../shared/validation use.
    """
    layer = sum(g.flops for g in layer_forward_gemms(model, global_batch, seq_len, tp=1))
    logits = logits_gemm(model, global_batch, seq_len, tp=1).flops
    return 3 * (model.layers * layer + logits)
