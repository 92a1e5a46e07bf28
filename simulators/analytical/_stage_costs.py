"""The costs of one pipeline stage: a micro-batch's forward, input- and weight-gradient
seconds through one model chunk (GEMMs, attention, exposed tensor/context/expert-parallel
communication, host launch waits), and what the step adds around it (gradient reduction,
parameter gather, optimizer). Memoised per distinct stage: candidates share most of them."""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import ClassVar, NamedTuple

import numpy as np

from simulators.analytical._collective_prices import collective_rows, collective_s, price_collectives, priced_s
from simulators.analytical._layer import adam_step_s, layer_blocks, output_layer, per_layer_plan
from simulators.analytical._offload import cpu_optimizer_step_s, exposed_offload_s
from simulators.hardware import GpuSpec
from simulators.models import ModelSpec
from simulators.network import Network
from simulators.workload import (
    Collective,
    ParallelPlan,
    TrainingCandidate,
    busiest_rank_share,
    layer_activation_bytes,
    layer_collectives,
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


@dataclass(frozen=True)
class _LayerCosts:
    """Seconds of one layer for one micro-batch: F, B (input gradient), W (weight gradient),
    with the exposed communication each includes, and the recomputed forward B carries."""

    forward_s: float
    backward_s: float
    weight_s: float
    gemm_s: float
    comm_s: Mapping[str, float]  # exposed, by group: tp, cp, ep, dp (ZeRO-3 gathers); host: launch waits


@cache
def _layer_costs_of(
    model: ModelSpec,
    gpu: GpuSpec,
    network: Network,
    plan: ParallelPlan,
    layer_index: int,
    calibration: str | None,
    fraction: float,
    host_s: float = 0.0,
) -> _LayerCosts:
    blocks = layer_blocks(model, gpu, plan, layer_index, calibration, fraction)
    fwd = sum(block.forward_s for block in blocks)
    input_grad = sum(block.input_grad_s for block in blocks)
    weight_grad = sum(block.weight_grad_s for block in blocks)
    attention_fwd, attention_bwd = blocks[0].attention_fwd_s, blocks[0].attention_bwd_s
    gemm = sum(block.gemm_s for block in blocks)
    gemm_fwd = sum(block.forward_s - block.memory_fwd_s - block.attention_fwd_s for block in blocks)

    # The layer's collectives (simulators.workload.layer_collectives) priced per phase and group.
    spent: dict[tuple[str, str], float] = defaultdict(float)
    tp_spent: dict[tuple[str, str], float] = defaultdict(float)  # (phase, "<block> <op>")
    launches = {"fwd": sum(b.kernels_fwd for b in blocks), "bwd": sum(b.kernels_bwd for b in blocks)}
    for c in layer_collectives(model, plan, layer_index):
        seconds = priced_s(network, c)
        spent[c.phase, c.group] += seconds
        if c.group == "tp":
            tp_spent[c.phase, c.name] += seconds
        launches["fwd" if c.phase == "fwd" else "bwd"] += 1
    # Tensor- and expert-parallel collectives sit between GEMMs that need them: exposed, unless
    # userbuffers run them under those GEMMs (`_tp_overlapped`). The context-parallel ring runs
    # step by step under the attention kernel (`_ring_exposed`); ZeRO-3 gathers are prefetched
    # under the previous layer's compute.
    tp_fwd, tp_bwd = spent["fwd", "tp"], spent["bwd_input", "tp"]
    if plan.tp_comm_overlap:
        tp_fwd, tp_bwd = _tp_overlapped(blocks, tp_spent, plan.tp)
    ep_fwd, ep_bwd = _ep_exposed(model, plan, spent, fwd, input_grad + weight_grad, EP_COMM_SMS / gpu.sm_count)
    fwd_comm = {
        "tp": tp_fwd,
        "cp": _ring_exposed(spent["fwd", "cp"], attention_fwd, plan.cp),
        "ep": ep_fwd,
        "dp": _exposed(spent["fwd", "dp"], fwd, plan.overlap_param_gather),
    }
    bwd_comm = {
        "tp": tp_bwd,
        "cp": _ring_exposed(spent["bwd_input", "cp"], attention_bwd, plan.cp),
        "ep": ep_bwd,
        "dp": _exposed_together(
            (
                (spent["bwd_input", "dp"], plan.overlap_param_gather),
                (spent["bwd_weight", "dp"], plan.overlap_grad_reduce),
            ),
            input_grad + weight_grad,
        ),
    }
    # Full recomputation reruns the forward (and its communication) before the backward;
    # selective (Megatron's) reruns the modules it names, the MoE block with its all-to-alls.
    full = plan.recompute == "full"
    selective = sum(block.rerun_s(plan) for block in blocks) + (fwd_comm["ep"] if plan.recomputes("moe") else 0.0)
    recompute = {"full": fwd + sum(fwd_comm.values()), "selective": selective, "none": 0.0}[plan.recompute]
    forward_s = fwd + sum(fwd_comm.values())
    backward_s = input_grad + sum(bwd_comm.values()) + recompute
    # The host issues every kernel (and collective) in order; where the GPU runs them faster
    # than the host launches them, the phase takes the host's time (the rerun forward of full
    # recomputation launches the forward's kernels again).
    host_fwd = max(0.0, host_s * launches["fwd"] - forward_s)
    host_bwd = max(0.0, host_s * (launches["bwd"] + (launches["fwd"] if full else 0)) - backward_s - weight_grad)
    comm = {k: fwd_comm[k] * (2 if full else 1) + bwd_comm[k] for k in fwd_comm}
    if plan.recomputes("moe"):
        comm["ep"] += fwd_comm["ep"]
    return _LayerCosts(
        forward_s=forward_s + host_fwd,
        backward_s=backward_s + host_bwd,
        weight_s=weight_grad,
        gemm_s=gemm + (gemm_fwd if full else 0.0),
        comm_s={**comm, "host": host_fwd * (2 if full else 1) + host_bwd},
    )


# SMs an expert-parallel all-to-all occupies while it runs under compute: "only 20 SMs are
# sufficient to fully utilize the bandwidths of IB and NVLink" (DeepSeek-V3 technical report,
# arXiv:2412.19437, section 3.2.2, on H800); DeepEP's normal kernels, which Megatron's flex
# dispatcher (DeepEP, HybridEP) runs, are built for that budget.
EP_COMM_SMS = 20


def _ep_exposed(
    model: ModelSpec,
    plan: ParallelPlan,
    spent: Mapping[tuple[str, str], float],
    forward_s: float,
    backward_s: float,
    sm_share: float,
) -> tuple[float, float]:
    """Exposed expert-parallel seconds of one layer's forward and backward.

    The all-to-all waits for the busiest rank of the group, which receives `busiest_rank_share`
    times the mean (simulators/workload/_routing.py). Without overlap the dispatch and combine sit
    between the GEMMs that need them: exposed. With Megatron-Core's combined 1F1B
    (ParallelPlan.moe_a2a_overlap) the forward of one micro-batch runs beside the backward of the
    previous one, layer by layer, so the forward's all-to-alls run under that layer's backward
    compute and the backward's under its forward compute. While an all-to-all of A seconds runs,
    it holds `sm_share` of the SMs (EP_COMM_SMS), so compute of C seconds beside it takes
    max(A, C + sm_share * A): the all-to-all adds max(A - C, sm_share * A). The first forward and
    the last backward of a step have no partner; their share (one micro-batch in the step's
    count) is not charged."""
    busiest = busiest_rank_share(model, plan)
    fwd = spent["fwd", "ep"] * busiest + spent["fwd", "etp"]
    bwd = spent["bwd_input", "ep"] * busiest + spent["bwd_input", "etp"]
    if plan.moe_a2a_overlap and plan.ep > 1:
        return max(fwd - backward_s, sm_share * fwd), max(bwd - forward_s, sm_share * bwd)
    return fwd, bwd


def _ring_exposed(ring_s: float, attention_s: float, cp: int) -> float:
    """Exposed time of a context-parallel ring of `cp` ranks moving `ring_s` in all.

    Ring attention (Transformer Engine's `AttnFuncWithCPAndKVP2P`, used by Megatron-Core for
    cp > 1) runs cp steps: step i computes attention on one 1/cp x 1/cp block of the sequence
    (causal load balancing gives every step the same work) while the K/V block for step i + 1
    is sent and received, and waits for both before the next step. So each of the cp - 1
    overlapped steps costs the slower of its kernel and its exchange: the ring is exposed where
    one exchange outlasts one step's kernel, not where all of it outlasts all of attention."""
    if cp == 1 or ring_s == 0:
        return 0.0
    return _ring_overlap_s(ring_s, attention_s / cp, cp, attention_s)


def _ring_overlap_s(comm_s: float, chunk_s: float, steps: int, whole_s: float) -> float:
    """Seconds a kernel split into `steps` chunks of `chunk_s` adds to its unsplit `whole_s` when
    a ring moves `comm_s` under it in steps - 1 hops: each hop runs beside one chunk and the
    step waits for the slower; the last chunk runs alone."""
    hop_s = comm_s / (steps - 1)
    return (steps - 1) * max(chunk_s, hop_s) + chunk_s - whole_s


def _tp_overlapped(blocks: Sequence, tp_spent: Mapping[tuple[str, str], float], tp: int) -> tuple[float, float]:
    """Forward and backward seconds the tensor-parallel collectives add under Transformer Engine's
    userbuffers (Megatron's --tp-comm-overlap), whose configurations for NVIDIA's recipes (NeMo
    nemo/collections/llm/recipes/tp_overlap_configs/userbuffers.py) overlap, per dense block:
    the all-gather before the column-parallel GEMM, the reduce-scatter after the row-parallel one
    and the gradient's all-gather before the row-parallel input gradient by ring exchange (the
    GEMM split into tp row chunks, one peer-to-peer hop beside each: `_ring_overlap_s`, which also
    charges the smaller chunks' lower GEMM efficiency), and the reduce-scatter of the
    column-parallel input gradient in bulk beside the column-parallel weight gradient (exposed
    only where it outlasts it). The H100 configurations give some reduce-scatters 8-32 SMs
    (`pipeline` method) instead; their GEMMs' slowdown is not priced. MoE and latent-attention
    blocks keep their collectives exposed."""
    fwd = bwd = 0.0
    for block, name in zip(blocks, ("attention", "mlp")):
        gather = (tp_spent["fwd", f"{name} all_gather"], tp_spent["bwd_input", f"{name} all_gather"])
        scatter = (tp_spent["fwd", f"{name} reduce_scatter"], tp_spent["bwd_input", f"{name} reduce_scatter"])
        g = block.overlap
        if g is None:
            fwd, bwd = fwd + gather[0] + scatter[0], bwd + gather[1] + scatter[1]
            continue
        fwd += _ring_overlap_s(gather[0], g.column_fwd_chunk_s, tp, g.column_fwd_s)
        fwd += _ring_overlap_s(scatter[0], g.row_fwd_chunk_s, tp, g.row_fwd_s)
        bwd += _ring_overlap_s(gather[1], g.row_dgrad_chunk_s, tp, g.row_dgrad_s)
        bwd += max(0.0, scatter[1] - g.column_wgrad_s)
    return fwd, bwd


def _exposed(comm_s: float, compute_s: float, overlapped: bool) -> float:
    """Communication time left on the critical path: what `compute_s` does not hide, or all of
    it where the framework does not overlap it."""
    return max(0.0, comm_s - compute_s) if overlapped else comm_s


def _exposed_together(parts: Sequence[tuple[float, bool]], compute_s: float) -> float:
    """Several transfers under one stretch of compute: the overlapped ones share what it hides."""
    serial = sum(comm_s for comm_s, overlapped in parts if not overlapped)
    hidden = sum(comm_s for comm_s, overlapped in parts if overlapped)
    return serial + _exposed(hidden, compute_s, True)


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


@cache
def _per_stage_plan(plan: ParallelPlan) -> ParallelPlan:
    """Costs per micro-batch do not depend on how many there are, nor on the schedule: one key
    for every global batch and schedule."""
    return dataclasses.replace(plan, global_batch=plan.micro_batch * plan.dp * plan.pp, schedule="1f1b")


@cache
def _step_plan(plan: ParallelPlan) -> ParallelPlan:
    """What the step's data-parallel collectives and optimizer read of a plan (parallel degrees,
    the stage split, ZeRO, gradient bytes, offload), the rest normalised: plans that differ in
    micro-batch, recomputation, precision or kernels share their step part."""
    return dataclasses.replace(
        plan,
        micro_batch=1,
        global_batch=plan.dp * plan.pp,
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
) -> dict[bool, tuple[_LayerCosts, int]]:
    """Each layer kind of a stage (dense False, MoE True) with its costs and count; one layer of
    each kind prices them all: dense layers come first, then MoE ones."""
    model = shared[0]
    return {
        kind: (_layer_costs_of(*shared, model.layers - 1 if kind else 0, calibration, fraction, host_s), count)
        for kind, count in kinds
    }


@cache
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
