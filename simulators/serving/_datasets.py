"""Request-length distributions of public serving benchmarks, as a catalogue (datasets.yaml).

Why: a published serving measurement (MLPerf Inference's Server runs) draws its requests from a
named data set whose per-request lengths are not shipped; replaying it needs the set's length
distribution, filled from the statistics its owners publish. Each row states its source and what
it assumes where no source gave a figure, so a result built on it can say so (STYLE 5).
"""

from __future__ import annotations

from functools import cache

from pydantic import BaseModel, ConfigDict, Field, model_validator

from simulators._registry import Registry, load_catalog
from simulators.serving._lengths import LengthDist, geometric, uniform


class _Uniform(BaseModel):
    model_config = ConfigDict(extra="forbid")
    low: int = Field(ge=1)
    high: int = Field(ge=1)


class _Geometric(_Uniform):
    mean: float = Field(gt=0)


class _Side(BaseModel):
    """One of: uniform (bounds only published) or geometric (mean and bounds published)."""

    model_config = ConfigDict(extra="forbid")
    uniform: _Uniform | None = None
    geometric: _Geometric | None = None

    @model_validator(mode="after")
    def _one(self) -> _Side:
        if (self.uniform is None) == (self.geometric is None):
            raise ValueError("give exactly one of uniform, geometric")
        self.dist()  # the distribution's own checks (bounds, mean inside them) at load
        return self

    def dist(self) -> LengthDist:
        if self.uniform is not None:
            return uniform(self.uniform.low, self.uniform.high)
        return geometric(self.geometric.mean, self.geometric.low, self.geometric.high)


class Dataset(BaseModel):
    """A benchmark's request lengths: `prompt` and `output` distributions, with provenance."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str
    aliases: tuple[str, ...] = ()
    samples: int = Field(ge=1)
    prompt: _Side
    output: _Side
    source: str
    assumption: str

    def lengths(self) -> tuple[LengthDist, LengthDist]:
        """(prompt, output) distributions for `make_requests`."""
        return self.prompt.dist(), self.output.dist()

    @property
    def bounds_only(self) -> list[str]:
        """The sides ("prompt", "output") whose sources give only bounds, no mean: a replay on
        them rests on the uniform assumption, not on the set's lengths."""
        return [name for name, side in (("prompt", self.prompt), ("output", self.output)) if side.uniform is not None]


@cache
def datasets() -> Registry[Dataset]:
    """All rows of datasets.yaml, keyed by name and aliases (the names sources print)."""
    return load_catalog(__package__, "datasets.yaml", Dataset, "dataset")


def get_dataset(name: str, field: str = "dataset") -> Dataset:
    """The catalogued data set `name`; a one-line SpecError naming `field` and the sets otherwise."""
    return datasets().choice(name, field)
