"""The spec's inference sections: the request stream and SLO, and the deployment knobs searched."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import (
    Field,
    field_validator,
    model_validator,
)

from dse.spec.fields import MAX_TOKENS, FilePath, Frozen, IntKnob, non_empty_unique, one_of, positive_knob
from simulators.serving import MOE_PARALLEL, ROUTERS, SCHEDULERS


class ServingSearch(Frozen):
    """Knobs of an inference study: a pool of `replicas` replicas of tp x pp GPUs, or with
    `disaggregated`, that pool prefills and `decode_replicas` of `decode_tp` GPUs decode."""

    DEFAULT_OBJECTIVES: ClassVar = ({"metric": "qps_per_usd_hour"}, {"metric": "ttft_p90_s"})
    SEARCHES_HARDWARE: ClassVar = False  # a deployment's GPUs follow from its knobs
    CLIMBS_LADDER: ClassVar = False  # a deployment does not replay collectives: no network ladder
    kind: Literal["inference"] = Field(default="inference", exclude=True)
    tp: IntKnob = [1, 2, 4, 8]
    pp: IntKnob = [1]
    moe_parallel: list[str] = ["tp"]
    replicas: IntKnob = [1, 2, 4]
    scheduler: list[str] = ["sarathi"]
    max_batch_requests: IntKnob = [128]
    max_batch_tokens: IntKnob = [512]
    prefix_caching: list[bool] = [False]
    speculative_tokens: list[int] = [0]  # draft tokens a verify step (0: no speculative decoding)
    speculative_acceptance: list[float] = [0.7]  # the chance each draft token is accepted
    router: list[str] = ["round_robin"]
    disaggregated: list[bool] = [False]
    decode_tp: IntKnob = [4]
    decode_replicas: IntKnob = [1]

    _counts = field_validator(
        "tp", "pp", "replicas", "max_batch_requests", "max_batch_tokens", "decode_tp", "decode_replicas"
    )(positive_knob)

    @field_validator("speculative_tokens")
    @classmethod
    def _draft_tokens(cls, values: list[int]) -> list[int]:
        return one_of(values, range(16))

    @field_validator("speculative_acceptance")
    @classmethod
    def _acceptance(cls, values: list[float]) -> list[float]:
        non_empty_unique(values)
        if any(not 0 <= v < 1 for v in values):
            raise ValueError(f"{values} holds a value outside [0, 1)")
        return values

    @field_validator("scheduler", "router", "disaggregated", "moe_parallel", "prefix_caching")
    @classmethod
    def _choices(cls, values: list, info) -> list:
        allowed = {
            "scheduler": tuple(SCHEDULERS),
            "router": tuple(ROUTERS),
            "disaggregated": (False, True),
            "prefix_caching": (False, True),
            "moe_parallel": tuple(MOE_PARALLEL),
        }
        return one_of(values, allowed[info.field_name])


class LengthSettings(Frozen):
    """A length distribution: `fixed` (value), `uniform` (low..high), `zipf` (theta over low..high)."""

    dist: Literal["fixed", "uniform", "zipf"] = "uniform"
    value: int | None = Field(default=None, ge=1, le=MAX_TOKENS)
    low: int = Field(default=1, ge=1, le=MAX_TOKENS)
    high: int = Field(default=1, ge=1, le=MAX_TOKENS)
    theta: float = Field(default=1.0, gt=0, le=100)

    @model_validator(mode="after")
    def _complete(self) -> LengthSettings:
        if self.dist == "fixed" and self.value is None:
            raise ValueError("dist fixed needs value")
        if self.dist != "fixed" and self.high < self.low:
            raise ValueError(f"high={self.high} is below low={self.low}")
        return self


class ServingSettings(Frozen):
    """The request stream every candidate of an inference study serves, and its SLO."""

    precision: Literal["fp16", "bf16", "fp8", "fp4"] = "bf16"
    requests: int = Field(default=2000, ge=10, le=10**7)
    arrival: Literal["poisson", "gamma", "replay"] = "poisson"  # replay: the trace's own arrivals, time-scaled
    cv: float = Field(default=1.0, gt=0, le=100)
    qps: float | None = Field(default=None, gt=0, le=1e9)  # None: search each candidate's capacity
    trace: FilePath | None = None  # a trace file: its lengths (in order) replace prompt/output
    max_tokens: int | None = Field(default=None, ge=2, le=MAX_TOKENS)  # cap prompt + output of trace requests
    prompt: LengthSettings = LengthSettings(dist="uniform", low=128, high=2048)
    output: LengthSettings = LengthSettings(dist="uniform", low=16, high=512)
    ttft_p90_s: float = Field(default=2.0, gt=0, le=1e6)
    tbt_p99_s: float = Field(default=0.2, gt=0, le=1e6)
    # The share of its capacity at which a candidate's latency is also measured (the *_at_load_s
    # metrics): at capacity every latency sits near the SLO bound, below it they differ.
    latency_load: float = Field(default=0.7, gt=0, le=1)
    # An MoE layer's busiest expert-parallel GPU carries this many times the mean token load
    # (an assumption: 1 is balanced routing; skewed traffic makes a few experts hot).
    expert_imbalance: float = Field(default=1.0, ge=1, le=64)
    # The share of each prompt that earlier requests already sent (a system prompt, a
    # conversation's history): what a prefix cache (search.prefix_caching) finds.
    prefix_share: float = Field(default=0.0, ge=0, lt=1)
    # The draft model of speculative decoding (a zoo name; needed where search.speculative_tokens
    # holds a value above 0): it must share the model's tokenizer.
    draft_model: str | None = Field(default=None, min_length=1, max_length=255)
    block_tokens: int = Field(default=16, ge=1, le=2**16)
    memory_fraction: float = Field(default=0.9, gt=0, le=1)
    # Measured operation times in Vidur's profile layout (mlp.csv, attention.csv, all_reduce.csv);
    # each replaces the analytical cost of the operations it covers.
    profile_mlp: FilePath | None = None
    profile_attention: FilePath | None = None
    profile_all_reduce: FilePath | None = None
