"""The study spec: what a user writes in YAML, validated into frozen pydantic models.

Every field has a default so a ten-line spec works; `search_spaces/README.md` documents each.
Errors come out as one SpecError line naming the field path and what is allowed. Types are strict
(no bool or string taken for a number), every float is finite and every count has a stated range,
and the size of the search space is checked before anything enumerates it: a spec may come from
anyone, and a knob of 10^12 values must be a one-line error, not a MemoryError.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from dse.errors import SpecError
from dse.spec.catalogs import is_model_file
from dse.spec.errors_text import one_line
from dse.spec.fields import MAX_BATCH, MAX_NAME, MAX_SPACE, SAMPLERS, FilePath, Frozen, IntRange, Name
from dse.spec.hardware import CostSettings, Hardware
from dse.spec.inputs import SPEC_LIMIT, brief, load_yaml, read_text
from dse.spec.metrics import DIRECTIONS
from dse.spec.reliability import ReliabilitySettings
from dse.spec.serving import ServingSearch, ServingSettings
from dse.spec.training import TrainingSearch, TrainingSettings
from simulators.models import ModelSpec

# The search knobs of each study mode (dse/spec/kind.py: a mode's StudyKind owns the rest).
SEARCH_OF_MODE = {model.model_fields["kind"].default: model for model in (TrainingSearch, ServingSearch)}
MODES = tuple(SEARCH_OF_MODE)


class LevelSettings(Frozen):
    """One rung of the fidelity ladder above the analytical model: at most `top` candidates are
    promoted to it (the best of the level below and their neighbourhood, by non-dominated
    sorting), evaluated until `budget_s` seconds of this run's wall clock are spent at the level
    (a resumed run has what an earlier one left), their collectives' messages capped at
    `message_cap_mb` MB in the level's runs."""

    top: int = Field(ge=1, le=10_000)
    budget_s: float = Field(gt=0, le=1e7)
    message_cap_mb: float = Field(gt=0, le=1e6)

    def options(self) -> dict[str, Any]:
        """The level's own settings (beyond top, budget and cap; unset ones left to the
        simulator's defaults), for simulators.fidelity."""
        return self.model_dump(exclude=set(LevelSettings.model_fields), exclude_none=True)


class FlowFidelity(LevelSettings):
    """The step's concurrent flows as fluids sharing the fabric's links by `model`
    (simulators.flow.MODELS): `fifo`, queues that hold what senders at line rate send (what the
    packet level's RoCE fabric does on the capped messages of a ladder, DCQCN or not), or
    `max_min`, fair rates without queues (a transport that keeps queues short)."""

    top: int = Field(default=24, ge=1, le=10_000)
    budget_s: float = Field(default=60.0, gt=0, le=1e7)
    message_cap_mb: float = Field(default=16.0, gt=0, le=1e6)
    model: Literal["fifo", "max_min"] = "fifo"


class PacketFidelity(LevelSettings):
    """Per-packet queues with PFC, ECN and `congestion_control` (simulators.packet
    CONGESTION_CONTROLS) on; each link loses a frame with chance `loss_rate`, and the NICs
    recover by `loss_recovery` with a `retransmit_timeout_s` (simulators.packet.RoceSettings)."""

    top: int = Field(default=4, ge=1, le=10_000)
    budget_s: float = Field(default=120.0, gt=0, le=1e7)
    message_cap_mb: float = Field(default=2.0, gt=0, le=1e6)
    congestion_control: Name = "dcqcn"
    pfc: bool = True
    ecn: bool = True
    loss_rate: float = Field(default=0.0, ge=0, lt=1)
    loss_recovery: Literal["go_back_n", "selective_repeat", "none"] | None = None  # None: the NICs' own
    retransmit_timeout_s: float | None = Field(default=None, ge=1e-12, lt=1e3)  # None: the NICs' (4.29 s)


class Fidelity(Frozen):
    """The ladder above the analytical model, climbed by `dse search` after the analytical
    search, on by default where the mode has collectives to re-price (training). Each level field
    names a level of simulators.fidelity.LEVELS, null to skip it (the contract suite
    tests/simulators/fidelity/test_level_contract.py checks the names); `validate_top` is how many
    of the final front's candidates have their collectives replayed with real traffic at the end."""

    flow: FlowFidelity | None = FlowFidelity()
    packet: PacketFidelity | None = PacketFidelity()
    validate_top: int = Field(default=0, ge=0, le=1000)

    def levels(self) -> list[tuple[str, LevelSettings]]:
        """The levels to climb, cheapest first, with their settings."""
        return [(name, getattr(self, name)) for name in LEVEL_FIELDS if getattr(self, name) is not None]

    def up_to(self, level: str, field: str = "--fidelity") -> Fidelity:
        """The ladder climbed no higher than `level` (`analytical`: none of it); the levels above
        are switched off, so the saved spec.yaml says what ran."""
        allowed = ("analytical", *LEVEL_FIELDS)
        if level not in allowed:
            raise SpecError(f"{field}: {level!r} is not a fidelity level; allowed: {', '.join(allowed)}")
        above = LEVEL_FIELDS[allowed.index(level) :]
        return self.model_copy(update=dict.fromkeys(above))


