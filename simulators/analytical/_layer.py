"""Compute cost of one transformer layer, split into its attention and MLP blocks.

The training model sums the blocks; the SimAI exporter writes them as the attention and MLP rows
AICB emits. Costs are for one micro-batch on one GPU of the plan: every GEMM by its shape
(forward, input gradient dX = dY W^T, weight gradient dW = X^T dY), the attention kernel, and
the memory-bound kernels of the block.
"""

from __future__ import annotations

import dataclasses
import math
from collections import defaultdict
from dataclasses import dataclass

from simulators._memo import interned, plan_memo
from simulators.hardware import (
    GpuSpec,
    attention_time_s,
    calibration_table,
    elementwise_time_s,
    gemm_time_s,
    grouped_gemm_time_s,
    layer_memory_kernels,
)
from simulators.models import ModelSpec
from simulators.workload import (
    ParallelPlan,
    busiest_rank_share,
    layer_forward_gemms,
    layer_kernels,
    logits_gemm,
    optimizer_local_params,
)
from simulators.workload._memory import ADAM_BYTES_PER_PARAM

MLP_GEMMS = ("mlp", "router", "expert", "shared_expert")
MLP_KERNELS = ("mlp", "swiglu", "gelu", "relu", "fp8_cast_mlp", "moe_")
# Kernels one attention launches per phase: FlashAttention's forward is one kernel and its
# backward three (simulators/hardware/_compute.py FLASH_BWD_KERNELS); the unfused path runs two
# batched GEMMs and a softmax forward, four GEMMs and a softmax backward.
ATTENTION_KERNELS = {"flash": {"fwd": 1, "bwd": 3}, "unfused": {"fwd": 3, "bwd": 5}}


@dataclass(frozen=True)
class OverlapGemms:
    """Seconds of the GEMMs Transformer Engine's userbuffers run a dense block's tensor-parallel
    collectives under (ParallelPlan.tp_comm_overlap): the column-parallel GEMM (q/k/v or MLP in)
    after its all-gather, the row-parallel one (attention or MLP out) before its reduce-scatter,
    and the row-parallel input gradient after the gradient's all-gather; `*_chunk_s` is one of the
    tp pieces the ring exchange splits a GEMM into, priced at the size it runs at."""

    column_fwd_s: float
    column_fwd_chunk_s: float
    row_fwd_s: float
    row_fwd_chunk_s: float
    row_dgrad_s: float
    row_dgrad_chunk_s: float

    def slowed(self, fraction: float) -> OverlapGemms:
        return OverlapGemms(*(getattr(self, f.name) / fraction for f in dataclasses.fields(self)))


# The dense blocks' (column-parallel, row-parallel) GEMM pairs whose collectives userbuffers overlap.
OVERLAP_PAIRS = {"attention": ("qkv_proj", "attn_out_proj"), "mlp": ("mlp_in_proj", "mlp_out_proj")}


@dataclass(frozen=True)
class Block:
    """Seconds of one block for one micro-batch: F, B (input gradient) and W (weight gradient);
    `gemm_s` is the GEMM part of the three, `memory_fwd_s` its forward memory-bound kernels
    (what selective recomputation reruns), `attention_fwd_s`/`_bwd_s` the attention kernel;
    `kernels_fwd`/`_bwd` count the kernels the framework launches for F and for B + W (the
    host must issue each one, which bounds small kernels from below); `recompute_parts` the
    forward seconds of each module selective recomputation can rerun (RECOMPUTE_MODULES);
    `column_wgrad_s` the weight gradient of a dense block's column-parallel GEMM (q/k/v or MLP
    in), which its input gradient's tensor-parallel reduce-scatter runs beside (0: no such GEMM
    split over tp ranks)."""

    name: str
    forward_s: float
    input_grad_s: float
    weight_grad_s: float
    gemm_s: float
    memory_fwd_s: float
    attention_fwd_s: float = 0.0
    attention_bwd_s: float = 0.0
    kernels_fwd: int = 0
    kernels_bwd: int = 0
    recompute_parts: tuple[tuple[str, float], ...] = ()
    column_wgrad_s: float = 0.0
    # None: no tensor-parallel overlap, or MoE and latent-attention blocks, which userbuffers leave alone
    overlap: OverlapGemms | None = None

    def rerun_s(self, plan: ParallelPlan) -> float:
        """Forward seconds selective recomputation reruns in this block under `plan`."""
        return sum(seconds for module, seconds in self.recompute_parts if plan.recomputes(module))

    def slowed(self, fraction: float) -> Block:
        """The block at `fraction` of its modelled speed (the system's sustained fraction)."""
        if fraction == 1.0:
            return self
        times = {f.name: getattr(self, f.name) / fraction for f in dataclasses.fields(self) if f.name.endswith("_s")}
        parts = tuple((module, seconds / fraction) for module, seconds in self.recompute_parts)
        overlap = None if self.overlap is None else self.overlap.slowed(fraction)
        return dataclasses.replace(self, **times, recompute_parts=parts, overlap=overlap)


