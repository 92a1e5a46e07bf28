"""Do vendors' tuned plans rank near the top of dse's search? One search per published recipe.

Why: a buyer trusts the plan dse ranks first only if the plans NVIDIA and MLPerf submitters
tuned by hand come out near the top too. For every public row of ../shared/validation/training.csv
from a tuned vendor recipe (NeMo and Megatron-Bridge performance summaries, MLPerf Training),
this builds a study of the same model, GPU type and count, sequence length, precision and
global batch, with the knobs Megatron-Core offers for that model (and the recipe's own settings: CUDA
graphs, gradient dtype, Transformer Engine's TP overlap; for a model NVIDIA runs on an explicit
pipeline layout per shape, DeepSeek-V3, those layouts as training.pipeline_layouts), evaluates every plan of it
with dse's own evaluator (the exact mode of `dse search`: `SearchSpace.grid` then
`Evaluator.evaluate_many`), and ranks the feasible plans by predicted step time. Memory is
judged as `dse search` judges it, with the spec's default reserve (hardware.memory_reserve_gib),
so a plan that fills HBM to the last hundred MiB is no alternative to a vendor's plan.

Per recipe it reports:
- rank: 1 + the number of feasible plans dse predicts strictly faster than the published one
  (the published plan itself judged out of memory or invalid counts as not ranked);
- regret = predicted step time of the published plan / dse's best predicted step time - 1:
  how much faster dse claims its pick is than the vendor's own plan (0 when the vendor's plan is
  dse's best). A large regret means either dse found a better plan or, far more often, it
  misprices the vendor's; either way a user should not trust dse's pick there without a test;
- best vs measured = dse's best predicted step time / the published measured step time - 1:
  what dse promises against what the vendor achieved (negative: dse claims to beat it).
- published vs measured = the published plan's predicted step time / its measured one - 1: the
  model's own error on the vendor's plan; a regret much larger than it points at a mispriced
  alternative instead.
A published plan dse judges infeasible (a run that happened, so a fault of dse) is not in the
top 5 and counts as an infinite regret in the median.

Rows sharing a configuration (a `-b` suffix: a second metric of the same run) count once; the
measured step time comes from tokens/s or step time where given (convention-free), else from
TFLOP/s in the row's FLOP convention. Rows `accuracy_training.build_model`/`build_plan` cannot
read are listed as skipped with the reason. The last line is
`recipes: published plan in dse's top 5 for a of b; median regret x%`.

    python benchmarks/recipes.py [--data PATH] [--only ID_PREFIX]
"""

from __future__ import annotations

import argparse
import csv
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from accuracy_training import DEFAULT_CSV, RECIPE_LAYOUTS, Skip, build_model, build_plan, step_flops

from dse.evaluation.evaluate import Evaluator
from dse.evaluation.space import SearchSpace
from dse.spec import parse_study
from dse.study import resolve_study
from simulators import DseError
from simulators.hardware import get_gpu
from simulators.models import ModelSpec
from simulators.network import Fabric
from simulators.workload import ParallelPlan, ep_problem, pp_problem, tp_problem

RECIPE_SOURCES = ("nemo_", "megatron_bridge_", "mlperf_training_")
TOP = 5
# Metrics that give the step time without a FLOP convention, preferred in this order.
DIRECT_METRICS = ("iteration_time_s", "tokens_per_s_per_gpu", "tflops_per_gpu")
POWERS = (1, 2, 4, 8, 16, 32, 64)
MIN_CP_CHUNK_TOKENS = 4096  # recipes split a sequence over cp ranks only when chunks stay this long


@dataclass(frozen=True)
class Recipe:
    row: dict[str, str]
    model: ModelSpec
    plan: ParallelPlan
    measured_step_s: float


@dataclass(frozen=True)
class Ranking:
    recipe: Recipe
    candidates: int  # distinct plans of the space
    feasible: int
    rank: int | None  # None: dse judges the published plan infeasible
    published_s: float | None  # predicted step time of the published plan
    best_s: float
    best: dict[str, Any]
    published_reason: str | None  # why dse rules the published plan out

    @property
    def regret_pct(self) -> float | None:
        return None if self.published_s is None else (self.published_s / self.best_s - 1) * 100

    @property
    def best_vs_measured_pct(self) -> float:
        return (self.best_s / self.recipe.measured_step_s - 1) * 100

    @property
    def published_vs_measured_pct(self) -> float | None:
        return None if self.published_s is None else (self.published_s / self.recipe.measured_step_s - 1) * 100