LEVEL_FIELDS = ("flow", "packet")


class Objective(Frozen):
    metric: Name
    direction: Literal["minimize", "maximize"] | None = None


class Constraint(Frozen):
    metric: Name
    max: float | None = None
    min: float | None = None

    @model_validator(mode="after")
    def _one_bound(self) -> Constraint:
        if self.max is None and self.min is None:
            raise ValueError("needs a bound: max or min")
        return self


class Budget(Frozen):
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


class Study(Frozen):
    """A whole study: what to search, for what, within which budget."""

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$", max_length=MAX_NAME)
    mode: Literal[MODES] = "training"
    model: Name | ModelSpec  # a zoo name, a YAML file of one model (*.yaml), or the fields inline
    training: TrainingSettings = TrainingSettings()
    serving: ServingSettings = ServingSettings()
    hardware: Hardware = Hardware()
    cost: CostSettings = CostSettings()
    reliability: ReliabilitySettings = ReliabilitySettings()  # training: failures and checkpoints
    search: Annotated[TrainingSearch | ServingSearch, Field(discriminator="kind")] = TrainingSearch()
    objectives: list[Objective]  # the mode's DEFAULT_OBJECTIVES when the spec gives none
    constraints: list[Constraint] = []
    fidelity: Fidelity = Fidelity()
    budget: Budget = Budget()
    sampler: Literal[SAMPLERS] = "auto"  # dse/search/samplers.py SAMPLER_FACTORIES holds one entry a name
    seed: int = Field(default=0, ge=0, le=2**32 - 1)  # numpy and Optuna seeds are 32-bit
    output: FilePath | None = None
    storage: FilePath | None = None

    @model_validator(mode="before")
    @classmethod
    def _search_of_the_mode(cls, raw: Any) -> Any:
        """The `search` knobs, and the objectives a spec leaves out, are those of the study's mode."""
        if isinstance(raw, dict):
            mode = raw.get("mode", cls.model_fields["mode"].default)
            search = raw.get("search") or {}
            if isinstance(search, dict):
                raw = {**raw, "search": {**search, "kind": mode}}
            if "objectives" not in raw and isinstance(mode, str) and mode in SEARCH_OF_MODE:
                raw["objectives"] = [dict(o) for o in SEARCH_OF_MODE[mode].DEFAULT_OBJECTIVES]
            climbs = SEARCH_OF_MODE.get(mode, TrainingSearch).CLIMBS_LADDER if isinstance(mode, str) else True
            fidelity = raw.get("fidelity", {})
            if not climbs and isinstance(fidelity, dict):  # the levels are on only where they apply
                raw["fidelity"] = {**dict.fromkeys(LEVEL_FIELDS), **fidelity}
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

    Only the syntax and field types are checked here; `dse.study.resolve.check_study` checks the
    names and the parallel plans against the catalogues.
    """
    raw = load_yaml(read_text(path, "spec", SPEC_LIMIT), f"spec: {path}")
    if not isinstance(raw, dict):
        raise SpecError(f"spec: {path} must hold a mapping of fields (name, model, ...)")
    _anchor_catalog_paths(raw, Path(path).parent)
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


def _anchor_catalog_paths(raw: dict, base: Path) -> None:
    """The catalogue files a spec names (`hardware.gpu_catalog`, `cost.price_book`, a `model`
    file) are relative to the spec's directory; made absolute, so the saved spec.yaml of a study
    directory still finds them. Values of the wrong type are left to the validation."""
    for section, field in (("hardware", "gpu_catalog"), ("cost", "price_book"), (None, "model")):
        node = raw if section is None else raw.get(section)
        value = node.get(field) if isinstance(node, dict) else None
        if isinstance(value, str) and (section is not None or is_model_file(value)):
            node[field] = str((base / value).absolute())


def parse_study(raw: dict) -> Study:
    """Validate a spec's fields, then bound its search space before anything enumerates it."""
    try:
        study = Study.model_validate(raw)
    except ValidationError as exc:
        raise SpecError(one_line(exc, Study)) from None
    _check_space_size(study)
    return study


def _check_space_size(study: Study) -> None:
    hardware, search = study.hardware, study.search
    counts = {"gpu": len(hardware.gpu)}
    if search.SEARCHES_HARDWARE:
        counts |= {"num_gpus": _knob_count(hardware.num_gpus), "fabric": len(hardware.fabric.family)}
        counts["nic_gbps"] = len(hardware.fabric.nic_gbps or [None])  # None: the catalogue speed
    counts |= {name: _knob_count(getattr(search, name)) for name in type(search).model_fields if name != "kind"}
    size = math.prod(counts.values())
    if size > MAX_SPACE:
        factors = " x ".join(f"{name} {n}" for name, n in counts.items() if n > 1)
        raise SpecError(f"search: {size:,} combinations of knob values ({factors}); allowed: at most {MAX_SPACE:,}")


def _knob_count(knob: Any) -> int:
    return knob.count if isinstance(knob, IntRange) else len(knob)


__all__ = ["MODES", "Study", "load_study", "parse_study"]
