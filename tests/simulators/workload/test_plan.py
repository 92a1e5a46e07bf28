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
