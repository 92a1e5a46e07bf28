"""The spec's building blocks: the stated ranges, name and path types, the frozen strict base
model, and knobs (a list of values or an integer range) with their validators."""

from __future__ import annotations

import math
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    Strict,
    model_validator,
)

from dse.spec.inputs import brief

SAMPLERS = ("auto", "tpe", "nsga2", "random", "refine", "grid", "exhaustive")

# Stated ranges: GPUs, parallel degrees, batch sizes and replicas are counts of 1..MAX_COUNT; a
# knob holds at most MAX_KNOB_VALUES values and the search space at most MAX_SPACE combinations
# of them (the shipped specs hold at most 28,800; the exact mode's target of 10^7 plans needs more
# combinations than plans, benchmarks/exhaustive.py --scale 10m), so every check before the first
# trial is a bounded loop; a name has at most MAX_NAME characters and a path MAX_PATH.
MAX_COUNT = 2**20
MAX_KNOB_VALUES = 256
MAX_SPACE = 2 * 10**7
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


class Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True, allow_inf_nan=False)


class IntRange(Frozen):
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


def non_empty_unique(values: list) -> list:
    if not values:
        raise ValueError("needs at least one value")
    if len(values) > MAX_KNOB_VALUES:
        raise ValueError(f"{len(values):,} values; allowed: at most {MAX_KNOB_VALUES}")
    if len(set(values)) != len(values):
        raise ValueError(f"{brief(values)} repeats a value")
    return values


def positive_knob(knob: Any) -> Any:
    """A knob given as a list: non-empty, no repeats, every value a count of 1..MAX_COUNT (a range checks itself)."""
    if isinstance(knob, list):
        non_empty_unique(knob)
        if any(not 1 <= v <= MAX_COUNT for v in knob):
            raise ValueError(f"{brief(knob)} holds a value outside 1..{MAX_COUNT}")
    return knob


def one_of(values: list, allowed) -> list:
    """A list of choices: non-empty, no repeats, each one of `allowed`."""
    non_empty_unique(values)
    for value in values:
        if value not in allowed:
            raise ValueError(f"{brief(value)} is not allowed; allowed: {', '.join(map(str, allowed))}")
    return values


class TokenBounds(Frozen):
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
