"""How close the default search gets to the true Pareto front of search_spaces/llama70b.yaml.

Why: the spec's 600 TPE trials see a small part of a 43,200-point space; the analytical model is
cheap enough to evaluate every distinct plan, so the true front is known and the search's front
can be scored against it. For each point of the true front: the smallest, over the search's
front, of the worst relative shortfall across the objectives (0 % = the search found that point
or one at least as good in every objective).

    python benchmarks/search_quality.py [--trials 600] [--seed 0]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np

from dse.checks import resolve_study
from dse.engine import RunSettings, run_search
from dse.evaluate import Evaluator
from dse.pareto import pareto_mask
from dse.report import pareto_frame, trials_frame
from dse.space import SearchSpace
from dse.spec import load_study

SPEC = Path(__file__).resolve().parents[1] / "search_spaces" / "llama70b.yaml"


def true_front(resolved) -> np.ndarray:
    space = SearchSpace.from_study(resolved)
    outcomes = Evaluator(space).evaluate_many(space.grid())
    rows = [[o.metrics[m] for m in resolved.objectives] for o in outcomes if o.feasible]
    values = np.array(rows)
    return values[pareto_mask(values, resolved.directions)]


def shortfall(truth: np.ndarray, found: np.ndarray, directions: tuple[str, ...]) -> np.ndarray:
    """Per true-front point: min over found points of the max relative shortfall (>= 0)."""
    sign = np.array([1.0 if d == "minimize" else -1.0 for d in directions])
    gap = (found[None, :, :] - truth[:, None, :]) * sign / np.abs(truth[:, None, :])
    return np.maximum(gap, 0.0).max(axis=2).min(axis=1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=600)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    resolved = resolve_study(load_study(SPEC, **{"budget.trials": args.trials, "seed": args.seed}))
    truth = true_front(resolved)
    with tempfile.TemporaryDirectory() as tmp:
        summary = run_search(resolved, RunSettings(Path(tmp), None, "off"))
        front = pareto_frame(trials_frame(summary.study, resolved), resolved)
    found = front[list(resolved.objectives)].to_numpy(dtype=float)
    gaps = shortfall(truth, found, resolved.directions) * 100
    print(f"true front: {len(truth)} points (every distinct plan simulated); search front: {len(found)} points")
    print(f"search: {args.trials} trials, {summary.evaluated} simulated, seed {args.seed}")
    print(
        f"shortfall against the true front: median {np.median(gaps):.1f}%, max {gaps.max():.1f}%, "
        f"points matched within 1%: {np.mean(gaps <= 1.0) * 100:.0f}%"
    )


if __name__ == "__main__":
    main()
