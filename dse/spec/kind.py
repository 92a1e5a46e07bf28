"""What differs between a training study and an inference study: one `StudyKind` per mode.

The spec's `mode` names a kind; everything that depends on it (which knobs are searched, the
metric vocabulary, the checks before any trial, how a batch of candidates is simulated and
costed) is asked of the kind, so no module tests the mode by name. Kinds register beside their
definitions (dse/study/training.py, dse/study/inference.py); the contract suite
tests/dse/study/test_kind_contract.py runs every registered kind.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from simulators._registry import Registry

if TYPE_CHECKING:
    from dse.evaluation.outcome import Outcome
    from dse.evaluation.space import SearchSpace
    from dse.spec.metrics import Metric
    from dse.spec.resolved import ResolvedStudy
    from dse.spec.study import Study
    from simulators.hardware import GpuSpec
    from simulators.models import ModelSpec
    from simulators.network import Network


class StudyKind(ABC):
    """A study mode: its knobs, metrics and traits, and the steps that differ by mode.

    Traits are what reports and checks read (never the mode's name): `fits_constraint` is the
    simulator's own feasibility constraint; `derived_columns` are trial-table columns computed
    from the knobs, `nullable_columns` integer columns that may be empty; `has_step_breakdowns`
    whether a candidate's step has time and memory breakdowns to show; `replays_collectives`
    whether its collectives can be re-run at packet level and on real NICs; `slowed_kernels`
    what the fitted compute fraction slows (the run's header says it).
    """

    name: ClassVar[str]
    knobs: ClassVar[tuple[str, ...]]
    shown_metrics: ClassVar[tuple[str, ...]]
    fits_constraint: ClassVar[str]
    derived_columns: ClassVar[tuple[str, ...]] = ()
    nullable_columns: ClassVar[tuple[str, ...]] = ()
    has_step_breakdowns: ClassVar[bool]
    replays_collectives: ClassVar[bool]
    slowed_kernels: ClassVar[str] = "kernels"
    settings_section: ClassVar[str]  # the spec section holding the kind's settings (`training`, `serving`)

    @property
    @abstractmethod
    def metrics(self) -> Registry[Metric]:
        """The metric vocabulary objectives and constraints name."""

    @abstractmethod
    def check(self, study: Study, model: ModelSpec, gpus: tuple[GpuSpec, ...]) -> None:
        """SpecError naming the field when a knob value can be part of no valid plan."""

    @abstractmethod
    def knob_lists(self, resolved: ResolvedStudy) -> dict[str, Any]:
        """Each knob's values as the spec gives them (a list or an IntRange), in `knobs` order."""

    @abstractmethod
    def describe(self, study: Study) -> str:
        """What one candidate runs, in a few words for the study's header."""

    @abstractmethod
    def work(self, study: Study) -> dict[str, Any]:
        """The settings that change a simulation (the shared cache keys candidates by them)."""

    @abstractmethod
    def canonical_params(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """The params with knobs that have no effect set to one value."""

    def represents_its_plan(self, params: Mapping[str, Any], values: Mapping[str, tuple]) -> bool:
        """Whether `params`, one combination of the knob `values`, is the one that stands for its
        plan: each knob without effect at the value `canonical_params` gives it where that is
        one of its choices, else at its first choice. Exactly one combination of each plan passes
        (the knobs a plan's identity overrides depend only on knobs it keeps), so a space's
        distinct plans are enumerated without remembering the keys already met."""
        canonical = self.canonical_params(params)
        if canonical == params:  # nothing overridden (one C-level comparison: asked for every combination)
            return True
        return all(
            canonical[name] == value or (canonical[name] not in values[name] and value == values[name][0])
            for name, value in params.items()
        )

    def params_key(self, params: Mapping[str, Any]) -> tuple:
        """A hashable identity of the plan the params describe: params that differ only in knobs
        with no effect give the same key, so the plan is simulated once and listed once."""
        canonical = self.canonical_params(params)
        return tuple((name, canonical[name]) for name in self.knobs)

    def step_details(
        self, space: SearchSpace, batch: Sequence[Mapping[str, Any]], network: Network | None = None
    ) -> list[dict[str, float]]:
        """Each candidate's step broken down for the reports (`breakdown_*_s` columns adding up
        to the step time, `memory_*_gib` to the memory per GPU, `memory_host_*_gib` apart: offloaded to
        host memory), on `network` if given; a kind without `has_step_breakdowns` has none to give."""
        return [{} for _ in batch]

    def derived(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """The `derived_columns` of one trial."""
        return {}

    # Metrics that only rise ("rises") or only fall ("falls") with the step time, all else of
    # the plan fixed, and those that do so only while the plan's spare servers are fixed (not
    # `auto`, whose choice moves with the step): what `step_floors` outcomes bound.
    step_monotone: ClassVar[Mapping[str, str]] = {}
    step_monotone_fixed_spares: ClassVar[Mapping[str, str]] = {}

    def step_floors(
        self, space: SearchSpace, batch: Sequence[Mapping[str, Any]], owned: dict
    ) -> tuple[list[Outcome | None], list[Outcome | None]]:
        """Per plan, either its outcome where it is known without simulating (a plan that cannot
        be built or does not fit, as `simulate_many` with `feasible_only` gives it), or an outcome
        with the step at a lower bound of what simulating it gives and the study's prices of it
        (`owned`: see `costs`), whose `step_monotone` metrics are bounds; None where neither (a
        kind without such a bound)."""
        return [None] * len(batch), [None] * len(batch)

    @abstractmethod
    def check_runnable(self, space: SearchSpace, limit: int) -> None:
        """SpecError when no plan of the space can run at all (see SearchSpace.check_runnable)."""

    @abstractmethod
    def simulate_many(
        self,
        space: SearchSpace,
        batch: Sequence[Mapping[str, Any]],
        network: Network | None,
        feasible_only: bool = False,
    ) -> list[Outcome]:
        """Outcomes in order, before the study's prices and own constraints. `feasible_only`: a
        plan found infeasible before it is simulated may come back without metrics, with its
        reason (the exact mode needs only the feasible plans' numbers)."""

    @abstractmethod
    def costs(
        self, space: SearchSpace, params: Mapping[str, Any], metrics: Mapping[str, float], owned: dict
    ) -> dict[str, float]:
        """The cost metrics of one simulated candidate; `owned` caches cluster ownership."""


STUDY_KINDS: Registry[StudyKind] = Registry("study mode")


def register(kind: StudyKind) -> None:
    """Add `kind` to STUDY_KINDS (each kind's module calls this beside its definition)."""
    STUDY_KINDS.register(kind.name, kind)
