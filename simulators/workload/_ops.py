"""Compute operations of a transformer training step, as GEMM shapes on one tensor-parallel rank.

FLOPs are counted from the shapes (2*m*n*k per GEMM), so the closed forms of the literature
(6*N*tokens, Megatron's `num_floating_point_operations`) are independent checks, not the source.
Only GEMMs count: norms, RoPE, softmax, activations and biases (Qwen2's q/k/v biases add
q_width + 2*kv_width per token, under 1e-4 of the layer) are elementwise and left out.

Sharding follows Megatron-Core. Dense projections split their output (column-parallel) or input
(row-parallel) width over the `tp` ranks and every rank sees all T = micro_batch*seq_len tokens.
Weights that tensor parallelism replicates -- the MoE router and MLA's latent down-projections --
instead run on the rank's sequence-parallel share of T/tp tokens; Megatron requires sequence
parallelism for MoE with tp > 1, and without it these GEMMs would only repeat work.

Routed experts, with `ep` expert-parallel and `etp` expert-tensor-parallel ranks (E experts, each
split into etp shards of width ffn/etp, E/ep experts per rank): every rank routes its own T/tp
tokens, top_k slots each, so an expert-parallel group of ep*etp ranks sends ep*etp*T*top_k/tp
slots, and the all-to-all delivers each slot to all etp shards of its expert. With balanced
routing a rank's local experts thus see etp*T*top_k/tp slots after the all-to-all, i.e.
T*top_k*ep*etp/(tp*E) tokens per expert. The routed FLOPs of a rank are 1/tp of the
micro-batch's whatever ep and etp are: expert parallelism moves tokens, it neither adds nor
removes work. When the slots do not divide evenly over the local experts, some experts get one
token more than others, so the FLOPs stay exact.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from simulators._errors import PlanError
from simulators.models import ModelSpec
from simulators.workload._plan import divisors


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


SEQUENCE_SHARE = "micro_batch*seq_len (tokens, split over tp by sequence parallelism)"


def _split(value: int, parts: int, what: str) -> int:
    """`value` shared evenly by `parts` ranks; a PlanError if it does not divide."""
    if value % parts:
        raise PlanError(f"{what}={value} does not split evenly over {parts} ranks")
    return value // parts


def _attention(model: ModelSpec, micro_batch: int, seq_len: int, tp: int) -> tuple[Gemm, ...]:
    """Standard (MHA/GQA) self-attention: fused q/k/v projection, scores, values, output."""
    tokens, h, d = micro_batch * seq_len, model.hidden, model.d_head
    heads = _split(model.heads, tp, "heads")
    return (
        Gemm("qkv_proj", tokens, _split(model.q_width + 2 * model.kv_width, tp, "q/k/v width"), h),
        Gemm("attn_scores", seq_len, seq_len, d, batch=micro_batch * heads, causal=True),
        Gemm("attn_values", seq_len, d, seq_len, batch=micro_batch * heads, causal=True),
        Gemm("attn_out_proj", tokens, h, heads * d),
    )


def _latent_attention(model: ModelSpec, micro_batch: int, seq_len: int, tp: int) -> tuple[Gemm, ...]:
    """Multi-head latent attention (DeepSeek-V2/V3) as trained: latents are up-projected to
    per-head keys and values (no weight absorption, which only pays off in decoding)."""
    tokens, h = micro_batch * seq_len, model.hidden
    local_tokens = _split(tokens, tp, SEQUENCE_SHARE)
    heads = _split(model.heads, tp, "heads")
    qk, v = model.d_head, model.v_head_dim
    if model.q_lora_rank is None:
        query: tuple[Gemm, ...] = (Gemm("q_proj", tokens, heads * qk, h),)
    else:
        query = (
            Gemm("q_down_proj", local_tokens, model.q_lora_rank, h),
            Gemm("q_up_proj", tokens, heads * qk, model.q_lora_rank),
        )
    return (
        *query,
        Gemm("kv_down_proj", local_tokens, model.kv_lora_rank + model.qk_rope_head_dim, h),
        Gemm("kv_up_proj", tokens, heads * (model.qk_nope_head_dim + v), model.kv_lora_rank),
        Gemm("attn_scores", seq_len, seq_len, qk, batch=micro_batch * heads, causal=True),
        Gemm("attn_values", seq_len, v, seq_len, batch=micro_batch * heads, causal=True),
        Gemm("attn_out_proj", tokens, h, heads * v),
    )


def _mlp(prefix: str, model: ModelSpec, tokens: int, width: int, tp: int) -> tuple[Gemm, Gemm]:
    """A dense MLP of inner `width`, tensor-parallel: gate+up (or up) in, down out."""
    local = _split(width, tp, f"{prefix} width")
    inputs = 2 if model.gated_mlp else 1
    return (
        Gemm(f"{prefix}_in_proj", tokens, inputs * local, model.hidden),
        Gemm(f"{prefix}_out_proj", tokens, model.hidden, local),
    )


def _moe(model: ModelSpec, micro_batch: int, seq_len: int, tp: int, ep: int, etp: int) -> tuple[Gemm, ...]:
    """Router, routed experts (token accounting in the module docstring) and shared experts."""
    tokens = micro_batch * seq_len
    local_tokens = _split(tokens, tp, SEQUENCE_SHARE)
    local_experts = _split(model.moe_experts, ep, "moe_experts")
    width = _split(model.moe_ffn_hidden, etp, "moe_ffn_hidden")
    inputs = 2 if model.gated_mlp else 1
    slots = etp * local_tokens * model.moe_top_k
    per_expert, busier = divmod(slots, local_experts)
    groups = ((busier, per_expert + 1), (local_experts - busier, per_expert))
    routed = tuple(
        gemm
        for experts, m in groups
        if experts and m
        for gemm in (
            Gemm("expert_in_proj", m, inputs * width, model.hidden, batch=experts),
            Gemm("expert_out_proj", m, model.hidden, width, batch=experts),
        )
    )
    shared = (
        _mlp("shared_expert", model, tokens, model.shared_experts_ffn_hidden, tp) if model.moe_shared_experts else ()
    )
    return (Gemm("router", local_tokens, model.moe_experts, model.hidden), *routed, *shared)


def _check_degrees(model: ModelSpec, tp: int, ep: int, etp: int) -> None:
    """PlanError unless tp, ep, etp are positive and ep, etp split the experts evenly."""
    for name, degree in (("tp", tp), ("ep", ep), ("etp", etp)):
        if degree < 1:
            raise PlanError(f"{name}={degree} must be a positive integer")
    if not model.is_moe:
        return
    for name, degree, field, size in (
        ("ep", ep, "moe_experts", model.moe_experts),
        ("etp", etp, "moe_ffn_hidden", model.moe_ffn_hidden),
    ):
        if size % degree:
            allowed = ", ".join(map(str, divisors(size)))
            raise PlanError(f"{name}={degree} does not divide {field}={size} of {model.name}; allowed: {allowed}")


def layer_forward_gemms(
    model: ModelSpec,
    micro_batch: int,
    seq_len: int,
    tp: int,
    *,
    layer_index: int | None = None,
    ep: int = 1,
    etp: int = 1,
) -> tuple[Gemm, ...]:
    """The forward GEMMs of one transformer layer on one of `tp` ranks.

    `layer_index` (0-based) picks the layer; it may be left out only when all layers are alike
    (dense models, Mixtral), so that a caller multiplying by `model.layers` cannot silently
    count DeepSeek-V3's dense layers as MoE ones or the reverse. `ep` and `etp` shard routed
    experts (module docstring) and leave dense layers untouched.
    """
    if layer_index is None:
        if len(model.layer_runs) > 1:
            raise PlanError(
                f"{model.name} mixes dense and MoE layers; layer_forward_gemms needs layer_index "
                f"(0..{model.layers - 1}; see ModelSpec.layer_runs)"
            )
        layer_index = 0
    _check_degrees(model, tp, ep, etp)
    attention = (_latent_attention if model.is_mla else _attention)(model, micro_batch, seq_len, tp)
    if model.is_moe_layer(layer_index):
        return attention + _moe(model, micro_batch, seq_len, tp, ep, etp)
    return attention + _mlp("mlp", model, micro_batch * seq_len, model.ffn_hidden, tp)


def logits_gemm(model: ModelSpec, micro_batch: int, seq_len: int, tp: int) -> Gemm:
    """The output (logit) layer's forward GEMM on one of `tp` ranks (vocabulary-parallel)."""
    return Gemm("logits", micro_batch * seq_len, -(-model.vocab // tp), model.hidden)


@cache
def model_flops(model: ModelSpec, global_batch: int, seq_len: int) -> int:
    """Model FLOPs of one training step: forward plus backward (2x forward), no recomputation.

    Follows the convention of Megatron-LM's `num_floating_point_operations` as the validation
    data uses it (2024, f2e5db402c: full s x s score matrix, logits included), generalised by
    Megatron's later branches to dense-then-MoE layers, shared experts and MLA. Where this count
    differs from Megatron's current code (megatron/training/training.py, read at 001b00c2):
    - the router GEMM, 2*hidden*moe_experts per token in every MoE layer, is counted here and
      not there;
    - Megatron adds q_lora_rank + kv_lora_rank multiply-adds per token for MLA's latent norms;
      they are not GEMMs and are not counted here;
    - Megatron now halves the score and value GEMMs for causal masking; here they count whole,
      and `Gemm.executed_flops` gives the halved figure;
    - Megatron adds multi-token-prediction modules when `mtp_num_layers` is set; zoo models
      have none (DeepSeek-V3's MTP module is not part of its 671B main model).
    """
    layers = sum(
        count * sum(g.flops for g in layer_forward_gemms(model, global_batch, seq_len, tp=1, layer_index=first))
        for first, count in model.layer_runs
    )
    logits = logits_gemm(model, global_batch, seq_len, tp=1).flops
    return 3 * (layers + logits)


# The forward GEMMs each module of selective recomputation reruns (RECOMPUTE_MODULES; the
# norms and the experts' activation are elementwise, no GEMM).
RECOMPUTED_GEMMS = {
    "core_attn": ("attn_scores", "attn_values"),
    "mla_up_proj": ("q_up_proj", "kv_up_proj"),
    "mlp": ("mlp_",),
    "moe": ("router", "expert_", "shared_expert_"),
    "shared_experts": ("shared_expert_",),
}


@cache
def recomputed_flops(model: ModelSpec, global_batch: int, seq_len: int, modules: tuple[str, ...]) -> int:
    """FLOPs selective recomputation of `modules` reruns in one step (counted as `model_flops`
    counts them: the score and value GEMMs whole), for the hardware FLOP utilisation."""
    prefixes = tuple(sorted({prefix for module in modules for prefix in RECOMPUTED_GEMMS.get(module, ())}))
    if not prefixes:
        return 0
    return sum(
        count
        * sum(
            g.flops
            for g in layer_forward_gemms(model, global_batch, seq_len, tp=1, layer_index=first)
            if g.name.startswith(prefixes)
        )
        for first, count in model.layer_runs
    )
