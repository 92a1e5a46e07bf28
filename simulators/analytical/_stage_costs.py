"""The costs of one pipeline stage: a micro-batch's forward, input- and weight-gradient
seconds through one model chunk (its layers' costs, `_layer_costs`, and the output layer), and
what the step adds around it (gradient reduction, parameter gather, optimizer). A batch of
candidates is priced per distinct shape: a stage's compute by its per-layer plan and layer kinds,
its step part by the data-parallel shape, its new collectives all in one call."""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar, NamedTuple

import numpy as np

from simulators._memo import interned, plan_memo, trim
from simulators.analytical._collective_prices import collective_rows, collective_s, price_collectives, priced_s
from simulators.analytical._layer import adam_step_s, cost_schedule, output_layer, per_layer_plan
from simulators.analytical._layer_costs import LayerCosts, layer_costs
from simulators.analytical._offload import cpu_optimizer_step_s, exposed_offload_s
from simulators.hardware import GpuSpec
from simulators.models import ModelSpec
from simulators.network import Network
from simulators.workload import (
    Collective,
    ParallelPlan,
    TrainingCandidate,
    layer_activation_bytes,
    optimizer_local_params,
    pipeline_send_bytes,
    stage_layer_kinds,
    stage_params,
    step_collectives,
)
from simulators.workload._memory import WEIGHT_BYTES


@dataclass(frozen=True)
class StageCosts:
    """Seconds per micro-batch and model chunk on one stage, and what the step adds around it."""

    forward_s: float
    backward_s: float
    weight_s: float
    gemm_s: float  # the GEMM part of forward + backward + weight
    # Exposed communication in the three by group; "host": launch waits; "offload": activation
    # copies to and from host memory that the layers' compute does not hide.
    comm_s: Mapping[str, float]
    grad_sync_s: float  # data-parallel gradient reduction of the stage, whole step
    param_gather_s: float  # parameter all-gather after the optimizer step (ZeRO >= 1)
    optimizer_s: float
    optimizer_host_s: float = 0.0  # the part of optimizer_s on the host CPU (optimizer offload)

    TIMES: ClassVar[tuple[str, ...]] = (
        "forward_s",
        "backward_s",
        "weight_s",
        "grad_sync_s",
        "param_gather_s",
        "optimizer_s",
    )


class Stages(NamedTuple):
    """A candidate's stages, and their `StageCosts.TIMES` and host optimizer seconds as arrays
    (built once per distinct key: a batch stacks them without reading each stage again)."""

    costs: tuple[StageCosts, ...]
    times: np.ndarray  # (stages, len(TIMES))
    optimizer_host_s: np.ndarray  # (stages,)


# Memo tables of the stage costs, filled a batch at a time (`stage_costs_batch`): whole
# candidates' stages by their `_stage_key`, and each stage's step part by its `_step_keys`.
_STAGES: dict[tuple, Stages] = {}
_STEPS: dict[tuple, tuple[float, float, float, float]] = {}


def stage_costs(candidate: TrainingCandidate) -> tuple[StageCosts, ...]:
    """Per-stage costs of one micro-batch through one model chunk (the stage's layers averaged
    over its chunks, so models mixing dense and MoE layers are priced layer by layer)."""
    return stage_costs_batch([candidate])[0].costs


def stage_costs_batch(candidates: Sequence[TrainingCandidate]) -> list[Stages]:
    """`stage_costs` of many candidates: the stages not met before are priced per distinct
    shape (a stage's compute by its layers, its step part by its data-parallel shape), the
    step's collectives of all of them gathered and priced together."""
    trim(_STAGES)
    trim(_STEPS)
    keys = [_stage_key(c) for c in candidates]
    new = [key for key in dict.fromkeys(keys) if key not in _STAGES]
    _price_steps(new)
    for key in new:
        costs = _all_stages(*key)
        times = np.array([[getattr(stage, name) for name in StageCosts.TIMES] for stage in costs])
        _STAGES[key] = Stages(costs, times, np.array([stage.optimizer_host_s for stage in costs]))
    return [_STAGES[key] for key in keys]


def _stage_key(candidate: TrainingCandidate) -> tuple:
    system = candidate.system
    plan = _per_stage_plan(candidate.plan)
    host = system.host if plan.offload != "none" else None
    return (
        candidate.model,
        system.gpu,
        system.fabric_network,
        plan,
        system.calibration,
        system.compute_fraction,
        0.0 if plan.cuda_graphs else system.kernel_host_s,
        (host.link_gbytes_per_s, host.memory_gbytes_per_s_per_gpu, host.nvme_gbytes_per_s_per_gpu) if host else None,
    )


def busiest_stage(candidate: TrainingCandidate) -> int:
    """The pipeline stage with the most work per micro-batch (forward + backward + weight,
    the first of equals): the one that paces the pipeline, and the one the training model's
    breakdown is told from."""
    busy = [stage.forward_s + stage.backward_s + stage.weight_s for stage in stage_costs(candidate)]
    return busy.index(max(busy))


