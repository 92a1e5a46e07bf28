"""Which Optuna sampler a study runs, from the spec's `sampler` and the size of its space."""

from __future__ import annotations

import itertools
import warnings
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import optuna
from optuna._transform import _SearchSpaceTransform
from optuna.distributions import BaseDistribution, CategoricalDistribution, IntDistribution, _get_single_value
from optuna.samplers._tpe.sampler import _split_trials, default_gamma, default_gamma_multiobjective
from optuna.trial import FrozenTrial, TrialState

from dse.errors import SpecError
from dse.evaluation.space import SearchSpace
from dse.search.pareto import pareto_mask

GRID_LIMIT = 100_000
# Share of each TPE batch drawn at random (after the start-up): without it one seed of eight
# settled on 91 % of the exact hypervolume of a 228k-plan space (benchmarks/RESULTS.md)
EXPLORE = 0.1
PlanKey = Callable[[Mapping[str, Any]], tuple]  # the identity of the plan a trial's params describe


def sampler_name(name: str, space: SearchSpace, trials: int) -> str:
    """The sampler a spec's `sampler` means; `auto` enumerates spaces no larger than the budget."""
    if name == "auto":
        return "grid" if space.size <= trials else "tpe"
    if name == "grid" and space.size > GRID_LIMIT:
        others = ", ".join(["auto", *(n for n in SAMPLER_FACTORIES if n != "grid")])
        raise SpecError(
            f"sampler: grid would enumerate {space.size} candidates (limit {GRID_LIMIT}); "
            f"allowed for this space: {others}"
        )
    return name


def make_sampler(name: str, seed: int, key: PlanKey | None = None) -> optuna.samplers.BaseSampler:
    """The Optuna sampler for a resolved sampler name (SAMPLER_FACTORIES); an unknown name is
    one line naming the allowed ones, never a silent fallback. `key` is the identity of a plan
    (the study kind's params_key); by default params are compared as they are."""
    try:
        factory = SAMPLER_FACTORIES[name]
    except KeyError:
        raise SpecError(f"sampler: {name!r} is not allowed; allowed: {', '.join(SAMPLER_FACTORIES)}") from None
    return factory(seed, key or _plain_key)


class BatchRandomSampler(optuna.samplers.RandomSampler):
    """Optuna's random sampler that also proposes a whole batch at once (`propose`), one
    uniform draw per trial over the transformed space instead of one call per knob."""

    def propose(self, study: optuna.Study, distributions: dict[str, BaseDistribution], count: int) -> list[dict]:
        space = {k: d for k, d in distributions.items() if not d.single()}
        fixed = {k: _get_single_value(d) for k, d in distributions.items() if d.single()}
        if not space:
            return [dict(fixed) for _ in range(count)]
        transform = _SearchSpaceTransform(space)
        draws = self._rng.rng.uniform(
            transform.bounds[:, 0], transform.bounds[:, 1], size=(count, len(transform.bounds))
        )
        return [{**fixed, **transform.untransform(row)} for row in draws]


