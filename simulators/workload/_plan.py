"""Parallel plans for training and the checks that decide whether one can run at all.

A plan that cannot run raises PlanError with the reason (STYLE 7); the checks are small
functions so the spec validator can apply the same rule to every value of a search knob
before any trial runs.
"""

from __future__ import annotations

import dataclasses
import operator
from dataclasses import dataclass
from functools import cache, cached_property

from simulators._errors import PlanError
from simulators.hardware import GROUPED_KERNELS, GpuSpec, HostTier, gpus_with_host_tier
from simulators.hardware import host_launch_s as fitted_host_launch_s
from simulators.models import ModelSpec
from simulators.network import Network

RECOMPUTE_MODES = ("none", "selective", "full")
# What selective recomputation reruns (Megatron-Core --recompute-modules, transformer_config.py):
# the attention core (the default), the two norms, MLA's up-projections with RoPE, the dense MLP,
# the whole MoE block (its all-to-alls included), the routed experts' activation, the shared experts.
RECOMPUTE_MODULES = ("core_attn", "layernorm", "mla_up_proj", "mlp", "moe", "moe_act", "shared_experts")
SCHEDULES = ("1f1b", "gpipe", "zb-h1")  # 1f1b with vpp > 1 is Megatron's interleaved 1F1B
# Reference networks by the GPU fields they depend on (GpuSpec itself is not hashable).
_REFERENCE_NETWORKS: dict[tuple, Network] = {}
ZERO_STAGES = (0, 1, 2, 3)
# How pipeline stages share the layers (Megatron-Core, megatron/core/transformer/transformer_config.py
# and transformer_block.py get_num_layers_to_build): "even" splits the transformer layers alone;
# "embedding" / "loss" / "embedding+loss" count the input embedding and the output layer with its
# loss as one layer each (--account-for-embedding-in-pipeline-split,
# --account-for-loss-in-pipeline-split), so the first / last virtual stage holds one transformer
# layer fewer.
PIPELINE_SPLITS = ("even", "embedding", "loss", "embedding+loss")
# What a plan keeps in host memory instead of HBM (simulators/workload/_offload.py): Megatron-Core's
# --optimizer-cpu-offload (fraction 1; DeepSpeed ZeRO-Offload alike), Megatron-Core/Transformer
# Engine activation CPU offloading per layer, or both; or DeepSpeed ZeRO-Infinity's CPU offload of
# the optimizer and of the ZeRO-3 parameter shards (offload_optimizer + offload_param), or of the
# optimizer state to the host's NVMe drives (offload_optimizer device nvme).
OFFLOAD_MODES = ("none", "optimizer", "activations", "optimizer+activations", "optimizer+weights", "optimizer-nvme")


def divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def tp_problem(model: ModelSpec, tp: int) -> str | None:
    """Why tensor parallelism `tp` cannot split `model`, or None if it can.

    Megatron shards attention by heads and requires whole KV groups per rank; the vocabulary
    is padded to a multiple of tp, so it needs no check.
    """
    if model.kv_heads % tp:
        allowed = ", ".join(map(str, divisors(model.kv_heads)))
        return f"{tp} does not divide kv_heads={model.kv_heads} of {model.name}; allowed: {allowed}"
    if model.ffn_hidden % tp:
        return f"{tp} does not divide ffn_hidden={model.ffn_hidden} of {model.name}"
    return None


def pp_problem(
    model: ModelSpec,
    pp: int,
    vpp: int = 1,
    split: str = "even",
    first_stage_layers: int | None = None,
    last_stage_layers: int | None = None,
    layout: tuple[int, ...] | None = None,
) -> str | None:
    """Why `pp` stages of `vpp` chunks cannot hold `model`'s layers this way, or None."""
    sizes = virtual_stage_sizes(model.layers, pp, vpp, split, first_stage_layers, last_stage_layers, layout, model.name)
    return sizes if isinstance(sizes, str) else None


