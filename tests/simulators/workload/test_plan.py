"""Every plan that cannot run is refused with its reason when the candidate is built."""

import pytest

from simulators._errors import PlanError
from simulators.hardware import get_gpu
from simulators.models import get_model
from simulators.workload import ParallelPlan, TrainingCandidate, TrainingSystem


def candidate(model="llama3-8b", num_gpus=8, **plan):
    base = dict(tp=1, pp=1, dp=num_gpus, micro_batch=1, global_batch=num_gpus, seq_len=4096)
    return TrainingCandidate(
        get_model(model), TrainingSystem(get_gpu("H100-SXM"), num_gpus), ParallelPlan(**{**base, **plan})
    )


@pytest.mark.parametrize(
    "kwargs,message",
    [
        (dict(tp=16, dp=1, num_gpus=16), "16 does not divide kv_heads=8"),
        (dict(pp=4, vpp=3, dp=2, global_batch=8), "pp*vpp=4*3 does not divide layers=32"),
        (dict(pp=64, dp=1, num_gpus=64, global_batch=64), "64 stages exceed layers=32"),
        (dict(ep=2), "ep=2 needs a mixture-of-experts model"),
        (dict(model="mixtral-8x7b", ep=16, num_gpus=16), "16 does not divide moe_experts=8"),
        (dict(model="mixtral-8x7b", etp=3, num_gpus=24, global_batch=24), "3 does not divide moe_ffn_hidden=14336"),
        (dict(tp=2, dp=2), "tp*cp*pp*dp=2*1*1*2=4 differs from num_gpus=8"),
        (dict(seq_len=16384), "seq_len=16384 exceeds max_seq_len=8192"),
        (dict(precision="fp4"), "H100-SXM has no fp4 tensor cores"),
    ],
)
def test_impossible_plans_are_refused_with_the_reason(kwargs, message):
    with pytest.raises(PlanError, match=message.replace("*", r"\*")):
        candidate(**kwargs)


@pytest.mark.parametrize(
    "kwargs,message",
    [
        (dict(global_batch=6, dp=4), "global_batch=6 is not a multiple of dp\\*micro_batch=4\\*1"),
        (dict(recompute="some"), "recompute='some'; allowed: none, selective, full"),
        (dict(vpp=2, pp=1), "vpp=2 needs schedule 1f1b and pp > 1"),
        (dict(vpp=2, pp=2, dp=1, global_batch=3), "needs microbatches=3 to be a multiple of pp=2"),
        (dict(cp=3), "seq_len=4096 is not a multiple of 2\\*cp=6"),
        (dict(zero_stage=4), "zero_stage=4; allowed: 0, 1, 2, 3"),
    ],
)
def test_inconsistent_plans_are_refused_at_construction(kwargs, message):
    base = dict(tp=1, pp=1, dp=4, micro_batch=1, global_batch=4, seq_len=4096)
    with pytest.raises(PlanError, match=message):
        ParallelPlan(**{**base, **kwargs})


# Megatron's uneven pipeline splits: Llama-3.1-405B (126 layers) at pp 8 x vpp 8 and pp 16 x vpp 4
# only when the embedding and the loss count as layers: (126 + 2) / 64 = 2 per virtual stage,
# the first holding the embedding and one transformer layer, the last one layer and the loss.
@pytest.mark.parametrize("pp,vpp", [(8, 8), (16, 4)])
def test_405b_splits_with_embedding_and_loss_counted_as_layers(pp, vpp):
    from simulators.workload import stage_layers, virtual_stage_sizes

    sizes = virtual_stage_sizes(126, pp, vpp, "embedding+loss")
    assert sizes == (1,) + (2,) * 62 + (1,)
    c = candidate("llama3-405b", num_gpus=pp, pp=pp, vpp=vpp, dp=1, global_batch=pp, pipeline_split="embedding+loss")
    on_stage = [stage_layers(c.model, c.plan, s) for s in range(pp)]
    assert sorted(i for layers in on_stage for i in layers) == list(range(126))  # each layer once
    assert len(on_stage[0]) == len(on_stage[-1]) == 2 * vpp - 1 and all(len(x) == 2 * vpp for x in on_stage[1:-1])
    with pytest.raises(PlanError, match=r"pp\*vpp=.* does not divide layers=126 .*pipeline_split"):
        candidate("llama3-405b", num_gpus=pp, pp=pp, vpp=vpp, dp=1, global_batch=pp)