class BatchTPESampler(optuna.samplers.TPESampler):
    """Multivariate TPE that proposes a whole batch from one fit (`propose`).

    Optuna's constant liar refits both Parzen estimators for every ask, over every trial (the
    batch's running ones added to the worse group), which cost ~5 ms a trial at 600 trials and
    grows with the study. Here the finished trials are split and fitted once per batch; the
    better group's estimator draws `n_ei_candidates` candidates per trial of the batch (each
    distinct draw ranked once), and the batch is the `count` distinct plans (identity by
    `key`) of highest acquisition (log l(x) - log g(x), as TPE ranks its candidates); when
    fewer are distinct, the best are repeated, as TPE repeats a plan it rates best. The last
    `explore` share of the batch is drawn at random instead: the spread the liar gave, which
    one fit per batch lacks. Before `n_startup_trials` trials are finished the batch is
    random, as TPE's start-up is. `study.ask` still runs Optuna's own per-trial TPE with the
    liar (the engine asks that way only for enqueued trials).
    """

    def __init__(self, seed: int | None = None, *, key: PlanKey | None = None, explore: float = EXPLORE) -> None:
        # Multivariate TPE with the constant liar (`study.ask` asks before any is told); both
        # are marked experimental by Optuna, whose warning says nothing to a dse user.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            super().__init__(seed=seed, multivariate=True, constant_liar=True)
        self._key = key or _plain_key
        self._explore = explore
        self._batch_random = BatchRandomSampler(seed=seed)

    def reseed_rng(self) -> None:
        super().reseed_rng()
        self._batch_random.reseed_rng()

    def propose(self, study: optuna.Study, distributions: dict[str, BaseDistribution], count: int) -> list[dict]:
        trials = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED))
        space = {k: d for k, d in distributions.items() if not d.single()}
        if len(trials) < self._n_startup_trials or not space:
            return self._batch_random.propose(study, distributions, count)
        trials = [t for t in trials if space.keys() <= t.params.keys()]
        gamma = self._gamma or (default_gamma if len(study.directions) <= 1 else default_gamma_multiobjective)
        below, above = _split_trials(study, trials, gamma(len(trials)))
        mpe_below = self._build_parzen_estimator(study, space, below, handle_below=True)
        mpe_above = self._build_parzen_estimator(study, space, above, handle_below=False)
        drawn = mpe_below.sample(self._rng.rng, self._n_ei_candidates * count)
        # a discrete space's draws repeat (768 draws, ~150 distinct at 600 trials): rank each once
        rows = np.stack([drawn[k] for k in space], axis=1)
        _, first = np.unique(rows, axis=0, return_index=True)
        samples = {k: rows[np.sort(first), j] for j, k in enumerate(space)}
        acquisition = self._compute_acquisition_func(samples, mpe_below, mpe_above)
        fixed = {k: _get_single_value(d) for k, d in distributions.items() if d.single()}
        chosen: dict[tuple, dict] = {}
        for i in np.argsort(-acquisition, kind="stable"):
            params = {**fixed, **{k: d.to_external_repr(samples[k][i]) for k, d in space.items()}}
            chosen.setdefault(self._key(params), params)
            if len(chosen) == count:
                break
        best = list(chosen.values())
        batch = [best[i % len(best)] for i in range(count)]
        wild = int(self._explore * count)
        return batch[: count - wild] + (self._batch_random.propose(study, distributions, wild) if wild else [])


def _plain_key(params: Mapping[str, Any]) -> tuple:
    return tuple(sorted(params.items()))


class RefineSampler(optuna.samplers.BaseSampler):
    """Multivariate TPE plus local refinement around the feasible Pareto front.

    TPE finds the regions of the front but, on a discrete space, keeps proposing from its
    density model and is slow to try the plan one step away from a good one (one more
    micro-batch, the next tp), which is where the last few percent of hypervolume lie. Once
    `start` trials are finished, each trial is with probability `probability` a neighbour of a
    feasible non-dominated finished trial (the anchor): one knob, or with probability
    `two_knobs` two knobs, moved to the adjacent value of its ordered choices (categorical
    lists in spec order, integer ranges by their step); the anchor is a random front member
    with a fresh move of that size, else the other size is tried. Two-knob moves reach plans
    that a coupling between knobs (tp*pp must divide the GPUs) hides from single steps. A neighbour
    already asked (finished, failed, or running in this batch; identity by `key`, so plans that
    differ only in knobs without effect count as one) is never proposed again; when no front
    member has a fresh neighbour, TPE proposes. Deterministic for a seed, like TPE.
    """

    def __init__(
        self,
        seed: int | None = None,
        *,
        probability: float = 0.5,
        two_knobs: float = 0.25,
        start: int = 10,
        key: PlanKey = _plain_key,
    ) -> None:
        self._tpe = BatchTPESampler(seed, key=key)  # its per-trial TPE: refine asks one trial at a time
        self._rng = np.random.default_rng(seed)
        self._probability, self._two_knobs, self._start, self._key = probability, two_knobs, start, key
        self._planned: dict[int, tuple[dict[str, Any], dict[str, BaseDistribution]]] = {}

    def reseed_rng(self) -> None:
        self._tpe.reseed_rng()
        self._rng = np.random.default_rng()

    def before_trial(self, study: optuna.Study, trial: FrozenTrial) -> None:
        """Decide here, once per trial, whether it refines: its params are then the neighbour's."""
        self._tpe.before_trial(study, trial)
        trials = study.get_trials(deepcopy=False)
        finished = sum(t.state == TrialState.COMPLETE for t in trials)
        if finished >= self._start and self._rng.random() < self._probability:
            planned = self._neighbour(study, trials)
            if planned is not None:
                self._planned[trial.number] = planned

    def infer_relative_search_space(self, study, trial) -> dict[str, BaseDistribution]:
        return self._tpe.infer_relative_search_space(study, trial)

    def sample_relative(self, study, trial, search_space) -> dict[str, Any]:
        if trial.number not in self._planned:
            return self._tpe.sample_relative(study, trial, search_space)
        params, distributions = self._planned[trial.number]
        return {k: params[k] for k, d in search_space.items() if distributions.get(k) == d}

    def sample_independent(self, study, trial, param_name, param_distribution) -> Any:
        params, distributions = self._planned.get(trial.number, ({}, {}))
        if distributions.get(param_name) == param_distribution:
            return params[param_name]
        return self._tpe.sample_independent(study, trial, param_name, param_distribution)

    def after_trial(self, study, trial, state, values) -> None:
        self._planned.pop(trial.number, None)
        self._tpe.after_trial(study, trial, state, values)

    def _neighbour(self, study: optuna.Study, trials: list[FrozenTrial]) -> tuple[dict, dict] | None:
        """A fresh neighbour of a random front member, or None when the front has none left."""
        seen = {self._key(t.params) for t in trials if t.params}
        order = (2, 1) if self._rng.random() < self._two_knobs else (1, 2)
        front = _front(study, trials)
        anchors = [front[i] for i in self._rng.permutation(len(front))]
        for count in order:
            for anchor in anchors:
                fresh = [p for p in _moves(anchor.params, anchor.distributions, count) if self._key(p) not in seen]
                if fresh:
                    return fresh[self._rng.integers(len(fresh))], dict(anchor.distributions)
        return None


