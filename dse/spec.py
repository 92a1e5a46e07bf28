"""The study spec: what a user writes in YAML, validated into frozen pydantic models.

Every field has a default so a ten-line spec works; `search_spaces/README.md` documents each.
Errors come out as one SpecError line naming the field path and what is allowed. Types are strict
(no bool or string taken for a number), every float is finite and every count has a stated range,
and the size of the search space is checked before anything enumerates it: a spec may come from
anyone, and a knob of 10^12 values must be a one-line error, not a MemoryError.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    Strict,
    ValidationError,
    field_validator,
    model_validator,
)

from dse.errors import SpecError
from dse.inputs import SPEC_LIMIT, brief, load_yaml, read_text
from dse.metrics import DIRECTIONS
from simulators.models import ModelSpec
from simulators.network import family_names
from simulators.serving import ROUTERS, SCHEDULERS
from simulators.workload import PIPELINE_SPLITS, RECOMPUTE_MODES, RECOMPUTE_MODULES, SCHEDULES, ZERO_STAGES

SAMPLERS = ("auto", "tpe", "nsga2", "random", "refine", "grid")

# Stated ranges: GPUs, parallel degrees, batch sizes and replicas are counts of 1..MAX_COUNT; a
# knob holds at most MAX_KNOB_VALUES values and the search space at most MAX_SPACE combinations
# of them (the shipped specs hold at most 28,800), so every check before the first trial is a
# bounded loop; a name has at most MAX_NAME characters and a path MAX_PATH.
MAX_COUNT = 2**20
MAX_KNOB_VALUES = 256
MAX_SPACE = 10**7
MAX_NAME = 255
MAX_PATH = 4096
MAX_GBPS = 100_000  # a NIC or switch port: 100 Tb/s
MAX_TOKENS = 2**24  # a sequence, prompt or output
MAX_BATCH = 4096  # trials asked at a time


def _printable(text: str) -> str:
    """Names and paths end up in one-line errors, tables and file names: no control characters."""
    if not text.isprintable():
        raise ValueError(f"{brief(text)} holds a control character (a newline, tab...); allowed: printable text")
    return text


Count = Annotated[int, Field(ge=1, le=MAX_COUNT)]
Name = Annotated[str, Field(min_length=1, max_length=MAX_NAME), AfterValidator(_printable)]
FilePath = Annotated[str, Field(min_length=1, max_length=MAX_PATH), AfterValidator(_printable)]
Price = Annotated[float, Field(gt=0, le=1e12)]


def _not_bool(value: Any) -> Any:
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a line rate in Gb/s")
    return value


# Not strict: `dse search` saves spec.yaml from JSON-mode dumps, whose mapping keys are strings.
Gbps = Annotated[int, Strict(False), BeforeValidator(_not_bool), Field(ge=1, le=MAX_GBPS)]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True, allow_inf_nan=False)


class IntRange(_Frozen):
    """An integer range knob: low, low+step, ..., up to high inclusive."""

    low: Count
    high: Count
    step: Count = 1

    @model_validator(mode="after")
    def _ordered(self) -> IntRange:
        if self.high < self.low:
            raise ValueError(f"high={self.high} is below low={self.low}")
        if (self.high - self.low) % self.step:
            raise ValueError(f"high - low = {self.high - self.low} is not a multiple of step={self.step}")
        if self.count > MAX_KNOB_VALUES:
            raise ValueError(
                f"{{low: {self.low}, high: {self.high}, step: {self.step}}} holds {self.count:,} values; "
                f"allowed: at most {MAX_KNOB_VALUES} (a larger step)"
            )
        return self

    @property
    def count(self) -> int:
        return (self.high - self.low) // self.step + 1

    @property
    def values(self) -> tuple[int, ...]:
        return tuple(range(self.low, self.high + 1, self.step))


IntKnob = list[int] | IntRange


def knob_values(knob: Any) -> tuple:
    """The candidate values of a knob given as a list or a range."""
    return knob.values if isinstance(knob, IntRange) else tuple(knob)


def _non_empty_unique(values: list) -> list:
    if not values:
        raise ValueError("needs at least one value")
    if len(values) > MAX_KNOB_VALUES:
        raise ValueError(f"{len(values):,} values; allowed: at most {MAX_KNOB_VALUES}")
    if len(set(values)) != len(values):
        raise ValueError(f"{brief(values)} repeats a value")
    return values


def _positive_knob(knob: Any) -> Any:
    """A knob given as a list: non-empty, no repeats, every value a count of 1..MAX_COUNT (a range checks itself)."""
    if isinstance(knob, list):
        _non_empty_unique(knob)
        if any(not 1 <= v <= MAX_COUNT for v in knob):
            raise ValueError(f"{brief(knob)} holds a value outside 1..{MAX_COUNT}")
    return knob


def _one_of(values: list, allowed) -> list:
    """A list of choices: non-empty, no repeats, each one of `allowed`."""
    _non_empty_unique(values)
    for value in values:
        if value not in allowed:
            raise ValueError(f"{brief(value)} is not allowed; allowed: {', '.join(map(str, allowed))}")
    return values


class TokenBounds(_Frozen):
    """Tokens per optimizer step the training recipe allows (global batch x seq_len): the
    batch is set by convergence, not by speed, so the search may not leave these bounds."""

    min: float | None = Field(default=None, gt=0, le=1e15)
    max: float | None = Field(default=None, gt=0, le=1e15)

    @model_validator(mode="after")
    def _bounded(self) -> TokenBounds:
        if self.min is None and self.max is None:
            raise ValueError("needs a bound: min or max")
        if self.min is not None and self.max is not None and self.max < self.min:
            raise ValueError(f"max={self.max:g} is below min={self.min:g}")
        return self

    def sequences(self, seq_len: int) -> tuple[int, int | None]:
        """The global batches, in sequences of seq_len tokens, inside the bounds: (lowest, highest or None)."""
        low = 1 if self.min is None else max(1, math.ceil(self.min / seq_len))
        return low, None if self.max is None else math.floor(self.max / seq_len)


class TrainingSettings(_Frozen):
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
    pipeline_layout: list[Count] | None = Field(default=None, max_length=2**16)
    # What recompute "selective" reruns (Megatron's --recompute-modules; default its default).
    recompute_modules: list[str] = ["core_attn"]
    # Megatron's --grad-reduce-in-bf16: bf16 gradients (2 bytes each, half the data-parallel
    # traffic) instead of fp32 main gradients.
    grad_reduce_in_bf16: bool = False
    # The step's kernels replayed from CUDA graphs (Megatron's --cuda-graph-impl full_iteration):
    # no kernel waits for the host.
    cuda_graphs: bool = False

    @field_validator("recompute_modules")
    @classmethod
    def _modules(cls, values: list[str]) -> list[str]:
        return _one_of(values, RECOMPUTE_MODULES)


class FabricSettings(_Frozen):
    """The scale-out network (simulators/network/_fabric.py); `family` and `nic_gbps` are knobs."""

    family: list[str] = ["rail-optimized"]
    nic_gbps: list[float] | None = None  # default: the catalogue NIC speeds of hardware.gpu
    gpus_per_server: int = Field(default=8, ge=1, le=1024)
    nics_per_server: int = Field(default=8, ge=1, le=1024)
    switch_radix: int = Field(default=64, ge=4, le=4096)
    oversubscription: float = Field(default=1.0, ge=1.0, le=64.0)

    @field_validator("family")
    @classmethod
    def _families(cls, values: list[str]) -> list[str]:
        _non_empty_unique(values)
        for value in values:
            if value not in family_names():
                raise ValueError(f"{value!r} is not allowed; allowed: {', '.join(family_names())}")
        return values

    @field_validator("nic_gbps")
    @classmethod
    def _speeds(cls, values: list[float] | None) -> list[float] | None:
        if values is not None:
            _non_empty_unique(values)
            if not all(0 < v <= MAX_GBPS for v in values):
                raise ValueError(f"{brief(values)} holds a value outside (0, {MAX_GBPS}] Gb/s")
        return values


class CostSettings(_Frozen):
    """Overrides of the price book (dse/cost/prices.yaml); unset fields keep its sourced defaults."""

    cloud_tier: Name = "neocloud"
    usd_per_gpu_hour: dict[Name, Price] = {}  # GPU -> $/GPU-hour in cloud_tier
    server_usd: dict[Name, Price] = {}  # GPU -> one 8-GPU server without scale-out NICs
    nic_usd: dict[Gbps, Price] = {}  # Gb/s -> one NIC
    switch_usd_per_port: dict[Gbps, Price] = {}  # Gb/s -> switch price per port
    link_usd: dict[Gbps, Price] = {}  # Gb/s -> one link with its optics
    server_overhead_watts: float | None = Field(default=None, ge=0, le=1e7)
    switch_watts_per_port: float | None = Field(default=None, ge=0, le=1e5)
    link_watts: float | None = Field(default=None, ge=0, le=1e5)
    pue: float | None = Field(default=None, ge=1, le=10)
    usd_per_kwh: float | None = Field(default=None, ge=0, le=1e3)
    amortisation_years: float | None = Field(default=None, gt=0, le=100)
    utilisation: float | None = Field(default=None, gt=0, le=1)
    grid_kg_co2e_per_kwh: float | None = Field(default=None, ge=0, le=10)

    def overrides(self) -> dict[str, Any]:
        """The price-book entries this spec sets (the GPU rental prices are applied per tier)."""
        return {
            name: value
            for name, value in self.model_dump(exclude={"cloud_tier", "usd_per_gpu_hour"}).items()
            if value not in (None, {})
        }


class Hardware(_Frozen):
    gpu: list[Name] = ["H100-SXM"]
    num_gpus: IntKnob = [8, 16, 32, 64]
    # What a GPU holds beyond the plan's tensors: the CUDA context and the cuBLAS/NCCL workspaces,
    # which live outside PyTorch's caching allocator, and the allocator's fragmentation. 4 GiB is
    # an assumption (no published figure for these together), shown as `reserve` in every
    # memory breakdown; set it to what your stack measures.
    memory_reserve_gib: float = Field(default=4.0, ge=0, le=1024)
    fabric: FabricSettings = FabricSettings()
    calibration: FilePath | None = None
    network_calibration: FilePath | None = None  # `dse validate --calibrate` output: the NIC efficiency
    compute_fraction: float | None = Field(default=None, gt=0, le=1)

    _unique = field_validator("gpu")(_non_empty_unique)

    _counts = field_validator("num_gpus")(_positive_knob)


class TrainingSearch(_Frozen):
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
    zero_stage: list[int] = [1]

    _counts = field_validator("tp", "pp", "cp", "ep", "etp", "vpp", "micro_batch", "global_batch")(_positive_knob)
    _unique = field_validator("sequence_parallel")(_non_empty_unique)

    @field_validator("recompute", "pipeline_split", "schedule", "zero_stage")
    @classmethod
    def _choices(cls, values: list, info) -> list:
        allowed = {
            "recompute": RECOMPUTE_MODES,
            "pipeline_split": PIPELINE_SPLITS,
            "schedule": SCHEDULES,
            "zero_stage": ZERO_STAGES,
        }
        return _one_of(values, allowed[info.field_name])


class ServingSearch(_Frozen):
    """Knobs of an inference study: a pool of `replicas` replicas of tp x pp GPUs, or with
    `disaggregated`, that pool prefills and `decode_replicas` of `decode_tp` GPUs decode."""

    kind: Literal["inference"] = Field(default="inference", exclude=True)
    tp: IntKnob = [1, 2, 4, 8]
    pp: IntKnob = [1]
    replicas: IntKnob = [1, 2, 4]
    scheduler: list[str] = ["sarathi"]
    max_batch_requests: IntKnob = [128]
    max_batch_tokens: IntKnob = [512]
    router: list[str] = ["round_robin"]
    disaggregated: list[bool] = [False]
    decode_tp: IntKnob = [4]
    decode_replicas: IntKnob = [1]

    _counts = field_validator(
        "tp", "pp", "replicas", "max_batch_requests", "max_batch_tokens", "decode_tp", "decode_replicas"
    )(_positive_knob)

    @field_validator("scheduler", "router", "disaggregated")
    @classmethod
    def _choices(cls, values: list, info) -> list:
        allowed = {"scheduler": tuple(SCHEDULERS), "router": tuple(ROUTERS), "disaggregated": (False, True)}
        return _one_of(values, allowed[info.field_name])


class LengthSettings(_Frozen):
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


class ServingSettings(_Frozen):
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
    block_tokens: int = Field(default=16, ge=1, le=2**16)
    memory_fraction: float = Field(default=0.9, gt=0, le=1)
    # Measured operation times in Vidur's profile layout (mlp.csv, attention.csv, all_reduce.csv);
    # each replaces the analytical cost of the operations it covers.
    profile_mlp: FilePath | None = None
    profile_attention: FilePath | None = None
    profile_all_reduce: FilePath | None = None


class PacketFidelity(_Frozen):
    """Re-evaluate the `top` candidates of the analytical front with collective times slowed by
    the packet simulator's congestion factors (every group of the step at once on the fabric),
    messages capped at `message_cap_mb` MB in the packet runs."""

    top: int = Field(default=5, ge=1, le=10_000)
    message_cap_mb: float = Field(default=16.0, gt=0, le=1e6)


class Fidelity(_Frozen):
    packet: PacketFidelity | None = None


class Objective(_Frozen):
    metric: Name
    direction: Literal["minimize", "maximize"] | None = None


class Constraint(_Frozen):
    metric: Name
    max: float | None = None
    min: float | None = None

    @model_validator(mode="after")
    def _one_bound(self) -> Constraint:
        if self.max is None and self.min is None:
            raise ValueError("needs a bound: max or min")
        return self


class Budget(_Frozen):
    trials: int = Field(default=200, ge=1, le=10**7)
    timeout_s: float | None = Field(default=None, gt=0, le=1e9)
    batch_size: int | Literal["auto"] = "auto"

    @field_validator("batch_size", mode="before")
    @classmethod
    def _batch_size(cls, value: Any) -> Any:
        if value == "auto" or (type(value) is int and 1 <= value <= MAX_BATCH):
            return value
        raise ValueError(
            f"{brief(value)} is not allowed; allowed: auto, or a whole number of trials (1 to {MAX_BATCH})"
        )


class Study(_Frozen):
    """A whole study: what to search, for what, within which budget."""

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$", max_length=MAX_NAME)
    mode: Literal["training", "inference"] = "training"
    model: Name | ModelSpec
    training: TrainingSettings = TrainingSettings()
    serving: ServingSettings = ServingSettings()
    hardware: Hardware = Hardware()
    cost: CostSettings = CostSettings()
    search: Annotated[TrainingSearch | ServingSearch, Field(discriminator="kind")] = TrainingSearch()
    objectives: list[Objective] = [
        Objective(metric="tokens_per_s_per_gpu"),
        Objective(metric="usd_per_mtok"),
    ]
    constraints: list[Constraint] = []
    fidelity: Fidelity = Fidelity()
    budget: Budget = Budget()
    sampler: Literal[SAMPLERS] = "auto"  # dse/samplers.py SAMPLER_FACTORIES holds one entry a name
    seed: int = Field(default=0, ge=0, le=2**32 - 1)  # numpy and Optuna seeds are 32-bit
    output: FilePath | None = None
    storage: FilePath | None = None

    @model_validator(mode="before")
    @classmethod
    def _search_of_the_mode(cls, raw: Any) -> Any:
        """The `search` knobs are those of the study's mode."""
        if isinstance(raw, dict):
            search = raw.get("search") or {}
            if isinstance(search, dict):
                raw = {**raw, "search": {**search, "kind": raw.get("mode", "training")}}
            if raw.get("mode") == "inference" and "objectives" not in raw:
                raw["objectives"] = [{"metric": "qps_per_usd_hour"}, {"metric": "ttft_p90_s"}]
        return raw

    @field_validator("objectives", mode="before")
    @classmethod
    def _shorthand(cls, items: Any) -> Any:
        """Accept `- tokens_per_s: maximize` and `- usd_per_mtok` besides full mappings."""
        if not isinstance(items, list):
            return items
        out = []
        for item in items:
            if isinstance(item, str):
                item = {"metric": item}
            elif isinstance(item, dict) and len(item) == 1:
                ((metric, direction),) = item.items()
                if direction in DIRECTIONS:
                    item = {"metric": metric, "direction": direction}
            out.append(item)
        if not out:
            raise ValueError("needs at least one objective")
        return out

    @property
    def output_dir(self) -> Path:
        return Path(self.output) if self.output else Path("reports") / self.name


