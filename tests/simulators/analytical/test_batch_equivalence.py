"""A batch of plans priced together gives every plan exactly what it gets priced alone.

The batch path shares work between plans (stage compute memoised by layer shape, the step part
by a normalised plan, the batch's collectives priced in one vectorised call): a key that drops
a knob a cost depends on would hand one plan another's cost. Here each plan is also simulated
on its own with every memo table emptied first, and the two must agree to the last bit (the
step's metrics, memory, feasibility, and every stage's costs with their communication parts)."""

import random

import numpy as np
import pytest

from simulators import PlanError, _memo
from simulators.analytical import _collective_prices, _layer, _layer_costs, _stage_costs, simulate_training_batch
from simulators.analytical._collective_prices import collective_s, price_collectives
from simulators.analytical._stage_costs import stage_costs
from simulators.hardware import get_gpu, host_tier_for
from simulators.models import get_model
from simulators.network import Network, collective_time_s
from simulators.workload import ParallelPlan, TrainingCandidate, TrainingSystem, _peak_memory

KNOBS = {
    "tp": (1, 2, 4),
    "pp": (1, 2, 4),
    "vpp": (1, 2),
    "cp": (1, 2),
    "micro_batch": (1, 2),
    "accumulation": (1, 2, 4),
    "recompute": ("none", "selective", "full"),
    "recompute_modules": (("core_attn",), ("core_attn", "mlp"), ("moe", "layernorm")),
    "schedule": ("1f1b", "zb-h1"),
    "zero_stage": (0, 1, 2, 3),
    "tp_comm_overlap": (False, True),
    "grad_reduce_in_bf16": (False, True),
    "overlap_grad_reduce": (False, True),
    "cuda_graphs": (False, True),
    "offload": ("none", "none", "optimizer", "activations", "optimizer+weights", "optimizer-nvme"),
}
MOE_KNOBS = {"ep": (1, 2, 4, 8), "etp": (1, 2), "moe_a2a_overlap": (False, True)}


def _varied_candidates(count: int) -> list[TrainingCandidate]:
    """Valid plans drawn at random (fixed seed): dense and MoE models, two GPUs and sizes."""
    rng = random.Random(7)
    out = []
    while len(out) < count:
        model = get_model(rng.choice(("llama3-8b", "mixtral-8x7b")))
        gpu = get_gpu(rng.choice(("H100-SXM", "H200")))
        num_gpus = rng.choice((16, 32))
        knobs = {k: rng.choice(v) for k, v in KNOBS.items()}
        if model.is_moe:
            knobs |= {k: rng.choice(v) for k, v in MOE_KNOBS.items()}
        tp, pp, cp = knobs["tp"], knobs["pp"], knobs["cp"]
        if num_gpus % (tp * pp * cp):
            continue
        dp = num_gpus // (tp * pp * cp)
        accumulation = knobs.pop("accumulation") * pp
        knobs["global_batch"] = dp * knobs["micro_batch"] * accumulation
        try:
            plan = ParallelPlan(dp=dp, seq_len=4096, **knobs)
            system = TrainingSystem(gpu, num_gpus, 2.0, host=host_tier_for(gpu.name))
            out.append(TrainingCandidate(model, system, plan))
        except PlanError:
            continue
    return out


def _forget_everything() -> None:
    """Empty every memo table the training model prices through."""
    for table in (_stage_costs._STAGES, _stage_costs._STEPS, _collective_prices._PRICES, _peak_memory._MEMORY):
        table.clear()
    for memoised in (
        _stage_costs._stage_compute,
        _layer_costs.layer_costs,
        _layer._layer_blocks,
        _layer.output_layer,
    ):
        memoised.cache_clear()


