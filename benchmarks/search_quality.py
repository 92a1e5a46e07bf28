"""How many trials each sampler needs to find the true Pareto front of a space small enough to
enumerate.

Why: issue 8 asks, on spaces whose exact front is known, for the trials each sampler needs to
reach 95 % and 99 % of the exact hypervolume (target: 95 % within 2 % of the space's size, 99 %
by every seed within 10 %). Every distinct plan of the space is simulated once (the exact
front); then each sampler runs for 10 % of the space, several seeds, and the hypervolume of the
feasible trials so far is tracked trial by trial. Objectives are scaled so the best feasible
value of the whole space is 0 and the reference point 1 (the reference point: each objective's
worst feasible value over the whole space, 10 % beyond; dse.search.hypervolume.reference_point), so
the exact hypervolume is the share of that box the true front dominates.

Three spaces: Llama-3-8B (the default); as a second check the knobs and hardware of
search_spaces/mixtral8x7b.yaml (expert parallelism, more invalid plans) with the same two
objectives (that file's own pair, throughput per GPU and cost per token, has a one-plan front);
and the README's main job, search_spaces/llama70b.yaml as shipped (38k plans, three objectives),
to be run with its own budget (--trials 600): how close does `dse search` get to the exact front?

    python benchmarks/search_quality.py [--seeds 5] [--space llama3-8b|mixtral-8x7b|llama70b] [--trials N]
        [--samplers tpe,refine,nsga2,random] [--first-seed 0]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np

from dse.evaluation.evaluate import Evaluator
from dse.evaluation.space import SearchSpace
from dse.search.engine import RunSettings, run_search
from dse.search.hypervolume import hypervolume, reference_point
from dse.search.pareto import direction_signs, pareto_mask
from dse.search.study_table import trials_frame
from dse.spec import parse_study
from dse.spec.inputs import load_yaml
from dse.study import resolve_study

SPACE = {
    "name": "search-quality",
    "model": "llama3-8b",
    "training": {"seq_len": 4096},
    "hardware": {"gpu": ["H100-SXM", "H200"], "num_gpus": [8, 16, 32, 64]},
    "search": {
        "tp": [1, 2, 4, 8],
        "pp": [1, 2, 4],
        "micro_batch": [1, 2],
        "global_batch": [256, 512],
        "recompute": ["none", "selective", "full"],
        "schedule": ["1f1b", "zb-h1"],
        "zero_stage": [0, 1],
    },
    "objectives": [{"iteration_time_s": "minimize"}, {"usd_per_mtok": "minimize"}],
}
MIXTRAL = {
    **load_yaml((Path(__file__).parents[1] / "search_spaces" / "mixtral8x7b.yaml").read_text(), "spec"),
    "name": "search-quality-mixtral",
    "objectives": SPACE["objectives"],
}
SHIPPED = load_yaml((Path(__file__).parents[1] / "search_spaces" / "llama70b.yaml").read_text(), "spec")
SPACES = {"llama3-8b": SPACE, "mixtral-8x7b": MIXTRAL, "llama70b": SHIPPED}
SAMPLERS = ("tpe", "refine", "nsga2", "random")


def exact(resolved) -> tuple[dict[tuple, np.ndarray], np.ndarray, np.ndarray, float, int]:
    """Every distinct plan's objectives (feasible ones), the scaling, and the exact hypervolume."""
    space = SearchSpace.from_study(resolved)
    points = space.grid()
    outcomes = Evaluator(space).evaluate_many(points)
    values = {
        resolved.kind.params_key(p): np.array([o.metrics[m] for m in resolved.objectives])
        for p, o in zip(points, outcomes)
        if o.feasible
    }
    table = np.array(list(values.values()))
    sign = direction_signs(resolved.directions)
    reference = reference_point(table, resolved.directions) * sign
    best = (table * sign).min(axis=0)
    costs = (table * sign - best) / (reference - best)
    front = costs[pareto_mask(costs, ("minimize",) * len(sign))]
    return values, sign, np.stack([best, reference]), hypervolume(front, np.ones(len(sign))), len(points)