@plan_memo
def _per_stage_plan(plan: ParallelPlan) -> ParallelPlan:
    """Costs per micro-batch do not depend on how many there are, nor on the schedule but for
    whether it defers weight gradients: one key for every global batch and schedule."""
    return interned(
        dataclasses.replace(plan, global_batch=plan.micro_batch * plan.dp * plan.pp, schedule=cost_schedule(plan))
    )


@plan_memo
def _step_plan(plan: ParallelPlan) -> ParallelPlan:
    """What the step's data-parallel collectives and optimizer read of a plan (parallel degrees,
    the stage split, ZeRO, gradient bytes, offload), the rest normalised: plans that differ in
    micro-batch, recomputation, precision or kernels share their step part."""
    return interned(
        dataclasses.replace(
            plan,
            micro_batch=1,
            global_batch=plan.dp * plan.pp,
            schedule="1f1b",
            recompute="none",
            recompute_modules=("core_attn",),
            precision="bf16",
            flash_attention=True,
            dropout=False,
            overlap_grad_reduce=True,
            overlap_param_gather=True,
            cuda_graphs=False,
            tp_comm_overlap=False,
            moe_a2a_overlap=False,
            moe_grouped_gemm="multi_stream",
        )
    )


def _step_keys(key: tuple) -> list[tuple]:
    """The `_STEPS` keys of every stage of a `_stage_key`: (model, gpu, network, step plan,
    stage, host tier)."""
    model, gpu, network, plan, *_, host_tier = key
    step_plan = _step_plan(plan)
    return [(model, gpu, network, step_plan, stage, host_tier) for stage in range(plan.pp)]


def _price_steps(keys: Sequence[tuple]) -> None:
    """Fill `_STEPS` for every stage of `keys`, pricing their collectives together per network."""
    pending = {}
    for key in keys:
        for step_key in _step_keys(key):
            if step_key not in _STEPS and step_key not in pending:
                model, _, _, plan, stage, _ = step_key
                pending[step_key] = [c for c in step_collectives(model, plan, stage) if c.per == "step"]
    rows = defaultdict(list)
    for (_, _, network, *_), step in pending.items():
        rows[network] += [row for c in step for _, row in collective_rows(c)]
    for network, wanted in rows.items():
        price_collectives(network, wanted)
    for step_key, step in pending.items():
        _STEPS[step_key] = _step_part(*step_key, step)


def _step_part(
    model: ModelSpec,
    gpu: GpuSpec,
    network: Network,
    plan: ParallelPlan,
    stage: int,
    host_tier: tuple[float, float, float | None] | None,
    step: Sequence[Collective],
) -> tuple[float, float, float, float]:
    """What the step adds around one stage's pipeline: seconds of its gradient reduction, its
    parameter gather, its optimizer and the host part of that (`step`: its per-step collectives)."""
    grad_sync = sum(priced_s(network, c) for c in step if c.phase == "bwd_weight")
    gather = sum(priced_s(network, c) for c in step if c.phase == "optimizer")
    dense, expert = stage_params(model, plan, stage)
    gpu_adam_s = adam_step_s(gpu, plan, dense, expert)
    host_adam_s = 0.0
    if plan.offloads_optimizer:
        # Megatron's HybridDeviceOptimizer: the offloaded share steps on the CPU, the rest on the
        # GPU; taken one after the other (no overlap between the two is assumed).
        share = plan.optimizer_offload_fraction
        host_adam_s = cpu_optimizer_step_s(
            share * optimizer_local_params(plan, dense, expert),
            plan.gradient_bytes,
            host_tier[0],
            host_tier[1],
            plan.overlap_cpu_optimizer,
            plan.offloads_weights,
            host_tier[2] if plan.optimizer_on_nvme else None,
        )
        gpu_adam_s *= 1 - share
    return grad_sync, gather, gpu_adam_s + host_adam_s, host_adam_s


def _all_stages(
    model: ModelSpec,
    gpu: GpuSpec,
    network: Network,
    plan: ParallelPlan,
    calibration: str | None,
    fraction: float,
    host_s: float = 0.0,
    host_tier: tuple[float, float, float | None] | None = None,
) -> tuple[StageCosts, ...]:
    """Every stage of a `_stage_key` (its step parts already in `_STEPS`)."""
    layer_plan = per_layer_plan(plan)
    shared = (model, gpu, network, layer_plan)
    return tuple(
        _one_stage(shared, plan, calibration, fraction, stage, host_s, host_tier, _STEPS[step_key])
        for stage, step_key in enumerate(_step_keys((model, gpu, network, plan, host_tier)))
    )