def adam_step_s(gpu: GpuSpec, plan: ParallelPlan, dense: float, expert: float) -> float:
    """The Adam step streams ADAM_BYTES_PER_PARAM per local parameter through HBM; ZeRO >= 1
    leaves each rank its shard (dense over dp*cp ranks, experts over expert_dp)."""
    return optimizer_local_params(plan, dense, expert) * ADAM_BYTES_PER_PARAM / (gpu.hbm_gbytes_per_s * 1e9)


def cost_schedule(plan: ParallelPlan) -> str:
    """The schedule as costs per micro-batch see it: only whether weight gradients are deferred,
    which a one-stage pipeline (no bubble to fill) does not do: there zero bubble is 1F1B, as the
    study's canonical plans have it."""
    return "zb-h1" if plan.defers_weight_grad and plan.pp > 1 else "1f1b"


@plan_memo
def per_layer_plan(plan: ParallelPlan) -> ParallelPlan:
    """The plan with what a layer's cost does not depend on normalised (pipeline shape, batch
    size, the schedule but for whether it defers weight gradients; the data-parallel degree and
    ZeRO stage unless ZeRO-3 gathers per layer or experts fold onto the data-parallel ranks), so
    memoised layer costs are shared across candidates."""
    zero3, experts = plan.zero_stage == 3, plan.ep * plan.etp > 1
    dp = plan.dp if zero3 or experts else 1
    zero = plan.zero_stage if zero3 else 1
    return interned(
        dataclasses.replace(
            plan,
            pp=1,
            vpp=1,
            schedule=cost_schedule(plan),
            dp=dp,
            zero_stage=zero,
            global_batch=plan.micro_batch * dp,
            # Only ZeRO-3 moves data-parallel traffic inside a layer.
            overlap_grad_reduce=plan.overlap_grad_reduce or not zero3,
            overlap_param_gather=plan.overlap_param_gather or not zero3,
        )
    )


