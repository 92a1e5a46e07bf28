"""The costs of one transformer layer for one micro-batch on one GPU: its blocks' compute, its
collectives priced and told exposed or hidden (tensor-parallel userbuffers, the context-parallel
ring under attention, expert all-to-alls beside compute, ZeRO-3 gathers under the previous
layer), and the host's launch waits. Memoised per distinct layer shape: the stages of every
plan that share it read one entry."""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from simulators._memo import plan_memo
from simulators.analytical._collective_prices import priced_s
from simulators.analytical._layer import layer_blocks
from simulators.hardware import GpuSpec
from simulators.models import ModelSpec
from simulators.network import Network
from simulators.workload import ParallelPlan, busiest_rank_share, layer_collectives


@dataclass(frozen=True)
class LayerCosts:
    """Seconds of one layer for one micro-batch: F, B (input gradient), W (weight gradient),
    with the exposed communication each includes, and the recomputed forward B carries."""

    forward_s: float
    backward_s: float
    weight_s: float
    gemm_s: float
    comm_s: Mapping[str, float]  # exposed, by group: tp, cp, ep, dp (ZeRO-3 gathers); host: launch waits


@plan_memo
def layer_costs(
    model: ModelSpec,
    gpu: GpuSpec,
    network: Network,
    plan: ParallelPlan,
    layer_index: int,
    calibration: str | None,
    fraction: float,
    host_s: float = 0.0,
) -> LayerCosts:
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
    # Tensor- and expert-parallel collectives sit between GEMMs that need them: exposed, but for
    # what the framework runs beside a GEMM (`_tp_exposed`). The context-parallel ring runs step
    # by step under the attention kernel (`_ring_exposed`); ZeRO-3 gathers are prefetched under
    # the previous layer's compute.
    tp_fwd, tp_bwd = _tp_exposed(blocks, tp_spent, plan)
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
    if model.is_moe_layer(layer_index) and host_s > 0:
        host_fwd, rerun = _moe_sync_host_s(blocks, layer_collectives(model, plan, layer_index), fwd_comm, host_s)
        host_bwd += rerun if full or plan.recomputes("moe") else 0.0
    comm = {k: fwd_comm[k] * (2 if full else 1) + bwd_comm[k] for k in fwd_comm}
    if plan.recomputes("moe"):
        comm["ep"] += fwd_comm["ep"]
    return LayerCosts(
        forward_s=forward_s + host_fwd,
        backward_s=backward_s + host_bwd,
        weight_s=weight_grad,
        gemm_s=gemm + (gemm_fwd if full else 0.0),
        comm_s={**comm, "host": host_fwd + host_bwd},  # host_bwd covers the rerun forward's launches
    )


# SMs an expert-parallel all-to-all occupies while it runs under compute: "only 20 SMs are
# sufficient to fully utilize the bandwidths of IB and NVLink" (DeepSeek-V3 technical report,
# arXiv:2412.19437, section 3.2.2, on H800); DeepEP's normal kernels, which Megatron's flex
# dispatcher (DeepEP, HybridEP) runs, are built for that budget.
EP_COMM_SMS = 20


def _moe_sync_host_s(
    blocks: Sequence, collectives: Sequence, fwd_comm: Mapping[str, float], host_s: float
) -> tuple[float, float]:
    """Host-bound seconds of an MoE layer's forward, and what a rerun of its dispatch adds.

    Dropless dispatch needs the per-expert token counts on the host: Megatron-Core's alltoall
    dispatcher copies them to the host and synchronises before the all-to-all (ep or tp > 1;
    before returning otherwise), HybridEP without a static token budget syncs to size its
    buffers, and Transformer Engine's GroupedLinear takes the counts as a host list (TEGroupedMLP
    calls `tokens_per_expert.tolist()`): megatron/core/transformer/moe/token_dispatcher.py
    (`cuda_sync_point`) and experts.py, 2026-03 to 2026-08. So once per MoE forward the host
    waits until the GPU has run everything before the dispatch, and cannot have queued the
    expert half ahead: the two halves (the attention block, then the MoE block with its
    all-to-alls) each take the slower of their host launches and their GPU time, and the GPU
    idles at least while the host issues the first kernel after the copy, one `host_s`. The router and
    the first permutation, before the sync, are counted in the expert half. The backward reuses
    the counts (no sync); a rerun of the MoE block's forward (recomputation) syncs again.
    CUDA graphs of the whole step need a static token budget and no host counts; those plans
    run without host time (`host_s` 0), so this does not apply to them."""
    # Each block's forward tensor-parallel collectives move the same bytes: split by count.
    tp = [c.name.startswith("attention") for c in collectives if c.phase == "fwd" and c.group == "tp"]
    tp_share = sum(tp) / len(tp) if tp else 0.0
    forward = [c for c in collectives if c.phase == "fwd"]
    attention_n = blocks[0].kernels_fwd + sum(1 for c in forward if c.group == "cp" or c.name.startswith("attention"))
    expert_n = blocks[1].kernels_fwd + len(forward) - (attention_n - blocks[0].kernels_fwd)
    attention_s = blocks[0].forward_s + fwd_comm["cp"] + tp_share * fwd_comm["tp"]
    expert_s = blocks[1].forward_s + fwd_comm["ep"] + fwd_comm["dp"] + (1 - tp_share) * fwd_comm["tp"]
    first = max(0.0, host_s * attention_n - attention_s)
    # After the sync kernel i can start once the host has issued it, (i + 1) host_s in, and once
    # kernel i - 1 is done: with n kernels of d seconds the half ends at max(n host_s + d,
    # host_s + n d) (the max-plus recursion, linear in i, peaks at an end).
    second = max(host_s * expert_n + expert_s / expert_n, host_s + expert_s) - expert_s
    return first + second, host_s


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