@cache
def virtual_stage_sizes(
    layers: int,
    pp: int,
    vpp: int = 1,
    split: str = "even",
    first_stage_layers: int | None = None,
    last_stage_layers: int | None = None,
    layout: tuple[int, ...] | None = None,
    model_name: str = "the model",
) -> tuple[int, ...] | str:
    """Transformer layers on each of the pp*vpp virtual stages (virtual stage c*pp + s is chunk c
    of stage s), or why Megatron-Core refuses the split (naming `model_name`).

    Megatron's rules: with interleaving every chunk of a stage holds the same number of layers;
    `embedding`/`loss` accounting adds one layer each to the count that pp*vpp must divide and
    takes it from the first/last virtual stage; explicit first/last stage counts
    (--decoder-first/last-pipeline-num-layers) leave the rest evenly to the middle stages and
    cannot be combined with that accounting; an explicit `layout` (--pipeline-model-parallel-layout)
    gives every virtual stage's count and combines with neither. Without interleaving and without
    explicit counts,
    layers that pp does not divide go one more to the middle stages (dse sets the first/last
    stage counts Megatron would need: the first and last stages, then the second and
    second-to-last, ... hold one layer fewer)."""
    if split not in PIPELINE_SPLITS:
        return f"pipeline_split={split!r}; allowed: {', '.join(PIPELINE_SPLITS)}"
    explicit = (first_stage_layers, last_stage_layers)
    if layout is not None:
        return _layout_sizes(layers, pp, vpp, split, explicit, layout, model_name)
    if any(n is not None for n in explicit):
        return _explicit_sizes(layers, pp, vpp, split, first_stage_layers, last_stage_layers)
    extra = ("embedding" in split) + ("loss" in split)
    of = f" of {model_name}"
    count = pp * vpp
    if pp > layers + extra:
        counted = (f"layers+{extra}={layers + extra}" if extra else f"layers={layers}") + of
        return f"{pp} stages exceed {counted}; allowed: 1 to {layers + extra}"
    if split == "even" and vpp == 1:
        return _outside_in(layers, pp)
    if (layers + extra) % count:
        counted = (f"layers+{extra}={layers + extra}" if extra else f"layers={layers}") + of
        allowed = ", ".join(map(str, divisors(layers + extra)))
        hint = (
            "" if extra else "; or count the embedding/loss as layers (pipeline_split), or set first/last_stage_layers"
        )
        equal = "interleaved chunks" if vpp > 1 else "stages that count the embedding/loss"
        return f"pp*vpp={pp}*{vpp} does not divide {counted}; {equal} must be equal (pp*vpp allowed: {allowed}{hint})"
    sizes = [(layers + extra) // count] * count
    sizes[0] -= "embedding" in split
    sizes[-1] -= "loss" in split
    if min(sizes) < 0:
        return f"pp*vpp={pp}*{vpp} leaves a virtual stage with the embedding or loss and no room"
    return tuple(sizes)


def _outside_in(layers: int, count: int) -> tuple[int, ...]:
    base, extra = divmod(layers, count)
    outside_in = [i for pair in zip(range(count), range(count - 1, -1, -1)) for i in pair]
    light = set(outside_in[: count - extra]) if extra else set(range(count))
    return tuple(base if i in light else base + 1 for i in range(count))


def _layout_sizes(
    layers: int, pp: int, vpp: int, split: str, explicit: tuple, layout: tuple[int, ...], model_name: str
) -> tuple[int, ...] | str:
    if split != "even" or any(n is not None for n in explicit):
        return "pipeline_layout cannot be combined with pipeline_split or first/last_stage_layers (Megatron refuses)"
    if len(layout) != pp * vpp:
        return f"pipeline_layout lists {len(layout)} virtual stages; pp*vpp={pp}*{vpp}={pp * vpp} needed"
    if min(layout) < 1:
        return "pipeline_layout entries must be positive: each virtual stage holds at least one transformer layer"
    if sum(layout) != layers:
        return f"pipeline_layout holds {sum(layout)} layers; {model_name} has {layers}"
    return tuple(layout)


def _explicit_sizes(
    layers: int, pp: int, vpp: int, split: str, first: int | None, last: int | None
) -> tuple[int, ...] | str:
    if split != "even":
        return f"first/last_stage_layers cannot be combined with pipeline_split={split!r} (Megatron refuses both)"
    if pp == 1:
        return "first/last_stage_layers need pp > 1"
    for name, n in (("first_stage_layers", first), ("last_stage_layers", last)):
        if n is not None and (n < 1 or n % vpp):
            return f"{name}={n} must be a positive multiple of vpp={vpp} (each chunk of a stage holds as many layers)"
    middle = pp - (first is not None) - (last is not None)
    rest = layers - (first or 0) - (last or 0)
    if rest < 0 or (middle == 0 and rest) or (middle and (rest % (middle * vpp))):
        return (
            f"first_stage_layers={first}, last_stage_layers={last} leave {rest} layers, which {middle} "
            f"middle stages of vpp={vpp} chunks cannot share equally"
        )
    per_stage = [rest // middle if middle else 0] * pp
    if first is not None:
        per_stage[0] = first
    if last is not None:
        per_stage[-1] = last
    return tuple(per_stage[stage] // vpp for _ in range(vpp) for stage in range(pp))


def ep_problem(model: ModelSpec, ep: int) -> str | None:
    """Why `ep` expert-parallel ranks cannot share `model`'s experts, or None."""
    experts = model.moe_experts
    if ep > 1 and not experts:
        return f"ep={ep} needs a mixture-of-experts model; {model.name} is dense (allowed: 1)"
    if experts and experts % ep:
        allowed = ", ".join(map(str, divisors(experts)))
        return f"{ep} does not divide moe_experts={experts} of {model.name}; allowed: {allowed}"
    return None


def etp_problem(model: ModelSpec, etp: int) -> str | None:
    """Why `etp` ranks cannot split each expert's MLP, or None."""
    if etp > 1 and not model.moe_experts:
        return f"etp={etp} needs a mixture-of-experts model; {model.name} is dense (allowed: 1)"
    if model.moe_experts and model.moe_ffn_hidden % etp:
        allowed = ", ".join(map(str, divisors(model.moe_ffn_hidden)))
        return f"{etp} does not divide moe_ffn_hidden={model.moe_ffn_hidden} of {model.name}; allowed: {allowed}"
    return None


def precision_problem(gpu: GpuSpec, precision: str) -> str | None:
    """Why `gpu` cannot run GEMMs in `precision`, or None."""
    if gpu.peak_tflops(precision) is None:
        return f"{gpu.name} has no {precision} tensor cores; allowed: {', '.join(gpu.precisions)}"
    return None


@dataclass(frozen=True)
class ParallelPlan:
    """How one training step is split over GPUs (Megatron vocabulary; batches in sequences).

    GPUs = tp * cp * pp * dp. Expert parallelism ep and expert tensor parallelism etp are folded
    onto the tp * cp * dp ranks of a stage (Megatron-Core's parallel folding; they do not multiply
    the GPU count); `vpp` model chunks per stage with schedule 1f1b is interleaved
    1F1B. ZeRO stages shard over the dp ranks: 1 optimizer states (Megatron's distributed
    optimizer), 2 also gradients, 3 also weights (FSDP).
    """

    tp: int
    pp: int
    dp: int
    micro_batch: int
    global_batch: int
    seq_len: int
    cp: int = 1
    ep: int = 1
    etp: int = 1
    vpp: int = 1
    recompute: str = "none"
    # The modules selective recomputation reruns (RECOMPUTE_MODULES); ignored unless selective.
    recompute_modules: tuple[str, ...] = ("core_attn",)
    sequence_parallel: bool = True
    zero_stage: int = 1
    schedule: str = "1f1b"
    precision: str = "bf16"
    flash_attention: bool = True
    # Hidden and attention dropout (GPT-era Megatron recipes: 0.1; Llama-class recipes: none): each
    # dropout keeps a one-byte mask for backward.
    dropout: bool = False
    # Whether the framework runs data-parallel traffic under compute (Megatron's
    # --overlap-grad-reduce / --overlap-param-gather, FSDP prefetch); False puts it on the
    # critical path, as DeepSpeed's defaults did (overlap_comm false; ZeRO-3 gathers synchronous).
    overlap_grad_reduce: bool = True
    overlap_param_gather: bool = True
    # Gradients accumulated and reduced in bf16 (Megatron's --grad-reduce-in-bf16; NVIDIA's
    # Megatron-Bridge performance recipes set grad_reduce_in_fp32=False): 2 bytes per gradient
    # and half the data-parallel traffic, instead of fp32 main gradients.
    grad_reduce_in_bf16: bool = False
    # The step's kernels replayed from CUDA graphs (Megatron's --cuda-graph-impl full_iteration, or
    # every transformer layer graphed): the host launches graphs, so no kernel waits for it.
    cuda_graphs: bool = False
    # Megatron's --tp-comm-overlap (Transformer Engine userbuffers): each tensor-parallel all-gather
    # and reduce-scatter of a dense block runs in chunks under the GEMM that consumes or produces
    # it. Needs sequence parallelism (Megatron asserts it); nothing to overlap at tp 1.
    tp_comm_overlap: bool = False
    # Megatron-Core's --overlap-moe-expert-parallel-comm ("combined 1F1B"): the expert-parallel
    # dispatch and combine all-to-alls of one micro-batch run under the computation of an adjacent
    # micro-batch (docs.nvidia.com/megatron-core, "Combined 1F1B: Expert-Parallel All-to-All
    # Overlap"). Megatron-Bridge asserts interleaving (vpp > 1) when pp > 1; nothing to hide at ep 1.
    moe_a2a_overlap: bool = False
    # How a rank runs its local experts' GEMMs (simulators.hardware.GROUPED_KERNELS): Transformer
    # Engine's one GEMM per expert on its streams ("multi_stream"), or one fused grouped kernel.
    moe_grouped_gemm: str = "multi_stream"
    # Megatron's uneven pipeline splits (PIPELINE_SPLITS; --decoder-first/last-pipeline-num-layers).
    pipeline_split: str = "even"
    first_stage_layers: int | None = None
    last_stage_layers: int | None = None
    # Megatron's --pipeline-model-parallel-layout as transformer layers per virtual stage (virtual
    # stage c*pp + s is chunk c of stage s; the embedding sits on the first, the loss on the last).
    pipeline_layout: tuple[int, ...] | None = None
    # What lives in host memory (OFFLOAD_MODES), and whether the offloaded optimizer step's
    # gradient copy out, CPU Adam and parameter copy back run chunk by chunk under one another
    # (Megatron-Core's --overlap-cpu-optimizer-d2h-h2d; DeepSpeed ZeRO-Offload pipelines them).
    offload: str = "none"
    overlap_cpu_optimizer: bool = True
    # The share of the optimizer's parameters (and their Adam state) offloaded, the rest stepped
    # in HBM on the GPU (Megatron-Core's --optimizer-offload-fraction); read only with optimizer
    # offload.
    optimizer_offload_fraction: float = 1.0

    def __post_init__(self) -> None:
        for name in ("tp", "pp", "dp", "cp", "ep", "etp", "vpp", "micro_batch", "global_batch", "seq_len"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise PlanError(f"{name}={value!r} must be a positive integer")
        for name, allowed in (
            ("recompute", RECOMPUTE_MODES),
            ("schedule", SCHEDULES),
            ("zero_stage", ZERO_STAGES),
            ("pipeline_split", PIPELINE_SPLITS),
            ("offload", OFFLOAD_MODES),
            ("moe_grouped_gemm", GROUPED_KERNELS),
        ):
            if getattr(self, name) not in allowed:
                raise PlanError(f"{name}={getattr(self, name)!r}; allowed: {', '.join(map(str, allowed))}")
        fraction = self.optimizer_offload_fraction
        if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not 0 < fraction <= 1:
            raise PlanError(f"optimizer_offload_fraction={fraction!r}; allowed: a number in (0, 1]")
        layout = self.pipeline_layout
        if layout is not None and not (isinstance(layout, tuple) and all(type(n) is int for n in layout)):
            raise PlanError(f"pipeline_layout={layout!r}; allowed: a tuple of layer counts, one per virtual stage")
        unknown = [m for m in self.recompute_modules if m not in RECOMPUTE_MODULES]
        if unknown or not isinstance(self.recompute_modules, tuple):
            raise PlanError(
                f"recompute_modules={self.recompute_modules!r}; allowed: a tuple of {', '.join(RECOMPUTE_MODULES)}"
            )
        if self.tp_comm_overlap and self.tp > 1 and not self.sequence_parallel:
            raise PlanError(
                "tp_comm_overlap needs sequence_parallel (Megatron asserts it: the overlap splits the "
                "sequence-parallel all-gathers and reduce-scatters); allowed without it: tp_comm_overlap false"
            )
        if self.moe_a2a_overlap and self.pp > 1 and self.vpp == 1:
            raise PlanError(
                "moe_a2a_overlap with pp > 1 needs interleaving (Megatron-Bridge asserts a virtual pipeline "
                f"size); pp={self.pp}, vpp=1; allowed: vpp > 1, pp 1, or moe_a2a_overlap false"
            )
        if self.global_batch % (self.dp * self.micro_batch):
            raise PlanError(
                f"global_batch={self.global_batch} is not a multiple of dp*micro_batch={self.dp}*{self.micro_batch}"
            )
        if (self.tp * self.cp * self.dp) % (self.ep * self.etp):
            raise PlanError(
                f"ep*etp={self.ep}*{self.etp} does not divide tp*cp*dp={self.tp}*{self.cp}*{self.dp}: "
                f"expert ranks are folded onto the attention ranks of a stage"
            )
        if self.cp > 1 and self.seq_len % (2 * self.cp):
            raise PlanError(
                f"seq_len={self.seq_len} is not a multiple of 2*cp={2 * self.cp} (load-balanced causal split)"
            )
        if self.vpp > 1:
            if self.schedule != "1f1b" or self.pp == 1:
                raise PlanError(f"vpp={self.vpp} needs schedule 1f1b and pp > 1 (interleaved 1F1B)")
            if self.microbatches % self.pp:
                raise PlanError(
                    f"interleaved 1F1B needs microbatches={self.microbatches} to be a multiple of pp={self.pp}"
                )

    def __hash__(self) -> int:
        return self._hash

    @cached_property
    def _hash(self) -> int:
        """The dataclass's own hash (of every field), computed once: plans key the training model's
        memo tables and are hashed at every lookup."""
        return hash(_plan_fields(self))

    @property
    def expert_dp(self) -> int:
        """Ranks holding the same experts (Megatron-Core's expert data parallelism)."""
        return self.tp * self.cp * self.dp // (self.ep * self.etp)

    @property
    def world_size(self) -> int:
        return self.tp * self.cp * self.pp * self.dp

    @property
    def microbatches(self) -> int:
        """Micro-batches each pipeline runs per step (gradient-accumulation steps)."""
        return self.global_batch // (self.dp * self.micro_batch)

    @property
    def tokens_per_step(self) -> int:
        return self.global_batch * self.seq_len

    @property
    def split(self) -> tuple[str, int | None, int | None, tuple[int, ...] | None]:
        """How the stages share the layers: (pipeline_split, first_stage_layers, last_stage_layers,
        pipeline_layout)."""
        return self.pipeline_split, self.first_stage_layers, self.last_stage_layers, self.pipeline_layout

    @property
    def gradient_bytes(self) -> int:
        """Bytes of one accumulated (and reduced) gradient: fp32 main gradients, or bf16."""
        return 2 if self.grad_reduce_in_bf16 else 4

    @property
    def offloads_optimizer(self) -> bool:
        return "optimizer" in self.offload

    @property
    def offloads_activations(self) -> bool:
        return "activations" in self.offload

    @property
    def offloads_weights(self) -> bool:
        return "weights" in self.offload

    @property
    def optimizer_on_nvme(self) -> bool:
        return self.offload.endswith("-nvme")

    def recomputes(self, module: str) -> bool:
        """Whether selective recomputation reruns `module` (one of RECOMPUTE_MODULES)."""
        return self.recompute == "selective" and module in self.recompute_modules

    @property
    def defers_weight_grad(self) -> bool:
        """Zero-bubble schedules run a micro-batch's weight gradient later than its input
        gradient, to fill bubbles: nothing of the backward runs beside it."""
        return self.schedule == "zb-h1"

    @property
    def pipeline_schedule(self) -> str:
        """The schedule the timeline runs: 1f1b with vpp > 1 is interleaved."""
        return "interleaved" if self.vpp > 1 else self.schedule


# Every field of a plan in order, as one C call (ParallelPlan._hash).
_plan_fields = operator.attrgetter(*(f.name for f in dataclasses.fields(ParallelPlan)))


@dataclass(frozen=True)
class TrainingSystem:
    """The hardware a plan runs on."""

    gpu: GpuSpec
    num_gpus: int
    memory_reserve_gib: float = 0.0
    calibration: str | None = None  # path of measured kernel times (simulators/hardware/calibration)
    compute_fraction: float = 1.0  # share of the modelled kernel speed the software stack sustains
    network: Network | None = None  # the cluster's fabric; None: the GPU's reference system
    # Host (CPU) time the framework spends per kernel it launches; None: the fitted value of the
    # GPU type (simulators/hardware/fitted.yaml), 0: kernels never wait for the host.
    host_launch_s: float | None = None
    # The host memory tier offloaded state goes to (simulators/hardware/memory_tiers.yaml); None:
    # the GPU has none there, and a plan that offloads cannot run.
    host: HostTier | None = None

    @property
    def kernel_host_s(self) -> float:
        """The host time per launched kernel the model uses."""
        return fitted_host_launch_s(self.gpu) if self.host_launch_s is None else self.host_launch_s

    @property
    def fabric_network(self) -> Network:
        """The network collectives run on: the given one, or the GPU's reference system
        (its NVLink domain and one NIC per GPU on one non-blocking fabric)."""
        if self.network is not None:
            return self.network
        key = (self.gpu.name, self.gpu.scaleup_domain_gpus, self.gpu.scaleup_gbytes_per_s, self.gpu.nic_gbps)
        if key not in _REFERENCE_NETWORKS:
            _REFERENCE_NETWORKS[key] = Network.from_gpu(self.gpu)
        return _REFERENCE_NETWORKS[key]

    def __post_init__(self) -> None:
        if self.num_gpus < 1:
            raise PlanError(f"num_gpus={self.num_gpus} must be at least 1")
        if self.memory_reserve_gib < 0:
            raise PlanError(f"memory_reserve_gib={self.memory_reserve_gib} must be >= 0")
        if not 0 < self.compute_fraction <= 1:
            raise PlanError(f"compute_fraction={self.compute_fraction} must be in (0, 1]")
        if self.host_launch_s is not None and not 0 <= self.host_launch_s < 1e-3:
            raise PlanError(f"host_launch_s={self.host_launch_s} must be in [0, 1e-3) seconds (or None: fitted)")


@dataclass(frozen=True)
class TrainingCandidate:
    """One complete training configuration; constructing it proves the plan can run."""

    model: ModelSpec
    system: TrainingSystem
    plan: ParallelPlan

    def __post_init__(self) -> None:
        plan, model = self.plan, self.model
        if plan.world_size != self.system.num_gpus:
            raise PlanError(
                f"tp*cp*pp*dp={plan.tp}*{plan.cp}*{plan.pp}*{plan.dp}={plan.world_size} "
                f"differs from num_gpus={self.system.num_gpus}"
            )
        for problem in (
            tp_problem(model, plan.tp),
            pp_problem(model, plan.pp, plan.vpp, *plan.split),
            ep_problem(model, plan.ep),
            etp_problem(model, plan.etp),
            precision_problem(self.system.gpu, plan.precision),
        ):
            if problem:
                raise PlanError(problem)
        if plan.recomputes("mla_up_proj") and not model.is_mla:
            raise PlanError(f"recompute_modules mla_up_proj needs multi-latent attention; {model.name} has none")
        if problem := offload_problem(plan, self.system):
            raise PlanError(problem)
        if model.max_seq_len is not None and plan.seq_len > model.max_seq_len:
            raise PlanError(f"seq_len={plan.seq_len} exceeds max_seq_len={model.max_seq_len} of {model.name}")


def offload_problem(plan: ParallelPlan, system: TrainingSystem) -> str | None:
    """Why `plan` cannot offload as it asks on `system`, or None.

    DeepSpeed's offload_param is a ZeRO-3 feature (deepspeed.ai/docs/config-json, "Parameter
    offloading": available only with ZeRO stage 3; recalled, not re-read). Megatron-Core's
    activation CPU offloading refuses pipeline parallelism, CUDA graphs and recomputation
    (Megatron Bridge docs, training/cpu-offloading: "PP must be 1", incompatible with CUDA graphs,
    recompute_granularity None); any offload needs a host tier."""
    if plan.offload == "none":
        return None
    if system.host is None:
        return (
            f"offload={plan.offload!r} needs a host memory tier; {system.gpu.name} has none in "
            f"simulators/hardware/memory_tiers.yaml (GPUs with one: {', '.join(gpus_with_host_tier())}); "
            "allowed: none"
        )
    if plan.optimizer_on_nvme and system.host.nvme_gib is None:
        return (
            f"offload={plan.offload!r} needs an NVMe tier; host tier {system.host.name} of {system.gpu.name} has "
            "none in simulators/hardware/memory_tiers.yaml; allowed: none, optimizer"
        )
    if plan.offloads_weights and plan.zero_stage != 3:
        why = "DeepSpeed offloads parameters only under ZeRO stage 3"
        return f"offload={plan.offload!r} needs zero_stage=3 ({why}); zero_stage={plan.zero_stage}"
    if plan.offloads_activations:
        if plan.pp > 1:
            why = "Megatron's activation offloading refuses pipelines"
            return f"offload={plan.offload!r} needs pp=1 ({why}); pp={plan.pp}"
        if plan.recompute != "none":
            why = "Megatron refuses both"
            return f"offload={plan.offload!r} needs recompute=none ({why}); recompute={plan.recompute!r}"
        if plan.cuda_graphs:
            return f"offload={plan.offload!r} cannot run with cuda_graphs (Megatron refuses both)"
    return None