def load_study(path: str | Path, **overrides: Any) -> Study:
    """Read and validate a spec file; `overrides` replace top-level or dotted fields.

    Only the syntax and field types are checked here; `dse.checks.check_study` checks the
    names and the parallel plans against the catalogues.
    """
    raw = load_yaml(read_text(path, "spec", SPEC_LIMIT), f"spec: {path}")
    if not isinstance(raw, dict):
        raise SpecError(f"spec: {path} must hold a mapping of fields (name, model, ...)")
    for dotted, value in overrides.items():
        if value is None:
            continue
        node = raw
        *parents, leaf = dotted.split(".")
        for depth, key in enumerate(parents):
            node = node.setdefault(key, {})
            if not isinstance(node, dict):
                field = ".".join(parents[: depth + 1])
                raise SpecError(f"{field}: {brief(node)} is not a mapping; allowed: a mapping of fields ({leaf}, ...)")
        node[leaf] = value
    return parse_study(raw)


def parse_study(raw: dict) -> Study:
    """Validate a spec's fields, then bound its search space before anything enumerates it."""
    try:
        study = Study.model_validate(raw)
    except ValidationError as exc:
        raise SpecError(_one_line(exc)) from None
    _check_space_size(study)
    return study


def _check_space_size(study: Study) -> None:
    hardware, search = study.hardware, study.search
    counts = {"gpu": len(hardware.gpu)}
    if study.mode == "training":
        counts |= {"num_gpus": _knob_count(hardware.num_gpus), "fabric": len(hardware.fabric.family)}
        counts["nic_gbps"] = len(hardware.fabric.nic_gbps or [None])  # None: the catalogue speed
    counts |= {name: _knob_count(getattr(search, name)) for name in type(search).model_fields if name != "kind"}
    size = math.prod(counts.values())
    if size > MAX_SPACE:
        factors = " x ".join(f"{name} {n}" for name, n in counts.items() if n > 1)
        raise SpecError(f"search: {size:,} combinations of knob values ({factors}); allowed: at most {MAX_SPACE:,}")


