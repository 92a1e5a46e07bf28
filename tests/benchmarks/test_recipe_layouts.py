"""benchmarks/recipes.py builds each recipe's study so the published plan is among the plans ranked:
NVIDIA's DeepSeek-V3 pipeline layouts (pp 4 x vpp 4 on GB200, 61 layers: no even split), and a
fabric large enough for the published cluster."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from simulators.workload import stage_layers

ROOT = Path(__file__).resolve().parents[2]
CSV = ROOT.parent / "shared" / "validation" / "training.csv"


@pytest.fixture
def recipes(monkeypatch):
    if not CSV.is_file():
        pytest.skip("../shared/validation is not beside this checkout")
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))  # the script imports its sibling by name
    import recipes

    return recipes


def test_the_deepseek_v3_gb200_recipe_is_ranked_on_its_layout(recipes):
    row = next(r for r in csv.DictReader(CSV.open()) if r["id"] == "mb2604-deepseek-v3-gb200-256-b")
    recipe = recipes.read_recipe(row)  # skipped before: 4*4 does not divide 61
    space = recipes.recipe_study(recipe)
    layouts = {e.shape: tuple(e.layers) for e in space.resolved.study.training.pipeline_layouts}
    # Megatron-Bridge's layouts (accuracy_training.RECIPE_LAYOUTS), all of whose pp divide 256 GPUs
    assert set(layouts) == {(4, 1), (8, 1), (16, 1), (4, 2), (8, 2), (4, 4)}
    assert 4 in space.values["vpp"] and 2 in space.values["vpp"]
    plan = space.candidate(recipes.published_params(space, recipe.plan)).plan
    assert plan.pipeline_layout == layouts[4, 4] == recipe.plan.pipeline_layout
    # 15 virtual stages of 4 layers and one of 1: stages 0-2 hold 4 chunks of 4, stage 3 three and the 1
    assert [len(stage_layers(recipe.model, plan, s)) for s in range(4)] == [16, 16, 16, 13]
    assert any(p["pp"] == 4 and p["vpp"] == 4 for p in space.grid())


def test_a_published_run_larger_than_two_rail_tiers_gets_a_fabric_that_holds_it(recipes):
    """Radix-64 switches in two rail-optimized tiers join 64 leaves x 32 down ports = 2,048 NICs
    (one per GPU): MLPerf v3.0's 3,584-GPU CoreWeave run needs the core tier of a fat-tree, and
    its published plan is then feasible (it was ruled out by the fabric alone)."""
    assert recipes.fabric_family(2048, 8) == "rail-optimized" and recipes.fabric_family(2056, 8) == "fat-tree"
    row = next(r for r in csv.DictReader(CSV.open()) if r["id"] == "mlperf30-coreweave-3584")
    recipe = recipes.read_recipe(row)
    space = recipes.recipe_study(recipe)
    assert list(space.values["fabric"]) == ["fat-tree"]
    outcome = recipes.Evaluator(space).evaluate(recipes.published_params(space, recipe.plan))
    assert outcome.feasible, outcome.reason