def test_explicit_first_and_last_stage_layers_leave_the_rest_to_the_middle_stages():
    from simulators.workload import virtual_stage_sizes

    # DeepSeek-V3 (61 layers) on 16 stages: first 1, the other 15 hold 4 each.
    assert virtual_stage_sizes(61, 16, 1, "even", 1, None) == (1,) + (4,) * 15
    assert (
        virtual_stage_sizes(32, 4, 2, "even", 2, 6) == (1, 6, 6, 3) * 2
    )  # (32-2-6)/2 = 12 per middle stage; chunk 0 of each stage, then chunk 1
    refused = {
        (61, 16, 1, "embedding", 1, None): "cannot be combined",
        (32, 4, 2, "even", 3, None): "multiple of vpp=2",
        (32, 4, 1, "even", 6, None): "cannot share equally",  # 26 layers over 3 middle stages
        (32, 1, 1, "even", 4, None): "need pp > 1",
        (32, 4, 1, "even", 0, None): "positive multiple",  # Megatron: a stage holds at least one layer
    }
    for args, message in refused.items():
        assert message in virtual_stage_sizes(*args)


def test_an_explicit_layout_places_each_virtual_stages_layers():
    """Megatron-Bridge's DeepSeek-V3 layout for pp 4 x vpp 4 (embedding + 4 layers, 14 x 4, 1 layer
    + loss): pipeline stage 3 holds virtual stages 3, 7, 11 and 15, so 4 + 4 + 4 + 1 layers."""
    from simulators.workload import stage_layer_kinds, stage_layers, virtual_stage_sizes

    layout = (4,) * 15 + (1,)
    assert virtual_stage_sizes(61, 4, 4, "even", None, None, layout) == layout
    c = candidate("deepseek-v3", num_gpus=4, pp=4, vpp=4, dp=1, global_batch=4, pipeline_layout=layout)
    assert [len(stage_layers(c.model, c.plan, s)) for s in range(4)] == [16, 16, 16, 13]
    assert stage_layers(c.model, c.plan, 0)[:4] == [0, 1, 2, 3] and stage_layers(c.model, c.plan, 3)[-1] == 60
    assert stage_layer_kinds(c.model, c.plan, 0) == {False: 3, True: 13}  # DeepSeek-V3's 3 dense layers
    refused = {
        (61, 4, 2, "even", None, None, layout): "lists 16 virtual stages; pp*vpp=4*2=8 needed",
        (61, 4, 4, "even", None, None, (4,) * 16): "holds 64 layers; the model has 61",
        (61, 4, 4, "even", None, None, (0, 5) + (4,) * 14): "must be positive",
        (61, 4, 4, "embedding", None, None, layout): "cannot be combined",
        (61, 4, 4, "even", 4, None, layout): "cannot be combined",
    }
    for args, message in refused.items():
        assert message in virtual_stage_sizes(*args)


def test_every_split_holds_every_parameter_once():
    from simulators.workload import stage_params

    model = get_model("llama3-8b")
    for pp, split, first, last in ((2, "embedding+loss", None, None), (4, "even", 5, None), (4, "even", 2, 6)):
        plan = ParallelPlan(
            tp=1,
            pp=pp,
            dp=1,
            micro_batch=1,
            global_batch=pp,
            seq_len=4096,
            pipeline_split=split,
            first_stage_layers=first,
            last_stage_layers=last,
        )
        held = sum(sum(stage_params(model, plan, s)) for s in range(pp))
        assert held == pytest.approx(model.total_params, rel=1e-12)
