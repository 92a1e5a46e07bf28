"""Per-GPU memory of a training plan, on its most loaded pipeline stage.

Bytes per parameter follow Megatron-LM's mixed-precision accounting (docs "Distributed
Optimizer"): 2 (bf16 weights) + 4 (fp32 main gradients) + 12 (fp32 master weights, Adam m and
v); the distributed optimizer shards the 12 over data-parallel ranks. Activations follow
Korthikanti et al., "Reducing Activation Recomputation in Large Transformer Models"
(arXiv:2205.05198, Sec. 4), adapted to today's recipe: FlashAttention (no s x s softmax kept,
only fp32 log-sum-exp per head and token), no dropout, GQA and gated MLPs.
"""

from __future__ import annotations

from dataclasses import dataclass

from simulators.models import ModelSpec
from simulators.workload._plan import ParallelPlan

WEIGHT_BYTES = 2
GRADIENT_BYTES = 4
OPTIMIZER_BYTES = 12
ACTIVATION_BYTES = 2
LOGIT_BYTES = 2 + 4  # bf16 logits kept for backward + fp32 copy for the cross-entropy


@dataclass(frozen=True)
class MemoryBreakdown:
    """Bytes one GPU holds at its peak; `total_gb` is what must fit in HBM."""

    weights_bytes: float
    gradients_bytes: float
    optimizer_bytes: float
    activations_bytes: float
    reserve_bytes: float

    @property
    def total_bytes(self) -> float:
        return (
            self.weights_bytes
            + self.gradients_bytes
            + self.optimizer_bytes
            + self.activations_bytes
            + self.reserve_bytes
        )

    @property
    def total_gb(self) -> float:
        return self.total_bytes / 1e9


def stage_params(model: ModelSpec, plan: ParallelPlan, first: bool, last: bool) -> float:
    """Parameters one tensor-parallel rank of a pipeline stage holds (norms are replicated)."""
    h, tp = model.hidden, plan.tp
    per_layer = (model.params_per_layer - 2 * h) / tp + 2 * h
    params = model.layers // plan.pp * per_layer
    if first:
        params += model.embedding_params / tp
    if last:
        params += h  # final norm
        if not model.tied_embeddings:
            params += model.output_params / tp
        elif not first:
            params += model.embedding_params / tp  # tied copy kept on the last stage
    return params


def layer_activation_bytes(model: ModelSpec, plan: ParallelPlan) -> float:
    """Activations one layer keeps for backward, for one micro-batch, without recomputation."""
    s, b, h, tp = plan.seq_len, plan.micro_batch, model.hidden, plan.tp
    sbe = s * b * ACTIVATION_BYTES
    # Sharded over tp: Q, K, V, attention output, FlashAttention's fp32 LSE, MLP intermediates.
    mlp_tensors = 3 if model.gated_mlp else 2  # gate, up, act(gate)*up  |  fc1 out, gelu out
    sharded = (
        sbe * (2 * model.q_width + 2 * model.kv_width) + 4 * s * b * model.heads + sbe * mlp_tensors * model.ffn_hidden
    ) / tp
    # Norm inputs and outputs (4 tensors of width h): replicated unless sequence-parallel.
    norm = 4 * sbe * h
    replicated = norm / tp if plan.sequence_parallel else norm
    return sharded + replicated


def training_memory(model: ModelSpec, plan: ParallelPlan, memory_reserve_gb: float) -> MemoryBreakdown:
    """Peak memory of the worse of the first and last pipeline stage under 1F1B.

    The first stage keeps min(pp, microbatches) micro-batches of activations in flight; the last
    keeps one, plus the logits. Full recomputation keeps only each layer's input, plus one
    layer's activations while it is recomputed.
    """
    layers = model.layers // plan.pp
    full = layer_activation_bytes(model, plan)
    if plan.recompute == "full":
        layer_input = plan.seq_len * plan.micro_batch * model.hidden * ACTIVATION_BYTES
        if plan.sequence_parallel:
            layer_input /= plan.tp
        per_microbatch, working = layers * layer_input, full
    else:
        per_microbatch, working = layers * full, 0.0
    logits = LOGIT_BYTES * plan.seq_len * plan.micro_batch * -(-model.vocab // plan.tp)

    def stage(first: bool, last: bool) -> MemoryBreakdown:
        params = stage_params(model, plan, first, last)
        in_flight = min(plan.pp, plan.microbatches) if first else 1
        optimizer_shards = plan.dp if plan.distributed_optimizer else 1
        return MemoryBreakdown(
            weights_bytes=params * WEIGHT_BYTES,
            gradients_bytes=params * GRADIENT_BYTES,
            optimizer_bytes=params * OPTIMIZER_BYTES / optimizer_shards,
            activations_bytes=in_flight * per_microbatch + working + (logits if last else 0.0),
            reserve_bytes=memory_reserve_gb * 1e9,
        )

    stages = [stage(True, plan.pp == 1), stage(False, True)] if plan.pp > 1 else [stage(True, True)]
    return max(stages, key=lambda m: m.total_bytes)
