"""The inference study kind: a deployment serving a request stream, costed per query and token."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from dse.errors import PlanError, SpecError
from dse.evaluation.outcome import PLAN_VALID, Outcome, crashed, invalid
from dse.evaluation.serving import serve, serving_costs
from dse.evaluation.space import SERVING_KNOBS, SearchSpace
from dse.spec.kind import StudyKind, register
from dse.spec.metrics import SERVING_METRICS
from dse.spec.resolved import ResolvedStudy
from dse.spec.study import Study
from dse.study.serving_checks import check_serving
from simulators.hardware import GpuSpec
from simulators.models import ModelSpec
from simulators.network import Network


class InferenceKind(StudyKind):
    name = "inference"
    knobs = SERVING_KNOBS
    shown_metrics = ("num_gpus", "mfu")
    settings_section = "serving"
    fits_constraint = "slo_met"
    nullable_columns = ("decode_tp", "decode_replicas")  # unused without disaggregation
    has_step_breakdowns = False
    replays_collectives = False
    slowed_kernels = "compute-bound kernels"  # GpuSpec.sustaining: HBM-bound ones keep their speed

    @property
    def metrics(self):
        return SERVING_METRICS

    def check(self, study: Study, model: ModelSpec, gpus: tuple[GpuSpec, ...]) -> None:
        check_serving(study, model, gpus)

    def knob_lists(self, resolved: ResolvedStudy) -> dict[str, Any]:
        search = resolved.study.search
        gpus = [gpu.name for gpu in resolved.gpus]
        return {"gpu": gpus, **{name: getattr(search, name) for name in SERVING_KNOBS[1:]}}

    def describe(self, study: Study) -> str:
        serving = study.serving
        rate = f"at {serving.qps:g} QPS" if serving.qps else "capacity under the SLO"
        parts = [f"{serving.requests} requests per run", rate, serving.precision]
        if not serving.qps:
            parts.append(f"latency also at {serving.latency_load:.0%} of capacity")
        if serving.prefix_share:
            parts.append(f"{serving.prefix_share:.0%} of each prompt a shared prefix")
        if serving.draft_model:
            parts.append(f"draft model {serving.draft_model}")
        if serving.expert_imbalance != 1.0:
            parts.append(f"busiest expert-parallel GPU at {serving.expert_imbalance:g}x the mean load")
        return ", ".join(parts)

    def work(self, study: Study) -> dict[str, Any]:
        return {"work": study.serving.model_dump(mode="json"), "seed": study.seed}  # the seed draws the stream

    def check_runnable(self, space: SearchSpace, limit: int) -> None:
        """Nothing to try: every knob value that passed `check` builds a deployment; whether it
        meets the SLO is each trial's verdict."""

    def canonical_params(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """The decode pool of a deployment that is not disaggregated, and the acceptance rate
        of one that does not speculate, have no effect (None)."""
        canonical = dict(params)
        if not canonical["disaggregated"]:
            canonical["decode_tp"] = canonical["decode_replicas"] = None
        if not canonical["speculative_tokens"]:
            canonical["speculative_acceptance"] = None
        return canonical

    def simulate_many(
        self,
        space: SearchSpace,
        batch: Sequence[Mapping[str, Any]],
        network: Network | None,
        feasible_only: bool = False,
    ) -> list[Outcome]:
        """Each candidate's capacity (or the fixed rate) on the study's request stream (whether
        it meets its SLOs is known only once served, so `feasible_only` changes nothing)."""
        return [self._serve(space.resolved, params) for params in batch]

    def _serve(self, resolved: ResolvedStudy, params: Mapping[str, Any]) -> Outcome:
        try:
            metrics, slo_excess, reason = serve(resolved, params)
        except (PlanError, SpecError) as exc:
            return invalid(exc, self.fits_constraint)
        except Exception as exc:
            return crashed(exc)
        return Outcome(metrics, {PLAN_VALID: 0.0, self.fits_constraint: slo_excess}, reason)

    def costs(
        self, space: SearchSpace, params: Mapping[str, Any], metrics: Mapping[str, float], owned: dict
    ) -> dict[str, float]:
        return serving_costs(space.resolved, params, metrics)


register(InferenceKind())