def trials_to_reach(resolved, sampler: str, seed: int, budget: int, values, sign, scale, exact_hv) -> list:
    """Trials (in order) until the feasible trials' hypervolume reaches 95 % and 99 % of exact,
    and the share of the exact hypervolume reached within the budget."""
    study = resolved.study.model_copy(update={"sampler": sampler, "seed": seed})
    study = study.model_copy(update={"budget": study.budget.model_copy(update={"trials": budget})})
    run = resolve_study(study)
    with tempfile.TemporaryDirectory() as tmp:
        summary = run_search(run, RunSettings(Path(tmp), None, "off"))
        trials = trials_frame(summary.study, run)
    best, reference = scale
    knobs = SearchSpace.from_study(run).knobs
    costs = []
    for _, row in trials.iterrows():
        key = run.kind.params_key({k: row[k] for k in knobs}) if row["feasible"] else None
        costs.append((values[key] * sign - best) / (reference - best) if key in values else None)
    return track(costs, exact_hv)


def track(costs: list[np.ndarray | None], exact_hv: float) -> list:
    """Trials (in order; None: infeasible) until the hypervolume of the scaled objective vectors
    reaches 95 % and 99 % of exact, and the share of the exact hypervolume reached at the end."""
    front, reached, volume = None, [None, None], 0.0
    for count, cost in enumerate(costs, start=1):
        front = np.empty((0, len(cost))) if front is None and cost is not None else front
        if cost is None or np.any(np.all(front <= cost, axis=1)):
            continue  # infeasible or dominated: the hypervolume does not change
        front = np.vstack([front[~np.all(cost <= front, axis=1)], cost])
        volume = hypervolume(front, np.ones(len(cost)))
        for i, target in enumerate((0.95, 0.99)):
            if reached[i] is None and volume >= target * exact_hv * (1 - 1e-12):
                reached[i] = count
    return [*reached, volume / exact_hv]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--space", choices=sorted(SPACES), default="llama3-8b")
    parser.add_argument("--trials", type=int, help="each run's budget (default: 10 %% of the space)")
    parser.add_argument("--samplers", default=",".join(SAMPLERS), help="comma-separated (default: all four)")
    parser.add_argument("--first-seed", type=int, default=0)
    args = parser.parse_args()
    resolved = resolve_study(parse_study(SPACES[args.space]))
    values, sign, scale, exact_hv, size = exact(resolved)
    budget = args.trials or size // 10
    print(f"space: {size} distinct plans, {len(values)} feasible; exact hypervolume {exact_hv:.4f} of the box")
    reference = ", ".join(f"{m} {v:.4g}" for m, v in zip(resolved.objectives, scale[1] * sign))
    print(f"reference point (objective units): {reference}")
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    print(f"each sampler: {budget} trials ({budget / size:.1%} of the space), seeds {seeds[0]}..{seeds[-1]}")
    print(f"{'sampler':8} {'to 95 % (trials per seed)':>36} {'to 99 % (trials per seed)':>36}")
    for sampler in args.samplers.split(","):
        runs = [trials_to_reach(resolved, sampler, s, budget, values, sign, scale, exact_hv) for s in seeds]
        shown = ["/".join("-" if r[i] is None else str(r[i]) for r in runs) for i in range(2)]
        worst = [max((r[i] if r[i] is not None else np.inf) for r in runs) for i in range(2)]
        print(
            f"{sampler:8} {shown[0]:>36} {shown[1]:>36}   worst: 95 % at {worst[0] / size:.1%} of the space, "
            f"99 % at {worst[1] / size:.1%}; after {budget} trials {min(r[2] for r in runs):.1%} of the exact "
            f"hypervolume"
        )


if __name__ == "__main__":
    main()
