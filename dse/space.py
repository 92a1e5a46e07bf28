"""The search space of a study: knobs, their Optuna distributions, and candidates from params.

Every knob is a distribution, even one with a single value, so trial parameters always hold
the whole candidate. Knobs given as lists become categorical; ranges become integer ranges.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from optuna.distributions import BaseDistribution, CategoricalDistribution, IntDistribution

from dse.checks import ResolvedStudy
from dse.spec import IntRange, knob_values
from simulators.hardware import GpuSpec
from simulators.workload import ParallelPlan, TrainingCandidate, TrainingSystem
from simulators.workload._plan import PlanError

KNOBS = (
    "gpu",
    "num_gpus",
    "tp",
    "pp",
    "micro_batch",
    "global_batch",
    "recompute",
    "sequence_parallel",
    "distributed_optimizer",
)


@dataclass(frozen=True)
class SearchSpace:
    """Knob values of one study and the fixed settings needed to build its candidates."""

    resolved: ResolvedStudy
    distributions: Mapping[str, BaseDistribution]
    values: Mapping[str, tuple]

    @classmethod
    def from_study(cls, resolved: ResolvedStudy) -> SearchSpace:
        study = resolved.study
        knobs: dict[str, Any] = {
            "gpu": [gpu.name for gpu in resolved.gpus],
            "num_gpus": study.hardware.num_gpus,
            **{name: getattr(study.search, name) for name in KNOBS[2:]},
        }
        distributions = {name: _distribution(knob) for name, knob in knobs.items()}
        values = {name: knob_values(knob) for name, knob in knobs.items()}
        return cls(resolved, distributions, values)

    @property
    def size(self) -> int:
        """Number of distinct candidates (valid or not)."""
        return math.prod(len(v) for v in self.values.values())

    def grid(self) -> dict[str, list]:
        return {name: list(values) for name, values in self.values.items()}

    def gpu(self, name: str) -> GpuSpec:
        return next(g for g in self.resolved.gpus if g.name == name)

    def candidate(self, params: Mapping[str, Any]) -> TrainingCandidate:
        """The training candidate for one trial's params; PlanError if the plan cannot run."""
        settings = self.resolved.study.training
        n, tp, pp = params["num_gpus"], params["tp"], params["pp"]
        if n % (tp * pp):
            raise PlanError(f"num_gpus={n} is not a multiple of tp*pp={tp}*{pp}")
        plan = ParallelPlan(
            tp=tp,
            pp=pp,
            dp=n // (tp * pp),
            micro_batch=params["micro_batch"],
            global_batch=params["global_batch"],
            seq_len=settings.seq_len,
            recompute=params["recompute"],
            sequence_parallel=params["sequence_parallel"] and tp > 1,
            distributed_optimizer=params["distributed_optimizer"],
            precision=settings.precision,
        )
        system = TrainingSystem(self.gpu(params["gpu"]), n, self.resolved.study.hardware.memory_reserve_gb)
        return TrainingCandidate(self.resolved.model, system, plan)


def _distribution(knob: Any) -> BaseDistribution:
    if isinstance(knob, IntRange):
        return IntDistribution(knob.low, knob.high, step=knob.step)
    return CategoricalDistribution(list(knob))


def params_key(params: Mapping[str, Any]) -> tuple:
    """A hashable identity of a candidate: equal params, equal key."""
    return tuple((name, params[name]) for name in KNOBS)