def _knob_count(knob: Any) -> int:
    return knob.count if isinstance(knob, IntRange) else len(knob)


def _one_line(exc: ValidationError) -> str:
    """The most telling validation error as `field.path: what is wrong; allowed: ...`.

    For a union (a knob given as a list or a range, a model given by name or inline) pydantic
    reports every branch; the branch whose error goes deeper than "wrong type", else the one whose
    error lies deepest in the input, is the one the user meant.
    """

    def field_path(err: dict) -> list:
        return [p for i, p in enumerate(err["loc"]) if not _union_tag(err["loc"], i)]

    err = max(exc.errors(), key=lambda e: (not e["type"].endswith("_type"), len(field_path(e))))
    loc = field_path(err)
    path = "".join(
        f"[{p}]" if isinstance(p, int) else f".{p}" if _FIELD_NAME.fullmatch(p) else f"[{brief(p)}]" for p in loc
    )
    path = path.lstrip(".") or "spec"
    kind, msg = err["type"], err["msg"]
    if kind == "extra_forbidden":
        return f"{path}: unknown field; allowed: {', '.join(_allowed_fields(err['loc'][:-1]))}"
    if kind == "missing":
        return f"{path}: required field is missing"
    if kind == "literal_error":
        return f"{path}: {brief(err['input'])} is not allowed; {msg.replace('Input should be', 'allowed:')}"
    if kind == "value_error":
        return f"{path}: {msg.removeprefix('Value error, ')}"
    return f"{path}: {brief(err['input'])}: {msg}"


