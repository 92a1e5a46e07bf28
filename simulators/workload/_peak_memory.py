"""Peak per-GPU memory of training plans, on each plan's most loaded pipeline stage, a batch at
a time: every stage of every plan is one row of arrays, so the search's memory check over
thousands of candidates is a few numpy passes; `training_memory` is a batch of one.

The last stage keeps its in-flight chunks plus the logits. Full recomputation keeps only each
layer's input, plus one layer's activations while it is recomputed. ZeRO shards dense
parameters' state over dp*cp ranks and experts' over the expert_dp ranks holding a replica;
ZeRO-3 also holds the gathered weights of the layer in use and of the next, at most
ZERO3_MAX_LIVE_PARAMS of them (the bytes per parameter and activations: `_memory`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from functools import cache

import numpy as np

from simulators._memo import trim
from simulators.models import ModelSpec
from simulators.workload._memory import (
    ACTIVATION_BYTES,
    GIB,
    LOGIT_BYTES,
    OPTIMIZER_BYTES,
    WEIGHT_BYTES,
    ZERO3_MAX_LIVE_PARAMS,
    MemoryBreakdown,
    in_flight_chunks,
    in_flight_rows,
    layer_activation_bytes,
    layer_kinds_by_shape,
    stage_layer_kinds,
    stage_params_by_shape,
)
from simulators.workload._plan import ParallelPlan

# Memoised peaks by (model, plan, memory_reserve_gib): a long search meets each plan again.
_MEMORY: dict[tuple[ModelSpec, ParallelPlan, float], MemoryBreakdown] = {}


def training_memory(model: ModelSpec, plan: ParallelPlan, memory_reserve_gib: float) -> MemoryBreakdown:
    """Peak memory of the most loaded pipeline stage (every stage is checked: with uneven
    splits a middle stage can hold the most)."""
    return training_memory_batch([(model, plan, memory_reserve_gib)])[0]


def training_memory_batch(items: Sequence[tuple[ModelSpec, ParallelPlan, float]]) -> list[MemoryBreakdown]:
    """`training_memory` of many (model, plan, memory_reserve_gib) at once."""
    trim(_MEMORY)
    new = [key for key in dict.fromkeys(items) if key not in _MEMORY]
    if new:
        _MEMORY.update(zip(new, _peaks(new)))
    return [_MEMORY[key] for key in items]


@cache
def _stage_table(model: ModelSpec, tp: int, ep: int, etp: int, pp: int, vpp: int, split: tuple) -> np.ndarray:
    """(pp, 4): each stage's dense and MoE layer counts and dense and expert parameters."""
    rows = []
    for stage in range(pp):
        kinds = dict(layer_kinds_by_shape(model.layers, model.moe_layers, pp, vpp, split, stage))
        rows.append(
            (kinds.get(False, 0), kinds.get(True, 0), *stage_params_by_shape(model, tp, ep, etp, pp, vpp, split, stage))
        )
    return np.array(rows, dtype=float)


def _peaks(items: Sequence[tuple[ModelSpec, ParallelPlan, float]]) -> list[MemoryBreakdown]:
    """Every stage of every item as one row; each item's first stage of the largest total."""
    terms = [_plan_terms(model, plan, reserve_gib) for model, plan, reserve_gib in items]
    pp = np.array([plan.pp for _, plan, _ in items])
    starts = np.concatenate(([0], np.cumsum(pp)[:-1]))
    stage = np.arange(pp.sum()) - np.repeat(starts, pp)
    table = np.concatenate([_stage_table(model, *_table_key(plan)) for model, plan, _ in items])
    dense_layers, moe_layers, dense, expert = table.T
    (layer_input, logits, dense_act, moe_act, gathered, dense_shards, expert_shards, zero, gradient_bytes, vpp,
     full, reserve, gpipe, m) = (np.repeat(np.array(column), pp) for column in zip(*terms))  # fmt: skip

    def sharded(bytes_per_param, stage_from: int) -> np.ndarray:
        whole = (dense + expert) * bytes_per_param
        return np.where(zero < stage_from, whole, (dense / dense_shards + expert / expert_shards) * bytes_per_param)

    chunk = np.where(
        full, (dense_layers + moe_layers) / vpp * layer_input, (dense_layers * dense_act + moe_layers * moe_act) / vpp
    )
    largest = np.where(moe_layers == 0, dense_act, np.where(dense_layers == 0, moe_act, np.maximum(dense_act, moe_act)))
    working = np.where(full, largest, 0.0)
    last = stage == np.repeat(pp, pp) - 1
    in_flight = in_flight_rows(gpipe, m, np.repeat(pp, pp), vpp, stage)
    parts = (
        sharded(WEIGHT_BYTES, 3) + gathered,
        sharded(gradient_bytes, 2),
        sharded(OPTIMIZER_BYTES, 1),
        in_flight * chunk + working + np.where(last, logits, 0.0),
        reserve,
    )
    total = parts[0] + parts[1] + parts[2] + parts[3] + parts[4]  # MemoryBreakdown.total_bytes
    peak = total == np.repeat(np.maximum.reduceat(total, starts), pp)
    owner = np.repeat(np.arange(len(items)), pp)
    _, first = np.unique(owner[peak], return_index=True)
    rows = np.flatnonzero(peak)[first]
    out = []
    for (model, plan, _), values in zip(items, zip(*(part[rows].tolist() for part in parts))):
        memory = MemoryBreakdown(*values)
        out.append(_offloaded(memory, model, plan) if plan.offload != "none" else memory)
    return out