def _context_parallel_attention_s(gpu: GpuSpec, attention: dict, local_seq: int, cp: int, phase: str) -> float:
    """One rank's causal attention over its `local_seq` tokens of a sequence split cp ways.

    Load-balanced ring attention (Megatron/Transformer Engine): a rank holds two chunks of
    local_seq/2 tokens, attends causally to its own pair, then in each of the cp-1 ring steps
    either all its queries meet half the arriving keys or half its queries meet all of them: a
    local_seq x local_seq/2 product without mask. So the kernels are smaller than one long
    sequence's, and their efficiency is priced at the size they run at.
    """
    own = attention_time_s(gpu, seq_q=local_seq, seq_kv=local_seq, causal=True, phase=phase, **attention)
    if cp == 1:
        return own
    ring = attention_time_s(gpu, seq_q=local_seq, seq_kv=local_seq // 2, causal=False, phase=phase, **attention)
    return own + (cp - 1) * ring


def layer_blocks(
    model: ModelSpec,
    gpu: GpuSpec,
    plan: ParallelPlan,
    layer_index: int,
    calibration: str | None = None,
    compute_fraction: float = 1.0,
) -> tuple[Block, Block]:
    """(attention, MLP) blocks of layer `layer_index`; memoised (plans of a study share layers,
    whatever their schedule). `calibration` is the path of a table of measured kernel times that
    overrides the curves; `compute_fraction` the share of the modelled kernel speed a real
    software stack sustains."""
    return _layer_blocks(model, gpu, _kernels_plan(plan), layer_index, calibration, compute_fraction)


@plan_memo
def _kernels_plan(plan: ParallelPlan) -> ParallelPlan:
    return plan if plan.schedule == "1f1b" else dataclasses.replace(plan, schedule="1f1b")


@plan_memo
def _layer_blocks(
    model: ModelSpec,
    gpu: GpuSpec,
    plan: ParallelPlan,
    layer_index: int,
    calibration: str | None,
    compute_fraction: float,
) -> tuple[Block, Block]:
    table = calibration_table(calibration)
    b, s, tp, cp, precision = plan.micro_batch, plan.seq_len // plan.cp, plan.tp, plan.cp, plan.precision
    gemms = layer_forward_gemms(model, b, s, tp, layer_index=layer_index, ep=plan.ep, etp=plan.etp)
    # Attention runs in bf16 under fp8 training (Transformer Engine's default).
    attention = dict(
        batch=b,
        heads=model.heads // tp,
        head_dim=model.d_head,
        precision="bf16" if precision in ("fp8", "fp4") else precision,
        kv_heads=max(1, model.kv_heads // tp),
        kernel="flash" if plan.flash_attention and gpu.fused_attention else "unfused",
        calibration=table,
    )
    attention_fwd, attention_bwd = (
        _context_parallel_attention_s(gpu, attention, s, cp, phase) for phase in ("fwd", "bwd")
    )
    attention_kernels = ATTENTION_KERNELS[attention["kernel"]]
    moe = model.is_moe_layer(layer_index)
    kernels = layer_kernels(model, plan, layer_index)
    blocks = []
    # The busiest expert-parallel rank receives more routed tokens than the mean and sets the pace.
    busiest = busiest_rank_share(model, plan)

    def priced(g, phase: str) -> float:
        """One GEMM of the block in `phase` (fwd, dgrad, wgrad); routed experts at the busiest
        rank's rows, issued as the plan's grouped GEMM (simulators/hardware/_grouped_gemm.py)."""
        m = math.ceil(g.m * busiest) if g.name.startswith("expert_") else g.m
        m, n, k = {"fwd": (m, g.n, g.k), "dgrad": (m, g.k, g.n), "wgrad": (g.k, g.n, m)}[phase]
        if g.name.startswith("expert_"):
            return grouped_gemm_time_s(gpu, m, n, k, g.batch, precision, plan.moe_grouped_gemm, calibration=table)
        return gemm_time_s(gpu, m, n, k, g.batch, precision, calibration=table)

    for name, is_mlp in (("attention", False), ("moe" if moe else "mlp", True)):
        mine = [g for g in gemms if not g.causal and g.name.startswith(MLP_GEMMS) == is_mlp]
        gemm_fwd: dict[str, float] = defaultdict(float)  # by name: the routed experts come in two row counts
        for g in mine:
            gemm_fwd[g.name] += priced(g, "fwd")
        forward = sum(gemm_fwd.values())
        dgrad = sum(priced(g, "dgrad") for g in mine)
        wgrad = sum(priced(g, "wgrad") for g in mine)
        pair = OVERLAP_PAIRS.get(name)
        split = tp > 1 and pair is not None and {g.name for g in mine} >= set(pair)
        column_wgrad = sum(priced(g, "wgrad") for g in mine if g.name == pair[0]) if split else 0.0
        memory = {"fwd": 0.0, "bwd": 0.0}
        kernel_fwd: dict[str, float] = defaultdict(float)
        # Transformer Engine's GroupedLinear issues one cuBLAS GEMM per local expert (its grouped
        # GEMM loops over the experts on several streams), so routed experts launch per expert;
        # a fused grouped kernel launches once.
        per_expert = plan.moe_grouped_gemm == "multi_stream"
        gemm_launches = sum(g.batch if g.name.startswith("expert_") and per_expert else 1 for g in mine)
        launches = {"fwd": gemm_launches, "bwd": 2 * gemm_launches}
        for kernel in kernels:
            if kernel.name.startswith(MLP_KERNELS) == is_mlp:
                seconds = elementwise_time_s(gpu, kernel.nbytes, calibration=table)
                memory[kernel.phase] += seconds
                launches[kernel.phase] += 1
                if kernel.phase == "fwd":
                    kernel_fwd[kernel.name] += seconds
        core_fwd, core_bwd = (0.0, 0.0) if is_mlp else (attention_fwd, attention_bwd)
        if not is_mlp:  # the ring of context parallelism launches the kernel once per step
            launches = {phase: n + cp * attention_kernels[phase] for phase, n in launches.items()}
        blocks.append(
            Block(
                name=name,
                forward_s=forward + core_fwd + memory["fwd"],
                input_grad_s=dgrad + core_bwd + memory["bwd"],
                weight_grad_s=wgrad,
                gemm_s=forward + dgrad + wgrad,
                memory_fwd_s=memory["fwd"],
                attention_fwd_s=core_fwd,
                attention_bwd_s=core_bwd,
                kernels_fwd=launches["fwd"],
                kernels_bwd=launches["bwd"],
                recompute_parts=_recompute_parts(model, layer_index, is_mlp, gemm_fwd, kernel_fwd, core_fwd),
                column_wgrad_s=column_wgrad,
                overlap=_overlap_gemms(gpu, {g.name: g for g in mine}, pair, tp, precision, table)
                if plan.tp_comm_overlap and split
                else None,
            )
        )
    return blocks[0].slowed(compute_fraction), blocks[1].slowed(compute_fraction)


def _overlap_gemms(gpu: GpuSpec, gemms: dict, pair: tuple[str, str], tp: int, precision: str, table):
    """The GEMMs a dense block's tensor-parallel collectives run under with userbuffers (blocks
    with a column- and row-parallel pair split over tp > 1 ranks; not MoE or latent attention)."""
    column, row = gemms[pair[0]], gemms[pair[1]]

    def seconds(m: int, n: int, k: int) -> tuple[float, float]:
        return gemm_time_s(gpu, m, n, k, 1, precision, calibration=table), gemm_time_s(
            gpu, max(1, m // tp), n, k, 1, precision, calibration=table
        )

    column_fwd = seconds(column.m, column.n, column.k)
    row_fwd = seconds(row.m, row.n, row.k)
    row_dgrad = seconds(row.m, row.k, row.n)
    return OverlapGemms(*column_fwd, *row_fwd, *row_dgrad)


def _recompute_parts(
    model: ModelSpec,
    layer_index: int,
    is_mlp: bool,
    gemm_fwd: dict[str, float],
    kernel_fwd: dict[str, float],
    core_fwd: float,
) -> tuple[tuple[str, float], ...]:
    """Forward seconds of the modules of one block that selective recomputation can rerun
    (Megatron-Core's --recompute-modules): the norm, the attention core and MLA's up-projections
    with RoPE in the attention block; the dense MLP, or the MoE block, its routed experts'
    activation and its shared experts, in the MLP block (the norm before it is its own module)."""
    norm = kernel_fwd.get("mlp_norm" if is_mlp else "input_norm", 0.0)
    if not is_mlp:
        up = sum(t for name, t in gemm_fwd.items() if name in ("q_up_proj", "kv_up_proj"))
        return (("layernorm", norm), ("core_attn", core_fwd), ("mla_up_proj", up + kernel_fwd.get("rope_qk", 0.0)))
    body = sum(gemm_fwd.values()) + sum(
        t for name, t in kernel_fwd.items() if name not in ("mlp_norm", "mlp_residual_add")
    )
    if not model.is_moe_layer(layer_index):
        return (("layernorm", norm), ("mlp", body))
    activation = sum(t for name, t in kernel_fwd.items() if name.startswith(("swiglu", "gelu", "relu")))
    routed_width = model.moe_top_k * model.moe_ffn_hidden
    routed_share = routed_width / (routed_width + model.shared_experts_ffn_hidden)
    shared = sum(t for name, t in gemm_fwd.items() if name.startswith("shared_expert"))
    return (
        ("layernorm", norm),
        ("moe", body),
        ("moe_act", activation * routed_share),
        ("shared_experts", shared + activation * (1 - routed_share)),
    )


@plan_memo
def output_layer(
    model: ModelSpec, gpu: GpuSpec, plan: ParallelPlan, calibration: str | None = None, compute_fraction: float = 1.0
) -> Block:
    """The logit GEMM with the final norm and the vocabulary-parallel cross entropy."""
    table = calibration_table(calibration)
    b, s, tp = plan.micro_batch, plan.seq_len // plan.cp, plan.tp
    logits = logits_gemm(model, b, s, tp)
    precision = plan.precision
    forward = gemm_time_s(gpu, logits.m, logits.n, logits.k, 1, precision, calibration=table)
    dgrad = gemm_time_s(gpu, logits.m, logits.k, logits.n, 1, precision, calibration=table)
    wgrad = gemm_time_s(gpu, logits.k, logits.n, logits.m, 1, precision, calibration=table)
    shape = (b * s, model.hidden, 1, 1, 1, 1, logits.n, precision)
    names = {k.name for k in layer_memory_kernels(*shape)}
    memory = {"fwd": 0.0, "bwd": 0.0}
    for kernel in layer_memory_kernels(*shape, last_layer=True):
        if kernel.name not in names:  # the final norm and the cross entropy
            memory[kernel.phase] += elementwise_time_s(gpu, kernel.nbytes, calibration=table)
    gemm = forward + dgrad + wgrad
    launches = {"fwd": 1, "bwd": 2}
    for kernel in layer_memory_kernels(*shape, last_layer=True):
        if kernel.name not in names:
            launches[kernel.phase] += 1
    block = Block(
        "output",
        forward + memory["fwd"],
        dgrad + memory["bwd"],
        wgrad,
        gemm,
        memory["fwd"],
        kernels_fwd=launches["fwd"],
        kernels_bwd=launches["bwd"],
    )
    return block.slowed(compute_fraction)
