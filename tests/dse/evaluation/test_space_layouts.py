"""Plans of a shape `training.pipeline_layouts` names take its layout, in the space, the grid,
`dse simulate`, `dse search` and the SimAI export; the other shapes split as without it."""

import json

import pandas as pd
import pytest

from dse.cli.commands import main
from dse.errors import PlanError
from dse.evaluation.space import SearchSpace
from dse.spec import load_study
from dse.study import resolve_study
from simulators.workload import read_simai_workload, stage_layers
from tests.conftest import FOUR_BY_THREE, LAYOUTS_SPEC, TINY_PARAMS

SPEC = LAYOUTS_SPEC
PARAMS = {**TINY_PARAMS, "num_gpus": 16}  # every use sets pp and vpp
PLAN = ["--set=tp=1", "--set=pp=4", "--set=vpp=3"]


def space_of(write_spec, text=SPEC):
    return SearchSpace.from_study(resolve_study(load_study(write_spec(text))))


def layers_by_stage(counts, pp):
    """Transformer layer indices of each pipeline stage, read off the listed counts: virtual stage
    c*pp + s (chunk c of stage s) holds the next counts[c*pp + s] layers in model order."""
    starts = [sum(counts[:v]) for v in range(len(counts))]
    return [[i for v in range(s, len(counts), pp) for i in range(starts[v], starts[v] + counts[v])] for s in range(pp)]


def test_a_plan_of_a_named_shape_takes_its_layout(write_spec):
    space = space_of(write_spec)
    plan = space.candidate({**PARAMS, "pp": 4, "vpp": 3}).plan
    assert plan.pipeline_layout == tuple(FOUR_BY_THREE)
    expected = layers_by_stage(FOUR_BY_THREE, 4)
    assert [len(layers) for layers in expected] == [7, 9, 9, 7]
    model = space.resolved.model
    assert [stage_layers(model, plan, s) for s in range(4)] == expected
    two = space.candidate({**PARAMS, "pp": 2, "vpp": 1})
    assert [len(stage_layers(model, two.plan, s)) for s in range(2)] == [12, 20]


def test_the_other_shapes_split_as_without_layouts(write_spec):
    plain = space_of(
        write_spec,
        SPEC.replace(f"    - {{pp: 4, vpp: 3, layers: {FOUR_BY_THREE}}}\n", "")
        .replace("    - {pp: 2, layers: [12, 20]}\n", "")
        .replace("vpp: [1, 3]", "vpp: [1]")
        .replace("  pipeline_layouts:\n", ""),
    )
    assert not plain.resolved.study.training.pipeline_layouts
    space = space_of(write_spec)
    for pp in (1, 4):
        plan = space.candidate({**PARAMS, "pp": pp, "vpp": 1}).plan
        assert plan == plain.candidate({**PARAMS, "pp": pp, "vpp": 1}).plan and plan.pipeline_layout is None
        assert [len(stage_layers(space.resolved.model, plan, s)) for s in range(pp)] == [32 // pp] * pp
    with pytest.raises(PlanError, match=r"pp\*vpp=2\*3 does not divide layers=32"):
        space.candidate({**PARAMS, "pp": 2, "vpp": 3})  # no layout: the even split, which cannot


def test_the_grid_enumerates_the_shapes_with_layouts(write_spec):
    """Every shape is in the grid; of vpp 3, only pp 4's (its layout) builds."""
    space = space_of(write_spec)
    runnable, refused = set(), set()
    for params in space.grid():
        shape = (params["pp"], params["vpp"])
        try:
            space.candidate(params)
            runnable.add(shape)
        except PlanError:
            refused.add(shape)
    assert runnable == {(1, 1), (2, 1), (4, 1), (4, 3)} and refused == {(1, 3), (2, 3)}


def test_simulate_and_search_run_the_layouts_end_to_end(write_spec, tmp_path, capsys):
    """A layout that loads the last stage with 11 layers and the loss paces the pipeline: slower
    than the spec's, whose stages hold 7 and the embedding, 9, 9, 7 and the loss; the exact search
    (exact mode) records every shape, vpp 3 on pp 4 feasible."""
    spec = write_spec(SPEC)
    assert main(["simulate", str(spec), *PLAN, "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    heavy = [1, 1, 1, 3, 3, 3, 3, 3, 3, 3, 3, 5]
    assert [len(layers) for layers in layers_by_stage(heavy, 4)] == [7, 7, 7, 11]
    assert (
        main(
            ["simulate", str(write_spec(SPEC.replace(str(FOUR_BY_THREE), str(heavy)), name="h.yaml")), *PLAN, "--json"]
        )
        == 0
    )
    loaded = json.loads(capsys.readouterr().out)
    assert listed["feasible"] and loaded["feasible"]
    assert listed["layers_per_stage"] == [7, 9, 9, 7] and loaded["layers_per_stage"] == [7, 7, 7, 11]
    assert loaded["metrics"]["iteration_time_s"] > listed["metrics"]["iteration_time_s"]
    out = tmp_path / "out"
    search = ["search", str(spec), "--out", str(out), "--sampler", "exhaustive", "--ray-address", "off"]
    assert main([*search, "--fidelity", "analytical"]) == 0
    plans = pd.concat([pd.read_parquet(p) for p in sorted((out / "plans").glob("part-*.parquet"))])
    assert set(map(tuple, plans.loc[plans["feasible"], ["pp", "vpp"]].values.tolist())) == {
        (1, 1),
        (2, 1),
        (4, 1),
        (4, 3),
    }
    row = plans[(plans["pp"] == 4) & (plans["vpp"] == 3) & (plans["tp"] == 1)].iloc[0]
    assert row["iteration_time_s"] == pytest.approx(listed["metrics"]["iteration_time_s"])


def test_the_simai_export_holds_each_stages_layers_of_the_layout(write_spec, tmp_path):
    out = tmp_path / "w.txt"
    assert main(["workload", "export", str(write_spec(SPEC)), *PLAN, "--out", str(out), "--stage", "all"]) == 0
    files = [read_simai_workload(tmp_path / f"w-stage{s}.txt") for s in range(4)]
    ga = files[0].header.ga
    attention = [sum(layer.name == "attention_layer" for layer in w.layers) for w in files]
    assert (
        attention
        == [len(layers) * ga for layers in layers_by_stage(FOUR_BY_THREE, 4)]
        == [7 * ga, 9 * ga, 9 * ga, 7 * ga]
    )


def test_a_shape_without_a_layout_keeps_the_first_and_last_stage_counts(write_spec):
    """last_stage_layers 5 splits pp 4 x vpp 1 as 9, 9, 9, 5; pp 2 and pp 4 x vpp 3 take their
    layouts instead (Megatron takes one or the other)."""
    text = SPEC.replace("  seq_len: 4096\n", "  seq_len: 4096\n  last_stage_layers: 5\n").replace(
        "pp: [1, 2, 4]", "pp: [2, 4]"
    )
    space = space_of(write_spec, text)
    model = space.resolved.model
    sizes = {
        shape: [
            len(stage_layers(model, space.candidate({**PARAMS, "pp": shape[0], "vpp": shape[1]}).plan, s))
            for s in range(shape[0])
        ]
        for shape in ((4, 1), (2, 1), (4, 3))
    }
    assert sizes == {(4, 1): [9, 9, 9, 5], (2, 1): [12, 20], (4, 3): [7, 9, 9, 7]}
