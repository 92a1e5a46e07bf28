"""Parallel plans for training and the checks that decide whether one can run at all.

A plan that cannot run raises PlanError with the reason (STYLE 7); the checks are small
functions so the spec validator can apply the same rule to every value of a search knob
before any trial runs.
"""

from __future__ import annotations

from dataclasses import dataclass

from simulators._errors import PlanError
from simulators.hardware import GpuSpec
from simulators.hardware import host_launch_s as fitted_host_launch_s
from simulators.models import ModelSpec
from simulators.network import Network

RECOMPUTE_MODES = ("none", "selective", "full")
SCHEDULES = ("1f1b", "gpipe", "zb-h1")  # 1f1b with vpp > 1 is Megatron's interleaved 1F1B
# Reference networks by the GPU fields they depend on (GpuSpec itself is not hashable).
_REFERENCE_NETWORKS: dict[tuple, Network] = {}
ZERO_STAGES = (0, 1, 2, 3)


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


def pp_problem(model: ModelSpec, pp: int, vpp: int = 1) -> str | None:
    """Why `pp` stages of `vpp` chunks cannot hold `model`'s layers, or None.

    Without interleaving, stages may hold unequal numbers of layers (the first and last get the
    fewer, as Megatron's --decoder-first/last-pipeline-num-layers allow); interleaved chunks must
    be equal."""
    if pp > model.layers:
        return f"{pp} stages exceed layers={model.layers} of {model.name}; allowed: 1 to {model.layers}"
    if vpp > 1 and model.layers % (pp * vpp):
        allowed = ", ".join(map(str, divisors(model.layers)))
        return (
            f"pp*vpp={pp}*{vpp} does not divide layers={model.layers} of {model.name}; interleaved chunks "
            f"must be equal (pp*vpp allowed: {allowed})"
        )
    return None


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
    sequence_parallel: bool = True
    zero_stage: int = 1
    schedule: str = "1f1b"
    precision: str = "bf16"
    flash_attention: bool = True
    # Whether the framework runs data-parallel traffic under compute (Megatron's
    # --overlap-grad-reduce / --overlap-param-gather, FSDP prefetch); False puts it on the
    # critical path, as DeepSpeed's defaults did (overlap_comm false; ZeRO-3 gathers synchronous).
    overlap_grad_reduce: bool = True
    overlap_param_gather: bool = True

    def __post_init__(self) -> None:
        for name in ("tp", "pp", "dp", "cp", "ep", "etp", "vpp", "micro_batch", "global_batch", "seq_len"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise PlanError(f"{name}={value!r} must be a positive integer")
        for name, allowed in (("recompute", RECOMPUTE_MODES), ("schedule", SCHEDULES), ("zero_stage", ZERO_STAGES)):
            if getattr(self, name) not in allowed:
                raise PlanError(f"{name}={getattr(self, name)!r}; allowed: {', '.join(map(str, allowed))}")
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
    def pipeline_schedule(self) -> str:
        """The schedule the timeline runs: 1f1b with vpp > 1 is interleaved."""
        return "interleaved" if self.vpp > 1 else self.schedule


@dataclass(frozen=True)
class TrainingSystem:
    """The hardware a plan runs on."""

    gpu: GpuSpec
    num_gpus: int
    memory_reserve_gb: float = 0.0
    calibration: str | None = None  # path of measured kernel times (simulators/hardware/calibration)
    compute_fraction: float = 1.0  # share of the modelled kernel speed the software stack sustains
    network: Network | None = None  # the cluster's fabric; None: the GPU's reference system
    # Host (CPU) time the framework spends per kernel it launches; None: the fitted value of the
    # GPU type (simulators/hardware/fitted.yaml), 0: kernels never wait for the host.
    host_launch_s: float | None = None

    @property
    def kernel_host_s(self) -> float:
        """The host time per launched kernel the model uses."""
        return fitted_host_launch_s(self.gpu.name) if self.host_launch_s is None else self.host_launch_s

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
        if self.memory_reserve_gb < 0:
            raise PlanError(f"memory_reserve_gb={self.memory_reserve_gb} must be >= 0")
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
            pp_problem(model, plan.pp, plan.vpp),
            ep_problem(model, plan.ep),
            etp_problem(model, plan.etp),
            precision_problem(self.system.gpu, plan.precision),
        ):
            if problem:
                raise PlanError(problem)
        if model.max_seq_len is not None and plan.seq_len > model.max_seq_len:
            raise PlanError(f"seq_len={plan.seq_len} exceeds max_seq_len={model.max_seq_len} of {model.name}")