def is_recipe(row: dict[str, str]) -> bool:
    return row["source"].startswith(RECIPE_SOURCES)


def configurations(rows: list[dict[str, str]]) -> list[dict[str, str]]:
    """One row per run: of a row and its `-b` twin, the one whose metric needs no FLOP convention."""
    runs: dict[str, list[dict[str, str]]] = {}
    for row in rows:
        runs.setdefault(row["id"].removesuffix("-b"), []).append(row)
    return [min(group, key=lambda r: DIRECT_METRICS.index(r["metric"])) for group in runs.values()]


def measured_step_s(row: dict[str, str], model: ModelSpec, plan: ParallelPlan) -> float:
    """The published step time, from whichever metric the row gives."""
    value, n = float(row["value"]), int(row["num_gpus"])
    if row["metric"] == "iteration_time_s":
        return value
    if row["metric"] == "tokens_per_s_per_gpu":
        return plan.global_batch * plan.seq_len / (value * n)
    return step_flops(model, plan, row["flop_convention"] or "model") / (value * 1e12 * n)


def read_recipe(row: dict[str, str]) -> Recipe:
    model = build_model(row)
    plan, _ = build_plan(row)
    # The search space splits the layers by its knobs (pipeline_split) or, for the shapes the
    # model's recipes give one, by their layout (recipe_layouts): the published plan must be one.
    if plan.pipeline_layout is None and (problem := pp_problem(model, plan.pp, plan.vpp, plan.pipeline_split)):
        raise Skip(f"published plan not expressible in the search space: {problem}")
    return Recipe(row, model, plan, measured_step_s(row, model, plan))


def domain_gpus(row: dict[str, str], num_gpus: int) -> int:
    """GPUs per NVLink server in the study's fabric: the row's NVLink domain, cut to the largest
    power of two that divides the job (64 of an NVL72 rack for 64-256 GB200 GPUs)."""
    domain = int(row["gpus_per_node"]) if row["gpus_per_node"] else get_gpu(row["gpu"]).scaleup_domain_gpus
    return max(p for p in POWERS if p <= domain and num_gpus % p == 0)


def fabric_family(num_gpus: int, domain: int) -> str:
    """The rail-optimized two tiers of a DGX SuperPOD where they hold the job at radix 64 (2,048
    GPUs), else a three-tier fat-tree, as clusters beyond that size add a core tier (MLPerf v3.0's
    3,584-GPU CoreWeave run: a plan that ran is never ruled out by a fabric too small to build)."""
    rails = Fabric("rail-optimized", gpus_per_server=domain, nics_per_server=domain)
    return "rail-optimized" if num_gpus <= rails.max_gpus() else "fat-tree"


def recipe_layouts(recipe: Recipe) -> dict[tuple[int, int], tuple[int, ...]]:
    """The pipeline layouts NVIDIA's recipes give the model, by (pp, vpp), for pp dividing the
    GPUs (accuracy_training.RECIPE_LAYOUTS): Megatron-Bridge runs DeepSeek-V3 with one per shape."""
    n = int(recipe.row["num_gpus"])
    return {
        (pp, vpp): layout
        for (name, pp, vpp), layout in RECIPE_LAYOUTS.items()
        if name == recipe.row["model"] and n % pp == 0
    }