_FIELD_NAME = re.compile(r"[\w.+-]{1,80}")  # a key quoted in an error path otherwise
_UNION_TAGS = {"list[int]", "IntRange", "str", "constrained-str", "ModelSpec", "list[bool]", "TokenBounds"}
_MODE_TAGS = {"training", "inference"}  # the tag of `search`'s union; elsewhere `training` is a field


def _union_tag(loc: tuple, i: int) -> bool:
    """Whether loc[i] names a union member pydantic adds to the path, not a field."""
    part = loc[i]
    if not isinstance(part, str):
        return False
    return part in _UNION_TAGS or "[" in part or (part in _MODE_TAGS and i > 0 and loc[i - 1] == "search")


def _allowed_fields(loc: list) -> list[str]:
    """Field names of the model found by walking `loc` from Study (through lists and unions)."""
    model: type[BaseModel] = Study
    nested: list[type[BaseModel]] = []
    for i, part in enumerate(loc):
        if isinstance(part, int):
            continue
        tagged = [m for m in nested if m.model_fields.get("kind") and m.model_fields["kind"].default == part]
        if tagged:  # a discriminated union's tag picks its member
            model = tagged[0]
            continue
        if _union_tag(loc, i):
            continue
        nested = _models_in(model.model_fields[part].annotation)
        if not nested:
            break
        model = nested[0]
    return [name for name, info in model.model_fields.items() if not info.exclude]


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in getattr(annotation, "__args__", ()) for m in _models_in(arg)]


__all__ = ["DIRECTIONS", "SAMPLERS", "Study", "knob_values", "load_study", "parse_study"]