def test_a_batch_prices_every_plan_as_it_is_priced_alone():
    candidates = _varied_candidates(160)
    assert {c.model.is_moe for c in candidates} == {False, True}
    assert {c.plan.offload for c in candidates} >= {"none", "optimizer", "activations", "optimizer+weights"}
    assert {c.plan.zero_stage for c in candidates} == {0, 1, 2, 3} and {c.plan.vpp for c in candidates} == {1, 2}
    _forget_everything()
    together = simulate_training_batch(candidates, breakdown=False)  # as the search calls it
    stages = [per.costs for per in _stage_costs.stage_costs_batch(candidates)]
    for candidate, batched, batched_stages in zip(candidates, together, stages):
        _forget_everything()
        alone = simulate_training_batch([candidate], breakdown=False)[0]
        assert batched.metrics == alone.metrics, candidate.plan
        assert batched.memory == alone.memory and batched.feasible == alone.feasible, candidate.plan
        _forget_everything()
        assert batched_stages == stage_costs(candidate), candidate.plan


def test_collectives_priced_together_cost_what_each_costs_alone():
    """The vectorised chooser over many rows against `collective_time_s` one scalar at a time."""
    network = Network.from_gpu(get_gpu("H100-SXM"))
    rows = [
        (op, float(nbytes), ranks, stride)
        for op in ("all_reduce", "reduce_scatter", "all_gather", "all_to_all", "send_recv")
        for nbytes in (0, 1e3, 3e6, 7e8)
        for ranks, stride in ((1, 1), (2, 1), (8, 1), (4, 8), (16, 2), (64, 8))
        if op != "send_recv" or ranks == 2
    ]
    _collective_prices._PRICES.clear()
    price_collectives(network, rows)
    for op, nbytes, ranks, stride in rows:
        alone = 0.0 if ranks == 1 or nbytes == 0 else float(collective_time_s(op, nbytes, ranks, stride, network))
        assert collective_s(network, op, nbytes, ranks, stride) == alone
    assert np.isfinite([collective_s(network, *row) for row in rows]).all()


@pytest.mark.parametrize("zero_stage", [0, 1, 3])
def test_plans_differing_only_in_what_the_step_reads_get_their_own_step_costs(zero_stage):
    """Two plans that share every layer shape but not the data-parallel step (ZeRO stage,
    gradient bytes) keep their own gradient reduction, gather and optimizer seconds."""
    gpu = get_gpu("H100-SXM")
    system = TrainingSystem(gpu, 16, 0.0)
    base = dict(tp=2, pp=2, dp=4, micro_batch=1, global_batch=16, seq_len=4096, zero_stage=zero_stage)
    fp32, bf16 = (
        TrainingCandidate(get_model("llama3-8b"), system, ParallelPlan(**base, grad_reduce_in_bf16=flag))
        for flag in (False, True)
    )
    _forget_everything()
    first, second = (stages.costs for stages in _stage_costs.stage_costs_batch([fp32, bf16]))
    for wide, narrow in zip(first, second):
        assert narrow.grad_sync_s < wide.grad_sync_s and narrow.forward_s == wide.forward_s


def test_bounded_memo_tables_forget_without_changing_an_answer(monkeypatch):
    """With room for a handful of entries, the tables are trimmed before every batch, so they
    stay within the bound plus what one batch adds, and every plan still gets what it gets
    with tables that forget nothing."""
    candidates = _varied_candidates(120)
    _forget_everything()
    unbounded = simulate_training_batch(candidates, breakdown=False)
    monkeypatch.setattr(_memo, "MEMO_ENTRIES", 8)
    _forget_everything()
    batch = 15
    tables = (_stage_costs._STAGES, _stage_costs._STEPS, _collective_prices._PRICES, _peak_memory._MEMORY)
    for start in range(0, len(candidates), batch):
        chunk = candidates[start : start + batch]
        results = simulate_training_batch(chunk, breakdown=False)
        for candidate, bounded, reference in zip(chunk, results, unbounded[start : start + batch]):
            assert bounded.metrics == reference.metrics and bounded.memory == reference.memory, candidate.plan
        assert len(_stage_costs._STAGES) <= 8 + batch and len(_peak_memory._MEMORY) <= 8 + batch
    assert max(len(table) for table in tables) > 8  # the batches did add beyond the bound
    simulate_training_batch(candidates[:1], breakdown=False)
    assert len(_stage_costs._STAGES) <= 8 + 1 and len(_peak_memory._MEMORY) <= 8 + 1