def _table_key(plan: ParallelPlan) -> tuple:
    return plan.tp, plan.ep, plan.etp, plan.pp, plan.vpp, plan.split


def _activations(model: ModelSpec, plan: ParallelPlan) -> dict[bool, float]:
    """Bytes one dense (False) and one MoE (True) layer keep for backward (the kinds it has)."""
    return {moe: layer_activation_bytes(model, plan, moe) for moe in {False, model.is_moe}}


def _gathered(model: ModelSpec, plan: ParallelPlan) -> float:
    """ZeRO-3 holds the layer in use and the one prefetched behind it (bf16), up to the live limit."""
    if plan.zero_stage != 3:
        return 0.0
    largest_layer = max(model.layer_params(first) for first, _ in model.layer_runs) / plan.tp
    return min(2 * largest_layer, ZERO3_MAX_LIVE_PARAMS) * WEIGHT_BYTES


def _plan_terms(model: ModelSpec, plan: ParallelPlan, reserve_gib: float) -> tuple:
    """The per-plan numbers the stage rows need, in `_peaks`'s column order."""
    layer_input = plan.seq_len // plan.cp * plan.micro_batch * model.hidden * ACTIVATION_BYTES
    if plan.sequence_parallel:
        layer_input /= plan.tp
    logits = LOGIT_BYTES * plan.seq_len // plan.cp * plan.micro_batch * -(-model.vocab // plan.tp)
    full = _activations(model, plan)
    return (
        layer_input,
        logits,
        full[False],
        full[model.is_moe],
        _gathered(model, plan),
        plan.dp * plan.cp,
        plan.expert_dp,
        plan.zero_stage,
        plan.gradient_bytes,
        plan.vpp,
        plan.recompute == "full",
        reserve_gib * GIB,
        plan.schedule == "gpipe",
        plan.microbatches,
    )


def _offloaded(memory: MemoryBreakdown, model: ModelSpec, plan: ParallelPlan) -> MemoryBreakdown:
    """`memory` with what the plan offloads moved to host memory.

    Optimizer offload (Megatron-Core's HybridDeviceOptimizer, --optimizer-offload-fraction;
    DeepSpeed ZeRO-Offload alike) keeps the fp32 master weights and Adam moments, the 12 bytes per
    parameter of the shard, on the host (`optimizer_offload_fraction` of them; the rest in HBM);
    gradients and bf16 weights stay in HBM. Activation offload (one pipeline stage, no
    recomputation: offload_problem) copies each layer's saved activations out after its forward
    and back before its backward, for all layers but the last (Megatron's cpu_offloading_num_layers
    is at most layers - 1); HBM keeps the last layer's and one layer in transit (the next to reload
    while a layer's backward runs), plus the logits.
    Weight offload (ZeRO-Infinity's offload_param, ZeRO-3) keeps the bf16 parameter shard on the
    host; HBM holds only the gathered layers in use (ZeRO-3's live parameters). NVMe optimizer
    offload (ZeRO-Infinity) keeps the optimizer's bytes on the host's NVMe drives instead (the host
    memory's staging buffers are not counted). Gradients stay in
    HBM in every mode (Megatron's way; DeepSpeed also moves ZeRO's gradient partitions to the host,
    so for it these HBM figures are upper bounds).
    """
    full, gathered = _activations(model, plan), _gathered(model, plan)
    share = plan.optimizer_offload_fraction if plan.offloads_optimizer else 0.0
    host_optimizer = memory.optimizer_bytes * share
    nvme_optimizer = host_optimizer if plan.optimizer_on_nvme else 0.0
    host_activations, kept = 0.0, memory.activations_bytes
    if plan.offloads_activations and model.layers > 1:
        kinds = stage_layer_kinds(model, plan, 0)
        last = full[model.is_moe]  # MoE layers come last
        layers_bytes = sum(n * full[k] for k, n in kinds.items())
        host_activations = in_flight_chunks(plan, 0) * (layers_bytes - last)
        kept = memory.activations_bytes - host_activations + max(full[k] for k in kinds)
    host_weights = memory.weights_bytes - gathered if plan.offloads_weights else 0.0
    return dataclasses.replace(
        memory,
        weights_bytes=memory.weights_bytes - host_weights,
        host_weights_bytes=host_weights,
        optimizer_bytes=memory.optimizer_bytes - host_optimizer,
        activations_bytes=kept,
        host_optimizer_bytes=host_optimizer - nvme_optimizer,
        host_nvme_optimizer_bytes=nvme_optimizer,
        host_activations_bytes=host_activations,
    )