def knobs(recipe: Recipe) -> dict[str, list]:
    """What Megatron-Core lets the recipe's author choose for this model, GPU count and batch,
    the published values always among them. TP stays inside the NVLink domain (no recipe of
    the file crosses it), CP only for long sequences, EP over divisors of the experts; pp and
    vpp also where a recipe layout of the model (recipe_layouts) splits the layers."""
    model, plan, n = recipe.model, recipe.plan, int(recipe.row["num_gpus"])
    layouts = recipe_layouts(recipe)
    domain = domain_gpus(recipe.row, n)
    tps = [t for t in POWERS if t <= min(8, domain) and n % t == 0 and not tp_problem(model, t)]
    splits = ["even", "embedding+loss"]  # Megatron's --account-for-embedding/loss-in-pipeline-split
    pps = [
        p
        for p in (1, 2, 4, 8, 16)
        if n % p == 0 and (any(not pp_problem(model, p, 1, s) for s in splits) or any(q == p for q, _ in layouts))
    ]
    cps = [c for c in POWERS[:4] if c == 1 or plan.seq_len // c >= MIN_CP_CHUNK_TOKENS]
    eps = [e for e in POWERS if e <= n and not ep_problem(model, e)] if model.moe_experts else [1]
    vpps = [
        v
        for v in (1, 2, 3, 4, 5, 6, 8)
        if v == 1
        or any(p > 1 and not pp_problem(model, p, v, s) for p in pps for s in splits)
        or any((p, v) in layouts for p in pps)
    ]
    values = {
        "tp": tps,
        "pp": pps,
        "cp": cps,
        "ep": eps,
        "vpp": vpps,
        "pipeline_split": splits,
        "micro_batch": [1, 2, 4],
        "recompute": ["none", "selective", "full"],
        "sequence_parallel": [True, False],
        # A setting of the recipe's family, like its CUDA graphs and gradient dtype: every plan
        # runs with the recipe's own (accuracy_training.TP_OVERLAP_CONFIGS).
        "tp_comm_overlap": [plan.tp_comm_overlap],
        "zero_stage": [1],  # the distributed optimizer: on in every NeMo/Megatron-Bridge recipe
    }
    published = {
        "tp": plan.tp,
        "pp": plan.pp,
        "cp": plan.cp,
        "ep": plan.ep,
        "vpp": plan.vpp,
        "pipeline_split": plan.pipeline_split,
        "micro_batch": plan.micro_batch,
        "recompute": plan.recompute,
        "sequence_parallel": plan.sequence_parallel,
        "tp_comm_overlap": plan.tp_comm_overlap,
        "zero_stage": plan.zero_stage,
    }
    for name, value in published.items():
        if value not in values[name]:
            values[name] = sorted([*values[name], value], key=str)
    return values


def recipe_study(recipe: Recipe) -> SearchSpace:
    """The in-memory study of one recipe: its model, GPUs, batch and the knobs above."""
    row, plan, n = recipe.row, recipe.plan, int(recipe.row["num_gpus"])
    domain = domain_gpus(row, n)
    nic_gbps = float(row["nic_gbps_per_gpu"]) if row["nic_gbps_per_gpu"] else get_gpu(row["gpu"]).nic_gbps
    search = knobs(recipe)
    raw = {
        "name": "recipe-" + row["id"].replace("_", "-"),
        "model": recipe.model,
        "training": {
            "seq_len": plan.seq_len,
            "precision": plan.precision,
            "overlap_grad_reduce": plan.overlap_grad_reduce,
            "overlap_param_gather": plan.overlap_param_gather,
            "recompute_modules": list(plan.recompute_modules),
            "grad_reduce_in_bf16": plan.grad_reduce_in_bf16,
            "cuda_graphs": plan.cuda_graphs,
            "moe_a2a_overlap": plan.moe_a2a_overlap,
            "moe_grouped_gemm": plan.moe_grouped_gemm,
            "pipeline_layouts": [
                {"pp": pp, "vpp": vpp, "layers": list(layout)}
                for (pp, vpp), layout in recipe_layouts(recipe).items()
                if pp in search["pp"] and vpp in search["vpp"]
            ],
        },
        "hardware": {
            "gpu": [row["gpu"]],
            "num_gpus": [n],
            "fabric": {
                "family": [fabric_family(n, domain)],
                "gpus_per_server": domain,
                "nics_per_server": domain,
                "nic_gbps": [nic_gbps],
            },
        },
        "search": {**search, "global_batch": [plan.global_batch], "schedule": ["1f1b"]},
        "objectives": [{"metric": "iteration_time_s"}],
        "sampler": "grid",
    }
    return SearchSpace.from_study(resolve_study(parse_study(raw)))


def published_params(space: SearchSpace, plan: ParallelPlan) -> dict[str, Any]:
    """The published plan as the study's params."""
    return {
        "gpu": space.values["gpu"][0],
        "num_gpus": space.values["num_gpus"][0],
        "tp": plan.tp,
        "pp": plan.pp,
        "cp": plan.cp,
        "ep": plan.ep,
        "etp": plan.etp,
        "vpp": plan.vpp,
        "pipeline_split": plan.pipeline_split,
        "micro_batch": plan.micro_batch,
        "global_batch": plan.global_batch,
        "recompute": plan.recompute,
        "schedule": "1f1b",
        "sequence_parallel": plan.sequence_parallel,
        "tp_comm_overlap": plan.tp_comm_overlap,
        "zero_stage": plan.zero_stage,
        "fabric": space.values["fabric"][0],
        "nic_gbps": space.values["nic_gbps"][0],
    }


def rank(recipe: Recipe) -> Ranking:
    """Every plan of the recipe's study evaluated; the published one placed among the feasible."""
    space = recipe_study(recipe)
    points = space.grid()
    evaluator = Evaluator(space)
    outcomes = evaluator.evaluate_many(points)
    key = space.resolved.kind.params_key
    times = {key(p): o.metrics["iteration_time_s"] for p, o in zip(points, outcomes) if o.feasible and o.metrics}
    if not times:
        raise Skip("no plan of the space is feasible")
    published = published_params(space, recipe.plan)
    own = evaluator.evaluate(published)
    best_key = min(times, key=times.get)
    best = dict(best_key)
    published_s = own.metrics["iteration_time_s"] if own.feasible else None
    position = None if published_s is None else 1 + sum(t < published_s for t in times.values())
    reason = None if own.feasible else (own.reason or "infeasible")
    return Ranking(recipe, len(points), len(times), position, published_s, times[best_key], best, reason)


def plan_text(p: dict[str, Any]) -> str:
    return (
        f"tp{p['tp']} pp{p['pp']} vpp{p['vpp']} cp{p['cp']} ep{p['ep']} mb{p['micro_batch']} "
        f"{p['recompute']}{' sp' if p['sequence_parallel'] and p['tp'] > 1 else ''}"
    )


def print_ranking(r: Ranking) -> None:
    row = r.recipe.row
    ruled_out = "OOM" if "memory" in (r.published_reason or "") else "n/a"
    where = f"{r.rank:4d}/{r.feasible:<5d}" if r.rank else f"{ruled_out:>4s}/{r.feasible:<5d}"
    regret = f"{r.regret_pct:+7.1f}%" if r.regret_pct is not None else "     n/a"
    own = f"{r.published_vs_measured_pct:+6.1f}%" if r.published_vs_measured_pct is not None else "   n/a"
    print(
        f"{row['id']:36s} {row['gpu']:8s} {row['num_gpus']:>5s} {where} regret {regret}  "
        f"measured {r.recipe.measured_step_s:8.3f}s, published plan predicted {own}, "
        f"dse's best {r.best_s:8.3f}s ({r.best_vs_measured_pct:+6.1f}%): "
        f"{plan_text(r.best)}" + (f"  [published plan ruled out: {r.published_reason}]" if r.published_reason else "")
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_CSV, help="rows in the schema of training.csv")
    parser.add_argument("--only", default="", help="only recipes whose id starts with this")
    args = parser.parse_args()
    with args.data.open(newline="", encoding="utf-8") as f:
        rows = [r for r in csv.DictReader(f) if is_recipe(r) and r["id"].startswith(args.only)]

    rankings, skipped = [], []
    print(f"{'recipe':36s} {'gpu':8s} {'gpus':>5s} rank/feasible")
    for row in configurations(rows):
        try:
            ranking = rank(read_recipe(row))
        except (Skip, DseError) as exc:
            skipped.append((row["id"], str(exc)))
            continue
        rankings.append(ranking)
        print_ranking(ranking)
    if skipped:
        print(f"\nSkipped: {len(skipped)} recipes")
        for run, reason in skipped:
            print(f"  {run:36s} {reason}")
    top = sum(r.rank is not None and r.rank <= TOP for r in rankings)
    regrets = [r.regret_pct if r.regret_pct is not None else float("inf") for r in rankings]
    errors = [r.best_vs_measured_pct for r in rankings]
    if errors:
        print(
            f"\ndse's best vs the published measurement: median {statistics.median(errors):+.1f}%, "
            f"median |e| {statistics.median(abs(e) for e in errors):.1f}% over {len(errors)} recipes"
        )
    median = statistics.median(regrets) if regrets else float("nan")
    print(f"recipes: published plan in dse's top {TOP} for {top} of {len(rankings)}; median regret {median:.1f}%")


if __name__ == "__main__":
    main()
