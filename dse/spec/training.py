"""The spec's training sections: the settings of every candidate and the knobs searched."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import (
    Field,
    field_validator,
    model_validator,
)

from dse.spec.fields import (
    MAX_COUNT,
    MAX_TOKENS,
    Count,
    Frozen,
    IntKnob,
    TokenBounds,
    non_empty_unique,
    one_of,
    positive_knob,
)
from simulators.hardware import GROUPED_KERNELS
from simulators.workload import (
    OFFLOAD_MODES,
    PIPELINE_SPLITS,
    RECOMPUTE_MODES,
    RECOMPUTE_MODULES,
    SCHEDULES,
    ZERO_STAGES,
)

MAX_LAYOUT_STAGES = 2**16  # virtual stages one pipeline layout may list


class PipelineLayout(Frozen):
    """Megatron's --pipeline-model-parallel-layout for one pipeline shape: transformer layers of
    each of the pp*vpp virtual stages, in model order (virtual stage c*pp + s is chunk c of stage
    s; the embedding goes on the first, the loss on the last)."""

    pp: Count
    vpp: Count = 1
    layers: list[Count] = Field(min_length=1, max_length=MAX_LAYOUT_STAGES)

    @model_validator(mode="after")
    def _one_count_per_virtual_stage(self) -> PipelineLayout:
        if len(self.layers) != self.pp * self.vpp:
            raise ValueError(
                f"layers lists {len(self.layers)} virtual stages; allowed: pp*vpp={self.pp}*{self.vpp}="
                f"{self.pp * self.vpp} counts, one per virtual stage"
            )
        return self

    @property
    def shape(self) -> tuple[int, int]:
        return self.pp, self.vpp


class TrainingSettings(Frozen):
    seq_len: int = Field(default=4096, ge=1, le=MAX_TOKENS)
    precision: Literal["fp16", "bf16", "fp8", "fp4"] = "bf16"
    train_tokens: float | None = Field(default=None, gt=0, le=1e18)
    global_batch_tokens: TokenBounds | None = None
    overlap_grad_reduce: bool = True
    overlap_param_gather: bool = True
    # Megatron's --decoder-first/last-pipeline-num-layers: transformer layers of the first and
    # last pipeline stage (the middle stages share the rest equally); null: not set.
    first_stage_layers: int | None = Field(default=None, ge=1, le=MAX_COUNT)
    last_stage_layers: int | None = Field(default=None, ge=1, le=MAX_COUNT)
    # Megatron's --pipeline-model-parallel-layout: transformer layers of each virtual stage, in
    # model order (pp*vpp entries; the embedding goes on the first, the loss on the last).
    # One layout every searched pipeline shape takes (so pp*vpp is the same for all of them).
    pipeline_layout: list[Count] | None = Field(default=None, max_length=MAX_LAYOUT_STAGES)
    # Layouts by pipeline shape (pp, vpp): a plan of a listed shape takes its layout, the other
    # shapes split the layers by search.pipeline_split or first/last_stage_layers.
    pipeline_layouts: list[PipelineLayout] = Field(default=[], max_length=1024)
    # What recompute "selective" reruns (Megatron's --recompute-modules; default its default).
    recompute_modules: list[str] = ["core_attn"]
    # Megatron's --grad-reduce-in-bf16: bf16 gradients (2 bytes each, half the data-parallel
    # traffic) instead of fp32 main gradients.
    grad_reduce_in_bf16: bool = False
    # The step's kernels replayed from CUDA graphs (Megatron's --cuda-graph-impl full_iteration):
    # no kernel waits for the host.
    cuda_graphs: bool = False
    # Megatron-Core's --overlap-moe-expert-parallel-comm (combined 1F1B): the expert-parallel
    # all-to-alls of one micro-batch under another's compute; applied to the plans Megatron allows
    # it on (ep > 1; pp 1 or interleaved).
    moe_a2a_overlap: bool = False
    # How a rank issues its local experts' GEMMs: Transformer Engine's one GEMM per expert on 4
    # streams ("multi_stream") or one fused grouped kernel ("fused").
    moe_grouped_gemm: str = "multi_stream"
    # With search.offload optimizer: the gradient copy out, CPU Adam and weight copy back run
    # chunk by chunk under one another (Megatron's --overlap-cpu-optimizer-d2h-h2d), or in turn.
    overlap_cpu_optimizer: bool = True
    # With search.offload optimizer: the share of the optimizer offloaded, the rest stepped on
    # the GPU (Megatron's --optimizer-offload-fraction).
    optimizer_offload_fraction: float = Field(default=1.0, gt=0, le=1)

    @field_validator("pipeline_layouts")
    @classmethod
    def _one_layout_per_shape(cls, layouts: list[PipelineLayout], info) -> list[PipelineLayout]:
        if layouts and info.data.get("pipeline_layout") is not None:
            raise ValueError(
                "cannot be combined with pipeline_layout; allowed: one of them (pipeline_layout: one layout "
                "every searched shape takes, pipeline_layouts: one layout per shape)"
            )
        shapes = [layout.shape for layout in layouts]
        for i, shape in enumerate(shapes):
            if shape in shapes[:i]:
                raise ValueError(
                    f"entries {shapes.index(shape)} and {i} both give pp={shape[0]}, vpp={shape[1]}; "
                    "allowed: one layout per pipeline shape"
                )
        return layouts

    def layout_for(self, pp: int, vpp: int) -> tuple[int, ...] | None:
        """The layers per virtual stage a plan of `pp` stages of `vpp` chunks takes: the one
        pipeline_layout, else the pipeline_layouts entry of that shape, else None (the split)."""
        if self.pipeline_layout is not None:
            return tuple(self.pipeline_layout)
        for layout in self.pipeline_layouts:
            if layout.pp == pp and layout.vpp == vpp:
                return tuple(layout.layers)
        return None

    @field_validator("recompute_modules")
    @classmethod
    def _modules(cls, values: list[str]) -> list[str]:
        return one_of(values, RECOMPUTE_MODULES)

    @field_validator("moe_grouped_gemm")
    @classmethod
    def _grouped_kernel(cls, value: str) -> str:
        return one_of([value], GROUPED_KERNELS)[0]


MAX_SECONDS = 100_000_000  # a checkpoint interval: about three years
# Knobs of numbers or one word: the word, the numbers' type and range (the spec and `--set` read it).
NUMBER_OR_WORD_KNOBS = {
    "spare_servers": ("auto", int, 0, MAX_COUNT),
    "checkpoint_interval_s": ("optimal", float, 1, MAX_SECONDS),
}


class TrainingSearch(Frozen):
    """Knobs of a training study; hardware.num_gpus and the fabric's families and NIC speeds are
    searched too."""

    DEFAULT_OBJECTIVES: ClassVar = ({"metric": "tokens_per_s_per_gpu"}, {"metric": "usd_per_mtok"})
    SEARCHES_HARDWARE: ClassVar = True
    CLIMBS_LADDER: ClassVar = True  # the fidelity ladder re-prices its collectives
    kind: Literal["training"] = Field(default="training", exclude=True)  # set from the study's mode
    tp: IntKnob = [1, 2, 4, 8]
    pp: IntKnob = [1, 2, 4, 8]
    cp: IntKnob = [1]
    ep: IntKnob = [1]
    etp: IntKnob = [1]
    vpp: IntKnob = [1]
    micro_batch: IntKnob = [1, 2]
    global_batch: IntKnob = [1024]
    recompute: list[str] = ["none", "full"]
    pipeline_split: list[str] = ["even"]
    schedule: list[str] = ["1f1b"]
    sequence_parallel: list[bool] = [True]
    # Megatron's --tp-comm-overlap (Transformer Engine userbuffers; needs sequence parallelism).
    tp_comm_overlap: list[bool] = [False]
    zero_stage: list[int] = [1]
    # What lives in host memory instead of HBM (simulators/hardware/memory_tiers.yaml gives each
    # GPU's host tier): none, optimizer, activations, optimizer+activations.
    offload: list[str] = ["none"]
    # Hot spare servers beside the job's, bought (capex) and rented (usd_per_hour) with it: a
    # failed server is swapped for a free spare instead of waited for; auto: for each candidate
    # the count with the lowest cost per useful hour (dse/study/goodput.py).
    spare_servers: list[Literal["auto"] | int] = [0]
    # Seconds of training between checkpoints (rounded to whole steps); optimal: Daly's optimum
    # for each candidate's failure rate and checkpoint cost.
    checkpoint_interval_s: list[Literal["optimal"] | float] = ["optimal"]

    _counts = field_validator("tp", "pp", "cp", "ep", "etp", "vpp", "micro_batch", "global_batch")(positive_knob)
    _unique = field_validator("sequence_parallel", "tp_comm_overlap")(non_empty_unique)

    @field_validator("spare_servers", "checkpoint_interval_s")
    @classmethod
    def _number_or_word(cls, values: list, info) -> list:
        """Counts of spares (or `auto`), seconds between checkpoints (or `optimal`)."""
        word, _, low, high = NUMBER_OR_WORD_KNOBS[info.field_name]
        non_empty_unique(values)
        if any(v != word and not low <= v <= high for v in values):
            raise ValueError(f"{values} holds a value that is neither {word!r} nor {low} to {high}")
        return values

    @field_validator("recompute", "pipeline_split", "schedule", "zero_stage", "offload")
    @classmethod
    def _choices(cls, values: list, info) -> list:
        allowed = {
            "recompute": RECOMPUTE_MODES,
            "pipeline_split": PIPELINE_SPLITS,
            "schedule": SCHEDULES,
            "zero_stage": ZERO_STAGES,
            "offload": OFFLOAD_MODES,
        }
        return one_of(values, allowed[info.field_name])