def _kind_costs(
    shared: tuple, kinds: tuple[tuple[bool, int], ...], calibration: str | None, fraction: float, host_s: float
) -> dict[bool, tuple[LayerCosts, int]]:
    """Each layer kind of a stage (dense False, MoE True) with its costs and count; one layer of
    each kind prices them all: dense layers come first, then MoE ones."""
    model = shared[0]
    return {
        kind: (layer_costs(*shared, model.layers - 1 if kind else 0, calibration, fraction, host_s), count)
        for kind, count in kinds
    }


@plan_memo
def _stage_compute(
    shared: tuple,
    kinds: tuple[tuple[bool, int], ...],
    vpp: int,
    last: bool,
    calibration: str | None,
    fraction: float,
    host_s: float,
) -> tuple[float, float, float, float, dict[str, float]]:
    """F, B, W, GEMM and exposed communication seconds of one chunk of a stage holding `kinds`
    of layers (`shared`: model, GPU, network, per-layer plan): memoised by that shape alone,
    whatever the data-parallel degree, batch or ZeRO stage."""
    costs = _kind_costs(shared, kinds, calibration, fraction, host_s)
    per_chunk = 1 / vpp
    fwd = per_chunk * sum(c.forward_s * n for c, n in costs.values())
    bwd = per_chunk * sum(c.backward_s * n for c, n in costs.values())
    wgt = per_chunk * sum(c.weight_s * n for c, n in costs.values())
    gemm = per_chunk * sum(c.gemm_s * n for c, n in costs.values())
    if last:  # the output layer, spread over the chunks
        model, gpu, _, layer_plan = shared
        output = output_layer(model, gpu, layer_plan, calibration, fraction)
        fwd += per_chunk * output.forward_s
        bwd += per_chunk * output.input_grad_s
        wgt += per_chunk * output.weight_grad_s
        gemm += per_chunk * output.gemm_s
    comm = {k: per_chunk * sum(c.comm_s[k] * n for c, n in costs.values()) for k in ("tp", "cp", "ep", "dp", "host")}
    return fwd, bwd, wgt, gemm, comm


def _one_stage(
    shared: tuple,
    plan: ParallelPlan,
    calibration: str | None,
    fraction: float,
    stage: int,
    host_s: float,
    host_tier: tuple[float, float, float | None] | None,
    step_part: tuple[float, float, float, float],
) -> StageCosts:
    """`host_tier`: (link GB/s per direction, host DRAM GB/s, NVMe GB/s or None) of the GPU's
    share of its host, where the plan offloads; `step_part`: `_step_part` of the stage."""
    model = shared[0]
    kinds = tuple(stage_layer_kinds(model, plan, stage).items())
    fwd, bwd, wgt, gemm, comm = _stage_compute(
        shared, kinds, plan.vpp, stage == plan.pp - 1, calibration, fraction, host_s
    )
    offload_fwd = offload_bwd = 0.0
    if plan.offloads_activations or plan.offloads_weights:
        costs = _kind_costs(shared, kinds, calibration, fraction, host_s)
    if plan.offloads_activations:  # one stage (offload_problem): every layer but the last offloads
        for kind, (layer, count) in costs.items():
            nbytes, n = layer_activation_bytes(model, plan, kind), count - (kind == model.is_moe)
            offload_fwd += n * exposed_offload_s(nbytes, layer.forward_s, host_tier[0])
            offload_bwd += n * exposed_offload_s(nbytes, layer.backward_s + layer.weight_s, host_tier[0])
    if plan.offloads_weights:  # each layer's bf16 shard comes from the host, forward and backward
        # (the stage's shard spread evenly over its layers, the embedding's and output layer's too)
        dense, expert = stage_params(model, plan, stage)
        layers = sum(count for _, count in costs.values())
        shard_bytes = optimizer_local_params(plan, dense, expert) * WEIGHT_BYTES / layers
        for layer, count in costs.values():
            n, link = count * (1 / plan.vpp), host_tier[0]
            offload_fwd += n * exposed_offload_s(shard_bytes, layer.forward_s, link)
            offload_bwd += n * exposed_offload_s(shard_bytes, layer.backward_s + layer.weight_s, link)
    grad_sync, gather, optimizer_s, optimizer_host_s = step_part
    return StageCosts(
        forward_s=fwd + offload_fwd,
        backward_s=bwd + offload_bwd,
        weight_s=wgt,
        gemm_s=gemm,
        comm_s={**comm, "offload": offload_fwd + offload_bwd},
        grad_sync_s=grad_sync,
        param_gather_s=gather,
        optimizer_s=optimizer_s,
        optimizer_host_s=optimizer_host_s,
    )


def send_s(candidate: TrainingCandidate) -> float:
    """One activation (or its gradient) crossing a pipeline-stage boundary."""
    model, plan = candidate.model, candidate.plan
    stride = plan.tp * plan.cp * plan.dp
    return collective_s(
        candidate.system.fabric_network, "send_recv", pipeline_send_bytes(model, plan), 2 if plan.pp > 1 else 1, stride
    )