def _tp_exposed(blocks: Sequence, tp_spent: Mapping[tuple[str, str], float], plan: ParallelPlan) -> tuple[float, float]:
    """Forward and backward seconds the tensor-parallel collectives of a layer add.

    A dense block's column-parallel linear (q/k/v, MLP in) launches its input gradient's
    reduce-scatter (all-reduce without sequence parallelism) asynchronously and computes its
    weight gradient beside it (Megatron-Core's LinearWithGradAccumulationAndAsyncCommunication,
    megatron/core/tensor_parallel/layers.py, and Transformer Engine's Linear: "Overlap dgrad-RS/AR
    with wgrad"), so that collective is exposed only where it outlasts the GEMM, unless a
    zero-bubble schedule defers the weight gradient. The rest is exposed: the forward's all-gather
    and reduce-scatter, the gradient's all-gather before the row-parallel input gradient.

    Transformer Engine's userbuffers (Megatron's --tp-comm-overlap), as configured for NVIDIA's
    recipes (NeMo nemo/collections/llm/recipes/tp_overlap_configs/userbuffers.py), also overlap
    the all-gather before the column-parallel GEMM, the reduce-scatter after the row-parallel one
    and the gradient's all-gather before the row-parallel input gradient by ring exchange (the
    GEMM split into tp row chunks, one peer-to-peer hop beside each: `_ring_overlap_s`, which also
    charges the smaller chunks' lower GEMM efficiency). The H100 configurations give some
    reduce-scatters 8-32 SMs (`pipeline` method) instead; their GEMMs' slowdown is not priced.
    MoE and latent-attention blocks have no such pair: their collectives stay exposed."""
    fwd = bwd = 0.0
    for block, name in zip(blocks, ("attention", "mlp")):
        spent = functools.partial(_block_spent, tp_spent, name)
        beside = 0.0 if plan.defers_weight_grad else block.column_wgrad_s
        bwd += max(0.0, spent("bwd_input", "reduce_scatter") + spent("bwd_input", "all_reduce") - beside)
        g = block.overlap
        if g is None:
            fwd += spent("fwd", "all_gather") + spent("fwd", "reduce_scatter") + spent("fwd", "all_reduce")
            bwd += spent("bwd_input", "all_gather")
            continue
        fwd += _ring_overlap_s(spent("fwd", "all_gather"), g.column_fwd_chunk_s, plan.tp, g.column_fwd_s)
        fwd += _ring_overlap_s(spent("fwd", "reduce_scatter"), g.row_fwd_chunk_s, plan.tp, g.row_fwd_s)
        bwd += _ring_overlap_s(spent("bwd_input", "all_gather"), g.row_dgrad_chunk_s, plan.tp, g.row_dgrad_s)
    return fwd, bwd


def _block_spent(tp_spent: Mapping[tuple[str, str], float], block: str, phase: str, op: str) -> float:
    return tp_spent.get((phase, f"{block} {op}"), 0.0)


def _exposed(comm_s: float, compute_s: float, overlapped: bool) -> float:
    """Communication time left on the critical path: what `compute_s` does not hide, or all of
    it where the framework does not overlap it."""
    return max(0.0, comm_s - compute_s) if overlapped else comm_s


def _exposed_together(parts: Sequence[tuple[float, bool]], compute_s: float) -> float:
    """Several transfers under one stretch of compute: the overlapped ones share what it hides."""
    serial = sum(comm_s for comm_s, overlapped in parts if not overlapped)
    hidden = sum(comm_s for comm_s, overlapped in parts if overlapped)
    return serial + _exposed(hidden, compute_s, True)
