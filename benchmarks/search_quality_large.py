"""How close the default search gets, within 1 % of a space too large to enumerate by trials, to
the exact front the exact mode finds.

Why: issue 20 asks that, when a space is too large to enumerate, the sampler reach 95 % of the
exact hypervolume within 1 % of the space. search_quality.py measures that on spaces small
enough to simulate in the driver; here the space is search_spaces/llama70b.yaml widened (B200,
three NIC speeds, micro-batch 8, ZeRO-3: about 150k distinct plans) and its exact front comes
from the exact mode (`sampler: exhaustive`, every plan recorded in Parquet): the reference point
and the scaling come from every feasible plan of that record, as search_quality.py does. Then
`dse search` runs with the spec's sampler (`auto`) for 1 % of the plans, several seeds, and
the hypervolume of its feasible trials is tracked trial by trial against the exact one.

    python benchmarks/search_quality_large.py [--seeds 3] [--share 0.01] [--sampler auto] [--ray-address off]
        [--exact-dir DIR] [--first-seed 0]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
from search_quality import track

from dse.search.engine import RunSettings, run_search
from dse.search.exhaustive import PLANS_DIR
from dse.search.hypervolume import hypervolume, reference_point
from dse.search.pareto import direction_signs, pareto_mask
from dse.search.study_table import trials_frame
from dse.spec import load_study
from dse.study import resolve_study

SPEC = Path(__file__).resolve().parents[1] / "search_spaces" / "llama70b.yaml"
WIDER = {  # a subset of benchmarks/exhaustive.py's widening
    "hardware.gpu": ["H100-SXM", "H200", "B200"],
    "hardware.fabric.nic_gbps": [200, 400, 800],
    "search.micro_batch": [1, 2, 4, 8],
    "search.zero_stage": [0, 1, 3],
}


def resolved_study(sampler: str, seed: int, trials: int):
    study = load_study(SPEC, **WIDER, sampler=sampler, seed=seed, **{"budget.trials": trials})
    return resolve_study(study.model_copy(update={"fidelity": study.fidelity.up_to("analytical")}))


def exact(ray_address: str, keep: Path | None) -> tuple[int, np.ndarray, np.ndarray, float, float]:
    """(distinct plans, signs, [best; reference] in signed units, exact hypervolume, seconds)
    from the exact mode's record of every plan; with `keep`, the exact study is kept there and
    a later run resumes it (every range recorded: nothing evaluated again)."""
    resolved = resolved_study("exhaustive", 0, 1)
    with tempfile.TemporaryDirectory() as tmp:
        out = keep or Path(tmp)
        resume = (out / "study.journal").exists()
        start = time.perf_counter()
        summary = run_search(resolved, RunSettings(out, None, ray_address, resume=resume))
        wall_s = time.perf_counter() - start
        columns = [*resolved.objectives, "feasible"]
        parts = sorted((out / PLANS_DIR).glob("*.parquet"))
        table = pd.concat(pd.read_parquet(p, columns=columns) for p in parts)
    values = table[table["feasible"]][list(resolved.objectives)].to_numpy(dtype=float)
    sign = direction_signs(resolved.directions)
    reference = reference_point(values, resolved.directions) * sign
    best = (values * sign).min(axis=0)
    costs = (values * sign - best) / (reference - best)
    front = costs[pareto_mask(costs, ("minimize",) * len(sign))]
    return summary.exhaustive.plans, sign, np.stack([best, reference]), hypervolume(front, np.ones(len(sign))), wall_s


def search(sampler: str, seed: int, trials: int, sign, scale, exact_hv: float) -> list:
    """[trials to 95 %, to 99 %, share of the exact hypervolume at the end, driver seconds]."""
    resolved = resolved_study(sampler, seed, trials)
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        summary = run_search(resolved, RunSettings(Path(tmp), None, "off"))
        wall_s = time.perf_counter() - start
        frame = trials_frame(summary.study, resolved)
    best, reference = scale
    values = frame[list(resolved.objectives)].to_numpy(dtype=float)
    costs = [(v * sign - best) / (reference - best) if ok else None for v, ok in zip(values, frame["feasible"])]
    return [*track(costs, exact_hv), wall_s]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--share", type=float, default=0.01, help="the budget as a share of the distinct plans")
    parser.add_argument("--sampler", default="auto")
    parser.add_argument("--ray-address", default="off", help="for the exact mode: off (default) or local")
    parser.add_argument("--exact-dir", type=Path, help="keep the exact study here and reuse it on later runs")
    parser.add_argument("--first-seed", type=int, default=0)
    args = parser.parse_args()
    plans, sign, scale, exact_hv, exact_s = exact(args.ray_address, args.exact_dir)
    trials = int(plans * args.share)
    print(f"space: {plans:,} distinct plans; exact mode {exact_s:.0f} s; exact hypervolume {exact_hv:.4f} of the box")
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    print(f"{args.sampler}: {trials} trials ({trials / plans:.2%} of the space), seeds {seeds[0]}..{seeds[-1]}")
    for seed in seeds:
        to95, to99, share, wall_s = search(args.sampler, seed, trials, sign, scale, exact_hv)
        print(
            f"seed {seed}: {share:.1%} of the exact hypervolume after {trials} trials; 95 % at trial {to95 or '-'}, "
            f"99 % at {to99 or '-'}; {wall_s:.0f} s"
        )


if __name__ == "__main__":
    main()
