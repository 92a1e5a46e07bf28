"""First analytical training model: roofline compute, ring collectives, 1F1B pipeline.

Honest and simple on purpose; each simplification is stated where it is made:
- compute runs at `gpu.gemm_efficiency` of the dense peak of the plan's precision; causal
  attention executes half its score FLOPs (FlashAttention skips masked blocks);
- tensor-parallel collectives (2 per layer per pass, as in Megatron) are fully exposed;
- a 1F1B pipeline of m micro-batches and p stages takes (m + p - 1) micro-batch steps;
- data-parallel gradient reduction (fp32) runs after the pipeline drains, not overlapped;
- the Adam step streams 30 bytes per local parameter through HBM.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from simulators.network import group_link, ring_all_gather_s, ring_all_reduce_s, ring_reduce_scatter_s, send_recv_s
from simulators.workload import (
    MemoryBreakdown,
    TrainingCandidate,
    layer_forward_gemms,
    logits_gemm,
    model_flops,
    stage_params,
    training_memory,
)
from simulators.workload._memory import ACTIVATION_BYTES, GRADIENT_BYTES, WEIGHT_BYTES

ADAM_BYTES_PER_PARAM = 30  # read grad, master, m, v (4 each); write master, m, v (4 each), bf16 weight (2)


@dataclass(frozen=True)
class TrainingResult:
    """What one simulated training step costs; `feasible` is False when memory does not fit."""

    metrics: Mapping[str, float]
    breakdown_s: Mapping[str, float]
    memory: MemoryBreakdown
    feasible: bool
    infeasible_reason: str | None = None


def simulate_training(candidate: TrainingCandidate) -> TrainingResult:
    """Time, throughput, utilisation and memory of one training step of `candidate`."""
    model, plan, system = candidate.model, candidate.plan, candidate.system
    gpu = system.gpu
    peak_flops = gpu.peak_tflops(plan.precision) * 1e12
    rate = peak_flops * gpu.gemm_efficiency
    b, s, h, tp, pp = plan.micro_batch, plan.seq_len, model.hidden, plan.tp, plan.pp
    layers = model.layers // pp
    recompute = plan.recompute == "full"

    # Compute of one micro-batch (forward + backward at 2x forward, + recomputed forward).
    layer_fwd = sum(g.executed_flops for g in layer_forward_gemms(model, b, s, tp))
    layer_passes = 3 + (1 if recompute else 0)
    stage_compute_s = layers * layer_fwd * layer_passes / rate
    logits_s = 3 * logits_gemm(model, b, s, tp).flops / rate
    compute_s = stage_compute_s + logits_s  # the last stage is the slowest

    # Tensor parallel: 2 all-reduces (or reduce-scatter + all-gather) per layer per pass.
    tp_link = group_link(gpu, tp)
    tp_collectives = 2 * (2 + (1 if recompute else 0))
    tp_s = layers * tp_collectives * ring_all_reduce_s(b * s * h * ACTIVATION_BYTES, tp, tp_link)

    # Pipeline: one activation send forward and one gradient send backward per micro-batch.
    pp_s = 0.0
    if pp > 1:
        boundary = b * s * h * ACTIVATION_BYTES / (tp if plan.sequence_parallel else 1)
        pp_s = 2 * send_recv_s(boundary, group_link(gpu, tp * plan.dp * pp))

    step_s = compute_s + tp_s + pp_s
    m = plan.microbatches
    pipeline_s = (m + pp - 1) * step_s

    # Data parallel: gradients of the largest stage, reduced in fp32.
    params = max(stage_params(model, plan, first=True, last=pp == 1), stage_params(model, plan, False, True))
    dp_link = group_link(gpu, tp * plan.dp)
    if plan.distributed_optimizer:
        dp_s = ring_reduce_scatter_s(params * GRADIENT_BYTES, plan.dp, dp_link) + ring_all_gather_s(
            params * WEIGHT_BYTES, plan.dp, dp_link
        )
    else:
        dp_s = ring_all_reduce_s(params * GRADIENT_BYTES, plan.dp, dp_link)
    shards = plan.dp if plan.distributed_optimizer else 1
    optimizer_s = params / shards * ADAM_BYTES_PER_PARAM / (gpu.hbm_gbytes_per_s * 1e9)

    iteration_s = pipeline_s + dp_s + optimizer_s
    useful_flops = model_flops(model, plan.global_batch, s)
    recompute_flops = (
        plan.global_batch / b * model.layers * sum(g.flops for g in layer_forward_gemms(model, b, s, tp=1))
        if recompute
        else 0.0
    )
    gpu_seconds = iteration_s * system.num_gpus
    memory = training_memory(model, plan, system.memory_reserve_gb)
    capacity_bytes = gpu.hbm_bytes
    feasible = memory.total_bytes <= capacity_bytes
    reason = (
        None
        if feasible
        else (
            f"needs {memory.total_gb:.1f} GB per GPU; {gpu.name} has {capacity_bytes / 1e9:.1f} GB ({gpu.hbm_gb:g} GiB)"
        )
    )
    tokens_per_s = plan.tokens_per_step / iteration_s
    return TrainingResult(
        metrics={
            "iteration_time_s": iteration_s,
            "tokens_per_s": tokens_per_s,
            "tokens_per_s_per_gpu": tokens_per_s / system.num_gpus,
            "mfu": useful_flops / (gpu_seconds * peak_flops),
            "hfu": (useful_flops + recompute_flops) / (gpu_seconds * peak_flops),
            "memory_gb_per_gpu": memory.total_gb,
        },
        breakdown_s={
            "compute_s": m * compute_s,
            "tp_comm_s": m * tp_s,
            "pp_comm_s": m * pp_s,
            "pipeline_bubble_s": (pp - 1) * step_s,
            "dp_comm_s": dp_s,
            "optimizer_s": optimizer_s,
        },
        memory=memory,
        feasible=feasible,
        infeasible_reason=reason,
    )