def _front(study: optuna.Study, trials: list[FrozenTrial]) -> list[FrozenTrial]:
    """The feasible non-dominated finished trials (one per objective vector): only these anchor a
    refinement, never an infeasible plan however good its numbers."""
    feasible = [
        t
        for t in trials
        if t.state == TrialState.COMPLETE and all(v <= 0 for v in t.constraints.values()) and all(np.isfinite(t.values))
    ]
    if not feasible:
        return []
    directions = ["minimize" if d == optuna.study.StudyDirection.MINIMIZE else "maximize" for d in study.directions]
    mask = pareto_mask(np.array([t.values for t in feasible]), directions)
    unique = {tuple(t.values): t for t, keep in zip(feasible, mask) if keep}
    return sorted(unique.values(), key=lambda t: t.number)


def _moves(params: Mapping[str, Any], distributions: Mapping[str, BaseDistribution], count: int) -> list[dict]:
    """Every params dict `count` knobs away from `params`, each moved one step in its order."""
    steps = {name: _adjacent(params[name], d) for name, d in distributions.items() if name in params}
    moves = []
    for names in itertools.combinations([n for n, s in steps.items() if s], count):
        for values in itertools.product(*(steps[n] for n in names)):
            moves.append({**params, **dict(zip(names, values))})
    return moves


def _adjacent(value: Any, distribution: BaseDistribution) -> list:
    """The values one step below and above `value` in the knob's order (spec order for lists)."""
    if isinstance(distribution, CategoricalDistribution):
        choices = list(distribution.choices)
        i = choices.index(value)
        return [choices[j] for j in (i - 1, i + 1) if 0 <= j < len(choices)]
    if isinstance(distribution, IntDistribution):
        return [
            v
            for v in (value - distribution.step, value + distribution.step)
            if distribution.low <= v <= distribution.high
        ]
    return []


# The samplers a study can run, one entry a name (spec.SAMPLERS lists them with `auto`; the
# contract suite in tests/dse/search/test_samplers.py runs every entry). A grid or exhaustive study
# never asks its sampler: the engine evaluates every distinct plan in bulk (`_Loop.run_grid`,
# `_Loop.run_exhaustive`); the random sampler it holds only answers a stray `ask`.
SAMPLER_FACTORIES: dict[str, Callable[[int, PlanKey], optuna.samplers.BaseSampler]] = {
    "tpe": lambda seed, key: BatchTPESampler(seed, key=key),
    "nsga2": lambda seed, key: optuna.samplers.NSGAIISampler(seed=seed),
    "random": lambda seed, key: BatchRandomSampler(seed=seed),
    "refine": lambda seed, key: RefineSampler(seed, key=key),
    "grid": lambda seed, key: optuna.samplers.RandomSampler(seed=seed),
    "exhaustive": lambda seed, key: optuna.samplers.RandomSampler(seed=seed),
}
