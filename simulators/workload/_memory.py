"""Per-GPU memory of a training plan, on its most loaded pipeline stage.

Bytes per parameter follow Megatron-LM's mixed-precision accounting (docs "Distributed
Optimizer"): 2 (bf16 weights) + 4 (fp32 main gradients) + 12 (fp32 master weights, Adam m and
v). ZeRO shards them over the data-parallel (times context-parallel) ranks: stage 1 the 12,
stage 2 also the 4, stage 3 also the 2. Activations follow Korthikanti et al., "Reducing
Activation Recomputation in Large Transformer Models" (arXiv:2205.05198, Sec. 4), adapted to
today's recipe: FlashAttention (no s x s softmax kept, only fp32 log-sum-exp per head and
token), no dropout, GQA and gated MLPs; context parallelism splits the sequence.
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
    """Activations one layer keeps for backward, for one micro-batch, per GPU.

    No recomputation keeps everything below; selective recomputation (Megatron-Core's
    `--recompute-modules layernorm mlp_act` style) drops the norm outputs and the MLP activation
    output and recomputes them in backward.
    """
    s, b, h, tp = plan.seq_len // plan.cp, plan.micro_batch, model.hidden, plan.tp
    sbe = s * b * ACTIVATION_BYTES
    selective = plan.recompute == "selective"
    # Gated: gate, up, act(gate)*up  |  plain: fc1 out, gelu out. Selective drops the last.
    mlp_tensors = (3 if model.gated_mlp else 2) - (1 if selective else 0)
    # Sharded over tp: Q, K, V, attention output, FlashAttention's fp32 LSE, MLP intermediates.
    sharded = (
        sbe * (2 * model.q_width + 2 * model.kv_width) + 4 * s * b * model.heads + sbe * mlp_tensors * model.ffn_hidden
    ) / tp
    # Norm inputs and outputs (4 tensors of width h; selective keeps the 2 inputs): replicated
    # over tp unless sequence-parallel.
    norm = (2 if selective else 4) * sbe * h
    replicated = norm / tp if plan.sequence_parallel else norm
    return sharded + replicated


def in_flight_chunks(plan: ParallelPlan, stage: int) -> int:
    """Model chunks of activations pipeline stage `stage` holds at its peak.

    GPipe runs every forward first (m micro-batches); 1F1B and ZB-H1 keep their warm-up plus the
    micro-batch in progress, pp - stage; interleaved 1F1B keeps (pp-stage-1)*2 + (v-1)*pp + 1
    chunks (Megatron's schedule, as simulators/analytical/_timeline.py runs it).
    """
    m, pp, v = plan.microbatches, plan.pp, plan.vpp
    if plan.schedule == "gpipe":
        return m
    if v > 1:
        return min((pp - stage - 1) * 2 + (v - 1) * pp + 1, m * v)
    return min(pp - stage, m)


def training_memory(model: ModelSpec, plan: ParallelPlan, memory_reserve_gb: float) -> MemoryBreakdown:
    """Peak memory of the worse of the first and last pipeline stage.

    The last stage keeps one micro-batch in flight, plus the logits. Full recomputation keeps
    only each layer's input, plus one layer's activations while it is recomputed.
    """
    chunk_layers = model.layers // (plan.pp * plan.vpp)
    full = layer_activation_bytes(model, plan)
    if plan.recompute == "full":
        layer_input = plan.seq_len // plan.cp * plan.micro_batch * model.hidden * ACTIVATION_BYTES
        if plan.sequence_parallel:
            layer_input /= plan.tp
        per_chunk, working = chunk_layers * layer_input, full
    else:
        per_chunk, working = chunk_layers * full, 0.0
    logits = LOGIT_BYTES * plan.seq_len // plan.cp * plan.micro_batch * -(-model.vocab // plan.tp)
    shards = plan.dp * plan.cp

    def stage(first: bool, last: bool) -> MemoryBreakdown:
        params = stage_params(model, plan, first, last)
        chunks = in_flight_chunks(plan, 0 if first else plan.pp - 1)
        return MemoryBreakdown(
            weights_bytes=params * WEIGHT_BYTES / (shards if plan.zero_stage >= 3 else 1),
            gradients_bytes=params * GRADIENT_BYTES / (shards if plan.zero_stage >= 2 else 1),
            optimizer_bytes=params * OPTIMIZER_BYTES / (shards if plan.zero_stage >= 1 else 1),
            activations_bytes=chunks * per_chunk + working + (logits if last else 0.0),
            reserve_bytes=memory_reserve_gb * 1e9,
        )

    stages = [stage(True, plan.pp == 1), stage(False, True)] if plan.pp > 1 else [stage(True, True)]
    return max(stages, key=lambda m: m.total_bytes)
