"""Which Optuna sampler a study runs, from the spec's `sampler` and the size of its space."""

from __future__ import annotations

import warnings

import optuna

from dse.errors import SpecError
from dse.space import SearchSpace

GRID_LIMIT = 100_000


def sampler_name(name: str, space: SearchSpace, trials: int) -> str:
    """The sampler a spec's `sampler` means; `auto` enumerates spaces no larger than the budget."""
    if name == "auto":
        return "grid" if space.size <= trials else "tpe"
    if name == "grid" and space.size > GRID_LIMIT:
        raise SpecError(
            f"sampler: grid would enumerate {space.size} candidates (limit {GRID_LIMIT}); "
            f"allowed for this space: auto, tpe, nsga2, random"
        )
    return name


def make_sampler(name: str, seed: int) -> optuna.samplers.BaseSampler:
    """The Optuna sampler for a resolved sampler name.

    A grid study never asks its sampler: the engine evaluates every distinct plan in bulk
    (`_Loop.run_grid`); the random sampler it holds only answers a stray `ask`.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        if name == "tpe":
            return optuna.samplers.TPESampler(seed=seed, multivariate=True, constant_liar=True)
        if name == "nsga2":
            return optuna.samplers.NSGAIISampler(seed=seed)
        return optuna.samplers.RandomSampler(seed=seed)
